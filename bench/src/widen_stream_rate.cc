// How fast one core turns narrow weights into FMAs (AVX2 + FMA + F16C), from L1 and streamed from
// memory: the measurement behind bench/results/cpu-peers-2026-11-28-avx2-gaps.md's explanation of
// weight-only INT8 and bf16 decode at the AVX2 level. One thread; 12 independent sums, as the
// widening GEMM's one-row kernel keeps. "bf16 split" widens 16 bf16 at a time into even and odd
// lanes (a byte shuffle and a mask, no shift on the FMA ports): tried in the kernel, not kept; so
// was "bf16 unpack" (sums held crosswise: 9.2 against 8.5 ms for GPT-2 124M's bf16 layers at batch
// 1 in bench_decode_gemm). "bf16 bcast+shuffle" is what simd::Avx2::widen_bf16 does.
// Run: build/bench_widen_stream_rate (no arguments).
#include <immintrin.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define DECL(c) __m256 s##c = _mm256_setzero_ps();
#define SUM(c) z += s##c[0];
// One 8-weight vector at p + 8c (bytes per weight: 1, 2 or 4), widened and accumulated.
#define W_INT8(c) s##c = _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)((const int8_t*)p + 8 * (c))))), s##c);
#define W_BF16(c) s##c = _mm256_fmadd_ps(a, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)((const uint16_t*)p + 8 * (c)))), 16)), s##c);
#define W_FP16(c) s##c = _mm256_fmadd_ps(a, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)p + 8 * (c)))), s##c);
#define W_FP32(c) s##c = _mm256_fmadd_ps(a, _mm256_loadu_ps((const float*)p + 8 * (c)), s##c);

#define REP6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define DECL1(c) __m256 s1##c = _mm256_setzero_ps();
#define SUM1(c) z += s1##c[0];
#define SUMS12 REP12(DECL)
#define SUMS6X2 REP6(DECL) REP6(DECL1)
#define TOTAL12 REP12(SUM)
#define TOTAL6X2 REP6(SUM) REP6(SUM1)
#define NO_SETUP

// Sweeps `bytes` of buf (96 weights, 96·ES bytes, per step) `passes` times; prefetch: bytes ahead (0:
// none). SETUP declares the constants BODY uses; SUMS and TOTAL declare and fold the 12 sums (12
// one-vector sums, or 6 pairs s/s1 for the forms that widen 16 weights a load).
#define SWEEP_WITH(NAME, ES, SETUP, SUMS, BODY, TOTAL)                                                    \
  __attribute__((target("avx2,fma,f16c"))) static double NAME(const uint8_t* buf, size_t bytes, int passes, \
                                                             size_t prefetch) {                            \
    const __m256 a = _mm256_set1_ps(1.0001f);                                                              \
    SETUP                                                                                                  \
    SUMS                                                                                                   \
    const double t = now();                                                                                \
    for (int r = 0; r < passes; ++r)                                                                       \
      for (size_t off = 0; off + 96 * ES <= bytes; off += 96 * ES) {                                       \
        const uint8_t* p = buf + off;                                                                      \
        if (prefetch)                                                                                      \
          for (size_t b = 0; b < 96 * ES; b += 64) _mm_prefetch((const char*)p + prefetch + b, _MM_HINT_T0); \
        BODY                                                                                               \
      }                                                                                                    \
    const double dt = now() - t;                                                                           \
    float z = 0;                                                                                           \
    TOTAL                                                                                                  \
    if (z == 12345.0f) puts("");                                                                           \
    return (double)bytes * passes / dt / 1e9;                                                              \
  }
#define SWEEP(NAME, ES, WIDEN) SWEEP_WITH(NAME, ES, NO_SETUP, SUMS12, REP12(WIDEN), TOTAL12)

// Sixteen bf16 (one 32-byte load) into two sums, s##c and s1##c; LO and HI widen the loaded x.
#define W_BF16_PAIR(c, LOAD, LO, HI)                                                                \
  {                                                                                                 \
    const __m256i x = LOAD(_mm256_loadu_si256((const __m256i*)((const uint16_t*)p + 16 * (c)))); \
    s##c = _mm256_fmadd_ps(a, _mm256_castsi256_ps(LO), s##c);                                      \
    s1##c = _mm256_fmadd_ps(a, _mm256_castsi256_ps(HI), s1##c);                                    \
  }
#define AS_LOADED(v) (v)
#define IN_ORDER(v) _mm256_permute4x64_epi64((v), 0xd8)
// "bf16 split": even and odd lanes (a byte shuffle and a mask).
#define W_BF16S(c) W_BF16_PAIR(c, AS_LOADED, _mm256_shuffle_epi8(x, top), _mm256_and_si256(x, mask))
// "bf16 unpack": interleaved with zeros (two shuffles, nothing on the FMA ports); the lanes come out
// in the order [0-3, 8-11] and [4-7, 12-15], so a kernel must hold its sums crosswise.
#define W_BF16U(c) W_BF16_PAIR(c, AS_LOADED, _mm256_unpacklo_epi16(zero, x), _mm256_unpackhi_epi16(zero, x))
// "bf16 perm+unpack": the same after a cross-lane permute of the 64-bit quarters: lanes in order.
#define W_BF16P(c) W_BF16_PAIR(c, IN_ORDER, _mm256_unpacklo_epi16(zero, x), _mm256_unpackhi_epi16(zero, x))
// "bf16 bcast+shuffle": 8 bf16 loaded into both 128-bit halves (a load, no shuffle) and one byte
// shuffle moving each under the upper half of its fp32 lane: in order, nothing on the FMA ports.
// simd::Avx2::widen_bf16 since 2026-11-28 (before: zero-extend and shift, the "bf16" row).
#define W_BF16B(c) s##c = _mm256_fmadd_ps(a, _mm256_castsi256_ps(_mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)((const uint16_t*)p + 8 * (c)))), topb)), s##c);

#define SPLIT_CONSTANTS                                                                                 \
  const __m256i top = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 4, 5, -1, -1, 8, 9, -1, -1, 12, 13, -1, -1, 0, 1, \
                                       -1, -1, 4, 5, -1, -1, 8, 9, -1, -1, 12, 13);                   \
  const __m256i mask = _mm256_set1_epi32((int)0xFFFF0000u);
#define ZERO_CONSTANT const __m256i zero = _mm256_setzero_si256();
#define BCAST_CONSTANT                                                                                   \
  const __m256i topb = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7, -1, -1, 8, 9, \
                                        -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);

SWEEP_WITH(sweep_bf16s, 2, SPLIT_CONSTANTS, SUMS6X2, REP6(W_BF16S), TOTAL6X2)
SWEEP_WITH(sweep_bf16u, 2, ZERO_CONSTANT, SUMS6X2, REP6(W_BF16U), TOTAL6X2)
SWEEP_WITH(sweep_bf16p, 2, ZERO_CONSTANT, SUMS6X2, REP6(W_BF16P), TOTAL6X2)
SWEEP_WITH(sweep_bf16b, 2, BCAST_CONSTANT, SUMS12, REP12(W_BF16B), TOTAL12)
SWEEP(sweep_int8, 1, W_INT8)
SWEEP(sweep_bf16, 2, W_BF16)
SWEEP(sweep_fp16, 2, W_FP16)
SWEEP(sweep_fp32, 4, W_FP32)

using Sweep = double (*)(const uint8_t*, size_t, int, size_t);

int main() {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
    std::puts("bench_widen_stream_rate: needs AVX2, FMA and F16C");
    return 0;
  }
  const size_t big = (size_t)340 << 20, small = 16 << 10;  // 340 MB: GPT-2 124M's fp32 layers; 16 KB: L1
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(4096, big));
  // Bytes 0x3c..0x3f: normal numbers in every type (no subnormal slow paths), small int8 values.
  for (size_t i = 0; i < big; ++i) buf[i] = (uint8_t)(0x3c + (i * 7) % 4);
  const struct { const char* name; Sweep f; } types[] = {
      {"int8", sweep_int8}, {"bf16", sweep_bf16}, {"bf16 split", sweep_bf16s}, {"bf16 unpack", sweep_bf16u}, {"bf16 perm+unpack", sweep_bf16p}, {"bf16 bcast+shuffle", sweep_bf16b}, {"fp16", sweep_fp16}, {"fp32", sweep_fp32}};
  printf("one thread, GB/s of weights (best of 3)   from L1   from memory   from memory, prefetch 4 KB ahead\n");
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
    double l1 = 0, mem = 0, pf = 0;
    for (int rep = 0; rep < 3; ++rep) {
      double v = types[t].f(buf, small, 20000, 0); if (v > l1) l1 = v;
      v = types[t].f(buf, big, 1, 0); if (v > mem) mem = v;
      v = types[t].f(buf, big, 1, 4096); if (v > pf) pf = v;
    }
    printf("%-40s %8.1f %13.1f %13.1f\n", types[t].name, l1, mem, pf);
  }
  free(buf);
  return 0;
}
