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
// The buffers sit on 2 MB pages where the kernel gives them (as the CPU backend's weights do:
// lib/cpu/huge_page_alloc.h); PAGES=small measures on 4 KB pages, where a streaming read also pays
// a page walk every 4 KB.
//
// Usage: bench_read_bandwidth [THREADS] [MIB_PER_THREAD] [PASSES] [PAGES (huge|small)]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/src/read_loop.h"
#include "lib/cpu/huge_page_alloc.h"

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const size_t mib = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 256;
  const int passes = argc > 3 ? std::atoi(argv[3]) : 30;
  const std::string pages = argc > 4 ? argv[4] : "huge";
  if (threads < 1 || mib < 1 || passes < 1 || (pages != "huge" && pages != "small")) {
    std::fprintf(stderr, "usage: bench_read_bandwidth [THREADS >= 1] [MIB_PER_THREAD >= 1] [PASSES >= 1] [huge|small]\n");
    return 2;
  }
  const size_t n = mib * (size_t(1) << 20) / sizeof(float);
  std::vector<double> seconds(passes + 1);
  std::vector<float> sink(threads);
#pragma omp parallel num_threads(threads)
  {
    // Each thread allocates and touches its own buffer (its pages near it on a NUMA machine).
    const int t = omp_get_thread_num();
    auto* buf = static_cast<float*>(pages == "huge" ? ftx::cpu::alloc_on_huge_pages(n * sizeof(float))
                                                    : std::aligned_alloc(64, n * sizeof(float)));
    for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;
    for (int p = 0; p <= passes; ++p) {
      double t0 = 0;
#pragma omp barrier
#pragma omp master
      t0 = omp_get_wtime();
      sink[t] += ftx::bench::read_sum(buf, n);
#pragma omp barrier
#pragma omp master
      seconds[p] = omp_get_wtime() - t0;
    }
    std::free(buf);
  }
  seconds.erase(seconds.begin());  // pass 0: first touch of the caches and TLBs
  std::sort(seconds.begin(), seconds.end());
  const double bytes = static_cast<double>(n) * sizeof(float) * threads;
  std::printf("{\"threads\": %d, \"mib_per_thread\": %zu, \"passes\": %d, \"pages\": \"%s\", \"best_bytes_per_s\": %.6g, "
              "\"median_bytes_per_s\": %.6g, \"check\": %g}\n",
              threads, mib, passes, pages.c_str(), bytes / seconds.front(), bytes / seconds[seconds.size() / 2],
              static_cast<double>(sink[0]));
  return 0;
}
