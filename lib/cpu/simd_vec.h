#pragma once
// The vector operations the CPU kernels are written in, one struct per instruction-set level
// (cpu_features.h): Avx512 (16 fp32 lanes, 32 registers) and Avx2 (8 lanes, 16 registers, FMA and
// F16C). A kernel is a template over one of them, instantiated in a file compiled for that level
// (widening_avx512.cc, widening_avx2.cc); every function here is inlined into it and carries its
// level's target attribute. Including this file emits no code.
//
// The widening loads turn `lanes` narrow elements into fp32 exactly: int8, fp16 (vcvtph2ps), bf16
// (the top half of an fp32: its bits moved up) and FP8 E4M3 (a shift makes it an fp16 of 2^-8
// times its value, every finite code and subnormal included; the loaders refuse NaN codes, the one
// thing this does not carry over).
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#define FTX_TARGET_AVX512 "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define FTX_TARGET_AVX2 "avx2,fma,f16c"
#define FTX_VEC_FN(isa) __attribute__((target(isa), always_inline)) static inline

namespace ftx::cpu::simd {

struct Avx512 {
  using F = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;

  FTX_VEC_FN(FTX_TARGET_AVX512) F zero() { return _mm512_setzero_ps(); }
  FTX_VEC_FN(FTX_TARGET_AVX512) F set1(float a) { return _mm512_set1_ps(a); }
  FTX_VEC_FN(FTX_TARGET_AVX512) F load(const float* p) { return _mm512_loadu_ps(p); }
  FTX_VEC_FN(FTX_TARGET_AVX512) void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  FTX_VEC_FN(FTX_TARGET_AVX512) F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  FTX_VEC_FN(FTX_TARGET_AVX512) F add(F a, F b) { return _mm512_add_ps(a, b); }
  FTX_VEC_FN(FTX_TARGET_AVX512) F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  FTX_VEC_FN(FTX_TARGET_AVX512) float reduce_add(F v) { return _mm512_reduce_add_ps(v); }
  // The first n (< kLanes) lanes of p; the others are not touched.
  FTX_VEC_FN(FTX_TARGET_AVX512) void store_first(float* p, F v, int n) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), v);
  }
  FTX_VEC_FN(FTX_TARGET_AVX512) F load_first(const float* p, int n) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
  }

  FTX_VEC_FN(FTX_TARGET_AVX512) F widen_int8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  FTX_VEC_FN(FTX_TARGET_AVX512) F widen_fp16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  FTX_VEC_FN(FTX_TARGET_AVX512) F widen_bf16(const uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  FTX_VEC_FN(FTX_TARGET_AVX512) F widen_fp8(const uint8_t* p) {
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7f)), 7),
                                      _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
  }

  // INT4 (int4_kernels.h): 32-bit lanes of 8 nibbles, nibble t at bits 4t..4t+3. nibble(w, t): nibble t
  // of each lane in fp32, times 16^t for t < 7 (masked in place: one and) and as itself for t = 7
  // (shifted down: in place it would make a negative int32). Exact: a 4-bit value times a power of two.
  FTX_VEC_FN(FTX_TARGET_AVX512) __m512i load_words(const uint32_t* p) { return _mm512_loadu_si512(p); }
  FTX_VEC_FN(FTX_TARGET_AVX512) F nibble(__m512i w, int t) {
    if (t == 7) return _mm512_cvtepi32_ps(_mm512_srli_epi32(w, 28));
    return _mm512_cvtepi32_ps(_mm512_and_si512(w, _mm512_set1_epi32(0xF << (4 * t))));
  }
  FTX_VEC_FN(FTX_TARGET_AVX512) F widen_uint8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
};

struct Avx2 {
  using F = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;

  FTX_VEC_FN(FTX_TARGET_AVX2) F zero() { return _mm256_setzero_ps(); }
  FTX_VEC_FN(FTX_TARGET_AVX2) F set1(float a) { return _mm256_set1_ps(a); }
  FTX_VEC_FN(FTX_TARGET_AVX2) F load(const float* p) { return _mm256_loadu_ps(p); }
  FTX_VEC_FN(FTX_TARGET_AVX2) void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  FTX_VEC_FN(FTX_TARGET_AVX2) F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  FTX_VEC_FN(FTX_TARGET_AVX2) F add(F a, F b) { return _mm256_add_ps(a, b); }
  FTX_VEC_FN(FTX_TARGET_AVX2) F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  FTX_VEC_FN(FTX_TARGET_AVX2) float reduce_add(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  FTX_VEC_FN(FTX_TARGET_AVX2) __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  FTX_VEC_FN(FTX_TARGET_AVX2) void store_first(float* p, F v, int n) { _mm256_maskstore_ps(p, first_lanes(n), v); }
  FTX_VEC_FN(FTX_TARGET_AVX2) F load_first(const float* p, int n) { return _mm256_maskload_ps(p, first_lanes(n)); }

  FTX_VEC_FN(FTX_TARGET_AVX2) F widen_int8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  FTX_VEC_FN(FTX_TARGET_AVX2) F widen_fp16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // Eight bf16 loaded into both 128-bit halves (vbroadcasti128 is a plain load) and one byte
  // shuffle that puts each under the top half of its fp32 lane: the zero-extend and shift it
  // replaces put a shift on the FMA ports for every vector. One core widened from L1 at 84-88 GB/s
  // against 62-63 and streamed from memory at 10.4-10.5 GB/s against 9.6-9.7
  // (bench_widen_stream_rate, "bf16 bcast+shuffle"). At the AVX2 cap, GPT-2 124M's bf16 layers at
  // batch 1 took 0.92-0.93x of the time and the whole bf16 step 0.92x (1.71x faster than fp32 where
  // it had been 1.59-1.60x): bench/results/bf16-widen-2026-11-28.txt.
  FTX_VEC_FN(FTX_TARGET_AVX2) F widen_bf16(const uint16_t* p) {
    const __m256i x = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i top = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,  //
                                         -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);
    return _mm256_castsi256_ps(_mm256_shuffle_epi8(x, top));
  }
  FTX_VEC_FN(FTX_TARGET_AVX2) F widen_fp8(const uint8_t* p) {
    const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7),
                                   _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
  }

  // INT4: as Avx512's.
  FTX_VEC_FN(FTX_TARGET_AVX2) __m256i load_words(const uint32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  FTX_VEC_FN(FTX_TARGET_AVX2) F nibble(__m256i w, int t) {
    if (t == 7) return _mm256_cvtepi32_ps(_mm256_srli_epi32(w, 28));
    return _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(0xF << (4 * t))));
  }
  FTX_VEC_FN(FTX_TARGET_AVX2) F widen_uint8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
};

}  // namespace ftx::cpu::simd

#undef FTX_VEC_FN
#endif
