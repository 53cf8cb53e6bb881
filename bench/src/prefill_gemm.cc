// bench_prefill_gemm: the CPU backend's prefill GEMMs against the cores' FMA peak, per weight type.
//
// The peak is measured here, not taken from a data sheet: every thread runs a loop of independent
// fp32 FMAs on the registers of the level the kernels run at (cpu_features.h: 512 bits at the
// AVX-512 level, 256 at AVX2; twelve chains, enough to cover the FMA latency on every such core),
// so it counts whatever the core really does per cycle (two 512-bit FMA pipes on Intel's server
// cores, two 256-bit pipes that split each 512-bit FMA on AMD's Zen 4) at the clock it really
// runs. Then, for one GPT layer's four GEMMs ([M, H]·[H, 3H], [H, H], [H, 4H], [4H, H]) through
// CpuBackend::gemm with weights uploaded as the engine uploads them (fp32; bf16/fp16 with
// --dtype; int8 weight-only, in an fp32 and in a bf16 model; W8A8 per-tensor), GFLOP/s (2·M·N·K per GEMM) and the fraction of the
// peak, best of REPS; and the prefill attention of the same M tokens (context_attention), whose
// flops (causal: about 2·M²·d per head for QK and as much for PV) are counted the same way.
//
// Usage: build/bench_prefill_gemm [threads (2)] [hidden (768)] [rows (64,512)] [reps (5)] [types]
//   types: comma-separated from fp32,bf16,fp16,int8,int8-bf16,w8a8,attn (default all), or peak (the FMA
//   peak only)
#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/cpu/cpu_features.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

#if defined(__x86_64__)
__attribute__((target("avx512f"), noinline)) float fma_loop(int64_t iters) {
  // Twelve accumulators held in registers (the loops unrolled: rolled, the compiler kept the array
  // in memory, a store and a load per FMA), each starting from its own value (identical chains
  // would be merged into one).
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  __m512 s[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) s[i] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(i));
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) s[i] = _mm512_fmadd_ps(s[i], a, b);
  }
  __m512 t = s[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) t = _mm512_add_ps(t, s[i]);
  return _mm512_reduce_add_ps(t);
}

__attribute__((target("avx2,fma"), noinline)) float fma_loop_avx2(int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  __m256 s[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) s[i] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(i));
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) s[i] = _mm256_fmadd_ps(s[i], a, b);
  }
  __m256 t = s[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) t = _mm256_add_ps(t, s[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, t);
  return lanes[0];
}
#endif

// fp32 FMA flops per second on `threads` threads (2 flops per lane per FMA), best of 200 short runs (a busy machine still leaves some whole).
double fma_peak(int threads) {
#if defined(__x86_64__)
  const bool avx512 = ftx::cpu::has_avx512f();
  if (!avx512 && !ftx::cpu::has_avx2()) return 0.0;
  const int lanes = avx512 ? 16 : 8;
  const int64_t iters = 100'000;  // about 0.4 ms: short enough to fit between other work's time slices
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int rep = 0; rep < 200; ++rep) {
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    sink = sink + (avx512 ? fma_loop(iters) : fma_loop_avx2(iters));
    best = std::max(best, static_cast<double>(iters) * 12 * lanes * 2 * threads / seconds_since(t0));
  }
  return best;
#else
  (void)threads;
  return 0.0;
#endif
}

std::vector<float> random_vector(size_t n, float std, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, std);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Gemm {
  const char* name;
  int64_t K, N;
};

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t H = argc > 2 ? std::atoll(argv[2]) : 768;
  std::vector<int64_t> rows;
  {
    std::stringstream ss(argc > 3 ? argv[3] : "64,512");
    for (std::string x; std::getline(ss, x, ',');) rows.push_back(std::atoll(x.c_str()));
  }
  const int reps = argc > 4 ? std::atoi(argv[4]) : 5;
  const std::string types = argc > 5 ? argv[5] : "fp32,bf16,fp16,int8,int8-bf16,w8a8,attn";
  auto want = [&](const char* t) { return ("," + types + ",").find("," + std::string(t) + ",") != std::string::npos; };

  const double peak1 = fma_peak(1), peak = fma_peak(threads);
  std::printf("cpu kernels: %s\n", ftx::cpu::cpu_isa_summary().c_str());
  std::printf("fp32 FMA peak (%d-bit FMA loop): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads\n",
              ftx::cpu::has_avx512f() ? 512 : 256, peak1 / 1e9, peak / 1e9, threads);
  if (types == "peak") return 0;
  const Gemm gemms[] = {{"qkv", H, 3 * H}, {"attn_out", H, H}, {"fc_in", H, 4 * H}, {"fc_out", 4 * H, H}};

  struct Mode {
    const char* name;
    ftx::DType dtype;
    int int8;  // 0 none, 1 weight-only, 2 W8A8
  };
  const Mode modes[] = {{"fp32", ftx::DType::kFloat32, 0},
                        {"bf16", ftx::DType::kBFloat16, 0},
                        {"fp16", ftx::DType::kFloat16, 0},
                        {"int8", ftx::DType::kFloat32, 1},
                        {"int8-bf16", ftx::DType::kBFloat16, 1},
                        {"w8a8", ftx::DType::kFloat32, 2}};
  for (const Mode& mode : modes) {
    if (!want(mode.name)) continue;
    ftx::cpu::CpuBackend be(threads, mode.dtype);
    std::vector<ftx::ops::Weight> w;
    for (const Gemm& g : gemms) {
      const auto host = random_vector(static_cast<size_t>(g.K * g.N), 0.02f, 7);
      if (mode.int8 == 1) {
        w.push_back(be.upload_weight_int8(host.data(), ftx::DType::kFloat32, g.K, g.N));
      } else if (mode.int8 == 2) {
        std::vector<int8_t> q(host.size());
        for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(std::lround(std::clamp(host[i] * 2000.0f, -127.0f, 127.0f)));
        const std::vector<float> alpha(static_cast<size_t>(g.N), 1.0f / 2000.0f);
        w.push_back(be.upload_weight_w8a8(q.data(), g.K, g.N, alpha.data(), 1.0f / 0.05f, 1.0f));
      } else {
        w.push_back(be.upload_weight_matrix(host.data(), ftx::DType::kFloat32, g.K, g.N));
      }
    }
    for (int64_t M : rows) {
      const auto A = random_vector(static_cast<size_t>(M * 4 * H), 1.0f, 3);
      std::vector<float> C(static_cast<size_t>(M * 4 * H));
      double total_flops = 0, total_s = 0;
      std::printf("%-5s M=%-4lld", mode.name, static_cast<long long>(M));
      for (size_t i = 0; i < std::size(gemms); ++i) {
        const Gemm& g = gemms[i];
        be.gemm(M, g.N, g.K, A.data(), w[i], false, C.data(), 0.0f);  // warm-up (oneDNN primitives, buffers)
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
          const auto t0 = Clock::now();
          be.gemm(M, g.N, g.K, A.data(), w[i], false, C.data(), 0.0f);
          best = std::min(best, seconds_since(t0));
        }
        const double flops = 2.0 * M * g.N * g.K;
        total_flops += flops;
        total_s += best;
        std::printf("  %s %6.1f GFLOP/s", g.name, flops / best / 1e9);
      }
      std::printf("  | layer %6.1f GFLOP/s = %4.0f%% of peak (%.2f ms)\n", total_flops / total_s / 1e9,
                  peak > 0 ? 100.0 * total_flops / total_s / peak : 0.0, total_s * 1e3);
    }
    for (const auto& x : w) be.release_weight(x);
  }
  if (want("attn")) {
    ftx::cpu::CpuBackend be(threads);
    const int64_t d = 64, heads = H / d;
    for (int64_t M : rows) {
      ftx::ops::AttentionShape sh;
      sh.q_heads = sh.kv_heads = heads;
      sh.head_dim = d;
      sh.max_seq = sh.block_size = M;  // one KV block holds the row
      sh.scale = 1.0f / std::sqrt(static_cast<float>(d));
      const auto qkv = random_vector(static_cast<size_t>(M * 3 * H), 1.0f, 5);
      std::vector<float> k(static_cast<size_t>(heads * M * d)), v(k.size()), out(static_cast<size_t>(M * H));
      ftx::ops::KvCache kc, vc;
      kc.data = k.data();
      vc.data = v.data();
      const int32_t len = static_cast<int32_t>(M), block = 0;
      const ftx::ops::BlockTables table{&block, 1};
      double best = 1e30;
      for (int r = 0; r <= reps; ++r) {
        const auto t0 = Clock::now();
        be.context_attention(out.data(), qkv.data(), 1, M, &len, table, kc, vc, sh, nullptr);
        if (r > 0) best = std::min(best, seconds_since(t0));
      }
      const double flops = 2.0 * 2.0 * heads * d * (M * (M + 1) / 2.0);
      std::printf("attn  M=%-4lld  %6.1f GFLOP/s = %4.0f%% of peak (%.2f ms)\n", static_cast<long long>(M),
                  flops / best / 1e9, peak > 0 ? 100.0 * flops / best / peak : 0.0, best * 1e3);
    }
  }
  return 0;
}
