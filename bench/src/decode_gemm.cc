// bench_decode_gemm: what the CPU backend's decode GEMMs (few rows: batch-1 and small-batch steps)
// read per second, per weight layout, against the C read loop over the same bytes.
//
// A decode step with few rows is bound by reading the weights once: the question is how close
// each path gets to what the memory gives. LAYERS layers of one GPT layer's four GEMMs
// ([M, H]·[H, 3H], [H, H], [H, 4H], [4H, H]; enough layers to be far past the L3) through
// CpuBackend::gemm, for each layout:
//   fp32-rows  fp32 weights row-major (upload_weight): OpenBLAS's sgemv at one row
//   fp32       fp32 weights as the engine uploads them (upload_weight_matrix)
//   bf16, fp16 half weights as the engine uploads them (column panels, the streaming kernel)
//   int8, int8-bf16  weight-only INT8 layers in an fp32 and in a bf16 model (upload_weight_int8)
//   fp32-head, bf16-head  the tied lm_head instead of the layers: one [VOCAB, H] embedding table
//              held row-major (upload_weight), multiplied transposed, as the engine's last GEMM
// Passes alternate between the layouts and the read loop (one pass each in turn), so a slow
// stretch of a shared machine falls on all of them alike. Prints, per layout and row count, the
// best and median pass in ms, the bytes per second, and the ratio of its time to the read loop's
// over the same number of bytes (best to best, median to median; 1.00 = at the floor). The read
// loop's buffers are on 2 MB pages, as the backend's weights are (lib/cpu/huge_page_alloc.h).
//
// Usage: build/bench_decode_gemm [threads (2)] [hidden (1024)] [layers (8)] [rows (1,8)] [passes (20)]
//                                [layouts (fp32-rows,fp32,bf16,fp16)] [vocab (50304)]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/src/read_loop.h"
#include "formats/dtype.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/cpu/cpu_features.h"
#include "lib/cpu/huge_page_alloc.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

struct Gemm {
  int64_t K, N;
};

struct Layout {
  std::string name;
  ftx::cpu::CpuBackend* backend;
  bool head = false;                      // the lm_head table, not the layers
  std::vector<ftx::ops::Weight> weights;  // layers x 4, or the one table
  double bytes = 0;
  std::vector<double> seconds;  // per M: passes
};

double best(std::vector<double> v) { return *std::min_element(v.begin(), v.end()); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t H = argc > 2 ? std::atoll(argv[2]) : 1024;
  const int layers = argc > 3 ? std::atoi(argv[3]) : 8;
  std::vector<int64_t> rows;
  for (const auto& x : split(argc > 4 ? argv[4] : "1,8")) rows.push_back(std::atoll(x.c_str()));
  const int passes = argc > 5 ? std::atoi(argv[5]) : 20;
  const auto names = split(argc > 6 ? argv[6] : "fp32-rows,fp32,bf16,fp16");
  const int64_t vocab = argc > 7 ? std::atoll(argv[7]) : 50304;
  if (threads < 1 || H < 64 || layers < 1 || passes < 1 || rows.empty() || vocab < 1) {
    std::fprintf(stderr, "usage: bench_decode_gemm [threads] [hidden >= 64] [layers] [rows] [passes] [layouts] [vocab]\n");
    return 2;
  }
  const Gemm gemms[] = {{H, 3 * H}, {H, H}, {H, 4 * H}, {4 * H, H}};

  ftx::cpu::CpuBackend fp32(threads, ftx::DType::kFloat32), bf16(threads, ftx::DType::kBFloat16),
      fp16(threads, ftx::DType::kFloat16);
  std::vector<Layout> layouts;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (const auto& name : names) {
    Layout l;
    l.name = name;
    l.backend = name == "bf16" || name == "bf16-head" || name == "int8-bf16" ? &bf16 : name == "fp16" ? &fp16 : &fp32;
    l.head = name == "fp32-head" || name == "bf16-head";
    const bool int8 = name == "int8" || name == "int8-bf16";
    if (name != "fp32-rows" && name != "fp32" && name != "bf16" && name != "fp16" && !l.head && !int8) {
      std::fprintf(stderr, "bench_decode_gemm: unknown layout '%s'\n", name.c_str());
      return 2;
    }
    if (l.head) {
      std::vector<float> host(static_cast<size_t>(vocab * H));
      for (auto& x : host) x = dist(rng);
      l.weights.push_back(l.backend->upload_weight(host.data(), ftx::DType::kFloat32, host.size()));
      l.bytes = static_cast<double>(host.size()) * ftx::dtype_size(l.weights.back().dtype);
    }
    for (int layer = 0; layer < layers && !l.head; ++layer)
      for (const Gemm& g : gemms) {
        std::vector<float> host(static_cast<size_t>(g.K * g.N));
        for (auto& x : host) x = dist(rng);
        l.weights.push_back(
            name == "fp32-rows" ? l.backend->upload_weight(host.data(), ftx::DType::kFloat32, host.size())
            : int8              ? l.backend->upload_weight_int8(host.data(), ftx::DType::kFloat32, g.K, g.N)
                                : l.backend->upload_weight_matrix(host.data(), ftx::DType::kFloat32, g.K, g.N));
        l.bytes += static_cast<double>(host.size()) * ftx::dtype_size(l.weights.back().dtype);
      }
    layouts.push_back(std::move(l));
  }

  // The read loop's buffer: as many bytes as the largest layout, each thread summing its own half.
  double max_bytes = 0;
  for (const auto& l : layouts) max_bytes = std::max(max_bytes, l.bytes);
  const size_t per_thread = (static_cast<size_t>(max_bytes / threads / sizeof(float)) + 63) / 64 * 64;
  std::vector<float*> buffers(threads);
  std::vector<float> sink(threads);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    buffers[t] = static_cast<float*>(ftx::cpu::alloc_on_huge_pages(per_thread * sizeof(float)));
    for (size_t i = 0; i < per_thread; ++i) buffers[t][i] = 1.0f;
  }
  const double read_bytes = static_cast<double>(per_thread) * sizeof(float) * threads;
  auto read_pass = [&] {
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      sink[t] += ftx::bench::read_sum(buffers[t], per_thread);
    }
    return seconds_since(t0);
  };

  std::printf("bench_decode_gemm: %d threads, hidden %lld, %d layers, %d passes (+1 not counted); read loop over %.0f MB\n",
              threads, static_cast<long long>(H), layers, passes, read_bytes / 1e6);
  std::printf("cpu kernels: %s\n", ftx::cpu::cpu_isa_summary().c_str());
  for (int64_t M : rows) {
    std::vector<float> A(static_cast<size_t>(M * 4 * H)), C(static_cast<size_t>(M * std::max(4 * H, vocab)));
    for (auto& x : A) x = dist(rng) * 50.0f;
    std::vector<double> read_s;
    for (auto& l : layouts) l.seconds.clear();
    for (int p = 0; p <= passes; ++p) {
      const double r = read_pass();
      if (p > 0) read_s.push_back(r);
      for (auto& l : layouts) {
        const auto t0 = Clock::now();
        if (l.head) l.backend->gemm(M, vocab, H, A.data(), l.weights[0], true, C.data(), 0.0f);
        for (int layer = 0; layer < layers && !l.head; ++layer)
          for (size_t i = 0; i < std::size(gemms); ++i)
            l.backend->gemm(M, gemms[i].N, gemms[i].K, A.data(), l.weights[layer * 4 + i], false, C.data(), 0.0f);
        if (p > 0) l.seconds.push_back(seconds_since(t0));
      }
    }
    const double rb = read_bytes / best(read_s), rm = read_bytes / median(read_s);
    std::printf("M=%-3lld read loop       best %6.2f GB/s  median %6.2f GB/s\n", static_cast<long long>(M), rb / 1e9,
                rm / 1e9);
    for (const auto& l : layouts) {
      const double b = best(l.seconds), m = median(l.seconds);
      std::printf("M=%-3lld %-10s %7.1f MB  best %7.2f ms %6.2f GB/s %5.2fx floor  median %7.2f ms %6.2f GB/s %5.2fx floor\n",
                  static_cast<long long>(M), l.name.c_str(), l.bytes / 1e6, b * 1e3, l.bytes / b / 1e9, b / (l.bytes / rb),
                  m * 1e3, l.bytes / m / 1e9, m / (l.bytes / rm));
    }
  }
  for (auto& l : layouts)
    for (const auto& w : l.weights) l.backend->release_weight(w);
  for (float* b : buffers) std::free(b);
  std::printf("check %g\n", static_cast<double>(sink[0]));
  return 0;
}
