// What convert-hf does with the keys every transformers PretrainedConfig may carry, whatever the
// family: read (and refused by name and value where ftx lacks that value), or not part of the
// model's math. Each family's own keys are in its file (lib/convert/hf/<family>.cc);
// man/ftx-convert-hf.1 prints both (hf::man_key_tables), and a key in neither list draws a warning
// naming it (unknown_keys).
#include "lib/convert/hf_config.h"

namespace ftx::hf {

namespace {

constexpr KeyUse R = KeyUse::kRead;
constexpr KeyUse N = KeyUse::kNoEffect;

}  // namespace

const std::vector<KeyRule>& common_keys() {
  static const std::vector<KeyRule> k = {
      {"model_type", R, "the architecture (or --model)"},
      {"bos_token_id", R, "start_id"},
      {"eos_token_id", R, "end_id (the first of a list)"},
      {"pruned_heads", R, "non-empty refused (heads removed)"},
      {"quantization_config", R, "gptq, awq, compressed-tensors: the layer GEMMs imported as INT4 (compressed-tensors int8: INT8; other methods and schemes refused)"},
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
