// CudaBackend's memory: weights and caches from the arena (quantised weights transposed for
// cuBLASLt's TN forms, INT4 in its kernel's layout), transfers that finish before the host buffer
// may go away, activations converted through scratch when held in a half type, the scratch the ops
// share, and the pinned ring that stages each op's host metadata.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/cuda_backend/act_kinds.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/memory/memory_kernels.h"
#include "kernels/quantization/fp8_gemm_lt.h"
#include "kernels/quantization/int4_layout.h"
#include "lib/ops/host_math.h"

namespace ftx::cuda {

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

ops::Weight CudaBackend::upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols,
                                           float activation_scaling_factor, float weights_scaling_factor) {
  check_not_in_step("upload_weight_fp8");
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  std::vector<uint8_t> t(n);  // [K, N] -> [N, K]
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t j = 0; j < cols; ++j) t[static_cast<size_t>(j * rows + k)] = q[static_cast<size_t>(k * cols + j)];
  void* dq = arena_.allocate(std::max<size_t>(n, 1));
  float scales[kFp8ActivationScaleSlot + 1] = {};  // cuBLASLt's A (weight) and B scales (fp8_gemm_lt.h)
  scales[0] = weights_scaling_factor;
  scales[kFp8ActivationScaleSlot] = activation_scaling_factor;
  auto* ds = static_cast<float*>(arena_.allocate(sizeof scales));
  if (n > 0) FTX_CUDA_CHECK(cudaMemcpyAsync(dq, t.data(), n, cudaMemcpyHostToDevice, stream_));
  FTX_CUDA_CHECK(cudaMemcpyAsync(ds, scales, sizeof scales, cudaMemcpyHostToDevice, stream_));
  synchronize();  // the host copies go away on return
  ops::Weight w(dq, DType::kFloat8E4M3);
  w.scale = ds;
  w.activation_scaling_factor = activation_scaling_factor;
  w.weights_scaling_factor = weights_scaling_factor;
  return w;
}

ops::Weight CudaBackend::upload_weight_int4(const ops::Int4Matrix& m, DType input_dtype) {
  check_not_in_step("upload_weight_int4");
  elem_kind(input_dtype);  // fp32, fp16 or bf16: Error naming any other
  const Int4DeviceLayout l = make_int4_layout(m, "upload_weight_int4");
  // One arena range per buffer (each 256-byte aligned, as the kernel's vector loads need).
  auto put = [&](const void* host, size_t bytes) -> void* {
    if (bytes == 0) return nullptr;
    void* d = arena_.allocate(bytes);
    FTX_CUDA_CHECK(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, stream_));
    return d;
  };
  ops::Weight w(put(l.packed.data(), l.packed.size()), DType::kUInt8);
  w.scale = static_cast<const float*>(put(l.scales.data(), l.scales.size() * sizeof(float)));
  w.int4_zeros = static_cast<const uint8_t*>(put(l.zeros.data(), l.zeros.size()));
  std::vector<int32_t> aux(l.row_group);  // act-order only: [K] groups, then [K] source rows
  aux.insert(aux.end(), l.perm.begin(), l.perm.end());
  w.int4_aux = put(aux.data(), aux.size() * sizeof(int32_t));
  synchronize();  // the host buffers go away on return
  w.int4 = true;
  w.int4_group_size = l.group_size;
  w.input_dtype = input_dtype;
  return w;
}

void CudaBackend::release_weight(const ops::Weight& w) {
  if (!w) return;
  arena_.release(const_cast<void*>(w.data));
  if (w.dtype == DType::kInt8 || w.dtype == DType::kFloat8E4M3 || w.int4) arena_.release(const_cast<float*>(w.scale));
  if (w.int4) {
    arena_.release(const_cast<uint8_t*>(w.int4_zeros));
    arena_.release(const_cast<void*>(w.int4_aux));
  }
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

// One cudaMemcpy2DAsync (recorded into a decode step's graph like the other copies).
void CudaBackend::copy_act_2d(const ops::Act& dst, int64_t dst_pitch, const ops::Act& src, int64_t src_pitch,
                              int64_t width, int64_t height) {
  if (dst.dtype != src.dtype)
    throw Error(std::string("CUDA copy: activations from ") + dtype_name(src.dtype) + " into " + dtype_name(dst.dtype));
  if (width <= 0 || height <= 0 || replaying()) return;
  const size_t el = dtype_size(dst.dtype);
  FTX_CUDA_CHECK(cudaMemcpy2DAsync(dst.data, static_cast<size_t>(dst_pitch) * el, src.data,
                                   static_cast<size_t>(src_pitch) * el, static_cast<size_t>(width) * el,
                                   static_cast<size_t>(height), cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::copy_2d(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t width,
                          int64_t height) {
  copy_act_2d(dst, dst_pitch, src, src_pitch, width, height);  // fp32 Acts
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

size_t CudaBackend::available_memory() const {
  size_t free_bytes = 0, total = 0;
  FTX_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  // The arena keeps released blocks for reuse: they are free to this backend too.
  return free_bytes + (arena_.bytes_reserved() - arena_.bytes_in_use());
}

}  // namespace ftx::cuda
