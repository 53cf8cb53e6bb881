// Device-independent pieces of the op seam: weight conversion, ALiBi slopes, the backend factory
// (which finds every backend, the CPU's too, in the registry: lib/ops/backend_registry.h).
#include "lib/ops/backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/ops/backend_registry.h"
#include "lib/ops/cuda_module.h"

namespace ftx::ops {

const float* Weight::fp32() const {
  if (dtype != DType::kFloat32)
    throw Error(std::string("internal: an fp32 weight was expected, this one is ") + dtype_name(dtype));
  return static_cast<const float*>(data);
}

float* KvCache::fp32() const {
  if (dtype != DType::kFloat32)
    throw Error(std::string("internal: an fp32 KV cache was expected, this one is ") + dtype_name(dtype));
  return static_cast<float*>(data);
}

int8_t* KvCache::int8() const {
  if (dtype != DType::kInt8)
    throw Error(std::string("internal: an int8 KV cache was expected, this one is ") + dtype_name(dtype));
  return static_cast<int8_t*>(data);
}

uint8_t* KvCache::fp8() const {
  if (dtype != DType::kFloat8E4M3)
    throw Error(std::string("internal: an FP8 KV cache was expected, this one is ") + dtype_name(dtype));
  return static_cast<uint8_t*>(data);
}

WeightKind weight_kind(const Weight& w) {
  switch (w.dtype) {
    case DType::kFloat32: return WeightKind::kFloat32;
    case DType::kFloat16:
    case DType::kBFloat16: return WeightKind::kHalf;
    case DType::kInt8: return w.w8a8 ? WeightKind::kW8A8 : w.int8_rows ? WeightKind::kInt8Rows : WeightKind::kInt8Columns;
    case DType::kFloat8E4M3: return WeightKind::kFp8;
    default: break;
  }
  throw Error(std::string("internal: no GEMM reads a weight held in ") + dtype_name(w.dtype));
}

KvCache Backend::alloc_kv(size_t n, DType t) {
  if (kv_is_quantized(t)) return KvCache(alloc((n + sizeof(float) - 1) / sizeof(float)), t);
  if (t != DType::kFloat32)
    throw Error(name() + " backend: no allocator for a " + dtype_name(t) + " KV cache");
  return KvCache(alloc(n));
}

namespace {

bool is_weight_dtype(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

float load_as_float(const uint8_t* p, DType t) {
  if (t == DType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::kFloat16 ? half_to_float(h) : bf16_to_float(h);
}

void store_float(uint8_t* p, DType t, float f) {
  if (t == DType::kFloat32) {
    std::memcpy(p, &f, 4);
    return;
  }
  const uint16_t h = t == DType::kFloat16 ? float_to_half(f) : float_to_bf16(f);
  std::memcpy(p, &h, 2);
}

}  // namespace

void convert_weight(const void* src, DType from, void* dst, DType to, size_t n) {
  for (DType t : {from, to})
    if (!is_weight_dtype(t))
      throw Error(std::string("weight dtype ") + dtype_name(t) + " is not supported (fp32, fp16, bf16)");
  if (from == to) {
    std::memcpy(dst, src, n * dtype_size(from));
    return;
  }
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const size_t fs = dtype_size(from), ts = dtype_size(to);
#pragma omp parallel for if (n > 65536)
  for (size_t i = 0; i < n; ++i) store_float(d + i * ts, to, load_as_float(s + i * fs, from));
}

Weight Backend::upload_weight(const void* src, DType src_dtype, size_t n) {
  float* dst = alloc(n);
  if (src_dtype == DType::kFloat32) {
    upload(dst, static_cast<const float*>(src), n);
  } else {
    std::vector<float> host(n);
    convert_weight(src, src_dtype, host.data(), DType::kFloat32, n);
    upload(dst, host.data(), n);
  }
  return Weight(dst);
}

void Backend::release_weight(const Weight& w) {
  if (!w) return;
  if (w.dtype == DType::kInt8 || w.dtype == DType::kFloat8E4M3) {
    release(static_cast<float*>(const_cast<void*>(w.data)));
    if (w.scale) release(const_cast<float*>(w.scale));
    return;
  }
  release(const_cast<float*>(w.fp32()));
}

Act Backend::alloc_act(size_t n) {
  if (act_dtype() != DType::kFloat32)
    throw Error(name() + " backend: no allocator for " + dtype_name(act_dtype()) + " activations");
  return Act(alloc(n));
}

void Backend::release_act(const Act& a) {
  if (a) release(a.fp32());
}

void Backend::upload_act(const Act& dst, const float* host_src, size_t n) { upload(dst.fp32(), host_src, n); }

void Backend::download_act(float* host_dst, const Act& src, size_t n) { download(host_dst, src.fp32(), n); }

void Backend::copy_act(const Act& dst, const Act& src, size_t n) { copy(dst.fp32(), src.fp32(), n); }

void quantize_int8_columns(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scale) {
  std::vector<float> amax(static_cast<size_t>(cols), 0.0f);
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t n = 0; n < cols; ++n) amax[n] = std::max(amax[n], std::fabs(w[k * cols + n]));
  for (int64_t n = 0; n < cols; ++n) scale[n] = amax[n] > 0.0f ? amax[n] / 128.0f : 1.0f;
  for (int64_t k = 0; k < rows; ++k)
    for (int64_t n = 0; n < cols; ++n) {
      const float r = std::round(w[k * cols + n] / scale[n]);  // std::round: half away from zero
      q[k * cols + n] = static_cast<int8_t>(std::min(127.0f, std::max(-128.0f, r)));
    }
}

namespace {

// FT's rule over the rows of a [rows, cols] matrix: each row read as a [cols, 1] matrix.
void quantize_int8_rows(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scale) {
  for (int64_t r = 0; r < rows; ++r) quantize_int8_columns(w + r * cols, cols, 1, q + r * cols, scale + r);
}

// src [rows, cols] quantised by `quantize` (its scales: `scales` of them) into backend memory.
template <class Quantize>
Weight upload_int8(Backend& be, const void* src, DType src_dtype, int64_t rows, int64_t cols, int64_t scales,
                   Quantize quantize) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  std::vector<float> wide;
  const float* w = static_cast<const float*>(src);
  if (src_dtype != DType::kFloat32) {
    wide.resize(n);
    convert_weight(src, src_dtype, wide.data(), DType::kFloat32, n);
    w = wide.data();
  }
  // The int8 bytes travel through the float-typed alloc/upload, padded to whole floats.
  const size_t words = (n + sizeof(float) - 1) / sizeof(float);
  std::vector<float> packed(std::max<size_t>(words, 1), 0.0f);
  std::vector<float> scale(static_cast<size_t>(scales));
  quantize(w, rows, cols, reinterpret_cast<int8_t*>(packed.data()), scale.data());
  float* q_dst = be.alloc(packed.size());
  float* s_dst = be.alloc(std::max<size_t>(scale.size(), 1));
  be.upload(q_dst, packed.data(), words);
  be.upload(s_dst, scale.data(), scale.size());
  Weight q(q_dst, s_dst);
  q.input_dtype = be.weight_dtype();
  return q;
}

}  // namespace

Weight Backend::upload_weight_int8_rows(const void* src, DType src_dtype, int64_t rows, int64_t cols) {
  Weight w = upload_int8(*this, src, src_dtype, rows, cols, rows, quantize_int8_rows);
  w.int8_rows = true;
  return w;
}

Weight Backend::upload_weight_int8(const void* src, DType src_dtype, int64_t rows, int64_t cols) {
  return upload_int8(*this, src, src_dtype, rows, cols, cols, quantize_int8_columns);
}

Weight Backend::upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols, float activation_scaling_factor,
                                  float weights_scaling_factor) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  // The E4M3 bytes travel through the float-typed alloc/upload, padded to whole floats.
  const size_t words = std::max<size_t>((n + sizeof(float) - 1) / sizeof(float), 1);
  std::vector<float> packed(words, 0.0f);
  std::memcpy(packed.data(), q, n);
  float* dst = alloc(words);
  upload(dst, packed.data(), words);
  Weight w(dst, DType::kFloat8E4M3);
  w.activation_scaling_factor = activation_scaling_factor;
  w.weights_scaling_factor = weights_scaling_factor;
  return w;
}

Weight Backend::upload_weight_w8a8(const int8_t* q, int64_t rows, int64_t cols, const float* alpha_col,
                                   float act_scale, float out_scale) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  // The int8 bytes travel through the float-typed alloc/upload, padded to whole floats.
  const size_t words = std::max<size_t>((n + sizeof(float) - 1) / sizeof(float), 1);
  std::vector<float> packed(words, 0.0f);
  std::memcpy(packed.data(), q, n);
  float* q_dst = alloc(words);
  float* s_dst = alloc(std::max<int64_t>(cols, 1));
  upload(q_dst, packed.data(), words);
  upload(s_dst, alpha_col, static_cast<size_t>(cols));
  Weight w(q_dst, s_dst);
  w.w8a8 = true;
  w.act_scale = act_scale;
  w.out_scale = out_scale;
  return w;
}

void Backend::sample_rows(float* logits, int64_t stride, int64_t vocab, const decoding::RowSamplingBatch& batch,
                          decoding::SampledToken* out) {
  if (batch.rows.empty()) return;
  const int64_t rows = decoding::logit_rows_read(batch);
  std::vector<float> host(static_cast<size_t>(rows * stride));
  download(host.data(), logits, host.size());
  decoding::sample_rows_on_host(host.data(), stride, vocab, batch, out);
}

namespace {

// A number from a one-line file such as /sys/fs/cgroup/memory.max; -1 when absent or "max".
int64_t read_number_file(const char* path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return -1;
  try {
    return std::stoll(v);
  } catch (...) {
    return -1;
  }
}

}  // namespace

size_t Backend::available_memory() const { return host_available_memory(); }

size_t host_available_memory() {
  int64_t avail = -1;
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") {
      avail = kb * 1024;
      break;
    }
  }
  // A container's limit is lower than what the host has free.
  const int64_t limit = read_number_file("/sys/fs/cgroup/memory.max");
  const int64_t used = read_number_file("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0) {
    const int64_t headroom = std::max<int64_t>(0, limit - used);
    avail = avail < 0 ? headroom : std::min(avail, headroom);
  }
  return avail < 0 ? SIZE_MAX : static_cast<size_t>(avail);
}

std::vector<float> alibi_slopes(int64_t num_heads) {
  int64_t n2 = 1;
  while (n2 * 2 <= num_heads) n2 *= 2;
  std::vector<float> s(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < num_heads; ++h) {
    const double e = h < n2 ? -8.0 * static_cast<double>(h + 1) / static_cast<double>(n2)
                            : -4.0 * static_cast<double>(2 * (h - n2) + 1) / static_cast<double>(n2);
    s[h] = static_cast<float>(std::pow(2.0, e));
  }
  return s;
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads, DType weight_dtype) {
  if (!is_weight_dtype(weight_dtype))
    throw UsageError(std::string("--dtype ") + dtype_name(weight_dtype) + ": expected fp32, fp16 or bf16");
  // Backends register themselves (lib/ops/backend_registry.h): the CPU's from lib/cpu/, the CUDA
  // one from kernels/.
  const BackendFactory* factory = find_backend_factory(device);
  if (!factory && device == "cuda" && load_cuda_module()) factory = find_backend_factory(device);
  if (factory) {
    BackendOptions options;
    options.threads = threads;
    options.weight_dtype = weight_dtype;
    return (*factory)(options);  // the CUDA backend: Error when there is no device
  }
  if (device == "cuda") throw Error("--device cuda: the CUDA backend is not built in this version");
  std::string known;
  for (const std::string& d : registered_backends()) known += (known.empty() ? "" : " or ") + d;
  if (known.empty())  // a program linked without ftx_runtime's registrations
    throw Error("--device " + device + ": no backend is registered in this program (link ftx_runtime)");
  throw Error("--device " + device + ": unknown device (expected " + known + ")");
}

}  // namespace ftx::ops
