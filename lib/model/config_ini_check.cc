// config.ini checked as a whole (see config_ini_check.h). Two passes: each key on its own (type,
// range, a key given twice), then the facts that several key sets state (FT's, TensorRT-LLM's,
// ftx's: docs/ft-layout.md#configini), which must agree.
#include "lib/model/config_ini_check.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <vector>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/model/model_config.h"

namespace ftx {

namespace {

constexpr int64_t kMaxDim = kMaxModelDim;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// Where a key comes from, for the messages about two keys that disagree.
const char* dialect(const std::string& key) {
  static const char* ft[] = {"head_num", "size_per_head", "inter_size", "num_layer", "max_pos_seq_len",
                             "weight_data_type", "layernorm_eps", "layernorm_type", "activation_type",
                             "has_positional_encoding", "use_attention_linear_bias", "rotary_embedding",
                             "use_gptj_residual", "model_variant"};
  static const char* tl[] = {"n_embd", "n_head", "n_layer", "n_positions", "intermediate_size", "storage_dtype",
                             "activation_function", "layer_norm_epsilon", "do_layer_norm_before", "bias",
                             "multi_query_mode", "rotary_pct"};
  for (const char* k : ft)
    if (key == k) return "FasterTransformer's key";
  for (const char* k : tl)
    if (key == k) return "TensorRT-LLM's key";
  return "ftx's key";
}

class Checker {
 public:
  Checker(const IniFile& ini, std::string sec) : ini_(ini), sec_(std::move(sec)) {}

  bool has(const std::string& k) const { return ini_.has(sec_, k); }
  std::string raw(const std::string& k) const { return ini_.get(sec_, k); }

  [[noreturn]] void fail(const std::string& k, const std::string& why) const {
    throw Error(ini_.path(), "[" + sec_ + "] " + k + " = " + shown(k) + ": " + why);
  }
  [[noreturn]] void disagree(const std::string& a, const std::string& b, const std::string& why = "") const {
    throw Error(ini_.path(), "[" + sec_ + "] " + a + " = " + shown(a) + " (" + dialect(a) + ") and " + b + " = " +
                                 shown(b) + " (" + dialect(b) + ") disagree" + (why.empty() ? "" : " (" + why + ")") +
                                 "; edit both, or delete one");
  }

  // The key's text, or nullopt when absent. A key written twice is an error (inih would join the
  // values; FT would read a number from the first line only).
  std::optional<std::string> text(const std::string& k) const {
    if (!has(k)) return std::nullopt;
    const std::string v = raw(k);
    if (v.find('\n') != std::string::npos) {
      std::string list = v;
      for (auto& c : list)
        if (c == '\n') c = ',';
      throw Error(ini_.path(), "[" + sec_ + "] " + k + " is given more than once (" + list + "); keep one");
    }
    return v;
  }

  std::optional<int64_t> integer(const std::string& k, int64_t lo, int64_t hi, const std::string& range_why = "") const {
    const auto v = text(k);
    if (!v) return std::nullopt;
    const std::string t = trim(*v);
    if (t.empty()) fail(k, "empty; expected an integer");
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(t.c_str(), &end, 10);
    if (*end != '\0') fail(k, "not an integer");
    if (errno == ERANGE || n < lo || n > hi) {
      std::string why;
      if (lo == hi) why = "must be " + std::to_string(lo);
      else if (hi == INT64_MAX) why = "must be at least " + std::to_string(lo);
      else if (lo == 1 && hi == kMaxDim) why = "must be at least 1 (and at most " + std::to_string(hi) + ")";
      else why = "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
      fail(k, why + (range_why.empty() ? "" : " " + range_why));
    }
    return n;
  }

  // A comma-separated list of integers in [lo, hi] ("4,0").
  std::optional<std::vector<int64_t>> integer_list(const std::string& k, int64_t lo, int64_t hi) const {
    const auto v = text(k);
    if (!v) return std::nullopt;
    std::vector<int64_t> out;
    const std::string t = *v;
    for (size_t at = 0; at <= t.size();) {
      const size_t end = std::min(t.find(',', at), t.size());
      const std::string item = trim(t.substr(at, end - at));
      if (item.empty()) fail(k, "an empty entry; expected integers separated by commas");
      errno = 0;
      char* stop = nullptr;
      const long long n = std::strtoll(item.c_str(), &stop, 10);
      if (*stop != '\0') fail(k, "'" + item + "' is not an integer");
      if (errno == ERANGE || n < lo || n > hi)
        fail(k, "'" + item + "' is out of range: each must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      out.push_back(n);
      at = end + 1;
    }
    return out;
  }

  std::optional<double> real(const std::string& k, double lo, bool lo_open, double hi) const {
    const auto v = text(k);
    if (!v) return std::nullopt;
    const std::string t = trim(*v);
    if (t.empty()) fail(k, "empty; expected a number");
    char* end = nullptr;
    const double d = std::strtod(t.c_str(), &end);
    if (*end != '\0') fail(k, "not a number");
    if (!std::isfinite(d) || d < lo || (lo_open && d == lo) || d > hi) {
      std::ostringstream why;
      why << "must be a finite number " << (lo_open ? "> " : ">= ") << lo;
      if (std::isfinite(hi)) why << " and <= " << hi;
      fail(k, why.str());
    }
    return d;
  }

  // Comma-separated numbers, each as real() takes them (longrope's factor lists).
  std::optional<std::vector<double>> reals(const std::string& k, double lo, bool lo_open, double hi) const {
    const auto v = text(k);
    if (!v) return std::nullopt;
    std::vector<double> out;
    size_t at = 0;
    const std::string t = trim(*v);
    if (t.empty()) fail(k, "empty; expected comma-separated numbers");
    while (at <= t.size()) {
      const size_t comma = std::min(t.find(',', at), t.size());
      const std::string item = trim(t.substr(at, comma - at));
      char* end = nullptr;
      const double d = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0') fail(k, "'" + item + "' is not a number");
      if (!std::isfinite(d) || d < lo || (lo_open && d == lo) || d > hi) {
        std::ostringstream why;
        why << "'" << item << "' is not a finite number " << (lo_open ? "> " : ">= ") << lo << " and <= " << hi;
        fail(k, why.str());
      }
      out.push_back(d);
      at = comma + 1;
    }
    return out;
  }

  // inih's GetBoolean spellings; anything else is an error (FT would silently use the default).
  std::optional<bool> boolean(const std::string& k) const {
    const auto v = text(k);
    if (!v) return std::nullopt;
    const std::string t = lower(trim(*v));
    if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
    if (t == "false" || t == "no" || t == "off" || t == "0") return false;
    fail(k, t.empty() ? "empty; expected true or false" : "not a boolean (true/false, yes/no, on/off, 1/0)");
  }

  std::optional<DType> dtype(const std::string& k) const {
    const auto v = text(k);
    if (!v) return std::nullopt;
    const std::string t = lower(trim(*v));
    if (t == "fp32" || t == "float32") return DType::kFloat32;
    if (t == "fp16" || t == "float16") return DType::kFloat16;
    if (t == "bf16" || t == "bfloat16") return DType::kBFloat16;
    fail(k, "not a weight type ftx reads (fp32, fp16, bf16; or float32, float16, bfloat16)");
  }

  std::optional<Activation> activation(const std::string& k) const {
    const auto v = text(k);
    if (!v) return std::nullopt;
    try {
      return activation_from_name(trim(*v));
    } catch (const Error&) {
      fail(k, "not an activation ftx runs (Gelu, gelu_tanh, Relu, Silu, SiGLU, GeGLU, geglu_tanh, squared-relu; HF: "
              "gelu, gelu_new, relu, silu, swiglu, geglu)");
    }
  }

  std::optional<std::string> choice(const std::string& k, const std::vector<std::vector<std::string>>& groups,
                                    const std::string& expected) const {
    const auto v = text(k);
    if (!v) return std::nullopt;
    const std::string t = lower(trim(*v));
    for (const auto& g : groups)
      for (const auto& name : g)
        if (t == name) return g.front();
    fail(k, t.empty() ? "empty; expected " + expected : "not one of " + expected);
  }

 private:
  std::string shown(const std::string& k) const {
    std::string v = raw(k);
    for (auto& c : v)
      if (c == '\n') c = ',';
    return v.empty() ? "(empty)" : v;
  }
  const IniFile& ini_;
  std::string sec_;
};

bool same_activation(Activation ft_or_exact, Activation exact, bool ft_spelling) {
  // FT's activation_type has one GELU ("Gelu", computed with tanh; its GeGLU gates it): it stands
  // for either of ftx's, gated as FT's is.
  auto gelu = [](Activation a) {
    return a.nonlinearity() == Nonlinearity::kGeluErf || a.nonlinearity() == Nonlinearity::kGeluTanh;
  };
  if (ft_spelling && gelu(ft_or_exact)) return gelu(exact) && ft_or_exact.is_gated() == exact.is_gated();
  return ft_or_exact == exact;
}

}  // namespace

void check_config_ini(const IniFile& ini, const std::string& sec) {
  Checker c(ini, sec);

  // ---- each key on its own ----
  const auto head_num = c.integer("head_num", 1, kMaxDim);
  const auto size_per_head = c.integer("size_per_head", 1, kMaxDim);
  const auto inter_size = c.integer("inter_size", 1, kMaxDim);
  const auto num_layer = c.integer("num_layer", 1, kMaxDim);
  const auto vocab_size = c.integer("vocab_size", 1, kMaxDim);
  const auto max_pos = c.integer("max_pos_seq_len", 0, kMaxDim);
  c.integer("start_id", INT32_MIN, INT32_MAX);
  c.integer("end_id", INT32_MIN, INT32_MAX);
  const auto tp = c.integer("tensor_para_size", 1, 65536);
  const auto wdt = c.dtype("weight_data_type");
  const auto eps = c.real("layernorm_eps", 0.0, true, 1.0);
  const auto ln_type = c.choice("layernorm_type", {{"pre_layernorm"}, {"post_layernorm"}}, "pre_layernorm, post_layernorm");
  const auto act_ft = c.activation("activation_type");
  const auto has_pos = c.boolean("has_positional_encoding");
  c.boolean("has_pre_decoder_layernorm");
  c.boolean("has_post_decoder_layernorm");
  const auto alibi = c.boolean("use_attention_linear_bias");
  const auto rotary_ft = c.integer("rotary_embedding", 0, kMaxDim);
  const auto gptj_residual = c.integer("use_gptj_residual", 0, 1, "(0 or 1: FT reads it as an integer)");
  if (c.boolean("has_adapters").value_or(false))
    c.fail("has_adapters", "ftx does not run Megatron adapter layers (the model would run without them)");
  const auto variant = c.text("model_variant");
  if (auto name = c.text("model_name"); name && trim(*name).empty()) c.fail("model_name", "empty");

  const auto n_embd = c.integer("n_embd", 1, kMaxDim);
  const auto n_head = c.integer("n_head", 1, kMaxDim);
  const auto n_layer = c.integer("n_layer", 1, kMaxDim);
  const auto n_positions = c.integer("n_positions", 0, kMaxDim);
  const auto intermediate = c.integer("intermediate_size", 1, kMaxDim);
  const auto storage = c.dtype("storage_dtype");
  const auto act_tl = c.activation("activation_function");
  const auto eps_tl = c.real("layer_norm_epsilon", 0.0, true, 1.0);
  const auto ln_before = c.boolean("do_layer_norm_before");
  const auto bias_tl = c.boolean("bias");
  const auto mqa = c.boolean("multi_query_mode");
  const auto rotary_pct = c.real("rotary_pct", 0.0, false, 1.0);
  c.real("rotary_base", 0.0, true, 1e10);
  const auto scaling =
      c.choice("rotary_scaling_type", {{"none"}, {"linear"}, {"llama3"}, {"yarn"}, {"longrope"}},
               "none, linear, llama3, yarn, longrope");
  c.real("rotary_scaling_factor", 0.0, true, 1e6);
  c.real("rotary_scaling_low_freq_factor", 0.0, true, 1e6);
  c.real("rotary_scaling_high_freq_factor", 0.0, true, 1e6);
  c.integer("rotary_scaling_original_max_positions", 1, kMaxDim);
  c.real("rotary_scaling_beta_fast", 0.0, true, 1e6);
  c.real("rotary_scaling_beta_slow", 0.0, true, 1e6);
  c.real("rotary_scaling_mscale", 0.0, false, 1e6);
  c.real("rotary_scaling_mscale_all_dim", 0.0, false, 1e6);
  c.boolean("rotary_scaling_truncate");
  c.real("rotary_scaling_attention_factor", 0.0, true, 1e6);
  c.reals("rotary_scaling_short_factor", 0.0, true, 1e6);
  c.reals("rotary_scaling_long_factor", 0.0, true, 1e6);
  if (!scaling || *scaling == "none") {
    // Without a type they would be dropped silently: the folder's writer meant some scaling.
    for (const char* k : {"rotary_scaling_factor", "rotary_scaling_low_freq_factor", "rotary_scaling_high_freq_factor",
                          "rotary_scaling_original_max_positions", "rotary_scaling_beta_fast", "rotary_scaling_beta_slow",
                          "rotary_scaling_mscale", "rotary_scaling_mscale_all_dim", "rotary_scaling_truncate",
                          "rotary_scaling_attention_factor", "rotary_scaling_short_factor", "rotary_scaling_long_factor"})
      if (c.has(k)) c.fail(k, "given without a rotary_scaling_type (linear, llama3, yarn, longrope)");
  } else {
    std::vector<std::string> need = {"rotary_scaling_factor"};
    if (*scaling == "llama3")
      need.insert(need.end(), {"rotary_scaling_low_freq_factor", "rotary_scaling_high_freq_factor",
                               "rotary_scaling_original_max_positions"});
    if (*scaling == "yarn") need.push_back("rotary_scaling_original_max_positions");
    if (*scaling == "longrope")
      need.insert(need.end(), {"rotary_scaling_original_max_positions", "rotary_scaling_short_factor",
                               "rotary_scaling_long_factor"});
    for (const auto& k : need)
      if (!c.has(k)) c.fail("rotary_scaling_type", "needs " + k + " (absent)");
  }
  c.boolean("qkv_bias");
  c.boolean("qk_norm");
  c.integer("sliding_window", 0, INT32_MAX);
  c.boolean("sandwich_norm");
  const auto weight_only = c.choice("weight_only_precision", {{"none"}, {"int4"}, {"int8"}}, "none, int4, int8");
  const auto int4_group = c.integer("int4_group_size", 0, kMaxDim, "0: one group per GEMM (per channel)");
  if (weight_only && *weight_only == "int4" && !int4_group)
    c.fail("weight_only_precision", "needs int4_group_size (absent)");
  if (int4_group && !(weight_only && *weight_only == "int4"))
    c.fail("int4_group_size", "given without weight_only_precision = int4");
  const auto layer_window = c.integer_list("layer_window", 0, INT32_MAX);
  const auto base_local = c.real("rotary_base_local", 0.0, true, 1e10);
  if (base_local && !(layer_window && std::any_of(layer_window->begin(), layer_window->end(), [](int64_t w) { return w > 0; })))
    c.fail("rotary_base_local", "no layer has a window (layer_window) to use it");
  c.real("attention_scale", 0.0, true, 1e6);
  c.real("attention_softcap", 0.0, true, 1e6);
  c.real("final_logit_softcap", 0.0, true, 1e6);

  const auto arch = c.choice("architecture",
                             {{"gpt", "gpt2"}, {"gptj", "gpt-j"}, {"gptneox", "gpt_neox", "gpt-neox"}, {"bloom"},
                              {"opt"}, {"xglm"}, {"gpt_bigcode", "gptbigcode"}},
                             "gpt, gptj, gptneox, bloom, opt, xglm, gpt_bigcode");
  const auto act = c.activation("activation");
  const auto position = c.choice("position_embedding_type",
                                 {{"learned", "learned_absolute"}, {"rope", "rotary"}, {"alibi"}, {"sinusoidal"}, {"none"}},
                                 "learned, rope, alibi, sinusoidal, none");
  c.integer("position_offset", 0, kMaxDim);
  const auto rotary_dim = c.integer("rotary_dim", 0, kMaxDim);
  c.choice("rotary_style", {{"interleaved", "gptj"}, {"half_split", "neox"}}, "interleaved, half_split");
  const auto parallel = c.boolean("parallel_residual");
  c.boolean("shared_input_norm");
  const auto has_bias = c.boolean("has_bias");
  c.boolean("tied_embeddings");
  c.boolean("has_lm_head_bias");
  c.real("embedding_scale", 0.0, true, 1e6);
  const auto kv_heads = c.integer("kv_head_num", 1, kMaxDim);
  const auto hidden_size = c.integer("hidden_size", 1, kMaxDim);
  c.choice("normalization", {{"layernorm"}, {"rmsnorm"}}, "layernorm, rmsnorm");
  c.boolean("norm_unit_offset");
  c.integer("prompt_learning_start_id", INT32_MIN, INT32_MAX);

  // ---- keys that state the same fact ----
  auto same_int = [&](const char* a, const std::optional<int64_t>& va, const char* b, const std::optional<int64_t>& vb) {
    if (va && vb && *va != *vb) c.disagree(a, b);
  };
  const auto layers = num_layer ? num_layer : n_layer;
  if (layer_window && layers && static_cast<int64_t>(layer_window->size()) != *layers)
    c.fail("layer_window", "one window per layer: " + std::to_string(layer_window->size()) + " entries for " +
                               std::to_string(*layers) + " layers");
  same_int("head_num", head_num, "n_head", n_head);
  same_int("num_layer", num_layer, "n_layer", n_layer);
  same_int("inter_size", inter_size, "intermediate_size", intermediate);
  if (max_pos && n_positions && *max_pos != *n_positions) c.disagree("max_pos_seq_len", "n_positions");
  const auto heads = head_num ? head_num : n_head;
  if (n_embd && hidden_size && *n_embd != *hidden_size) c.disagree("n_embd", "hidden_size");
  if (n_embd && !hidden_size && heads && size_per_head && *n_embd != *heads * *size_per_head)
    c.disagree("n_embd", "size_per_head", "n_embd must be head_num x size_per_head = " +
                                              std::to_string(*heads * *size_per_head));
  if (n_embd && n_head && !size_per_head && *n_embd % *n_head != 0)
    c.fail("n_embd", "not a multiple of n_head " + std::to_string(*n_head));
  if (wdt && storage && *wdt != *storage) c.disagree("weight_data_type", "storage_dtype");
  if (eps && eps_tl && std::fabs(*eps - *eps_tl) > 1e-9 * std::fabs(*eps)) c.disagree("layernorm_eps", "layer_norm_epsilon");
  if (ln_type && ln_before && (*ln_type == "pre_layernorm") != *ln_before)
    c.disagree("layernorm_type", "do_layer_norm_before");
  if (has_bias && bias_tl && *has_bias != *bias_tl) c.disagree("bias", "has_bias");

  if (act && act_ft && !same_activation(*act_ft, *act, true)) c.disagree("activation_type", "activation");
  if (act && act_tl && !same_activation(*act_tl, *act, false)) c.disagree("activation_function", "activation");
  if (!act && act_ft && act_tl && !same_activation(*act_ft, *act_tl, true))
    c.disagree("activation_type", "activation_function");

  if (position) {
    if (alibi && *alibi != (*position == "alibi")) c.disagree("use_attention_linear_bias", "position_embedding_type");
    if (has_pos && *has_pos != (*position == "learned" || *position == "sinusoidal"))
      c.disagree("has_positional_encoding", "position_embedding_type");
    if (rotary_pct && (*rotary_pct > 0) != (*position == "rope")) c.disagree("rotary_pct", "position_embedding_type");
  } else if (alibi && has_pos && *alibi && *has_pos) {
    c.disagree("use_attention_linear_bias", "has_positional_encoding", "ALiBi models have no position table");
  }
  if (rotary_ft && rotary_dim && *rotary_ft != *rotary_dim) c.disagree("rotary_embedding", "rotary_dim");
  const auto rdim = rotary_dim ? rotary_dim : rotary_ft;
  if (rdim && rotary_pct && size_per_head && *rotary_pct > 0 &&
      std::fabs(*rotary_pct * static_cast<double>(*size_per_head) - static_cast<double>(*rdim)) >= 0.5)
    c.disagree("rotary_pct", rotary_dim ? "rotary_dim" : "rotary_embedding",
               "rotary_pct x size_per_head must be the rotary dimension");
  if (rdim && size_per_head && *rdim > 0 && (*rdim > *size_per_head || *rdim % 2 != 0))
    c.fail(rotary_dim ? "rotary_dim" : "rotary_embedding",
           "must be even and at most size_per_head (" + std::to_string(*size_per_head) + ")");
  if (gptj_residual && parallel && (*gptj_residual != 0) != *parallel) c.disagree("use_gptj_residual", "parallel_residual");

  if (heads && kv_heads && (*kv_heads > *heads || *heads % *kv_heads != 0))
    c.disagree("kv_head_num", head_num ? "head_num" : "n_head",
               "kv_head_num must divide the head count: 1 for multi-query, fewer for grouped-query attention");
  if (mqa && kv_heads && heads && *heads > 1 && *mqa != (*kv_heads == 1)) c.disagree("multi_query_mode", "kv_head_num");

  if (arch) {
    const std::string want_sec = *arch == "gptj" ? "gptj" : *arch == "gptneox" ? "gptneox" : "gpt";
    if (lower(sec) != want_sec)
      c.fail("architecture", "this architecture's keys belong in a [" + want_sec + "] section, not [" + sec + "]");
    if (variant) {
      const std::string v = lower(trim(*variant));
      if ((v.rfind("bloom", 0) == 0 && *arch != "bloom") || (v.rfind("opt", 0) == 0 && *arch != "opt"))
        c.disagree("model_variant", "architecture");
    }
  }
  if (tp && heads && *heads % *tp != 0)
    c.fail("tensor_para_size", "head_num " + std::to_string(*heads) + " is not divisible by it");
  if (tp && kv_heads && *kv_heads != 1 && *kv_heads % *tp != 0)
    c.fail("tensor_para_size", "kv_head_num " + std::to_string(*kv_heads) +
                                   " is not divisible by it (grouped-query attention splits the key/value heads)");
  const auto inter = inter_size ? inter_size : intermediate;
  if (tp && inter && *inter % *tp != 0)
    c.fail("tensor_para_size", "inter_size " + std::to_string(*inter) + " is not divisible by it");
  (void)vocab_size;
}

}  // namespace ftx
