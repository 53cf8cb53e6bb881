// CudaBackend::gemm: the one switch on the weight's kind (ops::weight_kind), then float weights
// through cuBLASLt (the activation rounded to the weights' dtype where held in another), weight-only
// INT8 widened and scaled, SmoothQuant W8A8 and FP8 through their quantised cuBLASLt forms, INT4
// through its own dequantising kernel (cuBLASLt has no 4-bit weight-only GEMM). The
// cuBLASLt call itself and its plans are cuda_gemm_plan.cc's.
#include <string>

#include "formats/error.h"
#include "kernels/cuda_backend/act_kinds.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/memory/memory_kernels.h"
#include "kernels/quantization/fp8_gemm_lt.h"
#include "kernels/quantization/fp8_kernels.h"
#include "kernels/quantization/int4_gemm.h"
#include "kernels/quantization/int8_gemm_lt.h"
#include "kernels/quantization/quantize_kernels.h"

namespace ftx::cuda {

void CudaBackend::gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& weight, bool trans_b,
                       ops::Act C, float beta) {
  if (M <= 0 || N <= 0 || replaying()) return;
  const ElemKind c_kind = act_kind(C, "gemm");
  if (K <= 0) {  // an empty sum: C = beta·C, as BLAS
    invoke_scale(stream_, C.data, c_kind, beta, static_cast<size_t>(M) * N);
    return;
  }
  const ops::WeightKind kind = ops::weight_kind(weight);
  if (ops::is_quantized(kind) && trans_b)
    throw Error(std::string("gemm: an ") + dtype_name(weight.dtype) +
                " weight cannot be transposed (embedding tables stay floating point)");
  // Every quantised kind's kernel reads its scales: a matrix that did not come from its upload call
  // would be a fault on the device, not an error.
  if (ops::is_quantized(kind) && !weight.scale)
    throw Error(std::string("gemm: an ") + dtype_name(weight.dtype) +
                " weight without its scales (quantised weights come from their upload_weight_* call)");
  switch (kind) {
    case ops::WeightKind::kW8A8: return gemm_w8a8(M, N, K, A, weight, C, beta);
    case ops::WeightKind::kFp8: return gemm_fp8(M, N, K, A, weight, C, beta);
    case ops::WeightKind::kInt8Columns:
    case ops::WeightKind::kInt8Rows: return gemm_int8(M, N, K, A, weight, C, beta);
    case ops::WeightKind::kInt4Groups: return gemm_int4(M, N, K, A, weight, C, beta);
    case ops::WeightKind::kFloat32:
    case ops::WeightKind::kHalf: break;
  }
  float_gemm(M, N, K, A, weight.data, weight.dtype, trans_b, C, beta);
}

void CudaBackend::float_gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const void* B, DType in, bool trans_b,
                             ops::Act C, float beta) {
  const ElemKind in_kind = elem_kind(in);  // Error for a dtype with no kernels
  const size_t mk = static_cast<size_t>(M) * K, mn = static_cast<size_t>(M) * N;
  const bool convert_a = A.dtype != in;
  const bool direct_c = C.dtype == DType::kFloat32 || C.dtype == in;
  // Scratch is stream-ordered, so the next op may reuse it.
  const auto parts = scratch_parts({convert_a ? mk * dtype_size(in) : 0, direct_c ? 0 : mn * sizeof(float)});
  const void* a = A.data;
  if (convert_a) {  // round (or widen) the activation operand to the weights' dtype
    invoke_convert(stream_, parts[0], in_kind, A.data, act_kind(A, "gemm"), mk);
    a = parts[0];
  }
  if (direct_c) return run_gemm(M, N, K, a, B, in, trans_b, C.data, C.dtype, beta);
  const ElemKind c_kind = act_kind(C, "gemm");
  if (beta != 0.0f) invoke_convert(stream_, parts[1], ElemKind::kFp32, C.data, c_kind, mn);
  run_gemm(M, N, K, a, B, in, trans_b, parts[1], DType::kFloat32, beta);
  invoke_convert(stream_, C.data, c_kind, parts[1], ElemKind::kFp32, mn);
}

void CudaBackend::gemm_fp8(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& w, ops::Act C,
                           float beta) {
  // cuBLASLt's FP8 GEMM writes fp32 here (fp8_gemm_lt.h): a half C gets it through scratch.
  const bool direct = C.dtype == DType::kFloat32;
  const size_t mn = static_cast<size_t>(M) * static_cast<size_t>(N);
  const auto parts = scratch_parts({static_cast<size_t>(M) * K, direct ? 0 : mn * sizeof(float)});
  auto* qa = static_cast<uint8_t*>(parts[0]);
  invoke_quantize_fp8(stream_, qa, A.data, act_kind(A, "FP8 gemm"), static_cast<size_t>(M) * K,
                      1.0f / w.activation_scaling_factor);
  auto* c = direct ? static_cast<float*>(C.data) : static_cast<float*>(parts[1]);
  if (!direct && beta != 0.0f) invoke_convert(stream_, c, ElemKind::kFp32, C.data, act_kind(C, "FP8 gemm"), mn);
  fp8_gemm_lt(lt_, stream_, M, N, K, qa, static_cast<const uint8_t*>(w.data), w.scale, c, beta, workspace_,
              kWorkspaceBytes);
  if (!direct) invoke_convert(stream_, C.data, act_kind(C, "FP8 gemm"), c, ElemKind::kFp32, mn);
}

void CudaBackend::gemm_w8a8(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& w, ops::Act C,
                            float beta) {
  // int8 activations [M, K], int32 products [M, N], per-row factors [M].
  const auto parts = scratch_parts({static_cast<size_t>(M) * K, static_cast<size_t>(M) * N * sizeof(int32_t),
                                    static_cast<size_t>(M) * sizeof(float)});
  auto* qa = static_cast<int8_t*>(parts[0]);
  auto* acc = static_cast<int32_t*>(parts[1]);
  auto* alpha_row = static_cast<float*>(parts[2]);
  const ElemKind a_kind = act_kind(A, "W8A8 gemm");
  const bool per_token = !(w.act_scale > 0.0f);
  if (per_token)
    invoke_quantize_per_token(stream_, qa, alpha_row, A.data, a_kind, M, K);
  else
    invoke_quantize_per_tensor(stream_, qa, A.data, a_kind, M * K, w.act_scale);
  int8_gemm_lt(lt_, stream_, M, N, K, qa, static_cast<const int8_t*>(w.data), acc, workspace_, kWorkspaceBytes);
  invoke_dequantize_int32(stream_, C.data, act_kind(C, "W8A8 gemm"), acc, M, N, per_token ? alpha_row : nullptr,
                          w.out_scale, w.scale, beta);
}

void CudaBackend::gemm_int8(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& w, ops::Act C,
                            float beta) {
  // (A' · q) · diag(scale): q widened to A's rounding type (exact: |q| <= 128 fits fp16's and bf16's
  // significands), A converted to that type unless held in it, the products exact and summed in
  // fp32 by one GEMM, then the column scales in fp32 as the result is written to C. Memory is saved;
  // the bandwidth a fused dequantising GEMM would save is not (yet): q is widened every call.
  const DType in = w.input_dtype;
  const ElemKind in_kind = elem_kind(in);
  const size_t kn = static_cast<size_t>(K) * static_cast<size_t>(N), mk = static_cast<size_t>(M) * K;
  const bool convert_a = A.dtype != in;
  const auto parts = scratch_parts({kn * dtype_size(in), convert_a ? mk * dtype_size(in) : 0,
                                    static_cast<size_t>(M) * N * sizeof(float)});
  invoke_dequantize_int8_columns(stream_, parts[0], in_kind, static_cast<const int8_t*>(w.data), nullptr, K, N);
  const void* a = A.data;
  if (convert_a) {
    invoke_convert(stream_, parts[1], in_kind, A.data, act_kind(A, "int8 gemm"), mk);
    a = parts[1];
  }
  run_gemm(M, N, K, a, parts[0], in, false, parts[2], DType::kFloat32, 0.0f);
  invoke_scale_columns(stream_, C.data, act_kind(C, "int8 gemm"), static_cast<const float*>(parts[2]), w.scale, M, N,
                       beta);
}

void CudaBackend::gemm_int4(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& w, ops::Act C,
                            float beta) {
  const ElemKind a_kind = act_kind(A, "INT4 gemm"), c_kind = act_kind(C, "INT4 gemm");
  Int4DeviceWeight d;
  d.packed = static_cast<const uint8_t*>(w.data);
  d.scales = w.scale;
  d.zeros = w.int4_zeros;
  if (w.int4_aux) {  // act-order: [K] groups, then [K] source rows (upload_weight_int4)
    d.row_group = static_cast<const int32_t*>(w.int4_aux);
    d.perm = d.row_group + K;
  }
  d.group_size = w.int4_group_size;
  invoke_int4_gemm(stream_, C.data, c_kind, A.data, a_kind, elem_kind(w.input_dtype), d, M, N, K, beta);
}

}  // namespace ftx::cuda
