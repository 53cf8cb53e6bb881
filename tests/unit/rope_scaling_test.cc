// Scaled rotary frequencies (lib/model/rope_scaling.h) against values worked out by hand from the
// published formulas (linear, llama3) or computed by transformers 5.23.0 itself (yarn, longrope),
// the CPU rotary op turning pairs by those frequencies, and config.ini's keys.
#include <gtest/gtest.h>

#include <cmath>

#include "formats/error.h"
#include "lib/cpu/cpu_backend.h"
#include "lib/model/model_config.h"
#include "lib/model/rope_scaling.h"

namespace ftx {
namespace {

constexpr double kPi = 3.14159265358979323846;

TEST(RopeScaling, PlainFrequenciesArePowersOfTheBase) {
  const auto f = rope_inv_freq(8, 10000.0, {});
  ASSERT_EQ(f.size(), 4u);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_NEAR(f[1], 0.1, 1e-15);
  EXPECT_NEAR(f[2], 0.01, 1e-16);
  EXPECT_NEAR(f[3], 0.001, 1e-17);
}

TEST(RopeScaling, LinearDividesEveryFrequency) {
  const auto f = rope_inv_freq(8, 10000.0, RopeScaling::linear(4.0));
  EXPECT_DOUBLE_EQ(f[0], 0.25);
  EXPECT_NEAR(f[2], 0.0025, 1e-17);
}

TEST(RopeScaling, Llama3KeepsHighDividesLowAndBlendsBetween) {
  // base 10000, 8 dims: f = 1, 0.1, 0.01, 0.001; wavelengths 2π/f = 6.28, 62.8, 628, 6283.
  // L = 64, low 1, high 4: w < 16 kept, w > 64 divided by 4, 16..64 blended with
  // s = (L/w - 1) / (4 - 1).
  const auto f = rope_inv_freq(8, 10000.0, RopeScaling::llama3(4.0, 1.0, 4.0, 64));
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  const double w1 = 2 * kPi / 0.1, s1 = (64.0 / w1 - 1.0) / 3.0;
  EXPECT_NEAR(f[1], (1 - s1) * 0.1 / 4 + s1 * 0.1, 1e-15);
  EXPECT_NEAR(f[2], 0.01 / 4, 1e-17);
  EXPECT_NEAR(f[3], 0.001 / 4, 1e-18);
}

// Yarn and longrope against transformers 5.23.0 (torch 2.9.1): the numbers below are what
// scripts/fixtures/rope_scaling_reference.py prints, its _compute_yarn_parameters and
// _compute_longrope_parameters (modeling_rope_utils.py) called on a Qwen3Config / Phi3Config with
// the rope_parameters named in each case, their float32 dtypes replaced by float64 so that they can
// be held to 1e-12 (as shipped, in float32, they agree within 2.3e-7 relative, the attention
// factors exactly).
struct TransformersRope {
  const char* what;
  int64_t rot_dim;
  double base;
  RopeScaling scaling;
  std::vector<double> inv_freq;
  double attention_factor;
};

void expect_transformers(const TransformersRope& c) {
  SCOPED_TRACE(c.what);
  check_rope_scaling(c.scaling, "test", c.rot_dim);
  const std::vector<double> f = rope_inv_freq(c.rot_dim, c.base, c.scaling);
  ASSERT_EQ(f.size(), c.inv_freq.size());
  for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(f[i], c.inv_freq[i], 1e-12 * c.inv_freq[i]) << "pair " << i;
  EXPECT_NEAR(rope_attention_factor(c.scaling), c.attention_factor, 1e-12 * c.attention_factor);
  EXPECT_EQ(ops::RotaryFrequencies(c.base, c.scaling).magnitude, rope_attention_factor(c.scaling));
}

RopeScaling yarn(double factor, int64_t L, double beta_fast, double beta_slow, bool truncate) {
  RopeScaling s = RopeScaling::yarn(factor, L);
  s.beta_fast = beta_fast;
  s.beta_slow = beta_slow;
  s.truncate = truncate;
  return s;
}

TEST(RopeScaling, YarnMatchesTransformers) {
  RopeScaling mscaled = yarn(4.0, 8, 2.0, 0.5, false);
  mscaled.mscale = 0.707;
  mscaled.mscale_all_dim = 1.0;
  RopeScaling given = RopeScaling::yarn(8.0, 64);
  given.attention_factor = 0.8;
  const TransformersRope cases[] = {
      // Qwen3's published yarn: head_dim 128, rope_theta 1e6, factor 4, original 32768, beta 32/1.
      {"head 128, base 1e6, factor 4, L 32768", 128, 1e6, RopeScaling::yarn(4.0, 32768),
       {1.0, 0.8058421877614819, 0.6493816315762113, 0.5232991146814947, 0.4216965034285823, 0.3398208328942559,
        0.27384196342643613, 0.220673406908459, 0.17782794100389226, 0.14330125702369628, 0.1154781984689458,
        0.0930572040929699, 0.07498942093324558, 0.06042963902381328, 0.04869675251658631, 0.03924189758484536,
        0.03162277660168379, 0.025482967479793464, 0.02053525026457146, 0.016548170999431816, 0.01333521432163324,
        0.010746078283213174, 0.008659643233600653, 0.006978305848598663, 0.005375321490790102,
        0.004131738022518394, 0.003168422574711092, 0.0024234223804076435, 0.001848276564706878,
        0.0014051124815959123, 0.0010643609812470017, 0.0008029597275452302, 0.0006029411764705882,
        0.00045032357551376927, 0.00033424054566422634, 0.0002462584069089387, 0.00017984115587395423,
        0.00012993149493015669, 9.262301704129459e-05, 6.490394320837028e-05, 4.445698525097307e-05,
        3.582531425592407e-05, 2.8869549617236455e-05, 2.3264301023242475e-05, 1.8747355233311396e-05,
        1.5107409755953319e-05, 1.2174188129146578e-05, 9.810474396211341e-06, 7.905694150420949e-06,
        6.370741869948367e-06, 5.133812566142866e-06, 4.137042749857953e-06, 3.33380358040831e-06,
        2.6865195708032935e-06, 2.1649108084001634e-06, 1.744576462149666e-06, 1.4058533129758728e-06,
        1.1328959094002045e-06, 9.129353181370943e-07, 7.356817940523205e-07, 5.928434264154138e-07,
        4.777382437426101e-07, 3.84981631514873e-07, 3.102344401879299e-07},
       1.138629436111989},
      // tests/fixtures/hf5 qwen3_yarn's rotary: beta_fast 2, beta_slow 0.5, truncated to [0, 2].
      {"head 16, base 100, factor 4, L 8, beta 2/0.5", 16, 100.0, yarn(4.0, 8, 2.0, 0.5, true),
       {1.0, 0.3514633282439682, 0.07905694150420949, 0.044456985250973066, 0.025, 0.014058533129758726,
        0.007905694150420948, 0.004445698525097307},
       1.138629436111989},
      {"as above, truncate false, mscale 0.707, mscale_all_dim 1", 16, 100.0, mscaled,
       {1.0, 0.30260104636725826, 0.07905694150420949, 0.044456985250973066, 0.025, 0.014058533129758726,
        0.007905694150420948, 0.004445698525097307},
       0.964326914892074},
      {"head 32, partial 0.75 (24 dims), base 10000, factor 8, L 64, attention_factor 0.8", 24, 10000.0, given,
       {1.0, 0.3626241276259984, 0.12118695131429347, 0.034375, 0.005801986042015975, 0.002693043362539854,
        0.00125, 0.0005801986042015972, 0.00026930433625398553, 0.000125, 5.801986042015971e-05,
        2.6930433625398556e-05},
       0.8},
      {"head 16, base 10000, factor 2, L 40, beta 3/3, truncate false: low == high", 16, 10000.0,
       yarn(2.0, 40, 3.0, 3.0, false),
       {1.0, 0.15811388300841897, 0.05, 0.015811388300841896, 0.005, 0.0015811388300841895, 0.0005,
        0.00015811388300841897},
       1.0693147180559945}};
  for (const TransformersRope& c : cases) expect_transformers(c);
}

TEST(RopeScaling, LongropeMatchesTransformersWithShortFactors) {
  // factor 4 = max_position_embeddings 128 / original 32 (Phi3Config sets no factor): attention
  // factor derived, sqrt(1 + ln 4 / ln 32).
  const RopeScaling derived = RopeScaling::longrope({1.0, 1.25, 2.5, 6.0}, {1.5, 3.0, 9.0, 20.0}, 32, 4.0);
  RopeScaling given = RopeScaling::longrope({1.0, 1.1, 1.5, 2.0, 3.5, 5.0}, {1.0, 2.0, 4.0, 8.0, 16.0, 32.0}, 32, 4.0);
  given.attention_factor = 1.25;
  const TransformersRope cases[] = {
      // tests/fixtures/hf5 phi3_longrope's and phi4mini's rotaries.
      {"head 16, partial 0.5, base 10000, L 32, max 128", 8, 10000.0, derived,
       {1.0, 0.08, 0.004, 0.00016666666666666666}, 1.1832159566199232},
      {"head 16, partial 0.75, base 10000, attention_factor 1.25", 12, 10000.0, given,
       {1.0, 0.1958576990938076, 0.030943925557418532, 0.005, 0.0006155527685805384, 9.283177667225553e-05}, 1.25},
      {"head 8, base 500, factor 1 given: attention factor 1", 8, 500.0,
       RopeScaling::longrope({1.0, 2.0, 3.0, 4.0}, {1.0, 2.0, 3.0, 4.0}, 64, 1.0),
       {1.0, 0.10573712634405641, 0.014907119849998596, 0.0023643540225079395}, 1.0}};
  for (const TransformersRope& c : cases) expect_transformers(c);
}

TEST(RopeScaling, OnlyYarnAndLongropeScaleTheMagnitude) {
  EXPECT_EQ(rope_attention_factor({}), 1.0);
  EXPECT_EQ(rope_attention_factor(RopeScaling::linear(4)), 1.0);
  EXPECT_EQ(rope_attention_factor(RopeScaling::llama3(8, 1, 4, 8192)), 1.0);
  EXPECT_EQ(ops::RotaryFrequencies(10000.0).magnitude, 1.0);
  EXPECT_EQ(rope_attention_factor(RopeScaling::yarn(1.0, 64)), 1.0);  // factor <= 1: get_mscale's 1
}

TEST(RopeScaling, LongropeRefusesLengthsBeyondTheOriginalContext) {
  const RopeScaling s = RopeScaling::longrope({1, 2}, {3, 4}, 32, 4.0);
  // transformers keeps short_factor while max(position) + 1 <= original_max_position_embeddings.
  EXPECT_FALSE(rope_beyond_original(s, 32));
  EXPECT_TRUE(rope_beyond_original(s, 33));
  EXPECT_FALSE(rope_beyond_original(RopeScaling::yarn(4, 8), 1000));  // yarn does not switch
  EXPECT_FALSE(rope_beyond_original(RopeScaling::llama3(8, 1, 4, 16), 1000));
  EXPECT_EQ(rope_beyond_original_message(s, 33),
            "a sequence of 33 positions is longer than the longrope rotary's original_max_position_embeddings = 32 "
            "(config.ini rotary_scaling_original_max_positions), beyond which the model rotates by long_factor, which "
            "ftx does not compute; keep prompt + new tokens within 32");
}

TEST(RopeScaling, YarnAndLongropeFieldsAreChecked) {
  RopeScaling y = RopeScaling::yarn(4, 0);
  EXPECT_THROW(check_rope_scaling(y, "x"), Error);  // no original_max_position_embeddings
  y.original_max_position_embeddings = 64;
  y.attention_factor = 0.0;
  EXPECT_THROW(check_rope_scaling(y, "x"), Error);
  y.attention_factor.reset();
  y.beta_slow = std::nan("");
  EXPECT_THROW(check_rope_scaling(y, "x"), Error);
  const RopeScaling l = RopeScaling::longrope({1, 2, 3}, {1, 2, 3}, 32, 4.0);
  check_rope_scaling(l, "x", 6);
  try {
    check_rope_scaling(l, "config.json", 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: rope scaling longrope: short_factor and long_factor must hold 4 numbers "
                           "(rotary dims 8 / 2), not 3 and 3");
  }
  EXPECT_THROW(rope_inv_freq(8, 10000.0, l), Error);
  EXPECT_THROW(check_rope_scaling(RopeScaling::longrope({1, -2}, {1, 2}, 32, 4.0), "x"), Error);
}

TEST(RopeScaling, OtherTypesAreRefusedByName) {
  EXPECT_EQ(rope_scaling_from_name("default", "x", "k"), RopeScalingType::kNone);
  try {
    rope_scaling_from_name("yarn", "config.json", "rope_scaling.rope_type");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: rope_scaling.rope_type = 'yarn' is not supported (supported: linear, llama3)");
  }
  // A reader that takes yarn and longrope names them; dynamic NTK stays refused by its name.
  const std::vector<RopeScalingType> all = {RopeScalingType::kLinear, RopeScalingType::kLlama3,
                                            RopeScalingType::kYarn, RopeScalingType::kLongrope};
  EXPECT_EQ(rope_scaling_from_name("yarn", "x", "k", all), RopeScalingType::kYarn);
  EXPECT_EQ(rope_scaling_from_name("longrope", "x", "k", all), RopeScalingType::kLongrope);
  try {
    rope_scaling_from_name("dynamic", "config.json", "rope_parameters.rope_type", all);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: rope_parameters.rope_type = 'dynamic' is not supported (supported: linear, "
                           "llama3, yarn, longrope)");
  }
}

TEST(RopeScaling, CpuRotaryTurnsByTheScaledFrequencies) {
  cpu::CpuBackend be(1);
  const RopeScaling s = RopeScaling::linear(2.0);
  int32_t pos = 3;
  float y[4] = {1, 2, 3, 4};
  // Half-split pairs (0,2), (1,3); base 100: f = 1, 0.1, halved: angles 1.5 and 0.15.
  be.rotary(y, 1, 4, &pos, 1, 4, 4, RotaryStyle::kHalfSplit, ops::RotaryFrequencies(100.0, s));
  const double a0 = 1.5, a1 = 0.15;
  EXPECT_NEAR(y[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(y[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(y[3], 4 * std::cos(a1) + 2 * std::sin(a1), 1e-6);
}

TEST(RopeScaling, CpuRotaryScalesCosAndSinByTheMagnitude) {
  cpu::CpuBackend be(1);
  int32_t pos = 3;
  float y[6] = {1, 2, 3, 4, 5, 6};
  // 4 of 6 dims rotary (half-split pairs (0,2), (1,3)); dims 4 and 5 are not scaled.
  ops::RotaryFrequencies f(100.0);
  f.magnitude = 1.5;
  be.rotary(y, 1, 6, &pos, 1, 6, 4, RotaryStyle::kHalfSplit, f);
  const double a0 = 3.0, a1 = 0.3, m = 1.5;
  EXPECT_NEAR(y[0], m * (1 * std::cos(a0) - 3 * std::sin(a0)), 1e-6);
  EXPECT_NEAR(y[2], m * (3 * std::cos(a0) + 1 * std::sin(a0)), 1e-6);
  EXPECT_NEAR(y[1], m * (2 * std::cos(a1) - 4 * std::sin(a1)), 1e-6);
  EXPECT_NEAR(y[3], m * (4 * std::cos(a1) + 2 * std::sin(a1)), 1e-6);
  EXPECT_EQ(y[4], 5.0f);
  EXPECT_EQ(y[5], 6.0f);
}

ModelConfig rope_model() {
  ModelConfig c;
  c.head_num = 4;
  c.size_per_head = 8;
  c.kv_head_num = 2;
  c.inter_size = 64;
  c.num_layer = 2;
  c.vocab_size = 64;
  c.position = PositionEmbedding::kRotary;
  c.rotary_dim = 8;
  c.activation = Activation::kSwiGlu;
  c.normalization = Normalization::kRmsNorm;
  c.has_bias = false;
  return c;
}

TEST(RopeScaling, ConfigIniKeepsScalingQkvBiasAndWindow) {
  ModelConfig c = rope_model();
  c.rope_scaling = RopeScaling::llama3(8, 1, 4, 8192);
  c.qkv_bias = true;
  c.sliding_window = 4096;
  const ModelConfig back = ModelConfig::from_ini(c.to_ini());
  EXPECT_TRUE(back.rope_scaling == c.rope_scaling);
  EXPECT_TRUE(back.qkv_bias);
  EXPECT_EQ(back.sliding_window, 4096);
  EXPECT_EQ(ModelConfig::from_ini(rope_model().to_ini()).rope_scaling.type, RopeScalingType::kNone);
}

// Qwen3's yarn (every field, the attention factor given or derived) and its q/k norm flag survive
// config.ini, and a yarn without its original length is refused naming the key.
TEST(RopeScaling, I46_ConfigIniKeepsYarnAndQkNorm) {
  ModelConfig c = rope_model();
  c.rope_scaling = RopeScaling::yarn(4, 8);
  c.rope_scaling.beta_fast = 2;
  c.rope_scaling.beta_slow = 0.5;
  c.rope_scaling.mscale = 0.707;
  c.rope_scaling.mscale_all_dim = 1.1;
  c.rope_scaling.truncate = false;
  c.qk_norm = true;
  ModelConfig back = ModelConfig::from_ini(IniFile::parse(c.to_ini().to_string(), "x/config.ini"));
  EXPECT_TRUE(back.rope_scaling == c.rope_scaling);
  EXPECT_FALSE(back.rope_scaling.attention_factor.has_value());
  EXPECT_TRUE(back.qk_norm);
  c.rope_scaling.attention_factor = 1.25;
  back = ModelConfig::from_ini(IniFile::parse(c.to_ini().to_string(), "x/config.ini"));
  EXPECT_TRUE(back.rope_scaling == c.rope_scaling);
  EXPECT_EQ(c.to_ini().get("gpt", "rotary_scaling_type"), "yarn");
  EXPECT_EQ(c.to_ini().get("gpt", "qk_norm"), "1");
  EXPECT_FALSE(rope_model().to_ini().has("gpt", "qk_norm"));
  EXPECT_FALSE(ModelConfig::from_ini(rope_model().to_ini()).qk_norm);
  std::string text = c.to_ini().to_string();
  const size_t at = text.find("rotary_scaling_original_max_positions");
  text.erase(at, text.find('\n', at) + 1 - at);
  try {
    ModelConfig::from_ini(IniFile::parse(text, "x/config.ini"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary_scaling_original_max_positions"), std::string::npos) << e.what();
  }
}

TEST(RopeScaling, ConfigIniRefusesUnknownTypeAndMissingFields) {
  IniFile ini = rope_model().to_ini();
  ini.set("gpt", "rotary_scaling_type", "dynamic");
  EXPECT_THROW(ModelConfig::from_ini(ini), Error);
  ini.set("gpt", "rotary_scaling_type", "llama3");
  ini.set("gpt", "rotary_scaling_factor", "8");
  try {
    ModelConfig::from_ini(ini);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary_scaling_low_freq_factor"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ftx
