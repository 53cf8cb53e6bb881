#include "lib/cpu/simd_math.h"

#include "formats/fp8_e4m3.h"

namespace ftx::cpu {

#define FTX_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

FTX_SIMD_CLONES float dot(const float* q, const float* k, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += q[i] * k[i];
  return s;
}

FTX_SIMD_CLONES float dot(const float* q, const int8_t* k, float scale, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += q[i] * (static_cast<float>(k[i]) * scale);
  return s;
}

FTX_SIMD_CLONES void axpy(float* out, float w, const float* v, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] += w * v[i];
}

FTX_SIMD_CLONES void axpy(float* out, float w, const int8_t* v, float scale, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] += w * (static_cast<float>(v[i]) * scale);
}

FTX_SIMD_CLONES float dot_e4m3(const float* q, const uint8_t* k, float scale, int64_t n) {
  const float* e4m3 = quant::kE4M3.value;
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += q[i] * (e4m3[k[i]] * scale);
  return s;
}

FTX_SIMD_CLONES void axpy_e4m3(float* out, float w, const uint8_t* v, float scale, int64_t n) {
  const float* e4m3 = quant::kE4M3.value;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] += w * (e4m3[v[i]] * scale);
}

FTX_SIMD_CLONES float exp_shifted_sum(float* x, float shift, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    x[i] = exp_approx(x[i] - shift);
    s += x[i];
  }
  return s;
}

#undef FTX_SIMD_CLONES

}  // namespace ftx::cpu
