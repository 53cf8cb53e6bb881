#include "lib/convert/quantized/awq.h"

#include <cctype>

#include "formats/error.h"
#include "lib/convert/quantized/reader_common.h"

namespace ftx::hf {

namespace {

using quantized::QcKey;
using quantized::QcUse;
using quantized::QcView;

constexpr QcUse R = QcUse::kRead;
constexpr QcUse I = QcUse::kIgnored;

// AutoAWQ's to_transformers_dict and transformers' AwqConfig. The ignored keys pick the runtime's
// fused modules or kernel, never what the stored numbers mean.
const std::vector<QcKey>& awq_keys() {
  static const std::vector<QcKey> k = {
      {"quant_method", R, "awq"},
      {"bits", R, "4 (others refused)"},
      {"group_size", R, "rows per group (positive)"},
      {"zero_point", R, "true (zero points stored; false refused)"},
      {"version", R, "gemm (gemv, gemv_fast, marlin, exllama, ipex refused: other packings)"},
      {"backend", R, "autoawq (llm-awq refused: another packing)"},
      {"modules_to_not_convert", I, "which Linears stayed float: ftx looks at each Linear's tensors"},
      {"do_fuse", I, "runtime module fusion"},
      {"fuse_max_seq_len", I, "runtime module fusion"},
      {"modules_to_fuse", I, "runtime module fusion"},
      {"exllama_config", I, "runtime kernel"},
  };
  return k;
}

// Where output column 8c + j sits in word c: bits 4·kShift[j] (the inverse of AWQ's order
// 0, 2, 4, 6, 1, 3, 5, 7; AutoAWQ's AWQ_REVERSE_ORDER).
constexpr int kField[8] = {0, 4, 1, 5, 2, 6, 3, 7};

uint8_t field(const std::vector<int32_t>& words, int64_t row, int64_t words_per_row, int64_t n) {
  const uint32_t w = static_cast<uint32_t>(words[static_cast<size_t>(row * words_per_row + n / 8)]);
  return static_cast<uint8_t>((w >> (4 * kField[n % 8])) & 0xF);
}

class AwqReader : public QuantizedLinearReader {
 public:
  explicit AwqReader(int64_t group_size) : group_size_(group_size) {}
  std::string method() const override { return "awq"; }
  int64_t group_size() const override { return group_size_; }

  std::vector<std::string> tensors(const std::string& module, const TensorLookup& get) const override {
    if (!get(module + ".qweight")) return {};
    return {module + ".qweight", module + ".qzeros", module + ".scales"};
  }

  ops::Int4Matrix int4(const std::string& module, const TensorLookup& get) const override {
    const std::string wn = module + ".qweight", zn = module + ".qzeros", sn = module + ".scales";
    const TensorView& qw = quantized::need_tensor(get, wn);
    const std::vector<int32_t> words = quantized::int32_matrix(qw, wn);
    const int64_t K = qw.shape[0], W = qw.shape[1], N = W * 8;
    FTX_CHECK(K % group_size_ == 0, wn,
              std::to_string(K) + " input rows are not a whole number of groups of " + std::to_string(group_size_));
    const int64_t G = K / group_size_;
    const TensorView& st = quantized::need_tensor(get, sn);
    quantized::expect_shape(st, sn, {G, N}, "groups x output features");
    const TensorView& qz = quantized::need_tensor(get, zn);
    quantized::expect_shape(qz, zn, {G, W}, "groups x output features / 8");
    ops::Int4Matrix m;
    m.rows = K;
    m.cols = N;
    m.groups = G;
    m.group_size = group_size_;
    m.packed.assign(static_cast<size_t>(K * (N / 2)), 0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const uint8_t u = field(words, k, W, n);
        m.packed[static_cast<size_t>(k * (N / 2) + n / 2)] |= static_cast<uint8_t>(n & 1 ? u << 4 : u);
      }
    m.scales = quantized::float_matrix(st, sn);
    const std::vector<int32_t> zwords = quantized::int32_matrix(qz, zn);
    m.zeros.resize(static_cast<size_t>(G * N));
    for (int64_t g = 0; g < G; ++g)
      for (int64_t n = 0; n < N; ++n) m.zeros[static_cast<size_t>(g * N + n)] = field(zwords, g, W, n);
    ops::check_int4(m, wn);
    return m;
  }

 private:
  int64_t group_size_;
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::unique_ptr<QuantizedLinearReader> make_awq_reader(const nlohmann::json& qc, const std::string& origin) {
  const QcView v(qc, origin, "awq", awq_keys());
  if (v.integer("bits", 4) != 4) v.refuse("bits", "ftx imports 4-bit AWQ");
  const int64_t gs = v.integer("group_size", 128);
  if (gs <= 0) v.refuse("group_size", "a positive number of rows");
  if (!v.boolean("zero_point", true)) v.refuse("zero_point", "AWQ without zero points; ftx reads the GEMM layout with them");
  const std::string version = lower(v.text("version", "gemm"));
  if (version != "gemm") v.refuse("version", "ftx reads AutoAWQ's GEMM packing only");
  const std::string backend = lower(v.text("backend", "autoawq"));
  if (backend != "autoawq") v.refuse("backend", "ftx reads AutoAWQ's packing only");
  return std::make_unique<AwqReader>(gs);
}

}  // namespace ftx::hf
