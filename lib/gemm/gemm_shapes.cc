#include "lib/gemm/gemm_shapes.h"

#include <algorithm>
#include <cctype>
#include <climits>

#include "formats/error.h"

namespace ftx::gemm {

GemmDType gemm_dtype_from_name(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "fp32" || s == "float32" || s == "float") return GemmDType::kFp32;
  if (s == "fp16" || s == "float16" || s == "half") return GemmDType::kFp16;
  if (s == "bf16" || s == "bfloat16") return GemmDType::kBf16;
  throw Error("unsupported GEMM data type '" + name + "' (expected fp32, fp16 or bf16)");
}

const char* gemm_dtype_name(GemmDType t) {
  switch (t) {
    case GemmDType::kFp32: return "fp32";
    case GemmDType::kFp16: return "fp16";
    case GemmDType::kBf16: return "bf16";
    case GemmDType::kInt8: return "int8";
    case GemmDType::kFp8: return "fp8";
  }
  return "?";
}

bool gemm_dtype_is_valid(int code) { return code >= 0 && code <= 4; }

static void require_positive(int64_t v, const char* what) {
  if (v <= 0) throw Error(std::string(what) + " must be positive, got " + std::to_string(v));
}

void GemmModelDims::validate() const {
  require_positive(head_num, "head_num");
  require_positive(size_per_head, "size_per_head");
  require_positive(inter_size, "inter_size");
  require_positive(vocab_size, "vocab_size");
  require_positive(tensor_para_size, "tensor_para_size");
  if (head_num % tensor_para_size != 0)
    throw Error("head_num " + std::to_string(head_num) + " is not divisible by tensor_para_size " +
                std::to_string(tensor_para_size));
  if (inter_size % tensor_para_size != 0)
    throw Error("inter_size " + std::to_string(inter_size) + " is not divisible by tensor_para_size " +
                std::to_string(tensor_para_size));
}

GemmModelDims gemm_dims_from_model(const ModelConfig& cfg, int64_t tensor_para_size) {
  GemmModelDims d;
  d.head_num = cfg.head_num;
  d.size_per_head = cfg.size_per_head;
  d.hidden_size = cfg.hidden_size;
  d.inter_size = cfg.inter_size;
  d.vocab_size = cfg.vocab_size;
  d.tensor_para_size = tensor_para_size;
  return d;
}

void GemmWorkload::validate() const {
  require_positive(batch_size, "batch_size");
  require_positive(beam_width, "beam_width");
  require_positive(max_input_len, "max_input_len");
}

static int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// gemm_config.in stores every number with printf("%d"); FT's reader scans them back as int.
static void require_int32(const GemmShape& s) {
  for (int64_t v : {s.batch_beam, s.seq_len, s.m, s.n, s.k, s.batch_count}) {
    if (v > INT_MAX)
      throw Error("GEMM " + std::to_string(s.id) + " (" + s.label + ") has a dimension " + std::to_string(v) +
                  " that does not fit gemm_config.in's 32-bit fields");
  }
}

std::vector<GemmShape> gpt_gemm_shapes(const GemmModelDims& dims, int64_t batch_beam, int64_t max_input_len) {
  dims.validate();
  require_positive(batch_beam, "batch_size*beam_width");
  require_positive(max_input_len, "max_input_len");
  const int64_t B = batch_beam, S = max_input_len, Sp = round_up(S, 16);
  const int64_t tp = dims.tensor_para_size;
  // H: the model width (GEMM inputs and outputs of the residual); Ql: this rank's Q columns, the
  // attention output's width.
  const int64_t Q = dims.head_num * dims.size_per_head, H = dims.hidden_size > 0 ? dims.hidden_size : Q;
  const int64_t Ql = Q / tp, Dh = dims.size_per_head, Il = dims.inter_size / tp;
  const int64_t local_heads = dims.head_num / tp;
  // FT: N = ceil(V / 8.) * 8 / tp, assigned to int (truncating when tp does not divide it).
  const int64_t logits_n = round_up(dims.vocab_size, 8) / tp;

  struct Row { const char* label; int64_t m, n, k, batch_count; };
  const Row rows[kGptGemmCount] = {
      {"context from_tensor * weightQKV", B * S, 3 * Ql, H, 1},
      {"context batch gemm Q*K^T", Sp, Sp, Dh, B * local_heads},
      {"context batch gemm QK*V^T", Sp, Dh, Sp, B * local_heads},
      {"context attr * output_kernel", B * S, H, Ql, 1},
      {"context ffn gemm 1", B * S, Il, H, 1},
      {"context ffn gemm 2", B * S, H, Il, 1},
      {"from_tensor * weightQKV", B, 3 * Ql, H, 1},
      {"attr * output_kernel", B, H, Ql, 1},
      {"ffn gemm 1", B, Il, H, 1},
      {"ffn gemm 2", B, H, Il, 1},
      {"logits gemm", B, logits_n, H, 1},
  };
  std::vector<GemmShape> out;
  out.reserve(kGptGemmCount);
  for (int i = 0; i < kGptGemmCount; ++i) {
    GemmShape s;
    s.id = i;
    s.label = rows[i].label;
    s.batch_beam = B;
    s.seq_len = i <= 5 ? S : 1;
    s.m = rows[i].m;
    s.n = rows[i].n;
    s.k = rows[i].k;
    s.batch_count = rows[i].batch_count;
    s.timed_m = s.m;
    s.timed_n = s.n;
    s.timed_k = s.k;
    s.strided_batched = (i == 1 || i == 2);
    s.transpose_weight = (i == 10);
    s.fp32_output = (i == 1);
    if (i == 1) { s.timed_m = S; s.timed_n = S; }
    if (i == 2) { s.timed_m = S; s.timed_k = S; }
    require_int32(s);
    out.push_back(s);
  }
  return out;
}

std::vector<GemmShape> gpt_gemm_shapes_all_batches(const GemmModelDims& dims, const GemmWorkload& w) {
  w.validate();
  std::vector<GemmShape> out;
  for (int64_t b = 1; b <= w.batch_size; ++b) {
    auto one = gpt_gemm_shapes(dims, b * w.beam_width, w.max_input_len);
    out.insert(out.end(), one.begin(), one.end());
  }
  return out;
}

}  // namespace ftx::gemm
