#include "lib/model/ft_weight_layout.h"

#include <algorithm>
#include <cstring>

namespace ftx {

int64_t ft_qkv_columns_per_rank(const ModelConfig& cfg, int64_t tp) {
  // [Q (n/T heads) | K | V (kv heads of this rank each)]; multi-query keeps its one K/V head whole.
  if (cfg.attention == AttentionKind::kMultiQuery) return cfg.q_width() / tp + 2 * cfg.size_per_head;
  return (cfg.head_num / tp + 2 * cfg.kv_heads_per_rank(tp)) * cfg.size_per_head;
}

namespace {

struct Lister {
  std::vector<FtWeightFile>& out;
  int64_t tp;
  void repl(const std::string& name, std::vector<int64_t> shape, bool optional = false) {
    out.push_back({name, -1, std::move(shape), optional});
  }
  void split(const std::string& name, const std::vector<int64_t>& shape) {
    for (int64_t r = 0; r < tp; ++r) out.push_back({name, r, shape, false});
  }
};

}  // namespace

std::vector<FtWeightFile> ft_weight_files(const ModelConfig& cfg, int64_t tp) {
  cfg.validate(tp, "config");
  std::vector<FtWeightFile> files;
  Lister l{files, tp};
  const int64_t H = cfg.hidden(), Q = cfg.q_width(), V = cfg.vocab_size, I = cfg.inter_size;
  const int64_t qkv = ft_qkv_columns_per_rank(cfg, tp);
  const bool gptj = cfg.ft_variant == FtVariant::kGptJ, neox = cfg.ft_variant == FtVariant::kGptNeoX;
  const bool rms = cfg.normalization == Normalization::kRmsNorm;  // norms without bias files

  if (gptj || neox) {
    l.repl("model.wte", {V, H});
    l.repl("model.final_layernorm.weight", {H});
    l.repl("model.final_layernorm.bias", {H});
    l.repl("model.lm_head.weight", {V, H});
    if (gptj) l.repl("model.lm_head.bias", {V});
  } else {
    if (cfg.position == PositionEmbedding::kLearned || cfg.position == PositionEmbedding::kSinusoidal)
      l.repl("model.wpe", {cfg.max_pos_seq_len, H});
    l.repl("model.wte", {V, H});
    l.repl("model.lm_head.weight", {V, H}, /*optional=*/cfg.tied_embeddings);
    if (cfg.has_pre_decoder_layernorm) {
      l.repl("model.pre_decoder_layernorm.weight", {H});
      l.repl("model.pre_decoder_layernorm.bias", {H});
    }
    if (cfg.has_post_decoder_layernorm) {
      l.repl("model.final_layernorm.weight", {H});
      if (!rms) l.repl("model.final_layernorm.bias", {H});
    }
  }

  // Prompt tables: p-tuning [len, H] replicated; prefix [layers, 2, n/T, len, d] per rank.
  for (const PromptTask& t : cfg.prompt.tasks) {
    if (cfg.prompt.type == PromptLearningType::kPTuning)
      l.repl("model.prompt_table." + t.name + ".weight", {t.length, H});
    else if (cfg.prompt.type == PromptLearningType::kPrefixPrompt)
      l.split("model.prefix_prompt." + t.name + ".weight",
              {cfg.num_layer, 2, cfg.head_num / tp, t.length, cfg.size_per_head});
  }

  for (int64_t L = 0; L < cfg.num_layer; ++L) {
    const std::string p = "model.layers." + std::to_string(L) + ".";
    l.repl(p + "input_layernorm.weight", {H});
    if (!rms) l.repl(p + "input_layernorm.bias", {H});
    l.split(p + "attention.query_key_value.weight", {H, qkv});
    if (gptj) {
      l.split(p + "attention.dense.weight", {Q / tp, H});
      l.split(p + "mlp.dense_h_to_4h.weight", {H, I / tp});
      l.split(p + "mlp.dense_h_to_4h.bias", {I / tp});
      l.split(p + "mlp.dense_4h_to_h.weight", {I / tp, H});
      l.repl(p + "mlp.dense_4h_to_h.bias", {H});
      continue;
    }
    if (neox) {
      l.split(p + "attention.query_key_value.bias", {qkv});
      l.split(p + "attention.dense.weight", {Q / tp, H});
      if (!cfg.parallel_residual) l.repl(p + "attention.dense.bias", {H});
      l.split(p + "mlp.dense_h_to_4h.weight", {H, I / tp});
      l.split(p + "mlp.dense_h_to_4h.bias", {I / tp});
      l.split(p + "mlp.dense_4h_to_h.weight", {I / tp, H});
      if (cfg.parallel_residual) l.repl(p + "mlp.attention.bias.sum", {H});
      else l.repl(p + "mlp.dense_4h_to_h.bias", {H});
      l.repl(p + "post_attention_layernorm.weight", {H});
      l.repl(p + "post_attention_layernorm.bias", {H});
      continue;
    }
    if (cfg.has_bias || cfg.qkv_bias) l.split(p + "attention.query_key_value.bias", {qkv});
    if (cfg.qk_norm) {  // one gamma for every head, so every rank holds it whole
      l.repl(p + "attention.q_layernorm.weight", {cfg.size_per_head});
      l.repl(p + "attention.k_layernorm.weight", {cfg.size_per_head});
    }
    l.split(p + "attention.dense.weight", {Q / tp, H});
    if (cfg.has_bias) l.repl(p + "attention.dense.bias", {H});
    if (cfg.sandwich_norm) {  // the attention output's norm; post_attention_layernorm is the FFN's input norm
      l.repl(p + "attention.post_layernorm.weight", {H});
      if (!rms) l.repl(p + "attention.post_layernorm.bias", {H});
    }
    l.repl(p + "post_attention_layernorm.weight", {H});
    if (!rms) l.repl(p + "post_attention_layernorm.bias", {H});
    if (cfg.is_moe_layer(L)) {
      // FT's GPT-MoE names: the router whole on every rank, each expert's FFN sliced as a dense
      // one is (columns of the first GEMMs, rows of the second), the experts stacked on axis 0.
      // A gated FFN's second input projection is `.gate.`, as the dense layout names it.
      // Biases (Megatron-DeepSpeed's experts): the first one's columns split, the output's whole
      // (validate() refuses them with a gate, a shared expert or whole experts, which no layout has
      // files for). With moe_ep_size (expert parallelism) each rank's files hold its E/P experts whole.
      const int64_t E = cfg.expert_num, El = E / cfg.moe_ep_size, Il = cfg.moe_local_inter(tp);
      const int64_t Is = cfg.moe_shared_inter_size;
      l.repl(p + "mlp.moe.gate.wg.weight", {H, E});
      l.split(p + "mlp.moe.experts.dense_h_to_4h.weight", {El, H, Il});
      if (cfg.has_bias) l.split(p + "mlp.moe.experts.dense_h_to_4h.bias", {E, Il});
      if (cfg.activation.is_gated()) l.split(p + "mlp.moe.experts.dense_h_to_4h.gate.weight", {El, H, Il});
      l.split(p + "mlp.moe.experts.dense_4h_to_h.weight", {El, Il, H});
      if (cfg.has_bias) l.repl(p + "mlp.moe.experts.dense_4h_to_h.bias", {E, H});
      if (Is > 0) {  // ftx's: a shared expert sliced as a dense FFN, its sigmoid gate whole on every rank
        l.split(p + "mlp.moe.shared_expert.dense_h_to_4h.weight", {H, Is / tp});
        if (cfg.activation.is_gated()) l.split(p + "mlp.moe.shared_expert.dense_h_to_4h.gate.weight", {H, Is / tp});
        l.split(p + "mlp.moe.shared_expert.dense_4h_to_h.weight", {Is / tp, H});
        l.repl(p + "mlp.moe.shared_expert_gate.weight", {H, 1});
      }
    } else {
      l.split(p + "mlp.dense_h_to_4h.weight", {H, I / tp});
      if (cfg.has_bias) l.split(p + "mlp.dense_h_to_4h.bias", {I / tp});
      if (cfg.activation.is_gated()) {
        l.split(p + "mlp.dense_h_to_4h.gate.weight", {H, I / tp});
        if (cfg.has_bias) l.split(p + "mlp.dense_h_to_4h.gate.bias", {I / tp});
      }
      l.split(p + "mlp.dense_4h_to_h.weight", {I / tp, H});
      if (cfg.has_bias) l.repl(p + "mlp.dense_4h_to_h.bias", {H});
    }
    if (cfg.sandwich_norm) {
      l.repl(p + "mlp.post_layernorm.weight", {H});
      if (!rms) l.repl(p + "mlp.post_layernorm.bias", {H});
    }
  }
  if (cfg.weight_only_precision != WeightOnlyPrecision::kNone) {
    // The layer GEMMs' weights are the int4 files (int4_files.h), whose shapes depend on the groups,
    // or the int8 files (int8_files.h).
    files.erase(std::remove_if(files.begin(), files.end(), [](const FtWeightFile& f) { return ft_is_layer_gemm_weight(f.name); }),
                files.end());
  }
  return files;
}

bool ft_is_layer_gemm_weight(const std::string& name) {
  if (name.rfind("model.layers.", 0) != 0) return false;
  for (const char* g : {".attention.query_key_value.weight", ".attention.dense.weight", ".mlp.dense_h_to_4h.weight",
                        ".mlp.dense_h_to_4h.gate.weight", ".mlp.dense_4h_to_h.weight"}) {
    const size_t n = std::strlen(g);
    if (name.size() > n && name.compare(name.size() - n, n, g) == 0) return true;
  }
  return false;
}

bool ft_is_int8_side_file(const std::string& f) {
  if (f.rfind("model.layers.", 0) != 0 || f.size() < 4 || f.compare(f.size() - 4, 4, ".bin") != 0) return false;
  static const char* gemms[] = {".attention.query_key_value.", ".attention.dense.", ".mlp.dense_h_to_4h.",
                                ".mlp.dense_h_to_4h.gate.", ".mlp.dense_4h_to_h."};
  static const char* kinds[] = {"weight.int8.", "scale_x_orig_quant.", "scale_w_quant_orig.", "scale_y_accum_quant.",
                                "scale_y_quant_orig.", "scale.", "scale_inter.", "scale_out."};
  for (const char* g : gemms) {
    const size_t at = f.find(g);
    if (at == std::string::npos) continue;
    const std::string rest = f.substr(at + std::strlen(g));
    for (const char* k : kinds)
      if (rest.rfind(k, 0) == 0) return true;
  }
  return false;
}

}  // namespace ftx
