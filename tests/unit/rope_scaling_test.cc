// Scaled rotary frequencies (lib/model/rope_scaling.h) against values worked out by hand from the
// published formulas, the CPU rotary op turning pairs by those frequencies, and config.ini's keys.
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

TEST(RopeScaling, OtherTypesAreRefusedByName) {
  EXPECT_EQ(rope_scaling_from_name("default", "x", "k"), RopeScalingType::kNone);
  try {
    rope_scaling_from_name("yarn", "config.json", "rope_scaling.rope_type");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.json: rope_scaling.rope_type = 'yarn' is not supported (supported: linear, llama3)");
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
