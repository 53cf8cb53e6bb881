#pragma once
// The GEMMs a GPT decoder runs, as FasterTransformer's gpt_gemm lists them (docs/runtime.md#gemm-tunes-gemms):
// 11 per batch size, context phase (0-5) and decode phase (6-10). gemm-tune times exactly these and
// gemm_config.in records them, so the list (and its quirks) must match FT's to the integer.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/model_config.h"

namespace ftx::gemm {

// FT's CublasDataType numbering, which is what gemm_config.in's dataType column holds.
enum class GemmDType : int { kFp32 = 0, kFp16 = 1, kBf16 = 2, kInt8 = 3, kFp8 = 4 };

// "fp32" | "fp16" | "bf16" (also float32/float16/bfloat16); anything else is an Error naming it.
GemmDType gemm_dtype_from_name(const std::string& name);
const char* gemm_dtype_name(GemmDType t);  // "fp32", "fp16", "bf16", "int8", "fp8"
bool gemm_dtype_is_valid(int code);        // 0..4, the codes FT's reader accepts

// Model sizes the GEMM list depends on (whole-model values, before tensor-parallel division).
struct GemmModelDims {
  int64_t head_num = 0;
  int64_t size_per_head = 0;
  int64_t hidden_size = 0;  // the model width; 0: head_num × size_per_head (FT's only case)
  int64_t inter_size = 0;
  int64_t vocab_size = 0;
  int64_t tensor_para_size = 1;
  // Positive sizes, head_num % tp == 0 and inter_size % tp == 0 (FT requires the first and
  // silently truncates the second); Error naming the offending value otherwise.
  void validate() const;
};
GemmModelDims gemm_dims_from_model(const ModelConfig& cfg, int64_t tensor_para_size);

// The decode workload being tuned for.
struct GemmWorkload {
  int64_t batch_size = 1;     // largest request batch; every batch size 1..batch_size is tuned
  int64_t beam_width = 1;
  int64_t max_input_len = 1;  // S
  void validate() const;
};

constexpr int kGptGemmCount = 11;

struct GemmShape {
  int id = 0;               // 0..10, FT's GEMM number
  const char* label = "";   // FT's printed label, e.g. "context ffn gemm 1"
  // What gemm_config.in records: col1 = batch·beam, col2 = S for ids 0-5 and 1 for 6-10.
  int64_t batch_beam = 0;
  int64_t seq_len = 0;
  // Recorded problem: M rows (tokens), N output features, K reduction (FT's notation).
  int64_t m = 0, n = 0, k = 0, batch_count = 1;
  // Problem actually timed. Equal to m/n/k except GEMMs 1 and 2, which FT records with the
  // padded Sp = ceil(S/16)·16 but times with the unpadded S (a quirk kept for file compatibility).
  int64_t timed_m = 0, timed_n = 0, timed_k = 0;
  bool strided_batched = false;  // GEMMs 1, 2: cublasGemmStridedBatchedEx
  bool transpose_weight = false; // GEMM 10: logits weight stored [V, H], op T
  bool fp32_output = false;      // GEMM 1: Q·K^T written in FP32
};

// The 11 GEMMs for one batch·beam value.
std::vector<GemmShape> gpt_gemm_shapes(const GemmModelDims& dims, int64_t batch_beam, int64_t max_input_len);
// 11 GEMMs for each batch size b = 1..batch_size (batch_beam = b·beam_width), in that order.
std::vector<GemmShape> gpt_gemm_shapes_all_batches(const GemmModelDims& dims, const GemmWorkload& w);

}  // namespace ftx::gemm
