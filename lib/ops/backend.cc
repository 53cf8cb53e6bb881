// The Backend's default implementations (fp32 host memory through the virtual alloc/upload, the
// int8 and FP8 uploads, sampling on the host) and the backend factory (which finds every backend,
// the CPU's too, in the registry: lib/ops/backend_registry.h).
#include "lib/ops/backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/ops/backend_registry.h"
#include "lib/ops/cuda_module.h"
#include "lib/ops/host_math.h"

namespace ftx::ops {

KvCache Backend::alloc_kv(size_t n, DType t) {
  if (kv_is_quantized(t)) return KvCache(alloc((n + sizeof(float) - 1) / sizeof(float)), t);
  if (t != DType::kFloat32)
    throw Error(name() + " backend: no allocator for a " + dtype_name(t) + " KV cache");
  return KvCache(alloc(n));
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

void Backend::copy_act_2d(const Act& dst, int64_t dst_pitch, const Act& src, int64_t src_pitch, int64_t width,
                          int64_t height) {
  for (int64_t i = 0; i < height; ++i) copy_act(dst + i * dst_pitch, src + i * src_pitch, static_cast<size_t>(width));
}

void Backend::copy_2d(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t width,
                      int64_t height) {
  for (int64_t i = 0; i < height; ++i) copy(dst + i * dst_pitch, src + i * src_pitch, static_cast<size_t>(width));
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

Weight Backend::upload_weight_int4(const Int4Matrix& m, DType input_dtype) {
  (void)m;
  (void)input_dtype;
  throw Error("the " + name() + " backend has no INT4 weight-only GEMM");
}

void Backend::moe_ffn(Act out, Act in, int64_t rows, const MoeLayer& layer) {
  (void)out;
  (void)in;
  (void)rows;
  (void)layer;
  throw Error("moe_ffn: the " + name() + " backend has no mixture-of-experts layer yet (the CPU backend has; "
              "run with --device cpu)");
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

void check_log_prob_targets(const int32_t* targets, int64_t rows, int64_t vocab) {
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] < 0 || targets[r] >= vocab)
      throw Error("token_log_probs: target " + std::to_string(targets[r]) + " of row " + std::to_string(r) +
                  " outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

void host_token_log_probs(const float* logits, int64_t rows, int64_t stride, int64_t vocab, const int32_t* targets,
                          float* out) {
  check_log_prob_targets(targets, rows, vocab);
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * stride;
    float max = -INFINITY;
    bool nan = false;
    for (int64_t i = 0; i < vocab; ++i) {
      nan |= std::isnan(l[i]);
      max = std::max(max, l[i]);
    }
    double sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(l[i]) - max);
    out[r] = nan ? NAN : static_cast<float>(static_cast<double>(l[targets[r]]) - max - std::log(sum));
  }
}

void Backend::token_log_probs(const float* logits, int64_t rows, int64_t stride, int64_t vocab,
                              const int32_t* targets, float* out) {
  if (rows == 0) return;
  check_log_prob_targets(targets, rows, vocab);
  std::vector<float> host(static_cast<size_t>(rows * stride));
  download(host.data(), logits, host.size());
  host_token_log_probs(host.data(), rows, stride, vocab, targets, out);
}

size_t Backend::available_memory() const { return host_available_memory(); }

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
