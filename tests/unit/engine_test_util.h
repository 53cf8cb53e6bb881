#pragma once
// Shared by the engine tests: the fixture models of scripts/fixtures/make_engine_models.py (made
// on first use, atomically, so any test can run first), their float64 reference outputs, and the
// logit tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/cpu/cpu_backend.h"
#include "lib/dist/communicator.h"
#include "lib/engine/engine.h"
#include "lib/engine/model_weights.h"

namespace ftx::test {

inline const std::vector<std::string>& engine_model_names() {
  static const std::vector<std::string> names = {"gpt2",    "megatron", "gptnext", "santacoder", "gptj",
                                                 "gptneox", "bloom",    "opt_post", "wide_heads"};
  return names;
}

// The models whose fixtures carry the INT8 references (scripts/fixtures/make_engine_models.py's
// INT8_MODELS): weight-only, --int8-lm-head and KV-cache emulations, and the KV-cache scale files.
inline const std::vector<std::string>& engine_int8_model_names() {
  static const std::vector<std::string> names = {"gpt2", "gptj", "gptneox", "bloom"};
  return names;
}

inline std::string env_or(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}

// The checkout this header lives in (…/tests/unit/engine_test_util.h), when FTX_SOURCE_DIR is unset.
inline std::string source_dir_from_here() {
  std::string f = __FILE__;
  const size_t p = f.rfind("/tests/unit/");
  return p == std::string::npos ? std::string(".") : f.substr(0, p);
}

// $FTX_FIXTURES/engine, generated when missing. Without FTX_FIXTURES (a test run outside ctest's
// environment), a /tmp folder named after a hash of the fixture script, so that a changed script
// never meets fixtures made by an older one.
inline std::string engine_fixtures() {
  const std::string script = env_or("FTX_SOURCE_DIR", source_dir_from_here()) + "/scripts/fixtures/make_engine_models.py";
  std::string dir;
  if (const char* f = std::getenv("FTX_FIXTURES"); f && *f) {
    dir = std::string(f) + "/engine";
  } else {
    std::ifstream in(script);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    dir = "/tmp/ftx-engine-fixtures-" + std::to_string(std::hash<std::string>()(text));
  }
  if (!std::ifstream(dir + "/DONE")) {
    const std::string cmd = env_or("FTX_TORCH_PYTHON", "/usr/bin/python3") + " " + script + " " + dir + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "fixture script failed: " << cmd;
  }
  return dir;
}

// The communicator of this process: MPI's under mpirun, else a single rank.
inline std::unique_ptr<dist::Communicator> this_process_communicator() {
  if (dist::launched_by_mpi()) return dist::make_communicator();
  return std::make_unique<dist::SingleRank>();
}

struct Expected {
  int32_t end_id = 0;
  int64_t vocab = 0;
  std::vector<std::vector<int32_t>> prompts, greedy;
  std::vector<std::vector<double>> prompt_logits;              // [prompt][V]
  std::vector<std::vector<std::vector<double>>> greedy_logits; // [prompt][step][V]
};

// `variant`: "" for the floating-point reference, or a section of expected.json holding its own
// greedy paths and logits over the same prompts (e.g. "int8_weight_only/tp2"); empty prompts when
// the fixture has no such section.
inline Expected load_expected(const std::string& model_dir, const std::string& variant = "") {
  std::ifstream in(model_dir + "/expected.json");
  auto j = nlohmann::json::parse(in);
  Expected e;
  e.end_id = j["end_id"].get<int32_t>();
  e.vocab = j["vocab_size"].get<int64_t>();
  const nlohmann::json* paths = &j;
  if (!variant.empty()) {
    const nlohmann::json::json_pointer where("/" + variant);
    if (!j.contains(where)) return e;
    paths = &j.at(where);
  }
  e.prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  e.greedy = (*paths)["greedy"].get<std::vector<std::vector<int32_t>>>();
  e.prompt_logits = (*paths)["prompt_logits"].get<std::vector<std::vector<double>>>();
  e.greedy_logits = (*paths)["greedy_logits"].get<std::vector<std::vector<std::vector<double>>>>();
  return e;
}

// Tolerance used by every logit comparison: for each logit i of a row,
//   |got_i - want_i| <= rel · max(1, max_j |want_j|)
// i.e. relative to the row's largest logit magnitude (absolute for logits of order one).
template <typename A, typename B>
::testing::AssertionResult logits_close(const A* got, const B* want, int64_t n, double rel) {
  double scale = 1.0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (!(d <= rel * scale))
      return ::testing::AssertionFailure() << "logit " << i << ": got " << got[i] << ", want " << want[i]
                                           << " (|diff| " << d << " > " << rel << " * " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

// Greedy decoding of `prompts` for `steps` tokens: as one padded batch (alone = false), or each
// prompt alone in row 0; per prompt, its tokens and the logits each was picked from (rank 0).
struct GreedyTrace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // [step][V]
};

inline std::vector<GreedyTrace> greedy_traces(Engine& eng, const std::vector<std::vector<int32_t>>& prompts,
                                              int64_t steps, bool alone) {
  const int64_t V = eng.vocab_size();
  std::vector<GreedyTrace> out(prompts.size());
  auto pick = [&](const float* row, GreedyTrace& t) {
    t.logits.emplace_back(row, row + V);
    t.tokens.push_back(static_cast<int32_t>(std::max_element(row, row + V) - row));
  };
  auto run = [&](const std::vector<std::vector<int32_t>>& batch, size_t first) {
    const int64_t B = static_cast<int64_t>(batch.size());
    int64_t longest = 0;
    for (const auto& p : batch) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    eng.reserve(B, longest + steps + 1, B * longest);
    std::vector<int32_t> rows(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) rows[b] = static_cast<int32_t>(b);
    std::vector<float> logits(static_cast<size_t>(B * V));
    eng.prefill(batch, rows, logits.data());
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int32_t> feed;
      for (int64_t b = 0; b < B; ++b) {
        pick(logits.data() + b * V, out[first + b]);
        feed.push_back(out[first + b].tokens.back());
      }
      if (s + 1 < steps) eng.decode(feed, rows, logits.data());
    }
  };
  if (alone) {
    for (size_t i = 0; i < prompts.size(); ++i) run({prompts[i]}, i);
  } else {
    run(prompts, 0);
  }
  return out;
}

// Whether `got` is `ref`'s greedy path up to near ties: the same tokens, or a first difference at a
// step where ref's logit of got's token lies within `tie` x the row's largest |logit| of its best. A run with
// another summation order (another GEMM shape, batch or device) may break such a tie the other
// way; the paths then part, and later tokens are not compared.
inline ::testing::AssertionResult same_tokens_up_to_ties(const GreedyTrace& ref, const std::vector<int32_t>& got,
                                                         double tie) {
  const size_t n = std::min(ref.tokens.size(), got.size());
  for (size_t s = 0; s < n; ++s) {
    if (got[s] == ref.tokens[s]) continue;
    const std::vector<float>& row = ref.logits[s];
    double scale = 1.0;
    for (float v : row) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    const double margin = static_cast<double>(row[static_cast<size_t>(ref.tokens[s])]) - row[static_cast<size_t>(got[s])];
    if (margin <= tie * scale) return ::testing::AssertionSuccess() << "paths part at a near tie, step " << s;
    return ::testing::AssertionFailure() << "step " << s << ": token " << got[s] << ", reference " << ref.tokens[s]
                                         << " ahead by a clear margin " << margin << " (> " << tie << " * " << scale
                                         << ")";
  }
  if (got.size() != ref.tokens.size())
    return ::testing::AssertionFailure() << got.size() << " tokens, reference " << ref.tokens.size();
  return ::testing::AssertionSuccess();
}

// What the engine computes along the reference's greedy paths (rank 0; empty on other ranks):
// step 0 = each prompt's last-position logits (one padded batch), step s = logits after feeding
// the reference's greedy token s-1 (lock-step decode of the rows whose path is that long).
struct Observed {
  std::vector<std::vector<std::vector<float>>> steps;  // [prompt][step][V]
};

// On a given backend, engine options and quantisation.
inline Observed run_greedy_paths_on(ops::Backend& be, const std::string& dir, const Expected& e,
                                    dist::Communicator& comm, const EngineOptions& options = {},
                                    const QuantPolicy& quant = {}) {
  ModelWeights w = ModelWeights::load(dir, comm.rank(), comm.size(), be, quant);
  Engine eng(w, be, comm, options);
  const int64_t B = static_cast<int64_t>(e.prompts.size()), V = e.vocab;
  int64_t longest = 0, steps = 0;
  for (int64_t b = 0; b < B; ++b) {
    longest = std::max<int64_t>(longest, e.prompts[b].size());
    steps = std::max<int64_t>(steps, e.greedy[b].size());
  }
  eng.reserve(B, longest + steps, B * longest);
  std::vector<int32_t> rows;
  for (int64_t b = 0; b < B; ++b) rows.push_back(static_cast<int32_t>(b));
  std::vector<float> logits(static_cast<size_t>(B * V));
  Observed o;
  o.steps.resize(static_cast<size_t>(B));
  eng.prefill(e.prompts, rows, logits.data());
  for (int64_t b = 0; b < B; ++b) o.steps[b].emplace_back(logits.begin() + b * V, logits.begin() + (b + 1) * V);
  for (int64_t s = 1; s < steps; ++s) {
    std::vector<int32_t> feed, active;
    for (int64_t b = 0; b < B; ++b)
      if (static_cast<int64_t>(e.greedy[b].size()) > s) {
        feed.push_back(e.greedy[b][s - 1]);
        active.push_back(static_cast<int32_t>(b));
      }
    eng.decode(feed, active, logits.data());
    for (size_t i = 0; i < active.size(); ++i)
      o.steps[active[i]].emplace_back(logits.begin() + i * V, logits.begin() + (i + 1) * V);
  }
  return o;
}

// Logits along the reference's greedy paths within `tolerance` of each row's largest, and the same
// greedy tokens.
inline void expect_greedy_paths_match(const Observed& o, const Expected& e, double tolerance) {
  for (size_t b = 0; b < e.prompts.size(); ++b) {
    ASSERT_EQ(o.steps[b].size(), e.greedy_logits[b].size());
    for (size_t s = 0; s < o.steps[b].size(); ++s) {
      EXPECT_TRUE(logits_close(o.steps[b][s].data(), e.greedy_logits[b][s].data(), e.vocab, tolerance))
          << "prompt " << b << " step " << s;
      const auto& l = o.steps[b][s];
      EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), e.greedy[b][s]) << "prompt " << b << " step " << s;
    }
  }
}

// The largest difference between two references' prompt logits: a test that holds ftx to one of
// them asserts this is well above its tolerance, so that it would see the other arithmetic.
inline double largest_prompt_logit_gap(const Expected& a, const Expected& b) {
  double largest = 0;
  for (size_t p = 0; p < a.prompts.size(); ++p)
    for (int64_t i = 0; i < a.vocab; ++i)
      largest = std::max(largest, std::fabs(a.prompt_logits[p][i] - b.prompt_logits[p][i]));
  return largest;
}

// The largest |got - ref| over every logit of every step, relative to that row's largest |ref| (at
// least 1): the measure test::logits_close holds a tolerance to.
inline double largest_logit_gap(const Observed& got, const Observed& ref) {
  double worst = 0;
  for (size_t p = 0; p < ref.steps.size(); ++p)
    for (size_t s = 0; s < ref.steps[p].size(); ++s) {
      double row = 1.0, gap = 0;
      for (size_t i = 0; i < ref.steps[p][s].size(); ++i) {
        row = std::max(row, std::fabs(static_cast<double>(ref.steps[p][s][i])));
        gap = std::max(gap, std::fabs(static_cast<double>(got.steps[p][s][i]) - ref.steps[p][s][i]));
      }
      worst = std::max(worst, gap / row);
    }
  return worst;
}

// On the CPU. int8_weight_only: load with FT's int8_mode 1 (layer GEMM weights quantised per
// column). int8_kv_cache: hold K and V in int8 with the folder's per-layer scales (--int8-kv-cache).
// int8_lm_head: --int8-lm-head (the lm_head table quantised per row too).
inline Observed run_greedy_paths(const std::string& dir, const Expected& e, dist::Communicator& comm,
                                 bool int8_weight_only = false, bool int8_kv_cache = false,
                                 bool int8_lm_head = false) {
  cpu::CpuBackend be(0);  // OMP_NUM_THREADS (ctest sets 2; under mpirun 1 per rank)
  QuantPolicy quant;
  quant.int8_weight_only = int8_weight_only;
  quant.int8_kv_cache = int8_kv_cache;
  quant.int8_lm_head = int8_lm_head;
  return run_greedy_paths_on(be, dir, e, comm, {}, quant);
}

// --int8-mode 1 --dtype bf16 (engine_half_test.cc, and on CUDA cuda_backend_test.cc). Rounding A
// at every layer GEMM gives the rounding flips that engine_half_test.cc's header describes, at
// bf16's spacing (2^-8): perturbing the emulation's activations by a relative 1e-7 (fp32's own noise) moves gpt2's logits
// by up to 2.9e-3 of the row (tests/reference/half_reference.py's emulation, 8 seeds), and gpt2's
// 11-token prompt holds an activation 2.5e-8 from a bf16 rounding boundary, where the engine's fp32
// value lands on the other side (the CPU engine's logits 1.4e-3 away, every other prompt's 1e-8). So single
// logits are held to kInt8Bf16Tolerance, and whether A is rounded at all is told by the prompts
// taken together: a flip moves one prompt's logits, a different arithmetic moves every prompt's,
// so the median over prompts of the RMS gap to the emulation must be well under the gap to an
// emulation that leaves A unrounded at the int8 layers. (The single-op test pins the rule itself:
// cpu_half_gemm_test.cc's Int8PackedGemm, 1e-5.)
constexpr double kInt8Bf16Tolerance = 4e-3;

// The median over prompts of the RMS of (got - want) over a prompt's logits, relative to the row's
// largest |logit|: a flip moves one prompt's logits, a different arithmetic moves every prompt's.
inline double median_prompt_rms(const Observed& o, const Expected& want) {
  std::vector<double> rms;
  for (size_t p = 0; p < want.prompts.size(); ++p) {
    double scale = 1, sum = 0;
    for (double v : want.prompt_logits[p]) scale = std::max(scale, std::fabs(v));
    for (int64_t i = 0; i < want.vocab; ++i) {
      const double d = (o.steps[p][0][i] - want.prompt_logits[p][i]) / scale;
      sum += d * d;
    }
    rms.push_back(std::sqrt(sum / static_cast<double>(want.vocab)));
  }
  std::sort(rms.begin(), rms.end());
  const size_t n = rms.size();
  return n % 2 ? rms[n / 2] : 0.5 * (rms[n / 2 - 1] + rms[n / 2]);
}

}  // namespace ftx::test
