// What convert-hf does with each key of transformers' configuration classes (4.45 and 5.x names)
// for the architectures it converts: read (and refused by name and value where ftx lacks that
// value), or not part of the model's math. man/ftx-convert-hf.1 prints these tables; a key in
// neither list draws a warning naming it (unknown_keys).
#include "lib/convert/hf_config.h"

#include <map>

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

const char* const kDropout = "dropout: off at inference";

std::vector<KeyRule> rope_keys(const char* older_theta, const char* older_partial) {
  std::vector<KeyRule> k = {
      {"rope_parameters", R, "5.x: rope_type (default, linear, llama3; others refused), rope_theta, "
                             "partial_rotary_factor, factor, low_freq_factor, high_freq_factor, "
                             "original_max_position_embeddings; any other field refused"},
      {"rope_scaling", R, "4.x: as rope_parameters"},
      {"rope_theta", R, "rotary_base (must agree with rope_parameters)"},
      {"partial_rotary_factor", R, "rotary_dim = int(head size x factor)"},
  };
  if (older_theta) k.push_back({older_theta, R, "older name of rope_theta"});
  if (older_partial) k.push_back({older_partial, R, "older name of partial_rotary_factor"});
  return k;
}

std::vector<KeyRule> join(std::vector<KeyRule> a, const std::vector<KeyRule>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<KeyRule> gpt2_keys(bool bigcode) {
  std::vector<KeyRule> k = {
      {"n_embd", R, "head_num x size_per_head"},
      {"n_head", R, "head_num"},
      {"n_layer", R, "num_layer"},
      {"n_inner", R, "inter_size (null: 4 x n_embd)"},
      {"n_positions", R, "max_pos_seq_len"},
      {"n_ctx", N, "older copy of n_positions, unused by transformers"},
      {"vocab_size", R, "vocab_size"},
      {"activation_function", R, "activation (gelu, gelu_new, gelu_pytorch_tanh, relu, silu; others refused)"},
      {"layer_norm_epsilon", R, "layernorm_eps"},
      {"scale_attn_weights", R, "false refused"},
      {"scale_attn_by_inverse_layer_idx", R, "true refused"},
      {"tie_word_embeddings", R, "tied_embeddings"},
      {"reorder_and_upcast_attn", N, "precision of the attention product only; ftx computes it in fp32"},
      {"attn_pdrop", N, kDropout},
      {"embd_pdrop", N, kDropout},
      {"resid_pdrop", N, kDropout},
      {"summary_type", N, "sequence-summary head (classification), not the LM"},
      {"summary_use_proj", N, "sequence-summary head"},
      {"summary_activation", N, "sequence-summary head"},
      {"summary_proj_to_labels", N, "sequence-summary head"},
      {"summary_first_dropout", N, "sequence-summary head"},
      {"initializer_range", N, "training initialisation"},
  };
  if (bigcode) {
    k.push_back({"multi_query", R, "multi-query attention (kv_head_num 1)"});
    k.push_back({"num_key_value_heads", R, "5.x: 1 with multi_query, n_head without (others refused)"});
    k.push_back({"attention_softmax_in_fp32", N, "precision only; ftx's softmax is fp32"});
    k.push_back({"scale_attention_softmax_in_fp32", N, "precision only"});
  }
  return k;
}

std::vector<KeyRule> llama_like(const std::string& type) {
  std::vector<KeyRule> k = {
      {"hidden_size", R, "head_num x size_per_head"},
      {"num_attention_heads", R, "head_num"},
      {"num_key_value_heads", R, "kv_head_num (null: num_attention_heads)"},
      {"head_dim", R, "must be hidden_size / num_attention_heads (others refused)"},
      {"num_hidden_layers", R, "num_layer"},
      {"intermediate_size", R, "inter_size"},
      {"vocab_size", R, "vocab_size"},
      {"max_position_embeddings", R, "max_pos_seq_len (recorded; rotary positions are not limited by it)"},
      {"hidden_act", R, "silu: SwiGLU (others refused)"},
      {"rms_norm_eps", R, "layernorm_eps (RMSNorm)"},
      {"tie_word_embeddings", R, "tied_embeddings"},
      {"attention_dropout", N, kDropout},
      {"initializer_range", N, "training initialisation"},
  };
  k = join(k, rope_keys(nullptr, nullptr));
  if (type == "llama") {
    k.push_back({"attention_bias", R, "q/k/v/o biases: false (the default) none; true with mlp_bias true: has_bias; "
                                      "true alone refused"});
    k.push_back({"mlp_bias", R, "gate/up/down biases: true refused unless attention_bias is true too"});
    k.push_back({"pretraining_tp", N, "splits the same products into slices"});
  }
  if (type == "mistral" || type == "qwen2")
    k.push_back({"sliding_window", R, "sliding_window (null: none); see use_sliding_window for qwen2"});
  if (type == "qwen2") {
    k.push_back({"use_sliding_window", R, "false: no window; true: window on the layers layer_types says"});
    k.push_back({"max_window_layers", R, "4.x: layers from this index on slide; some sliding, some not is refused"});
    k.push_back({"layer_types", R, "5.x: full_attention / sliding_attention per layer; a mix is refused"});
    k.push_back({"attention_bias", R, "Qwen2's q/k/v biases (o has none); false refused"});
  }
  return k;
}

std::map<std::string, std::vector<KeyRule>> make_tables() {
  std::map<std::string, std::vector<KeyRule>> t;
  t["gpt2"] = gpt2_keys(false);
  t["gpt_bigcode"] = gpt2_keys(true);
  t["gptj"] = {
      {"n_embd", R, "head_num x size_per_head"},
      {"n_head", R, "head_num"},
      {"n_layer", R, "num_layer"},
      {"n_inner", R, "inter_size (null: 4 x n_embd)"},
      {"n_positions", R, "max_pos_seq_len"},
      {"vocab_size", R, "vocab_size"},
      {"rotary_dim", R, "rotary_embedding (null: the whole head)"},
      {"activation_function", R, "activation"},
      {"layer_norm_epsilon", R, "layernorm_eps"},
      {"tie_word_embeddings", R, "true refused (GPT-J's lm_head has its own weight and bias)"},
      {"attn_pdrop", N, kDropout},
      {"embd_pdrop", N, kDropout},
      {"resid_pdrop", N, kDropout},
      {"initializer_range", N, "training initialisation"},
  };
  t["gpt_neox"] = join(
      {
          {"hidden_size", R, "head_num x size_per_head"},
          {"num_attention_heads", R, "head_num"},
          {"num_hidden_layers", R, "num_layer"},
          {"intermediate_size", R, "inter_size"},
          {"vocab_size", R, "vocab_size"},
          {"max_position_embeddings", R, "max_pos_seq_len (recorded)"},
          {"hidden_act", R, "activation"},
          {"layer_norm_eps", R, "layernorm_eps"},
          {"use_parallel_residual", R, "use_gptj_residual"},
          {"attention_bias", R, "false refused"},
          {"tie_word_embeddings", R, "lm_head written from embed_in"},
          {"attention_dropout", N, kDropout},
          {"hidden_dropout", N, kDropout},
          {"classifier_dropout", N, "classification head"},
          {"initializer_range", N, "training initialisation"},
      },
      rope_keys("rotary_emb_base", "rotary_pct"));
  t["bloom"] = {
      {"hidden_size", R, "head_num x size_per_head (older name n_embed)"},
      {"n_embed", R, "older name of hidden_size"},
      {"n_head", R, "head_num (or num_attention_heads)"},
      {"num_attention_heads", R, "head_num"},
      {"n_layer", R, "num_layer (or num_hidden_layers)"},
      {"num_hidden_layers", R, "num_layer"},
      {"vocab_size", R, "vocab_size"},
      {"layer_norm_epsilon", R, "layernorm_eps"},
      {"apply_residual_connection_post_layernorm", R, "true refused"},
      {"tie_word_embeddings", R, "tied_embeddings"},
      {"n_inner", N, "unused by transformers (BLOOM's FFN is 4 x hidden_size)"},
      {"pretraining_tp", N, "splits the same products into slices"},
      {"slow_but_exact", N, "precision of the same products"},
      {"attention_softmax_in_fp32", N, "precision only"},
      {"masked_softmax_fusion", N, "Megatron-DeepSpeed kernel choice"},
      {"bias_dropout_fusion", N, "Megatron-DeepSpeed kernel choice"},
      {"skip_bias_add", N, "Megatron-DeepSpeed kernel choice"},
      {"skip_bias_add_qkv", N, "Megatron-DeepSpeed kernel choice"},
      {"offset_alibi", N, "unused by transformers"},
      {"seq_length", N, "training sequence length"},
      {"unk_token_id", N, "tokenizer id"},
      {"attention_dropout", N, kDropout},
      {"hidden_dropout", N, kDropout},
      {"initializer_range", N, "training initialisation"},
  };
  t["opt"] = {
      {"hidden_size", R, "head_num x size_per_head"},
      {"num_attention_heads", R, "head_num"},
      {"num_hidden_layers", R, "num_layer"},
      {"ffn_dim", R, "inter_size"},
      {"vocab_size", R, "vocab_size"},
      {"max_position_embeddings", R, "max_pos_seq_len"},
      {"word_embed_proj_dim", R, "project_in/out folded into wte and lm_head"},
      {"do_layer_norm_before", R, "layernorm_type"},
      {"_remove_final_layer_norm", R, "has_post_decoder_layernorm"},
      {"activation_function", R, "activation"},
      {"enable_bias", R, "false refused"},
      {"layer_norm_elementwise_affine", R, "false refused"},
      {"tie_word_embeddings", R, "lm_head from embed_tokens or lm_head.weight"},
      {"dropout", N, kDropout},
      {"attention_dropout", N, kDropout},
      {"activation_dropout", N, kDropout},
      {"layerdrop", N, "training layer drop"},
      {"init_std", N, "training initialisation"},
  };
  t["xglm"] = {
      {"d_model", R, "head_num x size_per_head"},
      {"attention_heads", R, "head_num"},
      {"num_layers", R, "num_layer"},
      {"ffn_dim", R, "inter_size"},
      {"vocab_size", R, "vocab_size"},
      {"max_position_embeddings", R, "max_pos_seq_len (sinusoidal table rows)"},
      {"activation_function", R, "activation"},
      {"scale_embedding", R, "wte x sqrt(d_model)"},
      {"tie_word_embeddings", R, "tied_embeddings"},
      {"dropout", N, kDropout},
      {"attention_dropout", N, kDropout},
      {"activation_dropout", N, kDropout},
      {"layerdrop", N, "training layer drop"},
      {"init_std", N, "training initialisation"},
  };
  for (const char* l : {"llama", "mistral", "qwen2"}) t[l] = llama_like(l);
  return t;
}

}  // namespace

const std::vector<KeyRule>& architecture_keys(const std::string& model_type) {
  static const std::map<std::string, std::vector<KeyRule>> tables = make_tables();
  static const std::vector<KeyRule> none;
  auto it = tables.find(model_type);
  return it == tables.end() ? none : it->second;
}

const std::vector<KeyRule>& common_keys() {
  static const std::vector<KeyRule> k = {
      {"model_type", R, "the architecture (or --model)"},
      {"bos_token_id", R, "start_id"},
      {"eos_token_id", R, "end_id (the first of a list)"},
      {"pruned_heads", R, "non-empty refused (heads removed)"},
      {"quantization_config", R, "refused (quantised weights)"},
      {"add_cross_attention", R, "true refused (cross-attention layers)"},
      {"torch_dtype", N, "4.x: the dtype of the saved weights; read from the files, -t sets the output's"},
      {"dtype", N, "5.x: as torch_dtype"},
      {"_name_or_path", N, "model_name"},
      {"architectures", N, "class names; model_type decides"},
      {"transformers_version", N, "bookkeeping"},
      {"pad_token_id", N, "tokenizer id"},
      {"sep_token_id", N, "tokenizer id"},
      {"decoder_start_token_id", N, "encoder-decoder models"},
      {"use_cache", N, "transformers' KV cache switch"},
      {"attn_implementation", N, "eager, sdpa, flash: the same function"},
      {"is_decoder", N, "encoder-decoder models"},
      {"is_encoder_decoder", N, "false for these models"},
      {"tie_encoder_decoder", N, "encoder-decoder models"},
      {"cross_attention_hidden_size", N, "encoder-decoder models"},
      {"chunk_size_feed_forward", N, "splits the same products into chunks"},
      {"torchscript", N, "export switch"},
      {"use_bfloat16", N, "training switch"},
      {"tf_legacy_loss", N, "training loss"},
      {"output_attentions", N, "outputs only"},
      {"output_hidden_states", N, "outputs only"},
      {"output_scores", N, "outputs only"},
      {"return_dict", N, "outputs only"},
      {"return_dict_in_generate", N, "outputs only"},
      {"id2label", N, "classification heads"},
      {"label2id", N, "classification heads"},
      {"num_labels", N, "classification heads"},
      {"problem_type", N, "classification heads"},
      {"finetuning_task", N, "bookkeeping"},
      {"task_specific_params", N, "generation defaults"},
      {"tokenizer_class", N, "tokenizer"},
      {"prefix", N, "generation default"},
      {"max_length", N, "generation default"},
      {"min_length", N, "generation default"},
      {"do_sample", N, "generation default"},
      {"early_stopping", N, "generation default"},
      {"num_beams", N, "generation default"},
      {"num_beam_groups", N, "generation default"},
      {"diversity_penalty", N, "generation default"},
      {"temperature", N, "generation default"},
      {"top_k", N, "generation default"},
      {"top_p", N, "generation default"},
      {"typical_p", N, "generation default"},
      {"repetition_penalty", N, "generation default"},
      {"length_penalty", N, "generation default"},
      {"no_repeat_ngram_size", N, "generation default"},
      {"encoder_no_repeat_ngram_size", N, "generation default"},
      {"bad_words_ids", N, "generation default"},
      {"num_return_sequences", N, "generation default"},
      {"output_scores", N, "generation default"},
      {"forced_bos_token_id", N, "generation default"},
      {"forced_eos_token_id", N, "generation default"},
      {"remove_invalid_values", N, "generation default"},
      {"exponential_decay_length_penalty", N, "generation default"},
      {"suppress_tokens", N, "generation default"},
      {"begin_suppress_tokens", N, "generation default"},
      {"gradient_checkpointing", N, "training switch"},
  };
  return k;
}

}  // namespace ftx::hf
