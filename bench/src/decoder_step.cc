// bench/decoder-step: what one Decoder::step costs on the host, per sampling mode, for a batch of
// GPT-2-vocabulary logits. With the GPU backend the logits come to the host every step and this is
// where tokens are chosen, so at large batches it adds to (or, for beams, may exceed) the GPU step.
//
// Baseline, in the same process: one read pass over the same logits (a sum), the least any host
// decoder must do. Prints ms per step and the ratio to that pass, for the thread count OpenMP gets
// (OMP_NUM_THREADS).
//
// Usage: build/bench_decoder_step [batch (64)] [vocab (50257)] [steps (16)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "lib/decoding/decoder.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One pass over the logits, split over the threads as the decoder splits its requests.
double read_pass_seconds(const std::vector<float>& logits, int64_t rows, int64_t vocab, int reps) {
  double best = 1e30, sink = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    double total = 0.0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      float s = 0.0f;
      const float* l = logits.data() + row * vocab;
#pragma omp simd reduction(+ : s)  // vectorised: the pass is bound by memory, not by add latency
      for (int64_t i = 0; i < vocab; ++i) s += l[i];
      total += s;
    }
    best = std::min(best, seconds_since(t0));
    sink += total;
  }
  if (sink == 12345.678) std::puts("");  // keeps the sums alive
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 64;
  const int64_t vocab = argc > 2 ? std::atoll(argv[2]) : 50257;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 16;
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  std::printf("decoder step: batch %lld, vocab %lld, %d steps, %d threads\n", static_cast<long long>(batch),
              static_cast<long long>(vocab), steps, threads);
  struct Mode {
    const char* name;
    ftx::SamplingConfig s;
  };
  std::vector<Mode> modes(5);
  modes[0].name = "greedy";
  modes[1].name = "top_k 40, temperature 0.8";
  modes[1].s.top_k = 40;
  modes[1].s.temperature = 0.8;
  modes[2].name = "top_p 0.9";
  modes[2].s.top_p = 0.9;
  modes[3].name = "top_p 0.9, repetition 1.2";
  modes[3].s.top_p = 0.9;
  modes[3].s.repetition_penalty = 1.2;
  modes[4].name = "beam 4";
  modes[4].s.beam_width = 4;
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const Mode& m : modes) {
    std::vector<ftx::DecodeRequest> requests;
    for (int64_t b = 0; b < batch; ++b) {
      ftx::DecodeRequest r;
      r.input_ids = {1, 2, 3, static_cast<int32_t>(b % vocab)};
      r.max_new_tokens = steps + 1;
      r.sampling = m.s;
      r.sampling.seed = static_cast<uint64_t>(b);
      requests.push_back(r);
    }
    ftx::Decoder decoder(requests, vocab);
    const int64_t rows = decoder.rows();
    std::vector<float> fresh(static_cast<size_t>(rows * vocab)), logits;
    for (float& x : fresh) x = normal(gen);
    double decode_s = 0.0;
    for (int s = 0; s < steps; ++s) {
      logits = fresh;  // the step edits logits in place; every step starts from the same numbers
      const auto t0 = Clock::now();
      decoder.step(logits.data());
      decode_s += seconds_since(t0);
    }
    const double per_step = decode_s / steps;
    const double pass = read_pass_seconds(fresh, rows, vocab, 5);
    std::printf("  %-28s rows %5lld: %8.3f ms per step, %6.1fx one read pass (%.3f ms)\n", m.name,
                static_cast<long long>(rows), per_step * 1e3, per_step / pass, pass * 1e3);
  }
  return 0;
}
