// TensorRT-LLM's keys of config.ini (config_ini_keys.h): a folder of hf_gpt_convert.py or
// nemo_ckpt_convert.py, with HuggingFace's names.
#include <string>

#include "formats/dtype.h"
#include "formats/error.h"
#include "lib/model/config_ini_keys.h"

namespace ftx::config_ini {

void read_trtllm_keys(const Reader& r, ModelConfig& c) {
  const std::string& origin = r.origin();
  c.model_name = r.get_or("model_name", r.get_or("model", "gpt"));
  const int64_t n_embd = r.i("n_embd");
  c.head_num = r.i("n_head");
  // n_embd is the model width: the head size is n_embd / n_head unless size_per_head says it (a
  // folder of ftx's whose width is not heads x head size, Qwen3's and Gemma's, without head_num).
  FTX_CHECK(c.head_num > 0 && (r.has("size_per_head") || n_embd % c.head_num == 0), origin,
            "n_embd " + std::to_string(n_embd) + " is not a multiple of n_head " + std::to_string(c.head_num));
  c.size_per_head = r.has("size_per_head") ? r.i("size_per_head") : n_embd / c.head_num;
  c.inter_size = r.i_or("intermediate_size", 0);
  if (c.inter_size == 0 && r.get_or("n_inner", "None") != "None") c.inter_size = r.i("n_inner");
  if (c.inter_size == 0) c.inter_size = 4 * n_embd;
  c.num_layer = r.i("n_layer");
  c.vocab_size = r.i("vocab_size");
  c.max_pos_seq_len = r.i("n_positions");
  c.start_id = r.i_or("start_id", r.i_or("bos_token_id", 50256));
  c.end_id = r.i_or("end_id", r.i_or("eos_token_id", 50256));
  c.layernorm_eps = r.d_or("layer_norm_epsilon", 1e-5);
  c.activation = activation_from_name(r.get("activation_function"));
  c.norm = r.b_or("do_layer_norm_before", true) ? NormPlacement::kPre : NormPlacement::kPost;
  c.has_post_decoder_layernorm = r.b_or("has_post_decoder_layernorm", c.norm == NormPlacement::kPre);  // TL: no ln_f after post-LN
  c.has_bias = r.b_or("bias", true);
  if (r.b_or("multi_query_mode", false)) c.attention = AttentionKind::kMultiQuery;
  double pct = r.d_or("rotary_pct", 0.0);
  if (pct > 0) {
    c.position = PositionEmbedding::kRotary;
    c.rotary_dim = static_cast<int64_t>(c.size_per_head * pct);
    c.max_pos_seq_len = 0;
  }
  c.rotary_base = r.d_or("rotary_base", 10000.0);
  c.weight_data_type = dtype_from_name(lower(r.get_or("storage_dtype", "float32")));
}

}  // namespace ftx::config_ini
