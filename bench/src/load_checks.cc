// bench/load-checks: what the checks at model load cost (the CRC-32 of manifest.json and the scan
// for values that are not finite, formats/weight_scan.h), against what reading the weights costs.
//
// For an FT folder whose files are in the page cache (a first pass warms it), over all of its
// weight files, best and median of N repetitions:
//   read     a C read() loop into a 1 MiB buffer: the floor of any load from the page cache;
//   touch    one pass over the mapped bytes (a 64-bit sum): the floor of a pass over mapped pages;
//   crc      libdeflate's CRC-32 over the mapped bytes;
//   scan     the non-finite scan alone;
//   crc+scan both in one chunked pass per file, one thread;
//   checks   what ModelWeights::load runs on each file (check_weight_bytes: crc+scan, each file's
//            8 MiB pieces on OpenMP's threads, the pieces' checksums combined);
//   load     ModelWeights::load on the CPU backend (fp32 weights), the checks included.
// Prints GB/s and each time's ratio to read, and the checks' share of the load.
//
// Usage: build/bench_load_checks MODEL_DIR/N-gpu [repetitions (5)]
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "formats/checksum.h"
#include "formats/ft_manifest.h"
#include "formats/mapped_file.h"
#include "formats/weight_scan.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/weight_checks.h"
#include "lib/cpu/cpu_backend.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double best = 1e30, median = 0;
};

Timing time_it(int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

volatile uint64_t g_sink = 0;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR/N-gpu [repetitions]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const auto manifest = ftx::read_ft_manifest(dir);
  if (!manifest) {
    std::fprintf(stderr, "%s: no manifest.json (convert the model with ftx)\n", dir.c_str());
    return 1;
  }
  struct File {
    std::string path;
    ftx::DType dtype;
    std::shared_ptr<ftx::MappedFile> map;
  };
  std::vector<File> files;
  uint64_t bytes = 0;
  for (const auto& e : manifest->files) {
    File f{dir + "/" + e.file, e.dtype.value_or(ftx::DType::kUInt8), ftx::MappedFile::open(dir + "/" + e.file)};
    bytes += f.map->size();
    files.push_back(std::move(f));
  }
  std::vector<char> buf(1 << 20);
  auto read_all = [&] {
    for (const auto& f : files) {
      const int fd = ::open(f.path.c_str(), O_RDONLY);
      while (::read(fd, buf.data(), buf.size()) > 0) g_sink += static_cast<uint8_t>(buf[0]);
      ::close(fd);
    }
  };
  read_all();  // warm the page cache
  const Timing read = time_it(reps, read_all);
  const Timing touch = time_it(reps, [&] {
    uint64_t s = 0;
    for (const auto& f : files) {
      const auto* p = reinterpret_cast<const uint64_t*>(f.map->data());
      for (size_t i = 0; i < f.map->size() / 8; ++i) s += p[i];
    }
    g_sink += s;
  });
  const Timing crc = time_it(reps, [&] {
    for (const auto& f : files) g_sink += ftx::crc32_bytes(f.map->data(), f.map->size());
  });
  const Timing scan = time_it(reps, [&] {
    for (const auto& f : files) g_sink += ftx::scan_weight_bytes(f.map->data(), f.map->size(), f.dtype, false).nonfinite;
  });
  const Timing both = time_it(reps, [&] {
    for (const auto& f : files) g_sink += ftx::scan_weight_bytes(f.map->data(), f.map->size(), f.dtype, true).crc32;
  });
  const Timing parallel = time_it(reps, [&] {
    for (size_t i = 0; i < files.size(); ++i)
      ftx::check_weight_bytes(files[i].path, files[i].map->data(), files[i].map->size(), files[i].dtype,
                              &manifest->files[i], dir);
  });
  ftx::cpu::CpuBackend cpu_backend(0);
  ftx::ops::Backend* backend = &cpu_backend;
  const Timing load = time_it(reps, [&] { g_sink += ftx::ModelWeights::load(dir, 0, 1, *backend).bytes(); });

  const double gb = static_cast<double>(bytes) / 1e9;
  auto row = [&](const char* what, const Timing& t) {
    std::printf("  %-9s best %8.1f ms (%6.2f GB/s)  median %8.1f ms  %5.2fx read\n", what, t.best * 1e3, gb / t.best,
                t.median * 1e3, t.best / read.best);
  };
  std::printf("load checks: %s, %zu files, %.3f GB, %d repetitions (best, median)\n", dir.c_str(), files.size(), gb, reps);
  row("read", read);
  row("touch", touch);
  row("crc", crc);
  row("scan", scan);
  row("crc+scan", both);
  row("checks", parallel);
  row("load", load);
  std::printf("  the checks are %.1f%% of the load (best times; %d threads)\n", 100.0 * parallel.best / load.best,
              omp_get_max_threads());
  return 0;
}
