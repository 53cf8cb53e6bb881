#include "lib/cpu/simd_math.h"

#include "formats/fp8_e4m3.h"
#include "lib/cpu/isa_levels.h"

namespace ftx::cpu {

namespace {

// Reductions run in kLanes explicit partial sums (element i into lane i % kLanes), reduced in a
// fixed tree: the compiler vectorises them without reordering anything, so a sum is the same
// whatever the vector width, and the same whether K or V is read as fp32 or as int8 · scale (each
// element is its dequantised value, then one multiply-add): the INT8 and FP8 caches change what is
// stored, nothing else (kv_cache_int8_test).
constexpr int64_t kLanes = 16;

__attribute__((always_inline)) inline float reduce_lanes(const float* s) {
  float t[8];
  for (int l = 0; l < 8; ++l) t[l] = s[l] + s[l + 8];
  for (int l = 0; l < 4; ++l) t[l] += t[l + 4];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

template <bool kFma, class Elem>
__attribute__((always_inline)) inline float dot_lanes(const float* q, const Elem& k, int64_t n) {
  float s[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) s[l] = mul_add<kFma>(q[i + l], k(i + l), s[l]);
  for (int64_t l = 0; i + l < n; ++l) s[l] = mul_add<kFma>(q[i + l], k(i + l), s[l]);
  return reduce_lanes(s);
}

template <bool kFma, class Elem>
__attribute__((always_inline)) inline void axpy_elems(float* out, float w, const Elem& v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = mul_add<kFma>(w, v(i), out[i]);
}

template <bool kFma>
__attribute__((always_inline)) inline float dot_fp32_t(const float* q, const float* k, int64_t n) {
  return dot_lanes<kFma>(q, [k](int64_t i) { return k[i]; }, n);
}
template <bool kFma>
__attribute__((always_inline)) inline float dot_int8_t(const float* q, const int8_t* k, float scale, int64_t n) {
  return dot_lanes<kFma>(q, [k, scale](int64_t i) { return static_cast<float>(k[i]) * scale; }, n);
}
template <bool kFma>
__attribute__((always_inline)) inline float dot_fp8_t(const float* q, const uint8_t* k, float scale, int64_t n) {
  const float* e4m3 = quant::kE4M3.value;
  return dot_lanes<kFma>(q, [k, scale, e4m3](int64_t i) { return e4m3[k[i]] * scale; }, n);
}
template <bool kFma>
__attribute__((always_inline)) inline void axpy_fp32_t(float* out, float w, const float* v, int64_t n) {
  axpy_elems<kFma>(out, w, [v](int64_t i) { return v[i]; }, n);
}
template <bool kFma>
__attribute__((always_inline)) inline void axpy_int8_t(float* out, float w, const int8_t* v, float scale, int64_t n) {
  axpy_elems<kFma>(out, w, [v, scale](int64_t i) { return static_cast<float>(v[i]) * scale; }, n);
}
template <bool kFma>
__attribute__((always_inline)) inline void axpy_fp8_t(float* out, float w, const uint8_t* v, float scale,
                                                        int64_t n) {
  const float* e4m3 = quant::kE4M3.value;
  axpy_elems<kFma>(out, w, [v, scale, e4m3](int64_t i) { return e4m3[v[i]] * scale; }, n);
}
template <bool kFma>
__attribute__((always_inline)) inline float exp_sum_t(float* x, float shift, int64_t n) {
  float s[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      x[i + l] = exp_approx(x[i + l] - shift);
      s[l] += x[i + l];
    }
  for (int64_t l = 0; i + l < n; ++l) {
    x[i + l] = exp_approx(x[i + l] - shift);
    s[l] += x[i + l];
  }
  return reduce_lanes(s);
}

FTX_CPU_LEVELS(float, dot_fp32, (const float* q, const float* k, int64_t n), (q, k, n))
FTX_CPU_LEVELS(float, dot_int8, (const float* q, const int8_t* k, float scale, int64_t n), (q, k, scale, n))
FTX_CPU_LEVELS(void, axpy_fp32, (float* out, float w, const float* v, int64_t n), (out, w, v, n))
FTX_CPU_LEVELS(void, axpy_int8, (float* out, float w, const int8_t* v, float scale, int64_t n),
               (out, w, v, scale, n))
FTX_CPU_LEVELS(float, dot_fp8, (const float* q, const uint8_t* k, float scale, int64_t n), (q, k, scale, n))
FTX_CPU_LEVELS(void, axpy_fp8, (float* out, float w, const uint8_t* v, float scale, int64_t n),
               (out, w, v, scale, n))
FTX_CPU_LEVELS(float, exp_sum, (float* x, float shift, int64_t n), (x, shift, n))

}  // namespace

float dot(const float* q, const float* k, int64_t n) { return dot_fp32(q, k, n); }
float dot(const float* q, const int8_t* k, float scale, int64_t n) { return dot_int8(q, k, scale, n); }
void axpy(float* out, float w, const float* v, int64_t n) { axpy_fp32(out, w, v, n); }
void axpy(float* out, float w, const int8_t* v, float scale, int64_t n) { axpy_int8(out, w, v, scale, n); }
float dot_e4m3(const float* q, const uint8_t* k, float scale, int64_t n) { return dot_fp8(q, k, scale, n); }
void axpy_e4m3(float* out, float w, const uint8_t* v, float scale, int64_t n) {
  axpy_fp8(out, w, v, scale, n);
}
float exp_shifted_sum(float* x, float shift, int64_t n) { return exp_sum(x, shift, n); }

}  // namespace ftx::cpu
