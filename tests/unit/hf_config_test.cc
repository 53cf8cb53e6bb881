// config.json's rotary settings as transformers 4.x and 5.x write them (lib/convert/hf_config.h):
// read from every place, refused where places disagree or the type is not one ftx computes; the
// typed keys (lib/convert/hf_common.h), refused in config.json's own names; the family registry
// (lib/convert/hf/family.h) and the key tables against man/ftx-convert-hf.1, which prints them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "formats/error.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"
#include "lib/convert/hf_config.h"
#include "lib/convert/hf_families.h"

namespace ftx {
namespace {

using json = nlohmann::json;

const hf::RopeKeys kNeox{{"rotary_emb_base"}, {"rotary_pct"}, 10000.0, 0.25};

std::string error_of(const json& j, const hf::RopeKeys& k = kNeox) {
  try {
    hf::read_rope(j, "config.json", k);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, RopeFromEveryPlace) {
  // transformers 4.45: old and new names side by side.
  auto r = hf::read_rope(json::parse(R"({"rotary_pct": 0.5, "partial_rotary_factor": 0.5, "rotary_emb_base": 5000,
                                          "rope_theta": 5000, "rope_scaling": null})"), "c", kNeox);
  EXPECT_EQ(r.partial_factor, 0.5);
  EXPECT_EQ(r.theta, 5000);
  // transformers 5: rope_parameters only (issue 37's GPT-NeoX).
  r = hf::read_rope(json::parse(R"({"rope_parameters": {"partial_rotary_factor": 0.5, "rope_theta": 5000.0,
                                                        "rope_type": "default"}})"), "c", kNeox);
  EXPECT_EQ(r.partial_factor, 0.5);
  EXPECT_EQ(r.theta, 5000);
  EXPECT_EQ(r.scaling.type, RopeScalingType::kNone);
  // Nothing: the architecture's defaults.
  r = hf::read_rope(json::object(), "c", kNeox);
  EXPECT_EQ(r.partial_factor, 0.25);
  EXPECT_EQ(r.theta, 10000);
}

// yarn where the family accepts it (Qwen3), with transformers 5.23's defaults: original absent ->
// max_position_embeddings, factor absent -> max / original, beta_fast / beta_slow 0 or null -> 32 / 1,
// mscale absent -> 0, truncate absent -> true, attention_factor absent -> derived.
TEST(HfConfig, I46_YarnWithTransformersDefaults) {
  hf::RopeKeys k{{}, {}, 10000.0, 1.0, {RopeScalingType::kYarn}, 256};
  auto r = hf::read_rope(json::parse(R"({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 2,
                                      "beta_slow": 0.5, "original_max_position_embeddings": 8, "rope_theta": 100.0}})"),
                         "c", k);
  EXPECT_TRUE(r.scaling == [] {
    RopeScaling s = RopeScaling::yarn(4.0, 8);
    s.beta_fast = 2;
    s.beta_slow = 0.5;
    return s;
  }());
  EXPECT_EQ(r.theta, 100.0);
  r = hf::read_rope(json::parse(R"({"rope_parameters": {"rope_type": "yarn", "beta_fast": 0, "beta_slow": null,
                                  "original_max_position_embeddings": 64, "mscale": 0.707, "mscale_all_dim": 1.0,
                                  "truncate": false, "attention_factor": 1.5}})"), "c", k);
  EXPECT_EQ(r.scaling.factor, 4.0);  // 256 / 64
  EXPECT_EQ(r.scaling.beta_fast, 32.0);
  EXPECT_EQ(r.scaling.beta_slow, 1.0);
  EXPECT_EQ(r.scaling.mscale, 0.707);
  EXPECT_EQ(r.scaling.mscale_all_dim, 1.0);
  EXPECT_FALSE(r.scaling.truncate);
  EXPECT_EQ(r.scaling.attention_factor, std::optional<double>(1.5));
  r = hf::read_rope(json::parse(R"({"rope_parameters": {"rope_type": "yarn", "factor": 2.0}})"), "c", k);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 256);
  EXPECT_TRUE(r.scaling.truncate);
  EXPECT_FALSE(r.scaling.attention_factor.has_value());
  EXPECT_EQ(error_of(json::parse(R"({"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "truncate": 1}})"), k),
            "config.json: rope_parameters.truncate = 1 is not true or false");
}

TEST(HfConfig, RopeScalingOfBothVersions) {
  auto r = hf::read_rope(json::parse(R"({"rope_scaling": {"type": "linear", "factor": 2.0}})"), "c", kNeox);
  EXPECT_EQ(r.scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(r.scaling.factor, 2.0);
  r = hf::read_rope(json::parse(R"({"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_theta": 500000.0}})"), "c", kNeox);
  EXPECT_EQ(r.scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(r.theta, 500000);
}

// rope_parameters with one set per layer type (transformers 5's Gemma 3): RopeKeys::layer_type reads
// its own set; without it the sets must be the same (issue 46).
TEST(HfConfig, I46_RopeSetPerLayerType) {
  const json j = json::parse(R"({"rope_parameters": {
      "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 10000.0}}})");
  hf::RopeKeys k = kNeox;
  k.layer_type = "full_attention";
  const hf::HfRope r = hf::read_rope(j, "c", k);
  EXPECT_EQ(r.theta, 10000.0);
  EXPECT_EQ(r.scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(r.scaling.factor, 8.0);
  k.layer_type = "sliding_attention";
  EXPECT_EQ(hf::read_rope(j, "c", k).theta, 100.0);
  k.layer_type = "chunked_attention";
  EXPECT_EQ(error_of(j, k).find("config.json: rope_parameters = {"), 0u) << error_of(j, k);
  EXPECT_NE(error_of(j, k).find("has no chunked_attention set"), std::string::npos) << error_of(j, k);
  EXPECT_EQ(error_of(j), "config.json: rope_parameters.sliding_attention differs from rope_parameters.full_attention "
                         "(rotary settings per layer type are not supported)");
}

TEST(HfConfig, RopeRefusalsNameTheKeyAndValue) {
  EXPECT_NE(error_of(json::parse(R"({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}})")).find("'dynamic'"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"rope_scaling": {"type": "yarn", "factor": 2.0}})")).find("rope_scaling.type"),
            std::string::npos);
  // Two places that disagree (transformers 5 takes rotary_pct, 4.45 partial_rotary_factor).
  const std::string e = error_of(json::parse(R"({"rotary_pct": 0.5, "partial_rotary_factor": 0.25})"));
  EXPECT_NE(e.find("partial_rotary_factor = 0.25"), std::string::npos) << e;
  EXPECT_NE(e.find("rotary_pct = 0.5"), std::string::npos) << e;
  EXPECT_NE(error_of(json::parse(R"({"rope_theta": 10000, "rope_parameters": {"rope_theta": 5000}})")).find("disagree"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"rope_parameters": {"rope_type": "default", "mrope_section": [1, 2]}})"))
                .find("rope_parameters.mrope_section"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}})")).find("low_freq_factor"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"rope_parameters": {"rope_type": "default", "factor": 4.0}})")).find("factor"),
            std::string::npos);
}

// longrope where the family accepts it (Phi-3), as transformers 5.23 reads it: the top-level
// original_max_position_embeddings (the family's 4096 when absent) over rope_parameters', which must
// agree; factor absent -> max / original; a factor given that differs from max / original, with no
// attention_factor, refused (4.x derived the attention factor from the ratio); short_factor and
// long_factor required; either list with another rope type refused.
TEST(HfConfig, I46_LongropeWithTransformersDefaults) {
  hf::RopeKeys k{{}, {}, 10000.0, 1.0, {RopeScalingType::kLongrope}, 128, 4096};
  auto r = hf::read_rope(json::parse(R"({"original_max_position_embeddings": 32, "rope_parameters": {"rope_type":
      "longrope", "short_factor": [1, 2], "long_factor": [3, 4], "original_max_position_embeddings": 32}})"), "c", k);
  EXPECT_TRUE(r.scaling == RopeScaling::longrope({1, 2}, {3, 4}, 32, 4.0));
  EXPECT_FALSE(r.scaling.attention_factor.has_value());
  r = hf::read_rope(json::parse(R"({"rope_parameters": {"rope_type": "longrope", "short_factor": [1, 2],
      "long_factor": [3, 4], "attention_factor": 1.25, "factor": 8}})"), "c", k);
  EXPECT_EQ(r.scaling.original_max_position_embeddings, 4096);
  EXPECT_EQ(r.scaling.factor, 8.0);
  EXPECT_EQ(r.scaling.attention_factor, std::optional<double>(1.25));
  EXPECT_EQ(error_of(json::parse(R"({"rope_parameters": {"rope_type": "longrope", "short_factor": [1, 2],
      "long_factor": [3, 4], "original_max_position_embeddings": 32}})"), k),
            "config.json: original_max_position_embeddings (absent: 4096) = 4096 and "
            "rope_parameters.original_max_position_embeddings = 32 disagree (which one transformers uses depends on "
            "its version); make them equal");
  EXPECT_EQ(error_of(json::parse(R"({"original_max_position_embeddings": 32, "rope_parameters": {"rope_type":
      "longrope", "short_factor": [1, 2], "long_factor": [3, 4], "factor": 2}})"), k),
            "config.json: rope_parameters.factor = 2.0 is not max_position_embeddings / original_max_position_embeddings "
            "= 4.0 (transformers 4.x derives the attention factor from the ratio, 5.x from rope_parameters.factor); give "
            "attention_factor, or make them agree");
  EXPECT_EQ(error_of(json::parse(R"({"rope_parameters": {"rope_type": "longrope", "long_factor": [3, 4]}})"), k),
            "config.json: rope scaling longrope needs short_factor");
  EXPECT_EQ(error_of(json::parse(R"({"rope_parameters": {"rope_type": "longrope", "short_factor": [1, 0],
      "long_factor": [3, 4]}})"), k),
            "config.json: rope_parameters.short_factor holds 0, not a positive number");
  EXPECT_EQ(error_of(json::parse(R"({"rope_scaling": {"type": "linear", "factor": 2, "short_factor": [1, 2]}})")),
            "config.json: rope_scaling.short_factor is given with rope_type linear (only longrope reads it)");
  // su and yarn are Phi3Config's older names of longrope, where the family says so.
  hf::RopeKeys phi3 = k;
  phi3.type_aliases = {{"su", RopeScalingType::kLongrope}, {"yarn", RopeScalingType::kLongrope}};
  r = hf::read_rope(json::parse(R"({"original_max_position_embeddings": 32, "rope_scaling": {"type": "su",
      "short_factor": [1, 2], "long_factor": [3, 4]}})"), "c", phi3);
  EXPECT_TRUE(r.scaling == RopeScaling::longrope({1, 2}, {3, 4}, 32, 4.0));
  EXPECT_EQ(error_of(json::parse(R"({"rope_scaling": {"type": "su", "short_factor": [1, 2], "long_factor": [3, 4]}})"), k),
            "config.json: rope_scaling.type = 'su' is not supported (supported: longrope)");
}

// rope_theta and partial_rotary_factor inside 4.x's rope_scaling: transformers 5 moves rope_scaling
// into rope_parameters and reads them there, so ftx does too (a top-level copy must agree).
TEST(HfConfig, I46_ThetaAndPartialInsideRopeScaling) {
  auto r = hf::read_rope(json::parse(R"({"rope_scaling": {"type": "linear", "factor": 2, "rope_theta": 5000,
      "partial_rotary_factor": 0.5}})"), "c", kNeox);
  EXPECT_EQ(r.theta, 5000.0);
  EXPECT_EQ(r.partial_factor, 0.5);
  EXPECT_EQ(r.partial_where, "rope_scaling.partial_rotary_factor");
  EXPECT_EQ(error_of(json::parse(R"({"rope_theta": 10000, "rope_scaling": {"type": "linear", "factor": 2,
      "rope_theta": 5000}})")),
            "config.json: rope_theta = 10000 and rope_scaling.rope_theta = 5000 disagree (which one transformers uses "
            "depends on its version); make them equal");
}

// longrope (Phi-3's; "su" is its 4.x name) and the others ftx does not compute are refused by their
// type, before the fields that come with them (long_factor, beta_fast) could be blamed.
TEST(HfConfig, R3_UnsupportedRopeTypeIsRefusedByItsName) {
  const std::string longrope = R"({"rope_scaling": {"rope_type": "longrope", "short_factor": [1, 1], "long_factor": [2, 2],
                                                     "original_max_position_embeddings": 64, "factor": 2.0}})";
  EXPECT_EQ(error_of(json::parse(longrope)),
            "config.json: rope_scaling.rope_type = 'longrope' is not supported (supported: linear, llama3)");
  EXPECT_EQ(error_of(json::parse(R"({"rope_scaling": {"type": "su", "short_factor": [1, 1], "long_factor": [2, 2]}})")),
            "config.json: rope_scaling.type = 'su' is not supported (supported: linear, llama3)");
  EXPECT_EQ(error_of(json::parse(R"({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32,
                                                         "original_max_position_embeddings": 64}})")),
            "config.json: rope_parameters.rope_type = 'yarn' is not supported (supported: linear, llama3)");
  EXPECT_EQ(error_of(json::parse(R"({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}})")),
            "config.json: rope_parameters.rope_type = 'dynamic' is not supported (supported: linear, llama3)");
  // A field ftx does not read beside a type it computes is still named.
  EXPECT_EQ(error_of(json::parse(R"({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "foo": 1}})")),
            "config.json: rope_scaling.foo = 1 is not supported (ftx reads rope_type, rope_theta, "
            "partial_rotary_factor, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings, "
            "beta_fast, beta_slow, mscale, mscale_all_dim, truncate, attention_factor, short_factor, long_factor)");
}

template <class F>
std::string key_error(F read) {
  try {
    read();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A key that is present with the wrong JSON type says so, in every typed reading of config.json.
TEST(HfConfig, R18_WrongTypeSaysSo) {
  const json j = json::parse(R"({"hidden_size": "64", "n_embd": 64.0, "head_dim": "8", "rms_norm_eps": "1e-5",
                                 "hidden_act": 1, "absent_ok": null})");
  EXPECT_EQ(key_error([&] { hf::dim_key(j, "hidden_size", "c/config.json"); }),
            "c/config.json: hidden_size = \"64\" is not an integer");
  EXPECT_EQ(key_error([&] { hf::dim_key(j, "n_embd", "c/config.json"); }), "c/config.json: n_embd = 64.0 is not an integer");
  EXPECT_EQ(key_error([&] { hf::dim_key_any(j, {"n_embed", "hidden_size"}, "c"); }),
            "c: hidden_size = \"64\" is not an integer");
  EXPECT_EQ(key_error([&] { hf::int_or(j, "head_dim", 8, "c"); }), "c: head_dim = \"8\" is not an integer");
  EXPECT_EQ(key_error([&] { hf::num_or(j, "rms_norm_eps", 1e-6, "c"); }), "c: rms_norm_eps = \"1e-5\" is not a number");
  EXPECT_EQ(key_error([&] { hf::eps_or(j, "rms_norm_eps", 1e-6, "c"); }), "c: rms_norm_eps = \"1e-5\" is not a number");
  EXPECT_EQ(key_error([&] { hf::str_or(j, "hidden_act", "silu", "c"); }), "c: hidden_act = 1 is not a string");
  // Absent is "missing"; absent or null takes the default where there is one.
  EXPECT_EQ(key_error([&] { hf::dim_key(j, "vocab_size", "c"); }), "c: missing integer key 'vocab_size'");
  EXPECT_EQ(hf::int_or(j, "absent_ok", 7, "c"), 7);
  EXPECT_EQ(hf::dim_or(j, "n_inner", 256, "c"), 256);
}

// Sizes are checked where config.json is read, in its key names (not FT's num_layer).
TEST(HfConfig, R19_SizesAreCheckedInConfigJsonsNames) {
  const json j = json::parse(R"({"num_hidden_layers": -1, "n_inner": 0, "vocab_size": 100000000,
                                 "max_position_embeddings": -2})");
  EXPECT_EQ(key_error([&] { hf::dim_key(j, "num_hidden_layers", "m/config.json"); }),
            "m/config.json: num_hidden_layers = -1 is not a positive integer");
  EXPECT_EQ(key_error([&] { hf::dim_or(j, "n_inner", 64, "c"); }), "c: n_inner = 0 is not a positive integer");
  EXPECT_EQ(key_error([&] { hf::dim_key(j, "vocab_size", "c"); }),
            "c: vocab_size = 100000000 is implausibly large (ftx's limit is 16777216)");
  EXPECT_EQ(key_error([&] { hf::positions_or(j, "max_position_embeddings", "c"); }),
            "c: max_position_embeddings = -2 is negative");
  EXPECT_EQ(hf::positions_or(json::parse(R"({"max_position_embeddings": 0})"), "max_position_embeddings", "c"), 0);
  // The rotary width, from partial_rotary_factor (or its older name), before it becomes rotary_dim.
  const hf::HfRope tenth = hf::read_rope(json::parse(R"({"rotary_pct": 0.1})"), "c", kNeox);
  EXPECT_EQ(key_error([&] { hf::rotary_dims(tenth, 16, "c"); }),
            "c: rotary dimensions int(head size 16 x rotary_pct 0.1) = 1 is not an even number > 0");
  EXPECT_EQ(hf::rotary_dims(hf::read_rope(json::object(), "c", kNeox), 16, "c"), 4);
}

// eps 0: transformers runs it, but a row whose variance is 0 (all zeros) then normalises to
// 0 / sqrt(0) = NaN in ftx's norms as in torch's; refused in config.json's name.
TEST(HfConfig, R34_NormEpsilonIsCheckedInConfigJsonsName) {
  EXPECT_EQ(key_error([&] { hf::eps_or(json::parse(R"({"rms_norm_eps": 0})"), "rms_norm_eps", 1e-6, "e/config.json"); }),
            "e/config.json: rms_norm_eps = 0 is not in (0, 1] (the norm divides by sqrt(variance + eps): with eps 0 a "
            "row whose variance is 0, e.g. all zeros, becomes NaN)");
  EXPECT_EQ(key_error([&] { hf::eps_or(json::parse(R"({"layer_norm_eps": -1e-5})"), "layer_norm_eps", 1e-5, "c"); }),
            "c: layer_norm_eps = -1e-05 is not in (0, 1]");
  EXPECT_EQ(hf::eps_or(json::parse(R"({"layer_norm_epsilon": 1e-6})"), "layer_norm_epsilon", 1e-5, "c"), 1e-6);
  EXPECT_EQ(hf::eps_or(json::object(), "rms_norm_eps", 1e-6, "c"), 1e-6);
}

// A boolean given as a string (Python would read "false" as true) or a number is refused, not
// taken as the default.
TEST(HfConfig, R28_BooleanKeyOfAnotherTypeIsRefused) {
  EXPECT_EQ(key_error([&] { hf::bool_or(json::parse(R"({"tie_word_embeddings": "false"})"), "tie_word_embeddings", false, "c"); }),
            "c: tie_word_embeddings = \"false\" is not a boolean (true or false)");
  EXPECT_EQ(key_error([&] { hf::bool_or(json::parse(R"({"attention_bias": 0})"), "attention_bias", false, "c"); }),
            "c: attention_bias = 0 is not a boolean (true or false)");
  EXPECT_TRUE(hf::bool_or(json::parse(R"({"tie_word_embeddings": null})"), "tie_word_embeddings", true, "c"));
  EXPECT_FALSE(hf::bool_or(json::parse(R"({"tie_word_embeddings": false})"), "tie_word_embeddings", true, "c"));
}

TEST(HfConfig, UnknownKeysAreListed) {
  const auto u = hf::unknown_keys(json::parse(R"({"model_type": "llama", "hidden_size": 8, "dtype": "bfloat16",
                                                  "attn_logit_softcapping": 30.0, "use_cache": true})"),
                                  "llama");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0], "attn_logit_softcapping");
}

std::string read_source(const std::string& rel) {
  std::ifstream in(std::string(FTX_TEST_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Each family registers itself from its own file (lib/convert/hf/<family>.cc): one the linker
// dropped, or one left out of the build, would take its model_types with it. So this list is
// written by hand, here and nowhere else: a new family adds its line.
TEST(HfFamilies, EveryFamilyIsRegistered) {
  const std::vector<std::pair<std::string, std::string>> types = {
      {"gpt2", "gpt2"},         {"gpt_bigcode", "gpt_bigcode"}, {"santacoder", "gpt_bigcode"},
      {"starcoder", "gpt_bigcode"}, {"gptj", "gptj"},           {"gpt-j", "gptj"},
      {"gpt_neox", "gpt_neox"}, {"gptneox", "gpt_neox"},        {"gpt-neox", "gpt_neox"},
      {"GPTNeoX", "gpt_neox"},  {"bloom", "bloom"},             {"opt", "opt"},
      {"xglm", "xglm"},         {"llama", "llama"},             {"mistral", "mistral"},
      {"qwen2", "qwen2"},       {"qwen3", "qwen3"},           {"phi3", "phi3"},
      {"gemma2", "gemma2"},     {"gemma3_text", "gemma3_text"}, {"mixtral", "mixtral"},
      {"qwen2_moe", "qwen2_moe"}, {"qwen3_moe", "qwen3_moe"},
  };
  for (const auto& [type, family] : types) {
    const hf::HfFamily* f = hf::find_family(type);
    ASSERT_NE(f, nullptr) << type << " is not registered (is lib/convert/hf/ linked whole-archive?)";
    EXPECT_EQ(f->model_type, family) << type;
    EXPECT_FALSE(f->keys().empty()) << type;
  }
  std::vector<std::string> names;
  for (const hf::HfFamily& f : hf::families()) names.push_back(f.model_type);
  EXPECT_EQ(names, (std::vector<std::string>{"gpt2", "gpt_bigcode", "gptj", "gpt_neox", "bloom", "opt", "xglm",
                                             "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2",
                                             "gemma3_text", "mixtral", "qwen2_moe", "qwen3_moe"}));
  EXPECT_EQ(hf::find_family("gemma"), nullptr);
  EXPECT_EQ(hf::find_family("gemma3"), nullptr);  // the multimodal model: its text model is gemma3_text
  EXPECT_EQ(hf::supported_list(),
            "gpt2, gpt_bigcode (aliases: santacoder, starcoder), gptj, gpt_neox, bloom, opt, xglm, llama, mistral, qwen2, qwen3, "
            "phi3, gemma2, gemma3_text, mixtral, qwen2_moe, qwen3_moe");
  EXPECT_EQ(hf::model_flag_list(),
            "gpt2, gpt_bigcode, santacoder, starcoder, gptj, gpt_neox, bloom, opt, xglm, llama, mistral, qwen2, qwen3, phi3, "
            "gemma2, gemma3_text, mixtral, qwen2_moe, qwen3_moe");
}

// The man page's CONFIG.JSON KEYS section is what the registry prints (`ftx convert-hf
// --print-man-tables`), byte for byte: every key of every family's table, each key it reads with
// the table's note (D11: llama's list carried Qwen2's attention_bias note, which refuses false). A
// family added, or a key changed, without the man page fails here.
TEST(HfConfig, D11_ManPageSaysWhatTheTablesSay) {
  const std::string man = read_source("man/ftx-convert-hf.1");
  const size_t sh = man.find(".SH CONFIG.JSON KEYS\n");
  ASSERT_NE(sh, std::string::npos);
  const size_t from = man.find(".SS ", sh);
  const size_t to = man.find(".SH ", from);
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(man.substr(from, to - from), hf::man_key_tables())
      << "regenerate the section with `ftx convert-hf --print-man-tables`";
}

// The man page's SUPPORTED MODELS section is the registry's too (a model_type per family, its
// aliases and example checkpoints).
TEST(HfConfig, ManPageSupportedModelsAreTheRegistrys) {
  const std::string man = read_source("man/ftx-convert-hf.1");
  const size_t from = man.find(".SH SUPPORTED MODELS\n");
  ASSERT_NE(from, std::string::npos);
  const size_t to = man.find(".SH ", from + 4);
  EXPECT_EQ(man.substr(from, to - from), hf::man_supported_table())
      << "regenerate the section with `ftx convert-hf --print-man-tables`";
}

// The man page names the families the registry has: NAME's list and --model's values.
TEST(HfConfig, ManPageListsTheRegistrysFamilies) {
  std::string man;
  for (const char ch : read_source("man/ftx-convert-hf.1"))  // roff's \- is a plain dash here
    if (ch != '\\') man += ch;
  std::string flat;  // runs of white space as one space
  std::istringstream is(man);
  for (std::string w; is >> w;) flat += (flat.empty() ? "" : " ") + w;
  EXPECT_NE(flat.find("convert a HuggingFace " + hf::display_list(", ", " or ") + " model to"), std::string::npos)
      << hf::display_list(", ", " or ");
  EXPECT_NE(flat.find("Override config.json's model_type: " + hf::model_flag_list() + " ("), std::string::npos)
      << hf::model_flag_list();
}

}  // namespace
}  // namespace ftx
