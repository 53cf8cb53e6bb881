// The CUDA rotary op with scaled frequencies (linear, llama3, yarn, longrope) against the CPU
// reference: both take their angles from RotaryFrequencies::inv_freq and their magnitude from
// RotaryFrequencies::magnitude, so they agree to float rounding. Label gpu.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/cuda_backend/cuda_backend.h"
#endif

namespace ftx {
namespace {

TEST(CudaRopeScaling, ScaledRotaryMatchesCpu) {
  REQUIRE_CUDA_DEVICE();
#ifdef FTX_HAVE_CUDA
  auto gpu = cuda::make_cuda_backend();
  cpu::CpuBackend cpu(1);
  const RopeScaling llama3 = RopeScaling::llama3(8, 1, 4, 64), linear = RopeScaling::linear(2.5);
  RopeScaling yarn = RopeScaling::yarn(4, 64);
  yarn.beta_fast = 8;
  // magnitude sqrt(1 + ln 16 / ln 64) ≈ 1.29
  const RopeScaling longrope = RopeScaling::longrope(std::vector<double>(12, 1.5), {}, 64, 16);
  const int64_t rows = 5, heads = 3, d = 32, stride = 5 * d;
  const std::vector<int32_t> pos = {0, 7, 63, 200, 4000};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (const RopeScaling& s : {llama3, linear, yarn, longrope}) {
    for (RotaryStyle style : {RotaryStyle::kInterleaved, RotaryStyle::kHalfSplit}) {
      std::vector<float> qkv(static_cast<size_t>(rows * stride));
      for (auto& x : qkv) x = u(rng);
      float* g = gpu->alloc(qkv.size());
      gpu->upload(g, qkv.data(), qkv.size());
      const ops::RotaryFrequencies f(500000.0, s);
      gpu->rotary(g, rows, stride, pos.data(), heads, d, 24, style, f);
      cpu.rotary(qkv.data(), rows, stride, pos.data(), heads, d, 24, style, f);
      std::vector<float> back(qkv.size());
      gpu->download(back.data(), g, back.size());
      gpu->release(g);
      for (size_t i = 0; i < qkv.size(); ++i)
        ASSERT_NEAR(back[i], qkv[i], 1e-5f) << "element " << i << " scaling " << rope_scaling_name(s.type);
    }
  }
#endif
}

}  // namespace
}  // namespace ftx
