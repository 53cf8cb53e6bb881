// CudaBackend: memory (arena, staging, transfers), cuBLASLt GEMMs, and the host side of every op
// (argument checks, metadata staging, then one launcher per op from the kernel rooms: attention/,
// embeddings/, memory/, norms/). It stays the thin adapter from ops to launchers.
#include "kernels/cuda_backend/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/lt_algo.h"
#include "kernels/gemm_tune/gemm_tuner.h"
#include "kernels/cuda_backend/attention_checks.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/attention/attention_kernels.h"
#include "kernels/attention/rotary_kernels.h"
#include "kernels/embeddings/embedding_kernels.h"
#include "kernels/memory/memory_kernels.h"
#include "kernels/norms/norm_kernels.h"
#include "kernels/quantization/fp8_device.h"
#include "kernels/quantization/fp8_gemm_lt.h"
#include "kernels/quantization/fp8_kernels.h"
#include "kernels/quantization/int8_gemm_lt.h"
#include "kernels/quantization/quantize_kernels.h"
#include "lib/ops/host_math.h"

namespace ftx::cuda {

// gemm_config.in's classic algo ids are cublasGemmAlgo_t values (gemm::tuned_gemm_route).
static_assert(CUBLAS_GEMM_DEFAULT == -1, "gemm_config.in writes CUBLAS_GEMM_DEFAULT as -1");

namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

ElemKind elem_kind(DType t) {
  switch (t) {
    case DType::kFloat32: return ElemKind::kFp32;
    case DType::kFloat16: return ElemKind::kFp16;
    case DType::kBFloat16: return ElemKind::kBf16;
    default: throw Error(std::string("CUDA backend: no kernels for ") + dtype_name(t) + " data");
  }
}

// An activation's kind, refused with the op's name when it is not a float type activations are held in.
ElemKind act_kind(const ops::Act& a, const char* op) {
  if (!ops::is_act_dtype(a.dtype))
    throw Error(std::string("CUDA ") + op + ": activations held in " + dtype_name(a.dtype) + " (fp32, fp16 or bf16)");
  return elem_kind(a.dtype);
}

// The kind all of an op's activations share (null ones aside): one type per call, Error otherwise.
ElemKind same_act_kind(std::initializer_list<ops::Act> acts, const char* op) {
  const ops::Act* first = nullptr;
  for (const ops::Act& a : acts) {
    if (!a) continue;
    if (first && a.dtype != first->dtype)
      throw Error(std::string("CUDA ") + op + ": activations in " + dtype_name(first->dtype) + " and " +
                  dtype_name(a.dtype) + " in one call");
    if (!first) first = &a;
  }
  return first ? act_kind(*first, op) : ElemKind::kFp32;
}

// cuBLAS's name for a weight dtype (elem_kind() has refused the others).
cudaDataType_t cuda_data_type(DType t) {
  switch (elem_kind(t)) {
    case ElemKind::kFp16: return CUDA_R_16F;
    case ElemKind::kBf16: return CUDA_R_16BF;
    case ElemKind::kFp32:
    case ElemKind::kInt8:
    case ElemKind::kFp8E4M3: break;  // elem_kind() returns neither (the KV cache's kinds only)
  }
  return CUDA_R_32F;
}

// The launch fields prefill and decode share (the caller adds lengths or past). tables and slopes
// are staged device copies.
AttentionLaunch attention_launch(const ops::Act& out, const ops::Act& qkv, const ops::KvCache& k_cache,
                                 const ops::KvCache& v_cache, const ops::AttentionShape& sh, const void* tables,
                                 int64_t stride, const void* slopes, int64_t items, int64_t S, int smem_optin) {
  if (k_cache.dtype != v_cache.dtype)
    throw Error(std::string("CUDA attention: K cache in ") + dtype_name(k_cache.dtype) + ", V cache in " +
                dtype_name(v_cache.dtype));
  AttentionLaunch a;
  a.act_kind = same_act_kind({out, qkv}, "attention");
  a.out = out.data;
  a.qkv = qkv.data;
  a.k_cache = k_cache.data;
  a.v_cache = v_cache.data;
  if (ops::kv_is_quantized(k_cache.dtype)) {
    // TensorRT-LLM's INT8 and FP8 KV caches: a scale per layer (the same for K and V).
    if (!(k_cache.scale > 0.0f) || !(v_cache.scale > 0.0f))
      throw Error(std::string("CUDA attention: ") + dtype_name(k_cache.dtype) + " KV cache without a positive scale (" +
                  std::to_string(k_cache.scale) + ")");
    a.kv_kind = k_cache.dtype == DType::kInt8 ? ElemKind::kInt8 : ElemKind::kFp8E4M3;
    a.k_scale = k_cache.scale;
    a.v_scale = v_cache.scale;
  } else {
    a.kv_kind = elem_kind(k_cache.dtype);
  }
  a.block_tables = static_cast<const int32_t*>(tables);
  a.table_stride = stride;
  a.block_size = static_cast<int32_t>(sh.block_size);
  a.alibi_slopes = static_cast<const float*>(slopes);
  a.items = items;
  a.S = S;
  a.q_heads = sh.q_heads;
  a.kv_heads = sh.kv_heads;
  a.head_dim = sh.head_dim;
  a.max_seq = sh.max_seq;
  a.memory_len = sh.memory_len;
  a.scale = sh.scale;
  a.smem_optin = smem_optin;
  return a;
}

// Largest power of two ≤ 256 that divides the address (cuBLASLt's alignment classes).
uint32_t alignment_of(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && (v % a) != 0) a /= 2;
  return a;
}

// The node-local rank under the common launchers; -1 when not launched by one.
int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                        "LOCAL_RANK"})
    if (const char* s = std::getenv(v)) {
      char* end = nullptr;
      const long r = std::strtol(s, &end, 10);
      if (end != s && r >= 0) return static_cast<int>(r);
    }
  return -1;
}

}  // namespace

int device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<ops::Backend> make_cuda_backend(const CudaBackendOptions& options) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("no CUDA device found (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")");
  }
  if (n == 0) throw Error("no CUDA device found (cudaGetDeviceCount: 0 devices)");
  int dev = options.device;
  if (dev < 0) dev = std::max(local_rank(), 0) % n;
  if (dev >= n)
    throw Error("CUDA device " + std::to_string(dev) + " requested, but only " + std::to_string(n) + " found");
  const char* tf32_env = std::getenv("FTX_CUDA_TF32");
  const bool tf32 = options.tf32 || (tf32_env && std::string(tf32_env) == "1");
  const char* graphs_env = std::getenv("FTX_CUDA_GRAPHS");
  const bool graphs = options.graphs || (graphs_env && std::string(graphs_env) == "1");
  std::optional<DType> act = options.act_dtype;
  const char* fp32_act_env = std::getenv("FTX_CUDA_FP32_ACTIVATIONS");
  if (fp32_act_env && std::string(fp32_act_env) == "1") act = DType::kFloat32;
  return std::make_unique<CudaBackend>(dev, tf32, options.weight_dtype, graphs, options.kv_dtype, act);
}

// ---------------------------------------------------------------- lifetime, memory, transfers

CudaBackend::CudaBackend(int device, bool tf32, DType weight_dtype, bool graphs, std::optional<DType> kv_dtype,
                         std::optional<DType> act_dtype)
    : device_(device), tf32_(tf32), weight_dtype_(weight_dtype), kv_dtype_(kv_dtype.value_or(weight_dtype)),
      act_dtype_(act_dtype.value_or(weight_dtype)), graphs_(graphs) {
  for (DType t : {weight_dtype_, kv_dtype_})
    if (!ops::is_act_dtype(t))
      throw Error(std::string("CUDA backend: weights and the KV cache cannot be held in ") + dtype_name(t) +
                  " (fp32, fp16 or bf16)");
  // Half activations with fp32 weights would round what an fp32 model computes, for nothing.
  if (act_dtype_ != DType::kFloat32 && act_dtype_ != weight_dtype_)
    throw Error(std::string("CUDA backend: activations in ") + dtype_name(act_dtype_) + " with weights in " +
                dtype_name(weight_dtype_) + " (fp32, or the weights' dtype)");
  FTX_CUDA_CHECK(cudaSetDevice(device_));
  FTX_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin_, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_));
  FTX_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  int max_pitch = 0;
  FTX_CUDA_CHECK(cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, device_));
  max_pitch_ = static_cast<size_t>(max_pitch);
  FTX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  FTX_CUBLAS_CHECK(cublasLtCreate(&lt_));
  workspace_ = arena_.allocate(kWorkspaceBytes);
}

CudaBackend::~CudaBackend() {
  // Best effort, no throwing: finish queued work, then give everything back.
  cudaSetDevice(device_);
  if (step_mode_ == StepMode::kCapture) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(stream_, &g);
    if (g) cudaGraphDestroy(g);
  }
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto& [key, st] : steps_)
    if (st.exec) cudaGraphExecDestroy(st.exec);
  if (step_meta_host_) cudaFreeHost(step_meta_host_);
  if (step_meta_copied_) cudaEventDestroy(step_meta_copied_);
  clear_plans();
  if (blas_) cublasDestroy(blas_);
  if (lt_) cublasLtDestroy(lt_);
  for (Slot& s : slots_) {
    if (s.host) cudaFreeHost(s.host);
    if (s.done) cudaEventDestroy(s.done);
  }
  if (download_buf_) cudaFreeHost(download_buf_);
  if (stream_) cudaStreamDestroy(stream_);
  // arena_ frees the device blocks in its destructor.
}

void CudaBackend::synchronize() { FTX_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

ops::Weight CudaBackend::upload_weight(const void* src, DType src_dtype, size_t n) {
  check_not_in_step("upload_weight");
  const size_t bytes = n * dtype_size(weight_dtype_);
  void* dst = arena_.allocate(std::max<size_t>(bytes, 1));
  const void* host = src;
  std::vector<uint8_t> converted;
  if (src_dtype != weight_dtype_) {  // on the host, once: the same rounding as the converters
    converted.resize(bytes);
    ops::convert_weight(src, src_dtype, converted.data(), weight_dtype_, n);
    host = converted.data();
  }
  if (bytes > 0) {
    FTX_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
    synchronize();  // the source (a file mapping or `converted`) may go away on return
  }
  return ops::Weight(dst, weight_dtype_);
}

ops::Weight CudaBackend::upload_weight_w8a8(const int8_t* q, int64_t rows, int64_t cols, const float* alpha_col,
                                            float act_scale, float out_scale) {
  check_not_in_step("upload_weight_w8a8");
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  std::vector<int8_t> t(n);  // [K, N] -> [N, K]
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t j = 0; j < cols; ++j) t[static_cast<size_t>(j * rows + k)] = q[static_cast<size_t>(k * cols + j)];
  void* dq = arena_.allocate(std::max<size_t>(n, 1));
  auto* ds = static_cast<float*>(arena_.allocate(std::max<size_t>(static_cast<size_t>(cols), 1) * sizeof(float)));
  if (n > 0) FTX_CUDA_CHECK(cudaMemcpyAsync(dq, t.data(), n, cudaMemcpyHostToDevice, stream_));
  if (cols > 0)
    FTX_CUDA_CHECK(cudaMemcpyAsync(ds, alpha_col, static_cast<size_t>(cols) * sizeof(float), cudaMemcpyHostToDevice,
                                   stream_));
  synchronize();  // the host copies go away on return
  ops::Weight w(dq, ds);
  w.w8a8 = true;
  w.act_scale = act_scale;
  w.out_scale = out_scale;
  return w;
}

void CudaBackend::require_fp8(const std::string& flag) const {
  cudaDeviceProp prop{};
  FTX_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  require_fp8_device("GPU " + std::to_string(device_) + " (" + prop.name + ")", prop.major, prop.minor, flag);
}

ops::Weight CudaBackend::upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols,
                                           float activation_scaling_factor, float weights_scaling_factor) {
  check_not_in_step("upload_weight_fp8");
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  std::vector<uint8_t> t(n);  // [K, N] -> [N, K]
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t j = 0; j < cols; ++j) t[static_cast<size_t>(j * rows + k)] = q[static_cast<size_t>(k * cols + j)];
  void* dq = arena_.allocate(std::max<size_t>(n, 1));
  auto* ds = static_cast<float*>(arena_.allocate(2 * sizeof(float)));
  const float scales[2] = {weights_scaling_factor, activation_scaling_factor};  // cuBLASLt's A (weight), B
  if (n > 0) FTX_CUDA_CHECK(cudaMemcpyAsync(dq, t.data(), n, cudaMemcpyHostToDevice, stream_));
  FTX_CUDA_CHECK(cudaMemcpyAsync(ds, scales, sizeof scales, cudaMemcpyHostToDevice, stream_));
  synchronize();  // the host copies go away on return
  ops::Weight w(dq, DType::kFloat8E4M3);
  w.scale = ds;
  w.activation_scaling_factor = activation_scaling_factor;
  w.weights_scaling_factor = weights_scaling_factor;
  return w;
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

void CudaBackend::release_weight(const ops::Weight& w) {
  if (!w) return;
  arena_.release(const_cast<void*>(w.data));
  if (w.dtype == DType::kInt8 || w.dtype == DType::kFloat8E4M3) arena_.release(const_cast<float*>(w.scale));
}

ops::KvCache CudaBackend::alloc_kv(size_t n, DType t) {
  return ops::KvCache(arena_.allocate(std::max<size_t>(n * dtype_size(t), 1)), t);
}

void CudaBackend::release_kv(const ops::KvCache& c) { arena_.release(c.data); }

float* CudaBackend::alloc(size_t n) { return static_cast<float*>(arena_.allocate(n * sizeof(float))); }

void CudaBackend::release(float* p) { arena_.release(p); }

void CudaBackend::upload(float* dst, const float* host_src, size_t n) {
  check_not_in_step("upload");
  if (n == 0) return;
  FTX_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
  // As the CPU's memcpy: the caller may reuse host_src on return (the engine frees fp16->fp32
  // conversion buffers right away). Weight loading is the only bulk user, so the wait is cheap.
  synchronize();
}

void CudaBackend::download(float* host_dst, const float* src, size_t n) {
  check_not_in_step("download");
  if (n == 0) return;
  const size_t bytes = n * sizeof(float);
  const size_t chunk = std::min(bytes, kDownloadChunkBytes);
  if (download_cap_ < chunk) {
    if (download_buf_) {
      synchronize();  // no copy into the old buffer is in flight (download waits anyway)
      FTX_CUDA_CHECK(cudaFreeHost(download_buf_));
      download_buf_ = nullptr;
      download_cap_ = 0;
    }
    const size_t cap = std::max(round_up(chunk, size_t(1) << 20), size_t(1) << 20);
    FTX_CUDA_CHECK(cudaMallocHost(&download_buf_, cap));
    download_cap_ = cap;
  }
  const char* s = reinterpret_cast<const char*>(src);
  char* d = reinterpret_cast<char*>(host_dst);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t len = std::min(chunk, bytes - off);
    FTX_CUDA_CHECK(cudaMemcpyAsync(download_buf_, s + off, len, cudaMemcpyDeviceToHost, stream_));
    synchronize();  // also where asynchronous kernel failures surface
    std::memcpy(d + off, download_buf_, len);
  }
}

void CudaBackend::copy(float* dst, const float* src, size_t n) { copy_act(dst, src, n); }  // fp32 Acts

void CudaBackend::fill(float* dst, float value, size_t n) {
  if (!replaying()) invoke_fill(stream_, dst, value, n);
}

ops::Act CudaBackend::alloc_act(size_t n) {
  return ops::Act(arena_.allocate(std::max<size_t>(n * dtype_size(act_dtype_), 1)), act_dtype_);
}

void CudaBackend::release_act(const ops::Act& a) { arena_.release(a.data); }

void CudaBackend::upload_act(const ops::Act& dst, const float* host_src, size_t n) {
  if (dst.dtype == DType::kFloat32) return upload(static_cast<float*>(dst.data), host_src, n);
  if (n == 0) return;
  float* staged = scratch(n);
  upload(staged, host_src, n);
  invoke_convert(stream_, dst.data, act_kind(dst, "upload"), staged, ElemKind::kFp32, n);
}

void CudaBackend::download_act(float* host_dst, const ops::Act& src, size_t n) {
  if (src.dtype == DType::kFloat32) return download(host_dst, static_cast<const float*>(src.data), n);
  if (n == 0) return;
  float* wide = scratch(n);
  invoke_convert(stream_, wide, ElemKind::kFp32, src.data, act_kind(src, "download"), n);
  download(host_dst, wide, n);
}

void CudaBackend::copy_act(const ops::Act& dst, const ops::Act& src, size_t n) {
  if (dst.dtype != src.dtype)
    throw Error(std::string("CUDA copy: activations from ") + dtype_name(src.dtype) + " into " + dtype_name(dst.dtype));
  if (n == 0 || dst.data == src.data || replaying()) return;
  const size_t bytes = dst.bytes(n);
  const char* s = static_cast<const char*>(src.data);
  char* d = static_cast<char*>(dst.data);
  if (d < s + bytes && s < d + bytes) {  // memmove semantics, as the CPU: through scratch
    void* tmp = scratch((bytes + sizeof(float) - 1) / sizeof(float));
    FTX_CUDA_CHECK(cudaMemcpyAsync(tmp, s, bytes, cudaMemcpyDeviceToDevice, stream_));
    FTX_CUDA_CHECK(cudaMemcpyAsync(d, tmp, bytes, cudaMemcpyDeviceToDevice, stream_));
  } else {
    FTX_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
}

float* CudaBackend::scratch(size_t n) {
  if (scratch_cap_ < n) {
    const size_t cap = std::max(n, scratch_cap_ * 2);
    release_graph_memory(scratch_);  // recorded graphs may hold its address
    scratch_ = nullptr;
    scratch_cap_ = 0;
    scratch_ = static_cast<float*>(arena_.allocate(cap * sizeof(float)));
    scratch_cap_ = cap;
  }
  return scratch_;
}

std::vector<void*> CudaBackend::scratch_parts(std::initializer_list<size_t> bytes) {
  size_t total = 0;
  for (size_t b : bytes) total += round_up(b, 256);
  char* base = reinterpret_cast<char*>(scratch(std::max<size_t>(total, 1) / sizeof(float) + 1));
  std::vector<void*> out;
  size_t off = 0;
  for (size_t b : bytes) {
    out.push_back(b == 0 ? nullptr : base + off);
    off += round_up(b, 256);
  }
  return out;
}

std::vector<const void*> CudaBackend::stage(std::initializer_list<Part> parts) {
  if (step_mode_ == StepMode::kCapture || step_mode_ == StepMode::kReplay) return stage_step(parts);
  size_t total = 0;
  for (const Part& p : parts) total += (p.bytes == 0 || !p.data) ? 0 : round_up(p.bytes, 16);
  if (step_mode_ == StepMode::kMeasure) step_meta_off_ += total;
  std::vector<const void*> out;
  out.reserve(parts.size());
  if (total == 0) {
    out.assign(parts.size(), nullptr);
    return out;
  }
  Slot& s = slots_[next_slot_];
  next_slot_ = (next_slot_ + 1) % kSlots;
  if (s.pending) FTX_CUDA_CHECK(cudaEventSynchronize(s.done));  // its last copy has read the host buffer
  s.pending = false;
  if (s.cap < total) {
    if (s.host) FTX_CUDA_CHECK(cudaFreeHost(s.host));
    s.host = nullptr;
    arena_.release(s.dev);  // stream order: kernels reading the old buffer run before any reuse
    s.dev = nullptr;
    s.cap = 0;
    const size_t cap = std::max(round_up(total, 4096), size_t(4096));
    FTX_CUDA_CHECK(cudaMallocHost(&s.host, cap));
    s.dev = arena_.allocate(cap);
    s.cap = cap;
  }
  if (!s.done) FTX_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  size_t off = 0;
  for (const Part& p : parts) {
    if (p.bytes == 0 || !p.data) {
      out.push_back(nullptr);
      continue;
    }
    std::memcpy(static_cast<char*>(s.host) + off, p.data, p.bytes);
    out.push_back(static_cast<char*>(s.dev) + off);
    off += round_up(p.bytes, 16);
  }
  FTX_CUDA_CHECK(cudaMemcpyAsync(s.dev, s.host, off, cudaMemcpyHostToDevice, stream_));
  FTX_CUDA_CHECK(cudaEventRecord(s.done, stream_));
  s.pending = true;
  return out;
}

// ---------------------------------------------------------------- repeated steps (CUDA graphs)

void CudaBackend::check_not_in_step(const char* op) const {
  if (step_mode_ != StepMode::kOff)
    throw Error(std::string("CUDA backend: ") + op + " inside a repeatable step (the engine must finish the step first)");
}

size_t CudaBackend::graphs_recorded() const {
  size_t n = 0;
  for (const auto& [key, st] : steps_) n += st.exec != nullptr;
  return n;
}

void CudaBackend::ensure_step_meta(size_t bytes) {
  if (bytes <= step_meta_cap_) return;
  // The device buffer's address is inside every recorded graph: a new one retires them all (they
  // are captured again, their measurements kept).
  retire_graphs();
  synchronize();  // no copy reads the old host buffer, no graph the old device one
  step_meta_pending_ = false;
  if (step_meta_host_) FTX_CUDA_CHECK(cudaFreeHost(step_meta_host_));
  step_meta_host_ = nullptr;
  arena_.release(step_meta_dev_);
  step_meta_dev_ = nullptr;
  step_meta_cap_ = 0;
  const size_t cap = std::max(round_up(bytes, 4096), size_t(64) << 10);
  FTX_CUDA_CHECK(cudaMallocHost(&step_meta_host_, cap));
  step_meta_dev_ = arena_.allocate(cap);
  step_meta_cap_ = cap;
  if (!step_meta_copied_) FTX_CUDA_CHECK(cudaEventCreateWithFlags(&step_meta_copied_, cudaEventDisableTiming));
}

std::vector<const void*> CudaBackend::stage_step(std::initializer_list<Part> parts) {
  std::vector<const void*> out;
  out.reserve(parts.size());
  for (const Part& p : parts) {
    if (p.bytes == 0 || !p.data) {
      out.push_back(nullptr);
      continue;
    }
    const size_t len = round_up(p.bytes, 16);
    // The same ops in the same order as the measured run: more bytes means another sequence.
    if (step_meta_off_ + len > step_->meta_bytes || step_meta_off_ + len > step_meta_cap_)
      throw Error("CUDA backend: a repeated step staged more metadata than its first run (" +
                  std::to_string(step_meta_off_ + len) + " > " + std::to_string(step_->meta_bytes) +
                  " bytes): its ops differ from the recorded ones");
    std::memcpy(static_cast<char*>(step_meta_host_) + step_meta_off_, p.data, p.bytes);
    out.push_back(static_cast<char*>(step_meta_dev_) + step_meta_off_);
    step_meta_off_ += len;
  }
  return out;
}

void CudaBackend::begin_repeatable(const std::string& key) {
  if (!graphs_) return;
  check_not_in_step("begin_repeatable");
  StepGraph& st = steps_[key];
  step_ = &st;
  step_meta_off_ = 0;
  if (!st.measured) {
    step_mode_ = StepMode::kMeasure;
    return;
  }
  ensure_step_meta(st.meta_bytes);  // before capture: it may allocate and synchronise
  if (step_meta_pending_) {  // the host buffer is rewritten below: the last step's copy must have read it
    FTX_CUDA_CHECK(cudaEventSynchronize(step_meta_copied_));
    step_meta_pending_ = false;
  }
  if (st.exec) {
    step_mode_ = StepMode::kReplay;
    return;
  }
  step_allocations_ = arena_.allocations();
  // Relaxed: the ops' host code may call CUDA APIs that are not stream work (cudaFuncSetAttribute).
  FTX_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  step_mode_ = StepMode::kCapture;
}

void CudaBackend::launch_step(cudaGraphExec_t exec) {
  if (step_meta_off_ > 0) {
    FTX_CUDA_CHECK(cudaMemcpyAsync(step_meta_dev_, step_meta_host_, step_meta_off_, cudaMemcpyHostToDevice, stream_));
    FTX_CUDA_CHECK(cudaEventRecord(step_meta_copied_, stream_));
    step_meta_pending_ = true;
  }
  FTX_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
}

void CudaBackend::end_repeatable() {
  const StepMode mode = step_mode_;
  step_mode_ = StepMode::kOff;
  StepGraph* st = step_;
  step_ = nullptr;
  switch (mode) {
    case StepMode::kOff:
      return;
    case StepMode::kMeasure:
      st->measured = true;
      st->meta_bytes = step_meta_off_;
      return;
    case StepMode::kReplay:
      if (step_meta_off_ != st->meta_bytes)
        throw Error("CUDA backend: a repeated step staged " + std::to_string(step_meta_off_) +
                    " bytes of metadata, its recording " + std::to_string(st->meta_bytes) +
                    ": its ops differ from the recorded ones");
      launch_step(st->exec);
      return;
    case StepMode::kCapture: {
      cudaGraph_t graph = nullptr;
      FTX_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      FTX_CUDA_CHECK(e);
      st->meta_bytes = step_meta_off_;
      launch_step(exec);
      if (arena_.allocations() == step_allocations_) {
        st->exec = exec;
      } else {  // addresses taken during the capture may be handed out again: run it this once only
        FTX_CUDA_CHECK(cudaGraphExecDestroy(exec));
      }
      finish_deferred_releases();
      return;
    }
  }
}

void CudaBackend::abort_repeatable() {
  if (step_mode_ == StepMode::kCapture) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);  // the error that aborted the step is the one to report
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  step_mode_ = StepMode::kOff;
  step_ = nullptr;
  try {  // called from destructors (RepeatableStep): an error here must not escape
    finish_deferred_releases();
  } catch (const std::exception&) {
  }
}

void CudaBackend::release_graph_memory(void* p) {
  if (!p) return;
  if (step_mode_ == StepMode::kCapture) {
    // No synchronising inside a capture: the buffer is released, and the graphs holding it retired,
    // when the capture ends (finish_deferred_releases). The graph being captured allocates, so it
    // runs once and is not kept (end_repeatable).
    deferred_releases_.push_back(p);
    return;
  }
  retire_graphs();   // synchronises first when a graph exists: none can run with the address again
  arena_.release(p);  // eager work still queued on the stream runs before any reuse (stream order)
}

void CudaBackend::finish_deferred_releases() {
  if (deferred_releases_.empty()) return;
  retire_graphs();
  for (void* p : deferred_releases_) arena_.release(p);
  deferred_releases_.clear();
}

void CudaBackend::retire_graphs() {
  bool any = false;
  for (auto& [key, st] : steps_) any |= st.exec != nullptr;
  if (any) synchronize();  // a launched graph may still run
  for (auto& [key, st] : steps_) {
    if (st.exec) cudaGraphExecDestroy(st.exec);
    st.exec = nullptr;
  }
}

void CudaBackend::forget_repeatables() {
  if (step_mode_ != StepMode::kOff) abort_repeatable();
  retire_graphs();
  steps_.clear();
}

// ---------------------------------------------------------------- GEMM

void CudaBackend::clear_plans() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  plans_.clear();
}

void CudaBackend::use_gemm_config(const std::string& explicit_path, const std::string& model_dir) {
  // The file's rows for the dtype the GEMMs multiply in (the weights' dtype) apply.
  const gemm::GemmDType dtype = weight_dtype_ == DType::kFloat16    ? gemm::GemmDType::kFp16
                                : weight_dtype_ == DType::kBFloat16 ? gemm::GemmDType::kBf16
                                                                    : gemm::GemmDType::kFp32;
  algo_map_ = gemm::GemmAlgoMap::load(explicit_path, model_dir, device_identity(current_cuda_device()), dtype);
  if (algo_map_.active() && !blas_) {
    FTX_CUBLAS_CHECK(cublasCreate(&blas_));
    FTX_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    // The Lt workspace serves cuBLAS too: both run on stream_, in order.
    FTX_CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_, kWorkspaceBytes));
  }
  clear_plans();  // GEMMs planned before now are planned again with the file
}


const CudaBackend::GemmPlan& CudaBackend::plan(const GemmKey& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  const auto [M, N, K, trans_b, align_a, align_b, align_c, in_dtype, c_dtype] = key;
  // Row-major C[M,N] = A[M,K]·B is column-major C^T[N,M] = B^T·A^T: cuBLASLt's "A" is our B
  // (column-major [N,K] with ld N, or with trans_b the stored [K,N] with ld K, transposed), its "B"
  // is our A (column-major [K,M], ld K), C is column-major [N,M], ld N. Half inputs (A already
  // in the weights' dtype) accumulate in fp32 and write an fp32 C or one of their own type.
  GemmPlan p;
  const bool half = in_dtype != DType::kFloat32;
  const cudaDataType_t in_type = cuda_data_type(in_dtype);
  const cudaDataType_t c_type = cuda_data_type(c_dtype);
  const cublasComputeType_t compute = tf32_ && !half ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  FTX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (trans_b)
    FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, in_type, K, N, K));
  else
    FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, in_type, N, K, N));
  FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, in_type, K, M, K));
  FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, c_type, N, M, N));

  const std::string shape = "gemm M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                            (trans_b ? " (B transposed)" : "") +
                            (c_dtype != DType::kFloat32 ? std::string(", ") + dtype_name(c_dtype) + " C" : "");
  // Lt's A is our B and vice versa.
  const uint32_t al_a = align_b, al_b = align_a, al_c = align_c;

  // gemm_config.in first (FT's key: m = rows, n = output features), as FT's cublasMMWrapper does.
  // An fp32 file is tuned for FP32 compute: with TF32 on, its timings do not apply. A half file's
  // cuBLASLt rows were timed with a half C (FT's GEMMs), as the activations' GEMMs of a half model
  // run here; the lm_head's C is fp32, so each row is used only when cuBLASLt accepts it.
  const bool use_file = half || !tf32_;
  if (const gemm::GemmAlgoRow* row = use_file ? algo_map_.find(1, static_cast<int>(M), static_cast<int>(N),
                                                               static_cast<int>(K), shape)
                                              : nullptr) {
    LtAlgoFields f;
    f.algo_id = row->algo_id;
    f.tile = static_cast<uint32_t>(row->tile);
    f.stages = static_cast<uint32_t>(row->stages);
    f.splitk = row->splitk;
    f.reduction = static_cast<uint32_t>(row->reduction_scheme);
    f.swizzle = static_cast<uint32_t>(row->swizzle);
    f.custom = static_cast<uint32_t>(row->custom_option);
    if (const gemm::TunedGemmRoute route = gemm::tuned_gemm_route(*row); route.classic) {
      // FT's gpt_gemm writes classic winners (all fp32 rows are): run them as FT does.
      p.classic = true;
      p.classic_algo = route.classic_algo;
      return plans_.emplace(key, p).first->second;
    }
    size_t ws_needed = 0;
    if (!rounds_once(f, c_type)) {
      gemm::gemm_log_to_stderr("warning: " + shape + ": the tuned algorithm " + std::to_string(row->algo_id) +
                               " adds its split-K partial sums in the half output type (reduction scheme " +
                               std::to_string(f.reduction) + "), which rounds C more than once; using the heuristic");
    } else if (build_lt_algo(lt_, compute, CUDA_R_32F, in_type, in_type, c_type, f, p.op, p.a, p.b, p.c,
                             kWorkspaceBytes, &p.algo, &ws_needed) &&
               lt_algo_accepts_alignment(p.algo, al_a, al_b, al_c)) {
      return plans_.emplace(key, p).first->second;
    } else {
      gemm::gemm_log_to_stderr("warning: " + shape + ": cuBLASLt does not accept the tuned algorithm " +
                               std::to_string(row->algo_id) + " for these operands; using the heuristic");
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  FTX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c));
  if (st == CUBLAS_STATUS_SUCCESS) st = prefer_rounding_once(pref, c_type);  // a half C: split-K sums in fp32
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
    throw Error("cuBLASLt has no algorithm for " + shape + ": " +
                (st != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(st) : "no heuristic result"));
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

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
  switch (kind) {
    case ops::WeightKind::kW8A8: return gemm_w8a8(M, N, K, A, weight, C, beta);
    case ops::WeightKind::kFp8: return gemm_fp8(M, N, K, A, weight, C, beta);
    case ops::WeightKind::kInt8Columns:
    case ops::WeightKind::kInt8Rows: return gemm_int8(M, N, K, A, weight, C, beta);
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

void CudaBackend::run_gemm(int64_t M, int64_t N, int64_t K, const void* a, const void* B, DType in, bool trans_b,
                           void* C, DType c_dtype, float beta) {
  const cudaDataType_t in_type = cuda_data_type(in), c_type = cuda_data_type(c_dtype);
  const GemmPlan& p =
      plan(GemmKey{M, N, K, trans_b, alignment_of(a), alignment_of(B), alignment_of(C), in, c_dtype});
  const float alpha = 1.0f;
  if (p.classic) {  // the same column-major view as the Lt plan: C^T[N,M] = op(B)^T · A^T
    FTX_CUBLAS_CHECK(cublasGemmEx(blas_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N),
                                  static_cast<int>(M), static_cast<int>(K), &alpha, B, in_type,
                                  static_cast<int>(trans_b ? K : N), a, in_type, static_cast<int>(K), &beta, C,
                                  c_type, static_cast<int>(N), CUBLAS_COMPUTE_32F,
                                  static_cast<cublasGemmAlgo_t>(p.classic_algo)));
    return;
  }
  FTX_CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &alpha, B, p.a, a, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace_,
                                  kWorkspaceBytes, stream_));
}

// ---------------------------------------------------------------- elementwise, norms, embeddings

void CudaBackend::layer_norm(ops::Act out, ops::Act x, const float* gamma, const float* beta, int64_t rows,
                             int64_t H, float eps) {
  // x is only read: the kernel writes x back only when a residual (y or bias) is given.
  if (replaying()) return;
  invoke_add_residual_layer_norm(stream_, same_act_kind({out, x}, "layer_norm"), x.data, nullptr, nullptr, gamma,
                                 beta, out.data, rows, H, eps);
}

void CudaBackend::add_residual_layer_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma,
                                          const float* beta, ops::Act norm_out, int64_t rows, int64_t H, float eps) {
  if (replaying()) return;
  invoke_add_residual_layer_norm(stream_, same_act_kind({x, y, norm_out}, "add_residual_layer_norm"), x.data, y.data,
                                 bias, gamma, beta, norm_out.data, rows, H, eps);
}

void CudaBackend::rms_norm(ops::Act out, ops::Act x, const float* gamma, int64_t rows, int64_t H, float eps) {
  if (replaying()) return;
  invoke_add_residual_rms_norm(stream_, same_act_kind({out, x}, "rms_norm"), x.data, nullptr, nullptr, gamma,
                               out.data, rows, H, eps);
}

void CudaBackend::add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma,
                                        ops::Act norm_out, int64_t rows, int64_t H, float eps) {
  if (replaying()) return;
  invoke_add_residual_rms_norm(stream_, same_act_kind({x, y, norm_out}, "add_residual_rms_norm"), x.data, y.data,
                               bias, gamma, norm_out.data, rows, H, eps);
}

void CudaBackend::add_bias(ops::Act x, const float* bias, int64_t rows, int64_t N) {
  if (replaying()) return;
  invoke_add_bias(stream_, act_kind(x, "add_bias"), x.data, bias, rows, N);
}

void CudaBackend::bias_activation(ops::Act x, const float* bias, ops::Act gate, const float* gate_bias, int64_t rows,
                                  int64_t N, Activation act) {
  if (replaying()) return;
  invoke_add_bias_activation(stream_, same_act_kind({x, gate}, "bias_activation"), x.data, bias, gate.data,
                             gate_bias, rows, N, static_cast<int>(act));
}

void CudaBackend::embedding(ops::Act out, const ops::Weight& wte, const float* wpe, ops::PositionTable table,
                            int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows,
                            int64_t H, float scale) {
  if (rows <= 0) return;
  const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  const auto dev = stage({{ids, bytes}, {positions, bytes}});
  if (replaying()) return;
  invoke_embedding_lookup(stream_, out.data, act_kind(out, "embedding"), wte.data, elem_kind(wte.dtype), wpe,
                          static_cast<int>(table), position_offset, static_cast<const int32_t*>(dev[0]),
                          static_cast<const int32_t*>(dev[1]), rows, H, scale);
}

void CudaBackend::rotary(ops::Act qkv, int64_t rows, int64_t stride, const int32_t* positions, int64_t heads,
                         int64_t head_dim, int64_t rot_dim, RotaryStyle style, const ops::RotaryFrequencies& freq) {
  if (rot_dim <= 0 || rows <= 0) return;
  // The frequencies come from the host, as the CPU's (rope_inv_freq), so both take the same angles.
  const std::vector<double> inv_freq = freq.inv_freq(rot_dim);
  const auto dev = stage({{positions, static_cast<size_t>(rows) * sizeof(int32_t)},
                          {inv_freq.data(), inv_freq.size() * sizeof(double)}});
  if (replaying()) return;
  invoke_rotary(stream_, act_kind(qkv, "rotary"), qkv.data, rows, stride, static_cast<const int32_t*>(dev[0]), heads,
                head_dim, rot_dim, style == RotaryStyle::kInterleaved, static_cast<const double*>(dev[1]));
}

// ---------------------------------------------------------------- attention and the cache

void CudaBackend::context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                                    const ops::BlockTables& tables, const ops::KvCache& k_cache,
                                    const ops::KvCache& v_cache, const ops::AttentionShape& sh, const int32_t* past) {
  if (B <= 0 || S <= 0) return;
  // The CPU trusts these (the engine checks them); here a bad value would corrupt device memory
  // silently, so check on the host, where it is free (attention_checks.h).
  check_attention_shape(sh, tables, "context_attention");
  check_append_slots(lengths, past, B, S, sh);
  check_block_ids(tables, B, cache_blocks(k_cache, v_cache, sh), "context_attention");
  const size_t ib = static_cast<size_t>(B) * sizeof(int32_t);
  const size_t tb = static_cast<size_t>(B * tables.stride) * sizeof(int32_t);
  const size_t sb = sh.alibi_slopes ? static_cast<size_t>(sh.q_heads) * sizeof(float) : 0;
  const auto dev = stage({{lengths, ib}, {tables.ids, tb}, {sh.alibi_slopes, sb}, {past, past ? ib : 0}});
  if (replaying()) return;
  AttentionLaunch a =
      attention_launch(out, qkv, k_cache, v_cache, sh, dev[1], tables.stride, dev[2], B, S, smem_optin_);
  a.lengths = static_cast<const int32_t*>(dev[0]);
  a.past = past ? static_cast<const int32_t*>(dev[3]) : nullptr;
  invoke_attention(stream_, a);
}

void CudaBackend::decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables,
                                   const int32_t* past, const ops::KvCache& k_cache, const ops::KvCache& v_cache,
                                   const ops::AttentionShape& sh) {
  if (n <= 0) return;
  check_attention_shape(sh, tables, "decode_attention");
  check_decode_slots(past, n, sh);
  check_block_ids(tables, n, cache_blocks(k_cache, v_cache, sh), "decode_attention");
  const size_t ib = static_cast<size_t>(n) * sizeof(int32_t);
  const size_t tb = static_cast<size_t>(n * tables.stride) * sizeof(int32_t);
  const size_t sb = sh.alibi_slopes ? static_cast<size_t>(sh.q_heads) * sizeof(float) : 0;
  const auto dev = stage({{past, ib}, {tables.ids, tb}, {sh.alibi_slopes, sb}});
  if (replaying()) return;
  AttentionLaunch a =
      attention_launch(out, qkv, k_cache, v_cache, sh, dev[1], tables.stride, dev[2], n, 1, smem_optin_);
  a.past = static_cast<const int32_t*>(dev[0]);
  a.sm_count = sm_count_;
  // Split decoding's partial results (stream-ordered scratch: the next op may reuse it).
  if (const size_t w = decode_attention_workspace(a)) a.workspace = scratch(w);
  invoke_attention(stream_, a);
}

int64_t CudaBackend::cache_blocks(const ops::KvCache& k, const ops::KvCache& v, const ops::AttentionShape& sh) const {
  // The allocations' own sizes (a cache that is a view into a larger allocation: unknown, -1).
  const int64_t bk = blocks_in_cache(arena_.requested_bytes(k.data), k.dtype, sh);
  const int64_t bv = blocks_in_cache(arena_.requested_bytes(v.data), v.dtype, sh);
  return bk < 0 || bv < 0 ? -1 : std::min(bk, bv);
}

size_t CudaBackend::available_memory() const {
  size_t free_bytes = 0, total = 0;
  FTX_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  // The arena keeps released blocks for reuse: they are free to this backend too.
  return free_bytes + (arena_.bytes_reserved() - arena_.bytes_in_use());
}

void CudaBackend::copy_kv_2d(const ops::KvCache& dst, int64_t dst_pitch, const ops::KvCache& src, int64_t src_pitch,
                             int64_t width, int64_t height) {
  if (dst.dtype != src.dtype) throw Error("CUDA copy_kv_2d: caches of different dtypes");
  if (ops::kv_is_quantized(dst.dtype) && dst.scale != src.scale)
    throw Error(std::string("CUDA copy_kv_2d: ") + dtype_name(dst.dtype) + " caches of different scales");
  if (width <= 0 || height <= 0) return;
  const size_t el = dtype_size(src.dtype);
  const size_t w = static_cast<size_t>(width) * el, dp = static_cast<size_t>(dst_pitch) * el,
               sp = static_cast<size_t>(src_pitch) * el;
  auto* d = static_cast<char*>(dst.data);
  const auto* s = static_cast<const char*>(src.data);
  // cudaMemcpy2D refuses pitches above the device's limit (2^31 - 1 bytes), and KvBlockPool::grow
  // copies a layer's whole buffer as one row of its own length: past 2 GiB that copy would fail.
  // One row, or rows packed end to end on both sides, is one plain copy; rows of larger pitches
  // than the device takes are copied one by one.
  if (height == 1 || (dp == w && sp == w)) {
    FTX_CUDA_CHECK(cudaMemcpyAsync(d, s, w * static_cast<size_t>(height), cudaMemcpyDeviceToDevice, stream_));
  } else if (dp <= max_pitch_ && sp <= max_pitch_) {
    FTX_CUDA_CHECK(cudaMemcpy2DAsync(d, dp, s, sp, w, static_cast<size_t>(height), cudaMemcpyDeviceToDevice, stream_));
  } else {
    for (int64_t r = 0; r < height; ++r)
      FTX_CUDA_CHECK(cudaMemcpyAsync(d + static_cast<size_t>(r) * dp, s + static_cast<size_t>(r) * sp, w,
                                     cudaMemcpyDeviceToDevice, stream_));
  }
}

void CudaBackend::gather_cache_rows(const ops::KvCache& kv, const int32_t* dst, const int32_t* src, int64_t n,
                                    int64_t row_elems) {
  if (n <= 0 || row_elems <= 0) return;
  // The CPU copies every source out, then writes in order (a repeated dst: the last pair wins).
  // Same result with less copying: keep each dst's last pair, drop pairs that copy a row onto
  // itself, and stage through scratch only the sources that some kept pair overwrites.
  std::unordered_map<int32_t, int64_t> last;
  for (int64_t i = 0; i < n; ++i) {
    if (dst[i] < 0 || src[i] < 0)
      throw Error("CUDA gather_cache_rows: pair " + std::to_string(i) + " has row " + std::to_string(src[i]) + " -> " +
                  std::to_string(dst[i]));
    last[dst[i]] = i;
  }
  std::vector<int32_t> to, from, staged;
  std::unordered_set<int32_t> written;
  for (int64_t i = 0; i < n; ++i)
    if (last[dst[i]] == i && src[i] != dst[i]) written.insert(dst[i]);
  std::unordered_map<int32_t, int32_t> slot_of;  // staged source row -> scratch slot
  for (int64_t i = 0; i < n; ++i) {
    if (last[dst[i]] != i || src[i] == dst[i]) continue;
    to.push_back(dst[i]);
    if (written.count(src[i])) {
      auto [it, fresh] = slot_of.emplace(src[i], static_cast<int32_t>(staged.size()));
      if (fresh) staged.push_back(src[i]);
      from.push_back(-it->second - 1);
    } else {
      from.push_back(src[i]);
    }
  }
  if (to.empty()) return;
  const auto dev = stage({{to.data(), to.size() * sizeof(int32_t)},
                          {from.data(), from.size() * sizeof(int32_t)},
                          {staged.data(), staged.size() * sizeof(int32_t)}});
  if (replaying()) return;
  const int64_t row_bytes = row_elems * static_cast<int64_t>(dtype_size(kv.dtype));
  const size_t staged_bytes = staged.size() * static_cast<size_t>(row_bytes);
  float* tmp = staged.empty() ? nullptr : scratch((staged_bytes + sizeof(float) - 1) / sizeof(float));
  if (!staged.empty())
    invoke_copy_rows(stream_, tmp, nullptr, kv.data, nullptr, static_cast<const int32_t*>(dev[2]),
                     static_cast<int64_t>(staged.size()), row_bytes);
  invoke_copy_rows(stream_, kv.data, static_cast<const int32_t*>(dev[0]), kv.data, tmp,
                   static_cast<const int32_t*>(dev[1]), static_cast<int64_t>(to.size()), row_bytes);
}

}  // namespace ftx::cuda
