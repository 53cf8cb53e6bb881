// config.ini checked as a whole (lib/model/config_ini_check.h), walked key by key: the config.ini
// ftx writes for each architecture, with one key at a time removed, emptied, set to a value of the
// wrong type or out of range, or set to a valid value that contradicts the keys stating the same
// fact in another dialect (FT / TensorRT-LLM / ftx). Every failure must be one message naming the
// file, the key and the value; every edit that loads must give a config the key really describes.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/model/model_config.h"

namespace ftx {
namespace {

const char* kPath = "out/1-gpu/config.ini";

// A config.ini as ftx writes it, for each kind of model the engine runs.
std::map<std::string, ModelConfig> models() {
  std::map<std::string, ModelConfig> m;
  ModelConfig gpt;
  gpt.head_num = 4, gpt.size_per_head = 16, gpt.inter_size = 256, gpt.num_layer = 2, gpt.vocab_size = 300;
  gpt.max_pos_seq_len = 64, gpt.start_id = 1, gpt.end_id = 2, gpt.activation = Activation::kGeluTanh;
  gpt.kv_head_num = 4, gpt.weight_data_type = DType::kFloat16, gpt.layernorm_eps = 1e-5;
  m["gpt2"] = gpt;
  ModelConfig bloom = gpt;
  bloom.ft_variant = FtVariant::kBloom, bloom.position = PositionEmbedding::kAlibi, bloom.max_pos_seq_len = 0;
  bloom.has_pre_decoder_layernorm = true;
  m["bloom"] = bloom;
  ModelConfig opt = gpt;
  opt.ft_variant = FtVariant::kOpt, opt.norm = NormPlacement::kPost, opt.activation = Activation::kRelu;
  opt.has_post_decoder_layernorm = false, opt.weight_data_type = DType::kFloat32;
  m["opt_post"] = opt;
  ModelConfig next = gpt;  // NeMo GPT-Next: rope on half of each head, SwiGLU, no biases, untied
  next.position = PositionEmbedding::kRotary, next.rotary_dim = 8, next.max_pos_seq_len = 0;
  next.activation = Activation::kSwiGlu, next.has_bias = false, next.tied_embeddings = false;
  m["gptnext"] = next;
  ModelConfig gptj = gpt;
  gptj.ft_variant = FtVariant::kGptJ, gptj.position = PositionEmbedding::kRotary, gptj.rotary_dim = 8;
  gptj.rotary_style = RotaryStyle::kInterleaved, gptj.max_pos_seq_len = 0, gptj.parallel_residual = true;
  gptj.shared_input_norm = true, gptj.tied_embeddings = false, gptj.has_lm_head_bias = true;
  m["gptj"] = gptj;
  ModelConfig neox = gpt;
  neox.ft_variant = FtVariant::kGptNeoX, neox.position = PositionEmbedding::kRotary, neox.rotary_dim = 8;
  neox.max_pos_seq_len = 0, neox.parallel_residual = true, neox.tied_embeddings = false;
  neox.activation = Activation::kGelu, neox.weight_data_type = DType::kBFloat16;
  m["gptneox"] = neox;
  ModelConfig mqa = gpt;
  mqa.ft_variant = FtVariant::kGptBigCode, mqa.kv_head_num = 1, mqa.attention = AttentionKind::kMultiQuery;
  mqa.tensor_para_size = 2;
  m["santacoder"] = mqa;
  ModelConfig mcore = next;  // Megatron Core: grouped-query attention, RMSNorm, squared ReLU
  mcore.kv_head_num = 2, mcore.tensor_para_size = 2, mcore.normalization = Normalization::kRmsNorm;
  mcore.activation = Activation::kSquaredRelu;
  m["mcore_gqa"] = mcore;
  ModelConfig llama = next;  // convert-hf's Llama family: half-split rope over the whole head, RMSNorm
  llama.rotary_dim = 16, llama.rotary_style = RotaryStyle::kHalfSplit, llama.normalization = Normalization::kRmsNorm;
  llama.kv_head_num = 2;
  ModelConfig phi3 = llama;  // Phi-3 / Phi-4-mini: partial rotary with longrope
  phi3.rotary_dim = 12;
  phi3.rope_scaling = RopeScaling::longrope({1, 1.1, 1.5, 2, 3.5, 5}, {1, 2, 4, 8, 16, 32}, 32, 4);
  phi3.rope_scaling.attention_factor = 1.25;
  m["phi3_longrope"] = phi3;
  ModelConfig qwen3 = llama;  // Qwen3: per-head q/k norms, yarn
  qwen3.qk_norm = true;
  qwen3.rope_scaling = RopeScaling::yarn(4, 16);
  qwen3.rope_scaling.mscale = 0.707, qwen3.rope_scaling.mscale_all_dim = 1, qwen3.rope_scaling.truncate = false;
  m["qwen3_yarn"] = qwen3;
  // GPTQ/AWQ imported (issue 50): the layer GEMMs as INT4 files with groups of 32 rows.
  ModelConfig llama_int4 = llama;
  llama_int4.weight_only_precision = WeightOnlyPrecision::kInt4, llama_int4.int4_group_size = 32;
  m["llama_int4"] = llama_int4;
  // Gemma 2 (issue 46): sandwich and (1 + γ) norms, its attention scale, both softcaps, a window on
  // layer 0 only, sqrt(H) in bf16, head_dim apart from the width.
  ModelConfig gemma = mcore;
  gemma.activation = Activation::kGeGluTanh, gemma.hidden_size = 48, gemma.tied_embeddings = true;
  gemma.sandwich_norm = true, gemma.norm_unit_offset = true, gemma.attention_scale = 0.2041241452319315;
  gemma.attention_softcap = 5.0, gemma.final_logit_softcap = 3.0, gemma.layer_window = {4, 0};
  gemma.embedding_scale = 6.9375, gemma.weight_data_type = DType::kBFloat16;
  m["gemma2"] = gemma;
  // Gemma 3: q/k norms, the windowed layer's own unscaled base, linear scaling on the full one.
  ModelConfig gemma3 = gemma;
  gemma3.qk_norm = true, gemma3.rotary_base = 1e6, gemma3.rotary_base_local = 100;
  gemma3.rope_scaling = RopeScaling::linear(8), gemma3.attention_softcap = 0, gemma3.final_logit_softcap = 0;
  m["gemma3"] = gemma3;
  return m;
}

struct Result {
  std::optional<ModelConfig> cfg;
  std::string error;
};

Result load(const IniFile& ini) {
  try {
    return {ModelConfig::from_ini(IniFile::parse(ini.to_string(), kPath)), ""};
  } catch (const Error& e) {
    return {std::nullopt, e.what()};
  }
}

std::string section_of(const IniFile& ini) {
  for (const char* s : {"gpt", "gptj", "gptneox"})
    if (ini.has_section(s)) return s;
  return "";
}

// `ini` with `key` of section `sec` set to `value` (nullopt: removed).
IniFile edited(const IniFile& ini, const std::string& sec, const std::string& key, std::optional<std::string> value) {
  IniFile out;
  for (const auto& s : ini.sections())
    for (const auto& [k, v] : ini.entries(s))
      if (!(s == sec && k == key)) out.set(s, k, v);
  if (value) out.set(sec, key, *value);
  return out;
}

// What the engine runs: two configs that agree on these run the same model.
std::string meaning(const ModelConfig& c) {
  // The gpt family (gpt, bloom, opt, xglm, gpt_bigcode) runs one code path: its members differ only
  // in the facts below.
  const bool own_path = c.ft_variant == FtVariant::kGptJ || c.ft_variant == FtVariant::kGptNeoX;
  std::string s = std::string(own_path ? ft_variant_name(c.ft_variant) : "gpt") + " " + activation_name(c.activation);
  for (int64_t v : {c.head_num, c.size_per_head, c.kv_head_num, c.inter_size, c.num_layer, c.vocab_size,
                    c.max_pos_seq_len, c.start_id, c.end_id, c.position_offset, c.rotary_dim, c.tensor_para_size})
    s += " " + std::to_string(v);
  for (int v : {static_cast<int>(c.position), static_cast<int>(c.rotary_style), static_cast<int>(c.norm),
                static_cast<int>(c.attention), static_cast<int>(c.normalization), static_cast<int>(c.weight_data_type), int(c.parallel_residual),
                int(c.shared_input_norm), int(c.has_bias), int(c.has_pre_decoder_layernorm),
                int(c.has_post_decoder_layernorm), int(c.tied_embeddings), int(c.has_lm_head_bias)})
    s += " " + std::to_string(v);
  s += " " + std::to_string(c.layernorm_eps) + " " + std::to_string(c.rotary_base) + " " + std::to_string(c.embedding_scale);
  s += " " + std::to_string(c.hidden()) + " " + std::to_string(int(c.qk_norm)) + " " + std::to_string(c.sliding_window);
  const RopeScaling& r = c.rope_scaling;
  s += std::string(" ") + rope_scaling_name(r.type);
  for (double v : {r.factor, r.low_freq_factor, r.high_freq_factor, r.beta_fast, r.beta_slow, r.mscale, r.mscale_all_dim,
                   r.attention_factor.value_or(-1.0), double(r.original_max_position_embeddings), double(r.truncate)})
    s += " " + std::to_string(v);
  for (const auto* list : {&r.short_factor, &r.long_factor})
    for (double v : *list) s += " " + std::to_string(v);
  s += " " + std::to_string(int(c.sandwich_norm)) + std::to_string(int(c.norm_unit_offset));
  for (double v : {c.attention_scale, c.attention_softcap, c.final_logit_softcap}) s += " " + std::to_string(v);
  for (int64_t w : c.layer_window) s += " w" + std::to_string(w);
  s += " " + std::to_string(c.rotary_base_local);
  s += std::string(" ") + weight_only_precision_name(c.weight_only_precision) + " " + std::to_string(c.int4_group_size);
  return s;
}

// An error names the file, the key and the value it found.
void expect_names(const std::string& error, const std::string& key, const std::string& what) {
  EXPECT_NE(error.find(kPath), std::string::npos) << what << ": " << error;
  EXPECT_NE(error.find(key), std::string::npos) << what << ": " << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << what << ": one line: " << error;
}

TEST(ConfigIniCheck, WhatFtxWritesLoadsBack) {
  for (const auto& [name, cfg] : models()) {
    const Result r = load(cfg.to_ini());
    ASSERT_TRUE(r.cfg) << name << ": " << r.error;
    EXPECT_EQ(meaning(*r.cfg), meaning(load(cfg.to_ini()).cfg.value())) << name;
  }
}

// Gemma's GeGLU gates the tanh GELU: ftx's activation key keeps it apart from GeGLU (erf), and FT's
// activation_type (GeGLU, which FT computes with tanh) agrees with it.
TEST(ConfigIniCheck, GegluTanhLoadsBack) {
  ModelConfig gemma = models()["gptnext"];
  gemma.activation = Activation::kGeGluTanh;
  const IniFile ini = gemma.to_ini();
  EXPECT_EQ(ini.get("gpt", "activation"), "geglu_tanh");
  EXPECT_EQ(ini.get("gpt", "activation_type"), "GeGLU");
  const Result r = load(ini);
  ASSERT_TRUE(r.cfg) << r.error;
  EXPECT_EQ(r.cfg->activation, Activation::kGeGluTanh);
  EXPECT_TRUE(r.cfg->activation.is_gated());
  EXPECT_EQ(r.cfg->activation.nonlinearity(), Nonlinearity::kGeluTanh);
  EXPECT_EQ(r.cfg->to_ini().to_string(), ini.to_string());
  EXPECT_NE(load(edited(ini, "gpt", "activation_type", "SiGLU")).error.find("activation_type"), std::string::npos);
}

// A rope model in a [gpt] section (convert-hf's Llama, Megatron Core) records its context length
// in max_pos_seq_len although it has no position table: reading and writing keep it, so a folder
// rewritten from its config.ini (ftx smoothquant) says the same, not n_positions = 0 beside it.
TEST(ConfigIniCheck, RotaryGptKeepsItsRecordedContext) {
  ModelConfig llama = models()["mcore_gqa"];
  llama.max_pos_seq_len = 128;
  const IniFile once = llama.to_ini();
  const Result r = load(once);
  ASSERT_TRUE(r.cfg) << r.error;
  EXPECT_EQ(r.cfg->max_pos_seq_len, 128);
  EXPECT_EQ(r.cfg->to_ini().to_string(), once.to_string());
}

// A key removed: an error naming it, or the same model (another key states the same fact).
TEST(ConfigIniCheck, EachKeyRemoved) {
  for (const auto& [name, cfg] : models()) {
    const IniFile ini = cfg.to_ini();
    const std::string sec = section_of(ini);
    const std::string want = meaning(load(ini).cfg.value());
    for (const auto& [key, value] : ini.entries(sec)) {
      // Which files the folder holds decides these two at load (a disagreement is an error there,
      // naming the file): tied_embeddings (model.lm_head.weight.bin) and, without its key, the TP
      // size comes from the folder's name, OUT/<N>-gpu.
      if (key == "tied_embeddings" || key == "tensor_para_size") continue;
      // Without kv_head_num a grouped-query model reads as one with a key/value head per head: the
      // QKV matrix's size, checked at load, tells (ModelWeights names the file). Without
      // normalization (ftx's key, written only for RMSNorm, as no FT or TensorRT-LLM key states
      // it) the model reads as a LayerNorm one and nothing in the folder says otherwise.
      if (cfg.kv_head_num != cfg.head_num && key == "kv_head_num") continue;
      if (cfg.normalization == Normalization::kRmsNorm && key == "normalization") continue;
      // Absent, yarn's and longrope's attention factor is derived from the factor, and yarn's
      // mscale, mscale_all_dim and truncate take transformers' defaults (rope_scaling.h).
      if (key == "rotary_scaling_attention_factor" || key == "rotary_scaling_mscale" ||
          key == "rotary_scaling_mscale_all_dim" || key == "rotary_scaling_truncate")
        continue;
      // Absent, rotary_base is 10000, the base FT's GPT-J and GPT-NeoX fix: a folder without the key
      // means that base in FT as in ftx.
      if (key == "rotary_base") continue;
      // Without qk_norm the folder's attention.{q,k}_layernorm files tell (ModelWeights refuses them).
      if (key == "qk_norm") continue;
      // Without weight_only_precision an INT4 folder reads as a float one whose layer GEMM files are
      // missing: the load names the first (int4_group_size alone is refused below).
      if (key == "weight_only_precision") continue;
      // Gemma's keys, written only when set, are the one statement of their fact (the norm files
      // tell sandwich_norm at load).
      static const std::set<std::string> gemma = {"sandwich_norm", "norm_unit_offset", "attention_scale",
                                                  "attention_softcap", "final_logit_softcap", "layer_window",
                                                  "embedding_scale", "hidden_size", "rotary_base_local"};
      const bool is_gemma = name.rfind("gemma", 0) == 0;
      if (is_gemma && gemma.count(key)) continue;
      // FT's GeGLU and TensorRT-LLM's geglu do not say which GELU is gated: ftx's activation is the
      // one key that tells Gemma's tanh GELU (GegluTanhLoadsBack).
      if (is_gemma && key == "activation") continue;
      const Result r = load(edited(ini, sec, key, std::nullopt));
      const std::string what = name + " without " + key;
      if (r.cfg) EXPECT_EQ(meaning(*r.cfg), want) << what << " loads as another model";
      else expect_names(r.error, key, what);
    }
  }
}

// Keys by what their values may be; the walk below tries each kind's bad values.
enum class Kind { kSize, kCount, kId, kBool, kBool01, kPositiveReal, kNonNegativeReal, kRealList, kFraction, kName, kEnum,
                  kWindows };

Kind kind_of(const std::string& key) {
  static const std::set<std::string> sizes = {"head_num", "size_per_head", "inter_size", "num_layer", "vocab_size",
                                              "n_embd", "n_head", "n_layer", "intermediate_size",
                                              "tensor_para_size", "kv_head_num"};
  static const std::set<std::string> counts = {"max_pos_seq_len", "n_positions", "rotary_dim", "rotary_embedding",
                                               "position_offset", "int4_group_size"};
  static const std::set<std::string> ids = {"start_id", "end_id", "prompt_learning_start_id"};
  static const std::set<std::string> bools = {"has_positional_encoding", "has_pre_decoder_layernorm",
                                              "has_post_decoder_layernorm", "use_attention_linear_bias",
                                              "do_layer_norm_before", "bias", "multi_query_mode", "parallel_residual",
                                              "shared_input_norm", "has_bias", "tied_embeddings", "has_lm_head_bias",
                                              "qk_norm", "rotary_scaling_truncate", "sandwich_norm", "norm_unit_offset"};
  static const std::set<std::string> reals = {"layernorm_eps", "layer_norm_epsilon", "rotary_base", "embedding_scale",
                                              "rotary_scaling_factor", "rotary_scaling_beta_fast",
                                              "rotary_scaling_beta_slow", "rotary_scaling_attention_factor",
                                              "attention_scale", "attention_softcap", "final_logit_softcap",
                                              "rotary_base_local"};
  // yarn's mscale and mscale_all_dim: 0 means absent (transformers tests `mscale and mscale_all_dim`).
  static const std::set<std::string> non_negative = {"rotary_scaling_mscale", "rotary_scaling_mscale_all_dim"};
  static const std::set<std::string> lists = {"rotary_scaling_short_factor", "rotary_scaling_long_factor"};
  if (key == "rotary_scaling_original_max_positions") return Kind::kSize;
  if (key == "layer_window") return Kind::kWindows;
  if (sizes.count(key)) return Kind::kSize;
  if (counts.count(key)) return Kind::kCount;
  if (ids.count(key)) return Kind::kId;
  if (bools.count(key)) return Kind::kBool;
  if (key == "use_gptj_residual") return Kind::kBool01;
  if (reals.count(key)) return Kind::kPositiveReal;
  if (non_negative.count(key)) return Kind::kNonNegativeReal;
  if (lists.count(key)) return Kind::kRealList;
  if (key == "rotary_pct") return Kind::kFraction;
  if (key == "model_name") return Kind::kName;
  return Kind::kEnum;  // weight_data_type, storage_dtype, activation*, layernorm_type, architecture, ...
}

std::vector<std::string> bad_values(Kind k) {
  std::vector<std::string> v = {"", "abc", "nan", "1e999", "99999999999999999999", "1 2"};
  switch (k) {
    case Kind::kSize: v.insert(v.end(), {"0", "-5", "1.5", "16777217"}); break;
    case Kind::kCount: v.insert(v.end(), {"-1", "2.5", "16777217"}); break;
    case Kind::kId: v.insert(v.end(), {"2.5", "4294967296"}); break;
    case Kind::kBool: v.insert(v.end(), {"2", "-1", "truee", "none"}); break;
    case Kind::kBool01: v.insert(v.end(), {"2", "-1", "True"}); break;
    case Kind::kPositiveReal: v.insert(v.end(), {"0", "-1e-5", "inf"}); break;
    case Kind::kNonNegativeReal: v.insert(v.end(), {"-1e-5", "inf"}); break;
    case Kind::kRealList: v = {"", "abc", "1,,2", "1,nan", "1,1e999", "1 2", "0,1", "1,-2", "1,2,"}; break;
    case Kind::kFraction: v.insert(v.end(), {"-0.1", "1.5", "inf"}); break;
    case Kind::kName: v = {""}; break;
    case Kind::kEnum: v.insert(v.end(), {"0", "-5", "fp8", "Gelu2"}); break;
    case Kind::kWindows: v = {"", "abc", "4", "4,0,0", "4,-1", "4,", ",0", "4;0", "4.5,0", "99999999999,0"}; break;
  }
  return v;
}

TEST(ConfigIniCheck, EachKeyEmptyWrongTypeOrOutOfRange) {
  for (const auto& [name, cfg] : models()) {
    const IniFile ini = cfg.to_ini();
    const std::string sec = section_of(ini);
    for (const auto& [key, value] : ini.entries(sec)) {
      for (const std::string& bad : bad_values(kind_of(key))) {
        const Result r = load(edited(ini, sec, key, bad));
        const std::string what = name + " with " + key + " = '" + bad + "'";
        EXPECT_FALSE(r.cfg) << what << " loads";
        if (!r.cfg) expect_names(r.error, key, what);
      }
    }
  }
}

TEST(ConfigIniCheck, KeyGivenTwice) {
  const IniFile ini = models()["gpt2"].to_ini();
  const std::string text = ini.to_string() + "[gpt]\nvocab_size = 200\n";
  try {
    ModelConfig::from_ini(IniFile::parse(text, kPath));
    FAIL() << "a key given twice loads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocab_size is given more than once (300,200)"), std::string::npos) << e.what();
  }
}

// One key edited to a valid value that the keys of another dialect contradict: both named.
TEST(ConfigIniCheck, ContradictoryKeysNameBoth) {
  struct Case {
    const char* model;
    const char* key;
    const char* value;
    const char* other;  // the key it must be reported against
  };
  const Case cases[] = {
      {"gpt2", "activation_type", "Relu", "activation"},
      {"gpt2", "activation", "Relu", "activation"},  // against activation_type or activation_function
      {"gpt2", "activation_function", "relu", "activation"},
      {"gpt2", "use_attention_linear_bias", "True", "position_embedding_type"},
      {"gpt2", "has_positional_encoding", "False", "position_embedding_type"},
      {"gpt2", "position_embedding_type", "alibi", "use_attention_linear_bias"},
      {"gpt2", "head_num", "8", "n_head"},
      {"gpt2", "n_head", "2", "head_num"},
      {"gpt2", "size_per_head", "8", "n_embd"},
      {"gpt2", "num_layer", "3", "n_layer"},
      {"gpt2", "inter_size", "128", "intermediate_size"},
      {"gpt2", "max_pos_seq_len", "32", "n_positions"},
      {"gpt2", "weight_data_type", "fp32", "storage_dtype"},
      {"gpt2", "storage_dtype", "bfloat16", "weight_data_type"},
      {"gpt2", "layernorm_eps", "1e-3", "layer_norm_epsilon"},
      {"gpt2", "layernorm_type", "post_layernorm", "do_layer_norm_before"},
      {"gpt2", "do_layer_norm_before", "False", "layernorm_type"},
      {"gpt2", "bias", "False", "has_bias"},
      {"gpt2", "has_bias", "0", "bias"},
      {"gpt2", "multi_query_mode", "True", "kv_head_num"},
      {"gpt2", "kv_head_num", "1", "multi_query_mode"},
      {"gpt2", "architecture", "gptj", "architecture"},
      {"gpt2", "hidden_size", "48", "n_embd"},  // the model width, when it is not head_num x size_per_head
      {"bloom", "model_variant", "opt-pre", "architecture"},
      {"bloom", "use_attention_linear_bias", "False", "position_embedding_type"},
      {"gptnext", "rotary_pct", "0.25", "rotary_dim"},
      {"gptnext", "rotary_dim", "4", "rotary_pct"},
      {"gptnext", "position_embedding_type", "learned", "has_positional_encoding"},
      {"gptj", "rotary_embedding", "4", "rotary_dim"},
      {"gptneox", "use_gptj_residual", "0", "parallel_residual"},
      {"gptneox", "parallel_residual", "0", "use_gptj_residual"},
      {"santacoder", "tensor_para_size", "3", "tensor_para_size"},
      {"mcore_gqa", "kv_head_num", "3", "head_num"},
      {"mcore_gqa", "tensor_para_size", "4", "kv_head_num"},
  };
  auto all = models();
  for (const Case& c : cases) {
    IniFile ini = all.at(c.model).to_ini();
    const std::string sec = section_of(ini);
    if (std::string(c.key) == "model_variant") ini.set(sec, "model_variant", "bloom-pre");
    const Result r = load(edited(ini, sec, c.key, std::string(c.value)));
    const std::string what = std::string(c.model) + " with " + c.key + " = " + c.value;
    EXPECT_FALSE(r.cfg) << what << " loads";
    if (r.cfg) continue;
    expect_names(r.error, c.key, what);
    expect_names(r.error, c.other, what);
    EXPECT_NE(r.error.find(c.value), std::string::npos) << what << ": the value is named: " << r.error;
  }
}

// Gemma 2's keys (issue 46) read back as written: what the engine runs, and the same text again.
TEST(ConfigIniCheck, I46_GemmaKeysLoadBack) {
  const ModelConfig gemma = models()["gemma2"];
  const IniFile ini = gemma.to_ini();
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"sandwich_norm", "1"}, {"norm_unit_offset", "1"}, {"attention_scale", "0.2041241452319315"},
           {"attention_softcap", "5"}, {"final_logit_softcap", "3"}, {"layer_window", "4,0"},
           {"embedding_scale", "6.9375"}, {"hidden_size", "48"}})
    EXPECT_EQ(ini.get("gpt", key), value) << key;
  const Result r = load(ini);
  ASSERT_TRUE(r.cfg) << r.error;
  EXPECT_TRUE(r.cfg->sandwich_norm);
  EXPECT_TRUE(r.cfg->norm_unit_offset);
  EXPECT_EQ(r.cfg->attention_scale, gemma.attention_scale);
  EXPECT_EQ(r.cfg->attention_softcap, 5.0);
  EXPECT_EQ(r.cfg->final_logit_softcap, 3.0);
  EXPECT_EQ(r.cfg->layer_window, (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(r.cfg->embedding_scale, 6.9375);
  EXPECT_EQ(r.cfg->to_ini().to_string(), ini.to_string());
  // None of them is written for a model without it; a window list of zeros is no window.
  const IniFile plain = models()["mcore_gqa"].to_ini();
  for (const char* key : {"sandwich_norm", "norm_unit_offset", "attention_scale", "attention_softcap",
                          "final_logit_softcap", "layer_window"})
    EXPECT_FALSE(plain.has("gpt", key)) << key;
  ModelConfig zeros = models()["mcore_gqa"];
  zeros.layer_window = {0, 0};
  EXPECT_FALSE(zeros.to_ini().has("gpt", "layer_window"));
  // One window per layer: a list of another length names the key and the layer count.
  const std::string error = load(edited(ini, "gpt", "layer_window", std::string("4,0,4"))).error;
  EXPECT_NE(error.find("[gpt] layer_window = 4,0,4: one window per layer: 3 entries for 2 layers"), std::string::npos)
      << error;
}

// Gemma 3's local rotary base (issue 46): written only when set, read back; a base with no windowed
// layer to use it is refused by name.
TEST(ConfigIniCheck, I46_LocalRotaryBaseLoadsBack) {
  const ModelConfig gemma3 = models()["gemma3"];
  const IniFile ini = gemma3.to_ini();
  EXPECT_EQ(ini.get("gpt", "rotary_base_local"), "1e+02");
  EXPECT_EQ(ini.get("gpt", "rotary_base"), "1e+06");
  const Result r = load(ini);
  ASSERT_TRUE(r.cfg) << r.error;
  EXPECT_EQ(r.cfg->rotary_base_local, 100.0);
  EXPECT_EQ(r.cfg->to_ini().to_string(), ini.to_string());
  EXPECT_FALSE(models()["gemma2"].to_ini().has("gpt", "rotary_base_local"));
  const std::string error = load(edited(ini, "gpt", "layer_window", std::string("0,0"))).error;
  EXPECT_NE(error.find("rotary_base_local = 1e+02: no layer has a window (layer_window) to use it"), std::string::npos)
      << error;
  expect_names(error, "rotary_base_local", "a local base with no window");
}

// The cases, as a user saw them.
TEST(ConfigIniCheck, MessagesNameFileKeyAndValue) {
  const IniFile ini = models()["gpt2"].to_ini();
  auto error_of = [&](const char* key, const char* value) {
    const Result r = load(edited(ini, "gpt", key, std::string(value)));
    return r.cfg ? std::string("(loads)") : r.error;
  };
  EXPECT_EQ(error_of("vocab_size", "-5"),
            std::string(kPath) + ": [gpt] vocab_size = -5: must be at least 1 (and at most 16777216)");
  EXPECT_NE(error_of("weight_data_type", "fp8").find("[gpt] weight_data_type = fp8: not a weight type ftx reads"),
            std::string::npos);
  EXPECT_NE(error_of("activation_type", "Relu")
                .find("[gpt] activation_type = Relu (FasterTransformer's key) and activation = gelu_tanh (ftx's key) "
                      "disagree"),
            std::string::npos);
  EXPECT_NE(error_of("has_adapters", "True").find("has_adapters = True: ftx does not run Megatron adapter layers"),
            std::string::npos);
}

// Folders with FT's keys only (FT's own converters) load as FT reads them.
TEST(ConfigIniCheck, FtOnlyFoldersLoad) {
  // The keys both of FT's converters below write alike; then each one's own.
  auto ft_folder = [](const std::string& own) {
    return ModelConfig::from_ini(IniFile::parse(
        "[gpt]\nnum_layer = 2\nhead_num = 4\ninter_size = 256\nsize_per_head = 16\nvocab_size = 300\n" + own, kPath));
  };
  const ModelConfig c = ft_folder(
      "model_name = bloom\ntensor_para_size = 1\nweight_data_type = fp16\nmodel_variant = bloom-pre\n"
      "layernorm_eps = 1e-05\nlayernorm_type = pre_layernorm\nactivation_type = Gelu\n"
      "has_positional_encoding = False\nhas_pre_decoder_layernorm = True\nhas_post_decoder_layernorm = True\n"
      "use_attention_linear_bias = True\nstart_id = 1\nend_id = 2\n");
  EXPECT_EQ(c.ft_variant, FtVariant::kBloom);
  EXPECT_EQ(c.position, PositionEmbedding::kAlibi);
  EXPECT_EQ(c.weight_data_type, DType::kFloat16);
  const ModelConfig o = ft_folder(
      "model_name = opt\nmax_pos_seq_len = 64\nlayernorm_eps = 1e-5\nlayernorm_type = post_layernorm\n"
      "activation_type = Relu\nhas_post_decoder_layernorm = 0\nstart_id = 2\nend_id = 2\nweight_data_type = fp32\n"
      "int8 = False\n");
  EXPECT_EQ(o.activation, Activation::kRelu);
  EXPECT_EQ(o.norm, NormPlacement::kPost);
}

}  // namespace
}  // namespace ftx
