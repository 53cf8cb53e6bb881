#pragma once
// The C read loop the CPU benchmarks take their memory floor from (bench_read_bandwidth,
// bench_decode_gemm): a sum over a buffer with wide loads and four independent accumulators, so
// it waits on memory and not on its adds.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstddef>

namespace ftx::bench {

#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline float read_sum_avx512(const float* p, size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(p + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(p + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(p + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

// The same on a CPU without AVX-512: eight 256-bit accumulators, the same 64 floats per step.
__attribute__((target("avx2"))) inline float read_sum_avx2(const float* p, size_t n) {
  __m256 s[8];
  for (auto& v : s) v = _mm256_setzero_ps();
  for (size_t i = 0; i + 64 <= n; i += 64)
    for (int j = 0; j < 8; ++j) s[j] = _mm256_add_ps(s[j], _mm256_load_ps(p + i + 8 * j));
  for (int j = 1; j < 8; ++j) s[0] = _mm256_add_ps(s[0], s[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s[0]);
  float t = 0;
  for (float x : lanes) t += x;
  return t;
}
#endif

inline float read_sum_portable(const float* p, size_t n) {
  float s[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  float t = 0;
  for (float x : s) t += x;
  return t;
}

// p: 64-byte aligned; n: a multiple of 64 for the vector loops to see every element. The widest
// loads the CPU has, whatever FTX_CPU_ISA caps the kernels at: the floor is what the memory gives.
inline float read_sum(const float* p, size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return read_sum_avx512(p, n);
  if (__builtin_cpu_supports("avx2")) return read_sum_avx2(p, n);
#endif
  return read_sum_portable(p, n);
}

}  // namespace ftx::bench
