// FasterTransformer's keys of config.ini (config_ini_keys.h).
#include <string>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/model/config_ini_keys.h"

namespace ftx::config_ini {

void read_ft_keys(const Reader& r, ModelConfig& c) {
  const std::string& origin = r.origin();
  c.model_name = r.get("model_name");
  c.head_num = r.i("head_num");
  c.size_per_head = r.i("size_per_head");
  c.inter_size = r.i("inter_size");
  c.num_layer = r.i("num_layer");
  c.vocab_size = r.i("vocab_size");
  c.start_id = r.i("start_id");
  c.end_id = r.i("end_id");

  // Optional keys (defaults as FT's readers).
  c.layernorm_eps = r.has("layernorm_eps") ? r.d_or("layernorm_eps", 1e-6) : r.d_or("layer_norm_epsilon", 1e-6);
  // Absent keys take what another dialect's key says before FT's default (check_config_ini made
  // sure that keys present agree).
  std::string lt = lower(r.get_or("layernorm_type", r.b_or("do_layer_norm_before", true) ? "pre_layernorm" : "post_layernorm"));
  if (lt == "pre_layernorm") c.norm = NormPlacement::kPre;
  else if (lt == "post_layernorm") c.norm = NormPlacement::kPost;
  else throw Error(origin, "layernorm_type '" + lt + "' is neither pre_layernorm nor post_layernorm");
  if (r.has("activation_type")) {
    // FT computes its "Gelu" with the tanh approximation, so an FT-only folder means gelu_tanh.
    Activation a = activation_from_name(r.get("activation_type"));
    c.activation = (a == Activation::kGelu) ? Activation::kGeluTanh : a;
  } else if (r.has("activation_function")) {
    c.activation = activation_from_name(r.get("activation_function"));  // TensorRT-LLM's key is exact
  } else if (c.ft_variant != FtVariant::kGptJ) {
    c.activation = Activation::kGeluTanh;
  }
  if (c.ft_variant == FtVariant::kGpt || c.ft_variant == FtVariant::kBloom || c.ft_variant == FtVariant::kOpt ||
      c.ft_variant == FtVariant::kXglm || c.ft_variant == FtVariant::kGptBigCode) {
    const std::string pe = r.has("position_embedding_type") ? lower(r.get("position_embedding_type")) : "";
    const bool pe_has_pos = pe.empty() ? c.position == PositionEmbedding::kLearned
                                       : pe == "learned" || pe == "learned_absolute" || pe == "sinusoidal";
    bool has_pos = r.b_or("has_positional_encoding", pe_has_pos);
    if (!has_pos && c.position == PositionEmbedding::kLearned) c.position = PositionEmbedding::kNone;
    // Without a position table the value only records the model's context (a rope model's
    // max_position_embeddings): kept when given, so that the folder's config.ini round-trips.
    if (has_pos || r.has("max_pos_seq_len")) c.max_pos_seq_len = r.i("max_pos_seq_len");
    if (r.b_or("use_attention_linear_bias", false)) c.position = PositionEmbedding::kAlibi;
    // Rotary positions in a [gpt] section (NeMo GPT-Next): FT has no key for them, ftx's and
    // TensorRT-LLM's say so.
    if (!has_pos && (r.i_or("rotary_dim", 0) > 0 || r.d_or("rotary_pct", 0.0) > 0)) c.position = PositionEmbedding::kRotary;
  } else {
    c.max_pos_seq_len = r.i_or("max_pos_seq_len", 0);
    c.rotary_dim = r.i("rotary_embedding");
  }
  if (c.ft_variant == FtVariant::kGptNeoX) c.parallel_residual = r.i_or("use_gptj_residual", 1) != 0;
  c.has_pre_decoder_layernorm = r.b_or("has_pre_decoder_layernorm", c.has_pre_decoder_layernorm);
  // TensorRT-LLM: do_layer_norm_before = False also means no final layernorm.
  c.has_post_decoder_layernorm = r.b_or("has_post_decoder_layernorm", r.b_or("do_layer_norm_before", true));
  c.weight_data_type = dtype_from_name(lower(r.get_or("weight_data_type", r.get_or("storage_dtype", "fp32"))));
  if (r.b_or("multi_query_mode", false)) c.attention = AttentionKind::kMultiQuery;
  if (r.has("bias")) c.has_bias = r.b_or("bias", true);
}

// [gpt] num_tasks, prompt_learning_type, prompt_learning_start_id (default end_id + 1) and the
// sections [task_K] (the Triton model folder's) or [<model_name>_task_K] (FT's C++ example's).
void read_prompt_learning(const Reader& r, ModelConfig& c) {
  const std::string& origin = r.origin();
  const int64_t n = r.i_or("num_tasks", 0);
  const int64_t type = r.i_or("prompt_learning_type", 0);
  FTX_CHECK(type >= 0 && type <= 3, origin, "prompt_learning_type = " + std::to_string(type) +
                                                " is not 0 (none), 1 (soft), 2 (prefix) or 3 (p-tuning)");
  FTX_CHECK(n >= 0 && n <= 100000, origin, "num_tasks = " + std::to_string(n) + " is out of range");
  c.prompt.type = static_cast<PromptLearningType>(type);
  c.prompt.start_id = r.i_or("prompt_learning_start_id", c.end_id + 1);
  for (int64_t k = 0; k < n; ++k) {
    std::string sec = "task_" + std::to_string(k);
    if (!r.ini.has_section(sec)) sec = c.model_name + "_task_" + std::to_string(k);
    FTX_CHECK(r.ini.has_section(sec), origin,
              "num_tasks = " + std::to_string(n) + " but there is no section [task_" + std::to_string(k) + "]");
    PromptTask t{r.ini.get(sec, "task_name"), r.ini.get_int(sec, "prompt_length")};
    FTX_CHECK(!t.name.empty() && t.name.find('/') == std::string::npos, origin,
              "[" + sec + "] task_name '" + t.name + "' is not a plain name");
    FTX_CHECK(t.length > 0 && t.length <= (int64_t(1) << 24), origin,
              "[" + sec + "] prompt_length = " + std::to_string(t.length) + " is out of range");
    c.prompt.tasks.push_back(std::move(t));
  }
}

}  // namespace ftx::config_ini
