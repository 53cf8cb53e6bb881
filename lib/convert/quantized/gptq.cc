#include "lib/convert/quantized/gptq.h"

#include "formats/error.h"
#include "lib/convert/quantized/reader_common.h"

namespace ftx::hf {

namespace {

using quantized::QcKey;
using quantized::QcUse;
using quantized::QcView;

constexpr QcUse R = QcUse::kRead;
constexpr QcUse I = QcUse::kIgnored;

// Every key GPTQModel's QuantizeConfig, AutoGPTQ's BaseQuantizeConfig and transformers' GPTQConfig
// write. The ignored ones steer calibration (which Hessian, which order of layers, damping) or the
// runtime's kernel choice: the stored qweight/qzeros/scales/g_idx mean the same whatever they say.
const std::vector<QcKey>& gptq_keys() {
  static const std::vector<QcKey> k = {
      {"quant_method", R, "gptq"},
      {"bits", R, "4 (others refused)"},
      {"group_size", R, "rows per group; -1: one group per Linear (per channel)"},
      {"desc_act", R, "act-order: g_idx is read as stored, never assumed sorted"},
      {"sym", R, "symmetric quantisation (the zero points are stored either way and read)"},
      {"checkpoint_format", R, "gptq (v1: stored zero = z - 1) or gptq_v2"},
      {"format", R, "GPTQModel's name for checkpoint_format"},
      {"pack_dtype", R, "int32 (others refused)"},
      {"lm_head", R, "false (a quantised lm_head is refused)"},
      {"dynamic", R, "per-module overrides: empty only"},
      {"static_groups", I, "how act-order groups were chosen; g_idx stores the result"},
      {"true_sequential", I, "calibration order"},
      {"damp_percent", I, "calibration damping"},
      {"damp_auto_increment", I, "calibration damping"},
      {"mse", I, "calibration search"},
      {"act_group_aware", I, "calibration grouping; g_idx stores the result"},
      {"v2", I, "GPTAQ calibration"},
      {"v2_alpha", I, "GPTAQ calibration"},
      {"quantizer", I, "producer name"},
      {"meta", I, "producer name and version"},
      {"model_name_or_path", I, "where the model came from"},
      {"model_file_base_name", I, "file name"},
      {"tokenizer", I, "calibration data"},
      {"dataset", I, "calibration data"},
      {"model_seqlen", I, "calibration data"},
      {"batch_size", I, "calibration data"},
      {"pad_token_id", I, "calibration data"},
      {"max_input_length", I, "runtime buffer"},
      {"cache_block_outputs", I, "calibration memory"},
      {"block_name_to_quantize", I, "which blocks were quantised: ftx looks at each Linear's tensors"},
      {"module_name_preceding_first_block", I, "calibration"},
      {"modules_in_block_to_quantize", I, "which Linears were quantised: ftx looks at each Linear's tensors"},
      {"use_cuda_fp16", I, "runtime kernel"},
      {"use_exllama", I, "runtime kernel"},
      {"exllama_config", I, "runtime kernel"},
      {"backend", I, "runtime kernel"},
      {"use_marlin", I, "runtime kernel"},
  };
  return k;
}

class GptqReader : public QuantizedLinearReader {
 public:
  GptqReader(int64_t group_size, bool v1) : group_size_(group_size), v1_(v1) {}
  std::string method() const override { return "gptq"; }
  int64_t group_size() const override { return group_size_ > 0 ? group_size_ : 0; }

  std::vector<std::string> tensors(const std::string& module, const TensorLookup& get) const override {
    if (!get(module + ".qweight")) return {};
    std::vector<std::string> t = {module + ".qweight", module + ".qzeros", module + ".scales"};
    if (get(module + ".g_idx")) t.push_back(module + ".g_idx");
    return t;
  }

  ops::Int4Matrix int4(const std::string& module, const TensorLookup& get) const override {
    const std::string wn = module + ".qweight", zn = module + ".qzeros", sn = module + ".scales", gn = module + ".g_idx";
    const TensorView& qw = quantized::need_tensor(get, wn);
    const std::vector<int32_t> words = quantized::int32_matrix(qw, wn);
    const int64_t packed_rows = qw.shape[0], N = qw.shape[1];
    const TensorView* gi = get(gn);
    std::vector<int32_t> g_idx;
    if (gi) g_idx = quantized::int32_vector(*gi, gn);
    // The input size: g_idx's length when stored (a size that is no multiple of 8 leaves the last
    // word part-filled), else every field of qweight.
    const int64_t K = gi ? static_cast<int64_t>(g_idx.size()) : packed_rows * 8;
    FTX_CHECK((K + 7) / 8 == packed_rows, gn,
              std::to_string(K) + " input rows, but " + wn + " holds " + std::to_string(packed_rows) + " words of 8 per column");
    const int64_t G = group_size_ > 0 ? (K + group_size_ - 1) / group_size_ : 1;
    const TensorView& st = quantized::need_tensor(get, sn);
    quantized::expect_shape(st, sn, {G, N}, "groups x output features, group_size " + std::to_string(group_size_));
    const TensorView& qz = quantized::need_tensor(get, zn);
    quantized::expect_shape(qz, zn, {G, (N + 7) / 8}, "groups x output features / 8");
    FTX_CHECK(N % 2 == 0, wn, std::to_string(N) + " output features: ftx's INT4 layout packs two per byte (an even count)");

    ops::Int4Matrix m;
    m.rows = K;
    m.cols = N;
    m.groups = G;
    m.group_size = group_size_ > 0 ? group_size_ : K;
    m.packed.assign(static_cast<size_t>(K * (N / 2)), 0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const uint32_t w = static_cast<uint32_t>(words[static_cast<size_t>((k / 8) * N + n)]);
        const uint8_t u = static_cast<uint8_t>((w >> (4 * (k % 8))) & 0xF);
        m.packed[static_cast<size_t>(k * (N / 2) + n / 2)] |= static_cast<uint8_t>(n & 1 ? u << 4 : u);
      }
    m.scales = quantized::float_matrix(st, sn);
    const std::vector<int32_t> zwords = quantized::int32_matrix(qz, zn);
    const int64_t zcols = (N + 7) / 8;
    m.zeros.resize(static_cast<size_t>(G * N));
    bool all_eight = true;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t n = 0; n < N; ++n) {
        const uint32_t w = static_cast<uint32_t>(zwords[static_cast<size_t>(g * zcols + n / 8)]);
        const int field = static_cast<int>((w >> (4 * (n % 8))) & 0xF);
        // v1's 15 is ambiguous: AutoGPTQ's loaders read it as zero point 16, GPTQModel's (which add
        // 0x11111111 to the whole word) as 0 with the next field borrowed from. No reading is safe.
        FTX_CHECK(!(v1_ && field == 15), zn,
                  "group " + std::to_string(g) + ", column " + std::to_string(n) +
                      " stores 15 under checkpoint_format gptq (v1, zero - 1): AutoGPTQ reads zero point 16, GPTQModel "
                      "a zero point of 0 that borrowed from the next column's; ambiguous, not supported (convert with "
                      "checkpoint_format gptq_v2)");
        const int z = field + (v1_ ? 1 : 0);
        all_eight = all_eight && z == 8;
        m.zeros[static_cast<size_t>(g * N + n)] = static_cast<uint8_t>(z);
      }
    if (all_eight) m.zeros.clear();  // symmetric: the layout's implied 8
    if (gi) {
      bool plain = true;
      for (int64_t k = 0; k < K; ++k) {
        const int32_t g = g_idx[static_cast<size_t>(k)];
        FTX_CHECK(g >= 0 && g < G, gn,
                  "row " + std::to_string(k) + " is in group " + std::to_string(g) + ", outside [0, " + std::to_string(G) + ")");
        plain = plain && g == k / m.group_size;
      }
      // Sorted g_idx (desc_act false) is the rows' plain grouping; keep the index only when it says more.
      if (!plain) m.group_index = g_idx;
    }
    ops::check_int4(m, wn);
    return m;
  }

 private:
  int64_t group_size_;
  bool v1_;
};

}  // namespace

std::unique_ptr<QuantizedLinearReader> make_gptq_reader(const nlohmann::json& qc, const std::string& origin) {
  const QcView v(qc, origin, "gptq", gptq_keys());
  if (v.integer("bits", 4) != 4) v.refuse("bits", "ftx imports 4-bit GPTQ");
  const int64_t gs = v.integer("group_size", 128);
  if (!(gs == -1 || gs > 0)) v.refuse("group_size", "a positive number of rows, or -1 for one group per Linear");
  v.boolean("desc_act", false);  // g_idx is honoured either way
  v.boolean("sym", true);        // the zero points are stored and read either way
  const bool has_ckpt = qc.contains("checkpoint_format") && !qc["checkpoint_format"].is_null();
  const std::string key = has_ckpt || !qc.contains("format") ? "checkpoint_format" : "format";
  const std::string fmt = v.text(key, "gptq");
  if (fmt != "gptq" && fmt != "gptq_v2")
    v.refuse(key, "ftx reads the gptq (v1) and gptq_v2 layouts; marlin, bitblas and other repackings are not");
  if (has_ckpt && qc.contains("format") && !qc["format"].is_null() && v.text("format", fmt) != fmt)
    v.refuse("format", "disagrees with checkpoint_format = " + v.shown("checkpoint_format"));
  const std::string pack = v.text("pack_dtype", "int32");
  if (pack != "int32" && pack != "torch.int32") v.refuse("pack_dtype", "ftx reads int32 words");
  if (v.boolean("lm_head", false)) v.refuse("lm_head", "a quantised lm_head; ftx's INT4 layout holds the layer GEMMs");
  auto dyn = qc.find("dynamic");
  if (dyn != qc.end() && !dyn->is_null() && !dyn->empty())
    v.refuse("dynamic", "per-module bits or group sizes; ftx's INT4 folder has one group size");
  return std::make_unique<GptqReader>(gs, fmt == "gptq");
}

}  // namespace ftx::hf
