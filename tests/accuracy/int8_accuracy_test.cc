// INT8 and FP8 accuracy on a trained model (issues 14 and 29): the GPT-2 of scripts/make_trained_gpt2.py
// (trained on the KJV Bible, Revelation held out), run by ftx's engine in fp32 and in each INT8 and
// FP8 mode over the held-out text; at every position the full next-token distributions are compared:
//   top-1 agreement  the share of positions where the mode's argmax equals fp32's;
//   mean KL          KL(p_fp32 || p_mode) in nats per position, from the full 50257 logits (float64).
// Random fixture weights cannot show this (no outliers, no preferences); the emulation tests
// (engine_reference_test) show that each mode computes what it should, this one what it costs.
//
// Fixtures: scripts/fixtures/make_trained_fixtures.py (ctest setup `trained_gpt2_fixtures`).
// The modes are one list (modes()): a name, a model folder and the runtime options generate would
// build from its flags. A mode whose runtime option this build rejects as not yet supported (W8A8
// before `--int8-mode 2` exists) is reported as not run instead of failing; any other error fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/engine/engine.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/runtime.h"
#include "lib/model/model_dir.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {
namespace {

constexpr int64_t kWindow = 128;     // tokens per held-out window (the model trained on 128)
constexpr int64_t kMaxWindows = 32;  // 32 · 127 = 4064 predicted positions

struct Floors {
  double min_agreement;  // top-1 agreement with fp32 ≥ this
  double max_mean_kl;    // mean KL(fp32 || mode) ≤ this (nats)
};

struct Mode {
  std::string name;
  std::string folder;  // under the fixture folder; its 1-gpu/ is loaded
  RuntimeOptions runtime;
  Floors floors;
};

RuntimeOptions int8_mode(int mode, bool int8_kv_cache = false, bool int8_lm_head = false) {
  RuntimeOptions o;
  o.int8_mode = mode;
  o.int8_kv_cache = int8_kv_cache;
  o.int8_lm_head = int8_lm_head;
  return o;
}

RuntimeOptions int4_mode(int64_t group_size, bool zero_points) {
  RuntimeOptions o;
  o.int4 = true;
  o.int4_group_size = group_size;
  o.int4_zero_points = zero_points;
  return o;
}

RuntimeOptions fp8_mode(bool gemms, bool kv_cache) {
  RuntimeOptions o;
  o.fp8 = gemms;
  o.fp8_kv_cache = kv_cache;
  return o;
}

// Floors set from measurements on this fixture, with margin. Weight-only measured 0.9988
// agreement (5 of 4064 positions, near-ties) and mean KL 2.0e-6 (max 2.8e-5); the INT8 KV cache
// 0.9978 and 7.0e-6 (max 2.1e-4), with weight-only too 0.9983 and 9.1e-6: floors 0.99 and 1e-4
// for all three; with --int8-lm-head 0.9968 and 1.5e-5 (max 7.7e-5), the same floors. W8A8's floors are provisional until --int8-mode 2 runs here: a float64 emulation of
// TensorRT-LLM's per-tensor W8A8 on these exports (w8a8_estimate.py beside this file: static
// activation scales, the files' int8 weights and per-tensor scales; its fp32 NLL equals ftx's to
// 4 digits) gave agreement 0.9924 and mean KL 1.17e-4 at alpha 0, 0.9921 and 1.03e-4 at alpha
// 0.5: floors 0.98 and 1e-3. FP8 (--fp8, smoothquant --fp8 of the same ranges, no smoothing) measured
// agreement 0.9899 and mean KL 1.81e-4 (max 5.3e-3): E4M3's 3 mantissa bits round a value near a
// tensor's amax more coarsely than int8's 127 steps do; the FP8 KV cache 0.9963 and 1.76e-5; both
// 0.9914 and 2.00e-4 (0.9911 before the tile prefill kernel): floors 0.98 and 1e-3 with FP8 GEMMs,
// 0.99 and 1e-4 for the cache alone (INT8 KV's). An fp32 head would pass --int8-lm-head's floors
// too (weight-only alone does): Int8LmHeadComputesWithTheInt8Table checks that the head is INT8.
// INT4 weight-only (--weight-only-precision int4; hidden 256, FFN 1024, so a group of 128 is half an
// attention input): group 128 symmetric measured agreement 0.9840 and mean KL 4.8e-4 (max 2.6e-2),
// group 32 0.9852 and 4.6e-4, group 32 with zero points 0.9897 and 2.1e-4: floors 0.97 and 2e-3.
const std::vector<Mode>& modes() {
  static const std::vector<Mode> m = {
      {"int8 weight-only (--int8-mode 1)", "ft", int8_mode(1), {0.99, 1e-4}},
      {"int8 weight-only + lm_head (--int8-lm-head)", "ft", int8_mode(1, false, true), {0.99, 1e-4}},
      {"int8 KV cache (--int8-kv-cache)", "kv", int8_mode(0, true), {0.99, 1e-4}},
      {"weight-only + KV cache", "kv", int8_mode(1, true), {0.99, 1e-4}},
      {"W8A8 SmoothQuant alpha=0 (--int8-mode 2)", "sq-a0", int8_mode(2), {0.98, 1e-3}},
      {"W8A8 SmoothQuant alpha=0.5 (--int8-mode 2)", "sq-a05", int8_mode(2), {0.98, 1e-3}},
      {"FP8 E4M3 GEMMs (--fp8)", "fp8", fp8_mode(true, false), {0.98, 1e-3}},
      {"FP8 KV cache (--fp8-kv-cache)", "fp8", fp8_mode(false, true), {0.99, 1e-4}},
      {"FP8 GEMMs + FP8 KV cache", "fp8", fp8_mode(true, true), {0.98, 1e-3}},
      {"int4 group 128 (--weight-only-precision int4)", "ft", int4_mode(128, false), {0.97, 2e-3}},
      {"int4 group 32", "ft", int4_mode(32, false), {0.97, 2e-3}},
      {"int4 group 32, zero points", "ft", int4_mode(32, true), {0.97, 2e-3}},
  };
  return m;
}

std::string fixture_dir() {
  const char* f = std::getenv("FTX_FIXTURES");
  return std::string(f && *f ? f : ".") + "/trained";
}

// Held-out text as kWindow-token windows (consecutive, not overlapping).
std::vector<std::vector<int32_t>> held_out_windows(const std::string& model_dir, const std::string& text_file) {
  std::ifstream in(text_file);
  if (!in) throw Error(text_file + ": cannot open the held-out text");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::vector<int32_t> ids = load_tokenizer(model_dir)->encode(ss.str());
  std::vector<std::vector<int32_t>> w;
  for (size_t at = 0; at + kWindow <= ids.size() && static_cast<int64_t>(w.size()) < kMaxWindows; at += kWindow)
    w.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(at), ids.begin() + static_cast<std::ptrdiff_t>(at + kWindow));
  return w;
}

// One model on one runtime, fed the windows in lock-step: prefill of each window's first token,
// then one decode step per token, so that every position's full logits pass by.
struct Runner {
  Runtime rt;
  ModelWeights weights;
  std::optional<Engine> engine;
  Runner(const std::string& dir, const RuntimeOptions& options) : rt(make_runtime(options)) {
    weights = ModelWeights::load(dir, rt.layout(), *rt.backend, rt.quant);
    engine.emplace(weights, *rt.backend, *rt.groups);
  }
};

// log-softmax of one row, in float64.
void log_softmax(const float* l, int64_t n, std::vector<double>& out) {
  out.resize(static_cast<size_t>(n));
  double m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(l[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(l[i]) - m);
  const double lse = m + std::log(s);
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(l[i]) - lse;
}

struct Tally {
  int64_t positions = 0, agree = 0;
  double kl_sum = 0, kl_max = 0, nll_sum = 0;
  std::vector<bool> agreed;  // per position, for the paired comparison of two modes
  double agreement() const { return static_cast<double>(agree) / static_cast<double>(positions); }
  double mean_kl() const { return kl_sum / static_cast<double>(positions); }
  double mean_nll() const { return nll_sum / static_cast<double>(positions); }
};

TEST(Int8Accuracy, TrainedGpt2HeldOut) {
  const std::string root = fixture_dir();
  ASSERT_TRUE(std::ifstream(root + "/DONE")) << root << "/DONE missing: run the ctest setup trained_gpt2_fixtures "
                                             << "(scripts/fixtures/make_trained_fixtures.py " << root << ")";
  const std::string fp32_dir = root + "/ft/1-gpu";
  const auto windows = held_out_windows(fp32_dir, root + "/hf/heldout.txt");
  ASSERT_GE(windows.size(), 32u) << "held-out text too short";
  const int64_t B = static_cast<int64_t>(windows.size());

  RuntimeOptions fp32_options;
  Runner reference(fp32_dir, fp32_options);
  std::vector<std::unique_ptr<Runner>> runners;  // null: the mode is not built yet
  std::vector<std::string> not_run(modes().size());
  for (size_t m = 0; m < modes().size(); ++m) {
    const Mode& mode = modes()[m];
    try {
      runners.push_back(std::make_unique<Runner>(root + "/" + mode.folder + "/1-gpu", mode.runtime));
    } catch (const UsageError& e) {
      if (std::string(e.what()).find("not supported") == std::string::npos) throw;
      runners.push_back(nullptr);
      not_run[m] = e.what();
    }
  }

  const int64_t V = reference.engine->vocab_size();
  std::vector<int32_t> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) rows[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  std::vector<float> ref_logits(static_cast<size_t>(B * V)), logits(static_cast<size_t>(B * V));
  std::vector<Tally> tally(modes().size());
  Tally fp32;
  std::vector<double> ref_lp(static_cast<size_t>(B * V)), lq;
  reference.engine->reserve(B, kWindow, B);
  for (auto& r : runners)
    if (r) r->engine->reserve(B, kWindow, B);

  // Step t feeds token t of every window and predicts token t + 1.
  for (int64_t t = 0; t + 1 < kWindow; ++t) {
    std::vector<int32_t> feed(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) feed[static_cast<size_t>(b)] = windows[static_cast<size_t>(b)][static_cast<size_t>(t)];
    auto step = [&](Runner& r, float* out) {
      if (t == 0) {
        std::vector<std::vector<int32_t>> first;
        for (int32_t id : feed) first.push_back({id});
        r.engine->prefill(first, rows, out);
      } else {
        r.engine->decode(feed, rows, out);
      }
    };
    step(reference, ref_logits.data());
    for (int64_t b = 0; b < B; ++b) {
      log_softmax(ref_logits.data() + b * V, V, lq);
      std::copy(lq.begin(), lq.end(), ref_lp.begin() + b * V);
      fp32.positions++;
      fp32.nll_sum -= lq[static_cast<size_t>(windows[static_cast<size_t>(b)][static_cast<size_t>(t + 1)])];
    }
    for (size_t m = 0; m < runners.size(); ++m) {
      if (!runners[m]) continue;
      step(*runners[m], logits.data());
      for (int64_t b = 0; b < B; ++b) {
        const float* p = ref_logits.data() + b * V;
        const float* q = logits.data() + b * V;
        const double* lp = ref_lp.data() + b * V;
        log_softmax(q, V, lq);
        double kl = 0;
        for (int64_t i = 0; i < V; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[static_cast<size_t>(i)]);
        Tally& s = tally[m];
        s.positions++;
        const bool same_top1 = (std::max_element(p, p + V) - p) == (std::max_element(q, q + V) - q);
        s.agree += same_top1;
        s.agreed.push_back(same_top1);
        s.kl_sum += kl;
        s.kl_max = std::max(s.kl_max, kl);
        s.nll_sum -= lq[static_cast<size_t>(windows[static_cast<size_t>(b)][static_cast<size_t>(t + 1)])];
      }
    }
  }

  // The figures, then the floors (so a failing run still shows every mode's numbers).
  std::printf("held-out text: Revelation, %lld windows of %lld tokens, %lld predicted positions\n",
              static_cast<long long>(B), static_cast<long long>(kWindow), static_cast<long long>(fp32.positions));
  std::printf("%-46s %10s %10s %10s %10s\n", "mode", "top1-agree", "mean-KL", "max-KL", "NLL/token");
  std::printf("%-46s %10s %10s %10s %10.4f\n", "fp32 (reference)", "-", "-", "-", fp32.mean_nll());
  for (size_t m = 0; m < modes().size(); ++m) {
    if (!runners[m]) {
      std::printf("%-46s not run: %s\n", modes()[m].name.c_str(), not_run[m].c_str());
      continue;
    }
    const Tally& s = tally[m];
    std::printf("%-46s %10.4f %10.3e %10.3e %10.4f   floors: agree >= %.3f, mean KL <= %.1e\n", modes()[m].name.c_str(),
                s.agreement(), s.mean_kl(), s.kl_max, s.mean_nll(), modes()[m].floors.min_agreement,
                modes()[m].floors.max_mean_kl);
  }
  std::fflush(stdout);

  // The fixture is a trained model: 4.73 nats per held-out token measured; random weights give
  // about ln 50257 = 10.8, the training text's unigram frequencies (add-one smoothed) 6.1.
  EXPECT_LT(fp32.mean_nll(), 5.5) << "fp32 held-out loss: the fixture model is not trained";
  for (size_t m = 0; m < modes().size(); ++m) {
    if (!runners[m]) continue;
    EXPECT_GE(tally[m].agreement(), modes()[m].floors.min_agreement) << modes()[m].name;
    EXPECT_LE(tally[m].mean_kl(), modes()[m].floors.max_mean_kl) << modes()[m].name;
    EXPECT_GT(tally[m].mean_kl(), 0.0) << modes()[m].name << ": identical to fp32, so nothing was quantised";
  }
  // SmoothQuant's point: migrating activation outliers into the weights (alpha 0.5) is at least as
  // good as plain W8A8 (alpha 0).
  auto index_of = [](const std::string& folder) {
    for (size_t m = 0; m < modes().size(); ++m)
      if (modes()[m].folder == folder) return m;
    return modes().size();
  };
  const size_t a0 = index_of("sq-a0"), a05 = index_of("sq-a05");
  if (a0 < runners.size() && a05 < runners.size() && runners[a0] && runners[a05]) {
    // Mean KL is the measure. Top-1 agreement is a count of a few dozen near-tie flips, and the
    // fixture model is retrained on each machine (CI measured 0.9961 at alpha 0 and 0.9938 at 0.5
    // with the lower KL at 0.5; this machine 0.9924 and 0.9921), so it is compared as a paired
    // count: McNemar's sign test on the positions where exactly one of the two modes agrees with
    // fp32 fails only when alpha 0.5 loses significantly more of them (z > 3, one-sided 0.13%; the CI
    // figures are 9 more lost positions, z <= 3 however the losses overlap).
    int64_t only_a0 = 0, only_a05 = 0;
    for (size_t i = 0; i < tally[a0].agreed.size(); ++i) {
      only_a0 += tally[a0].agreed[i] && !tally[a05].agreed[i];
      only_a05 += !tally[a0].agreed[i] && tally[a05].agreed[i];
    }
    const double discordant = static_cast<double>(only_a0 + only_a05);
    const double z = discordant > 0 ? static_cast<double>(only_a0 - only_a05) / std::sqrt(discordant) : 0.0;
    std::printf("alpha 0 vs 0.5, top-1 on positions where they differ: %lld kept only by alpha 0, %lld only by "
                "alpha 0.5 (z = %.2f)\n",
                static_cast<long long>(only_a0), static_cast<long long>(only_a05), z);
    EXPECT_LE(z, 3.0) << "alpha 0.5 loses significantly more top-1 positions than alpha 0";
  }
}

// A float32 file of n values in the folder.
std::vector<float> read_floats(const std::string& path, size_t n) {
  std::vector<float> v(n);
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float))))
    throw Error(path + ": cannot read " + std::to_string(n) + " float32 values");
  return v;
}

// The lm_head table [V, H] as FT's weight-only INT8 holds it, dequantised (tests/reference/
// int8_reference.py quantize_columns, each vocabulary row one column of the transposed table):
// scale = max|row| / 128 in fp32, q = round(w / scale) half away from zero, clamped to [-128, 127].
std::vector<double> int8_rows(const std::vector<float>& table, int64_t V, int64_t H) {
  std::vector<double> q(table.size());
  for (int64_t v = 0; v < V; ++v) {
    const float* row = table.data() + v * H;
    float amax = 0;
    for (int64_t k = 0; k < H; ++k) amax = std::max(amax, std::fabs(row[k]));
    const float scale = amax > 0 ? amax / 128.0f : 1.0f;
    for (int64_t k = 0; k < H; ++k) {
      const double x = static_cast<double>(row[k] / scale);
      const double r = std::clamp(std::copysign(std::floor(std::fabs(x) + 0.5), x), -128.0, 127.0);
      q[static_cast<size_t>(v * H + k)] = r * static_cast<double>(scale);
    }
  }
  return q;
}

// --int8-lm-head in effect, which the floors above cannot tell (weight-only with its fp32 head is
// within them). Both runs share the weight-only body; at the last token of each held-out window the
// engine's own last-layer output (context_embeddings of a one-token append) goes through the final
// layernorm in float64 and then through the fp32 table (W) and the INT8 one (Q). The fp32 head's
// logits must be h·W within kHeadTol of the row's largest |logit| (the emulation follows the engine),
// the INT8 head's h·Q within kHeadTol, and h·Q must lie well beyond kHeadTol from h·W (the check
// could not pass an fp32 head).
TEST(Int8Accuracy, Int8LmHeadComputesWithTheInt8Table) {
  constexpr double kHeadTol = 1e-4;  // fp32 GEMM and layernorm against float64
  const std::string root = fixture_dir();
  ASSERT_TRUE(std::ifstream(root + "/DONE")) << root << "/DONE missing: run the ctest setup trained_gpt2_fixtures";
  const std::string dir = root + "/ft/1-gpu";
  const ModelConfig cfg = read_model_config(dir);
  ASSERT_TRUE(cfg.tied_embeddings && !cfg.has_lm_head_bias && cfg.weight_data_type == DType::kFloat32);
  const int64_t V = cfg.vocab_size, H = cfg.hidden();
  const std::vector<float> wte = read_floats(dir + "/model.wte.bin", static_cast<size_t>(V * H));
  const std::vector<float> gamma = read_floats(dir + "/model.final_layernorm.weight.bin", static_cast<size_t>(H));
  const std::vector<float> beta = read_floats(dir + "/model.final_layernorm.bias.bin", static_cast<size_t>(H));
  const std::vector<double> q = int8_rows(wte, V, H);

  auto windows = held_out_windows(dir, root + "/hf/heldout.txt");
  windows.resize(std::min<size_t>(windows.size(), 8));
  const int64_t B = static_cast<int64_t>(windows.size());
  std::vector<int32_t> rows(static_cast<size_t>(B));
  std::vector<std::vector<int32_t>> heads, lasts;
  for (int64_t b = 0; b < B; ++b) {
    rows[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    const auto& w = windows[static_cast<size_t>(b)];
    heads.emplace_back(w.begin(), w.end() - 1);
    lasts.push_back({w.back()});
  }
  double int8_effect = 0;  // the largest |h·Q - h·W| relative to the row's largest |h·W|
  for (const bool int8_head : {false, true}) {
    SCOPED_TRACE(int8_head ? "--int8-lm-head" : "weight-only, fp32 head");
    Runner r(dir, int8_mode(1, false, int8_head));
    ASSERT_EQ(r.engine->vocab_size(), V);
    r.engine->reserve(B, kWindow, B * kWindow);
    std::vector<float> logits(static_cast<size_t>(B * V)), emb;
    r.engine->prefill(heads, rows, logits.data());
    r.engine->append(lasts, rows, logits.data(), &emb);
    ASSERT_EQ(emb.size(), static_cast<size_t>(B * H));
    double worst = 0;
    for (int64_t b = 0; b < B; ++b) {
      const float* x = emb.data() + b * H;
      double mean = 0, var = 0;
      for (int64_t k = 0; k < H; ++k) mean += x[k];
      mean /= static_cast<double>(H);
      for (int64_t k = 0; k < H; ++k) var += (x[k] - mean) * (x[k] - mean);
      var /= static_cast<double>(H);
      std::vector<double> h(static_cast<size_t>(H));
      for (int64_t k = 0; k < H; ++k)
        h[static_cast<size_t>(k)] = (x[k] - mean) / std::sqrt(var + cfg.layernorm_eps) * gamma[k] + beta[k];
      std::vector<double> hw(static_cast<size_t>(V)), hq(static_cast<size_t>(V));
      double top = 0;
      for (int64_t v = 0; v < V; ++v) {
        double sw = 0, sq = 0;
        for (int64_t k = 0; k < H; ++k) {
          sw += h[static_cast<size_t>(k)] * wte[static_cast<size_t>(v * H + k)];
          sq += h[static_cast<size_t>(k)] * q[static_cast<size_t>(v * H + k)];
        }
        hw[static_cast<size_t>(v)] = sw;
        hq[static_cast<size_t>(v)] = sq;
        top = std::max(top, std::fabs(sw));
      }
      const std::vector<double>& want = int8_head ? hq : hw;
      for (int64_t v = 0; v < V; ++v) {
        worst = std::max(worst, std::fabs(logits[static_cast<size_t>(b * V + v)] - want[static_cast<size_t>(v)]) / top);
        int8_effect = std::max(int8_effect, std::fabs(hq[static_cast<size_t>(v)] - hw[static_cast<size_t>(v)]) / top);
      }
    }
    std::printf("%s: logits within %.3g of the emulation's (relative to the row's largest |logit|; tolerance %.0e)\n",
                int8_head ? "--int8-lm-head, INT8 table" : "weight-only, fp32 table", worst, kHeadTol);
    EXPECT_LE(worst, kHeadTol) << "the logits are not the final hidden state times the "
                               << (int8_head ? "INT8" : "fp32") << " lm_head table";
  }
  std::printf("the INT8 table moves the logits by up to %.3g of the row's largest |logit|\n", int8_effect);
  EXPECT_GT(int8_effect, 10 * kHeadTol) << "the INT8 and fp32 tables give logits within the tolerance: the check "
                                           "could not tell an fp32 head";
}

}  // namespace
}  // namespace ftx
