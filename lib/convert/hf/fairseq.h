#pragma once
// What OPT and XGLM (fairseq's decoder) share: the layer layout, and embed_tokens (with OPT's
// project_in/out) and lm_head, which are not layout rules' tensors: the family computes wte and
// lm_head from them once every source is seen (finish()).
#include <map>
#include <string>

#include "formats/error.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

// fairseq-style decoder layers (OPT, XGLM): separate q/k/v projections, fc1/fc2.
inline ArchLayout fairseq_layout(const std::string& name, const std::string& final_norm) {
  return ArchLayout{
      name,
      {
          {final_norm + R"(\.(weight|bias))", "model.final_layernorm.$1", Role::kReplicated, false},
          {kL + R"(self_attn_layer_norm\.(weight|bias))", kFL + "input_layernorm.$2", Role::kReplicated, false},
          {kL + R"(self_attn\.q_proj\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true, 0},
          {kL + R"(self_attn\.k_proj\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true, 1},
          {kL + R"(self_attn\.v_proj\.(weight|bias))", kFL + "attention.query_key_value.$2", Role::kQkv, true, 2},
          {kL + R"(self_attn\.out_proj\.weight)", kFL + "attention.dense.weight", Role::kRow, true},
          {kL + R"(self_attn\.out_proj\.bias)", kFL + "attention.dense.bias", Role::kReplicated, false},
          {kL + R"(final_layer_norm\.(weight|bias))", kFL + "post_attention_layernorm.$2", Role::kReplicated, false},
          {kL + R"(fc1\.(weight|bias))", kFL + "mlp.dense_h_to_4h.$2", Role::kColumn, true},
          {kL + R"(fc2\.weight)", kFL + "mlp.dense_4h_to_h.weight", Role::kRow, true},
          {kL + R"(fc2\.bias)", kFL + "mlp.dense_4h_to_h.bias", Role::kReplicated, false},
      },
      {R"(embed_positions\.weights)", R"(.*\.inv_freq)"}};
}

class EmbeddingHooks : public TensorHooks {
 public:
  bool layout_takes(const Source& s, std::string& n, std::vector<TensorView>&, ConversionPlan&) override {
    if (n != "embed_tokens.weight" && n != "project_in.weight" && n != "project_out.weight" && n != "lm_head.weight")
      return true;
    taken_[n] = &s;
    return false;
  }

 protected:
  const Source* get(const std::string& n) const {
    auto it = taken_.find(n);
    return it == taken_.end() ? nullptr : it->second;
  }
  // embed_tokens, and the output table: embed_tokens when tie_word_embeddings (default true), else lm_head.
  const Source* embed() const {
    const Source* emb = get("embed_tokens.weight");
    FTX_CHECK(emb, in->folder, "no embed_tokens.weight");
    return emb;
  }
  const Source* head(const Source* emb) const {
    const Source* h = bool_or(in->config, "tie_word_embeddings", true, in->cfg_path) ? emb : get("lm_head.weight");
    FTX_CHECK(h, in->folder, "tie_word_embeddings is false but there is no lm_head.weight");
    return h;
  }

 private:
  std::map<std::string, const Source*> taken_;
};

}  // namespace ftx::hf
