// bench_read_bandwidth: how fast THREADS threads read memory, the floor the CPU benchmarks divide
// weight bytes by. Each thread sums its own buffer (MiB per thread, default 256: far past the L3)
// with wide loads and four independent accumulators, so the loop waits on memory and not on the
// adds; a pass is timed from the moment all threads start to the moment the last one ends. Prints
// the best and the median of PASSES passes as one JSON line (bytes per second), after one pass
// that is not counted (page faults, first touch).
//
// A numpy sum (what bench/int8-cpu used before) reads at about half of this: it is one
// single-accumulator pairwise reduction per thread, bound by its own adds.
//
// Usage: bench_read_bandwidth [THREADS] [MIB_PER_THREAD] [PASSES]
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float sum_avx512(const float* p, size_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(p + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(p + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(p + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}
#endif

float sum_portable(const float* p, size_t n) {
  float s[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += p[i + j];
  float t = 0;
  for (float x : s) t += x;
  return t;
}

float sum(const float* p, size_t n) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return sum_avx512(p, n);
#endif
  return sum_portable(p, n);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const size_t mib = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 256;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 30;
  if (threads < 1 || mib < 1 || passes < 1) {
    std::fprintf(stderr, "usage: bench_read_bandwidth [THREADS >= 1] [MIB_PER_THREAD >= 1] [PASSES >= 1]\n");
    return 2;
  }
  const size_t n = mib * (size_t(1) << 20) / sizeof(float);
  std::vector<double> seconds(passes + 1);
  std::vector<float> sink(threads);
#pragma omp parallel num_threads(threads)
  {
    // Each thread allocates and touches its own buffer (its pages near it on a NUMA machine).
    const int t = omp_get_thread_num();
    auto* buf = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
    for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;
    for (int p = 0; p <= passes; ++p) {
      double t0 = 0;
#pragma omp barrier
#pragma omp master
      t0 = omp_get_wtime();
      sink[t] += sum(buf, n);
#pragma omp barrier
#pragma omp master
      seconds[p] = omp_get_wtime() - t0;
    }
    std::free(buf);
  }
  seconds.erase(seconds.begin());  // pass 0: first touch of the caches and TLBs
  std::sort(seconds.begin(), seconds.end());
  const double bytes = static_cast<double>(n) * sizeof(float) * threads;
  std::printf("{\"threads\": %d, \"mib_per_thread\": %zu, \"passes\": %d, \"best_bytes_per_s\": %.6g, "
              "\"median_bytes_per_s\": %.6g, \"check\": %g}\n",
              threads, mib, passes, bytes / seconds.front(), bytes / seconds[seconds.size() / 2],
              static_cast<double>(sink[0]));
  return 0;
}
