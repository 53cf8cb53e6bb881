#pragma once
// FP8 E4M3 (issue 29; TensorRT-LLM's FP8 and FP8 KV CACHE): the element codec, TensorRT-LLM's
// per-tensor scales, and the names of the FP8 files `ftx smoothquant --fp8` writes.
//
// E4M3 here is the "fn" variant NVIDIA's FP8 GEMMs and KV caches use (OCP FP8, ml_dtypes'
// float8_e4m3fn): 1 sign bit, 4 exponent bits biased by 7, 3 mantissa bits; no infinities; S.1111.111
// is NaN; largest finite ±448 (0x7e), smallest normal 2^-6, subnormal quantum 2^-9.
//
// float_to_e4m3 rounds to nearest, ties to even, and saturates: every finite value beyond ±448 and
// ±infinity give ±448 (PTX cvt.rn.satfinite.e4m3x2.f32, CUDA's __nv_cvt_float_to_fp8(x,
// __NV_SATFINITE, __NV_E4M3)); NaN stays NaN, sign kept (0x7f, 0xff). It equals ml_dtypes' conversion
// of the value clipped to [-448, 448] on every float32 (tests/unit/fp8_e4m3_test.cc: all 2^32 bit
// patterns against the rounding boundaries ml_dtypes gives, and a dense sample against ml_dtypes
// itself). ml_dtypes without the clip turns an overflow into NaN; TensorRT-LLM's kernels saturate.
#include <cstdint>
#include <cstring>
#include <string>

namespace ftx::quant {

constexpr float kE4M3Max = 448.0f;

inline uint8_t float_to_e4m3(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;   // NaN
  if (a >= 0x43e00000u) return sign | 0x7eu;  // >= 448 (and inf): saturate; (448, 464] rounds to 448 too
  if (a >= 0x3c800000u) {                     // >= 2^-6: a normal E4M3
    // Keep 3 of the 23 mantissa bits, rounding the 20 dropped ones to nearest even (a carry into
    // the exponent is the right result), then rebias the exponent from 127 to 7.
    a += 0x7ffffu + ((a >> 20) & 1u);
    return static_cast<uint8_t>(sign | ((a - (120u << 23)) >> 20));
  }
  // Below 2^-6 the E4M3 values are multiples of 2^-9 (subnormals, up to 8·2^-9 = 2^-6). Adding 2^14,
  // whose fp32 ulp is 2^-9, leaves round-to-nearest-even of the count of quanta in the low bits.
  float m;
  std::memcpy(&m, &a, sizeof m);
  const float shifted = m + 16384.0f;
  uint32_t s;
  std::memcpy(&s, &shifted, sizeof s);
  return static_cast<uint8_t>(sign | (s - 0x46800000u));
}

// Every E4M3 code as fp32 (exact): 0x7f and 0xff are NaN.
struct E4M3Table {
  float value[256];
  E4M3Table();
};
extern const E4M3Table kE4M3;
inline float e4m3_to_float(uint8_t q) { return kE4M3.value[q]; }

// TensorRT-LLM's per-tensor FP8 scale of a tensor whose largest magnitude is `amax`: amax / 448 in
// fp32 (weights_scaling_factor, activation_scaling_factor, kv_cache_scaling_factor), amax floored at
// 1e-8 (an all-zero tensor still gets a usable scale, as the INT8 export clips max |W|).
float fp8_scale_of(double amax);

// q[i] = float_to_e4m3(w[i] / scale), the quotient in fp32 (the stored weight over its stored scale).
void quantize_e4m3(const float* w, size_t n, float scale, uint8_t* q);

// The FP8 files of one layer GEMM (`gemm` = "model.layers.L.<FT GEMM name>", e.g.
// model.layers.0.attention.query_key_value), without the rank suffix and ".bin" (FtWeightFile names):
//   <gemm>.weight.fp8                 E4M3 [in, out], split per rank like the weight (suffix .R)
//   <gemm>.weights_scaling_factor     fp32 [1], once
//   <gemm>.activation_scaling_factor  fp32 [1], once
// and per layer model.layers.L.attention.kv_cache_scaling_factor, fp32 [1], once. TensorRT-LLM's
// names for the three per-tensor scales (its FP8 GPT checkpoints: attention.qkv, attention.dense,
// mlp.fc, mlp.proj .activation_scaling_factor / .weights_scaling_factor, attention.
// kv_cache_scaling_factor), on FT's GEMM names as its INT8 files are (ft-format.md §3.5).
std::string fp8_weight_name(const std::string& gemm);
std::string fp8_weight_scale_name(const std::string& gemm);
std::string fp8_act_scale_name(const std::string& gemm);
std::string fp8_kv_scale_name(int64_t layer);
// True for any of the file names above (with ".bin" and rank suffixes).
bool is_fp8_side_file(const std::string& file_name);

// FP8 GEMMs and KV caches need FP8 tensor cores: compute capability 8.9 (Ada) or 9.0 (Hopper) and
// up. Throws Error naming the device and what it is otherwise (used by the CUDA backend).
void require_fp8_device(const std::string& device_name, int sm_major, int sm_minor, const std::string& flag);

}  // namespace ftx::quant
