// bench_int4_gemm: the CPU backend's INT4 weight-only GEMM (lib/cpu/int4_gemm.h) against weight-only
// INT8 and fp32 on the layers of a Llama-3.2-1B-shaped model: per layer QKV [2048, 3072], attention
// output [2048, 2048], gate|up [2048, 16384] and down [8192, 2048] (LAYERS layers, past the L3 for
// INT8 and fp32). The goal: batch-1 INT4 at least 1.6x faster than weight-only INT8.
//
// Passes alternate between the formats (one pass of every GEMM of every layer each, in turn), so a
// slow stretch of a shared machine falls on all of them alike. Prints per format and row count the
// best pass and the spread of the passes ((median - best) / best, (worst - best) / best), the weight
// bytes read per second at the best pass (INT4: the 4-bit values and the fp32 scales; INT8: the
// bytes and the column scales), and the ratio of INT8's and fp32's best time to INT4's.
//
// Usage: build/bench_int4_gemm [threads (2)] [layers (2)] [rows (1,8)] [passes (10)] [group size (128)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/cpu/cpu_features.h"
#include "lib/ops/int4_matrix.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<int64_t> split(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(std::atoll(x.c_str()));
  return out;
}

struct Gemm {
  int64_t K, N;
};

struct Format {
  std::string name;
  std::vector<ftx::ops::Weight> weights;  // layers x 4
  double bytes = 0;
  std::vector<double> seconds;
};

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int layers = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::vector<int64_t> rows = split(argc > 3 ? argv[3] : "1,8");
  const int passes = argc > 4 ? std::atoi(argv[4]) : 10;
  const int64_t group = argc > 5 ? std::atoll(argv[5]) : 128;
  if (threads < 1 || layers < 1 || rows.empty() || passes < 1 || group < 0) {
    std::fprintf(stderr, "usage: bench_int4_gemm [threads] [layers] [rows] [passes] [group size]\n");
    return 2;
  }
  const Gemm gemms[] = {{2048, 3072}, {2048, 2048}, {2048, 16384}, {8192, 2048}};
  ftx::cpu::CpuBackend be(threads, ftx::DType::kFloat32);
  std::vector<Format> formats(3);
  formats[0].name = "int4-g" + std::to_string(group);
  formats[1].name = "int8";
  formats[2].name = "fp32";
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (int layer = 0; layer < layers; ++layer)
    for (const Gemm& g : gemms) {
      std::vector<float> host(static_cast<size_t>(g.K * g.N));
      for (auto& x : host) x = dist(rng);
      const ftx::ops::Int4Matrix m = ftx::ops::quantize_int4(host.data(), ftx::DType::kFloat32, g.K, g.N, group, false);
      formats[0].weights.push_back(be.upload_weight_int4(m, ftx::DType::kBFloat16));
      formats[0].bytes += static_cast<double>(g.K * g.N) / 2 + static_cast<double>(m.scales.size()) * 4;
      formats[1].weights.push_back(be.upload_weight_int8(host.data(), ftx::DType::kFloat32, g.K, g.N));
      formats[1].bytes += static_cast<double>(g.K * g.N) + static_cast<double>(g.N) * 4;
      formats[2].weights.push_back(be.upload_weight_matrix(host.data(), ftx::DType::kFloat32, g.K, g.N));
      formats[2].bytes += static_cast<double>(g.K * g.N) * 4;
    }
  // INT8 multiplies A rounded to bf16 too, as INT4 does: the same model.
  for (auto& w : formats[1].weights) w.input_dtype = ftx::DType::kBFloat16;

  std::printf("bench_int4_gemm: %d threads, %d Llama-3.2-1B-shaped layers, %d passes (+1 not counted)\n", threads,
              layers, passes);
  std::printf("cpu kernels: %s\n", ftx::cpu::cpu_isa_summary().c_str());
  for (int64_t M : rows) {
    std::vector<float> A(static_cast<size_t>(M * 8192)), C(static_cast<size_t>(M * 16384));
    for (auto& x : A) x = dist(rng) * 50.0f;
    for (auto& f : formats) f.seconds.clear();
    for (int p = 0; p <= passes; ++p)
      for (auto& f : formats) {
        const auto t0 = Clock::now();
        for (int layer = 0; layer < layers; ++layer)
          for (size_t i = 0; i < std::size(gemms); ++i)
            be.gemm(M, gemms[i].N, gemms[i].K, A.data(), f.weights[layer * 4 + i], false, C.data(), 0.0f);
        if (p > 0) f.seconds.push_back(seconds_since(t0));
      }
    double int4_best = 0;
    for (auto& f : formats) {
      std::vector<double> s = f.seconds;
      std::sort(s.begin(), s.end());
      const double best = s.front(), median = s[s.size() / 2], worst = s.back();
      if (&f == &formats[0]) int4_best = best;
      std::printf("M=%-3lld %-10s %7.1f MB  best %8.3f ms  %6.2f GB/s  spread +%4.1f%% median +%5.1f%% worst  %5.2fx int4's time\n",
                  static_cast<long long>(M), f.name.c_str(), f.bytes / 1e6, best * 1e3, f.bytes / best / 1e9,
                  100 * (median - best) / best, 100 * (worst - best) / best, best / int4_best);
    }
  }
  for (auto& f : formats)
    for (const auto& w : f.weights) be.release_weight(w);
  return 0;
}
