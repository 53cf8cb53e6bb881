#include "lib/engine/int4_weights.h"

#include "formats/error.h"
#include "lib/engine/w8a8_weights.h"
#include "lib/model/int4_files.h"
#include "lib/ops/int4_matrix.h"

namespace ftx {

bool is_int4_gemm(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant, const std::string& weight_name,
                  std::string* gemm) {
  if (!cfg.holds_int4() && !quant.int4.on) return false;
  if (!is_w8a8_gemm(weight_name, gemm)) return false;
  if (cfg.holds_int4()) {
    const char* other = quant.int8_weight_only ? "--int8-mode 1"
                        : quant.smoothquant.on ? "--int8-mode 2"
                        : quant.fp8            ? "--fp8"
                                               : nullptr;
    if (other)
      throw Error(dir + "/config.ini", std::string("weight_only_precision = int4: the folder's layer GEMMs are INT4 "
                                                   "already, they cannot be run with ") + other);
  }
  return true;
}

ops::Weight load_int4_weight(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant,
                             const std::string& gemm, int rank, int64_t rows, int64_t cols, const void* float_src,
                             DType src_dtype, ops::Backend& backend, size_t* bytes) {
  const ops::Int4Matrix m =
      cfg.holds_int4() ? read_int4_files(dir, gemm, rank, rows, cols, cfg.int4_group_size)
                       : ops::quantize_int4(float_src, src_dtype, rows, cols, quant.int4.group_size, quant.int4.zero_points);
  *bytes = m.packed.size() + m.scales.size() * sizeof(float) + m.zeros.size() + m.group_index.size() * sizeof(int32_t);
  // The model's float type: what the GEMMs round A to (bf16 activations for a bf16 model, as FT's
  // and TensorRT-LLM's weight-only GEMMs take them).
  return backend.upload_weight_int4(m, backend.weight_dtype());
}

double int4_bytes_per_weight(const ModelConfig& cfg, const QuantPolicy& quant, int64_t rows) {
  const int64_t g = cfg.holds_int4() ? cfg.int4_group_size : quant.int4.group_size;
  const double group = static_cast<double>(g <= 0 || g > rows ? rows : g);
  return 0.5 + (4.0 + 1.0) / group;  // 4 bits, and per group an fp32 scale and a zero point
}

}  // namespace ftx
