#pragma once
// Every file of an FT model folder (`OUT/N-gpu/`) for a ModelConfig and an inference TP size, with
// the shape each file holds (docs/ft-layout.md). The converters write exactly this list and the
// engine checks and loads exactly this list, so the two cannot drift apart.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/model_config.h"

namespace ftx {

struct FtWeightFile {
  std::string name;             // e.g. "model.layers.3.attention.query_key_value.weight"
  int64_t rank = -1;            // TP rank of this file; -1 = replicated, written once without suffix
  std::vector<int64_t> shape;   // of this file (2-D GEMM weights as [in, out])
  bool optional = false;        // may be absent (GPT family lm_head when embeddings are tied)
  // name + (rank >= 0 ? "." + rank : "") + ".bin"
  std::string file_name() const { return name + (rank >= 0 ? "." + std::to_string(rank) : "") + ".bin"; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Files in a deterministic order: top-level tensors, then layer 0, 1, ...; split tensors once per
// rank (rank 0 .. tp-1). Calls cfg.validate(tp, "config") first, so bad TP sizes are an Error.
//  * GPT family (gpt, bloom, opt, xglm, gpt_bigcode): wpe when the position table is stored,
//    wte, optional lm_head (required when !tied_embeddings), pre/post decoder layernorms, per layer
//    input/post-attention layernorms, fused QKV [H, 3H/T] (multi-query: [H, H/T + 2d]),
//    attention.dense, mlp (+ `mlp.dense_h_to_4h.gate.*` for gated activations), biases when has_bias;
//    with sandwich_norm the output norms `attention.post_layernorm.*` and `mlp.post_layernorm.*`.
//  * GPT-J and GPT-NeoX: their own lists (no position table, an lm_head always).
//  * weight_only_precision int4 or int8: the layer GEMMs' weights (ft_is_layer_gemm_weight) are not
//    listed: the folder holds their int4 files (lib/model/int4_files.h) or int8 files
//    (lib/model/int8_files.h) instead.
std::vector<FtWeightFile> ft_weight_files(const ModelConfig& cfg, int64_t tp);

// True for a layer GEMM's weight tensor name (model.layers.L.attention.query_key_value.weight,
// attention.dense, mlp.dense_h_to_4h, its .gate and mlp.dense_4h_to_h), the GEMMs INT4 replaces.
bool ft_is_layer_gemm_weight(const std::string& name);

// QKV output columns held by one rank: 3H/T, or H/T + 2d for multi-query.
int64_t ft_qkv_columns_per_rank(const ModelConfig& cfg, int64_t tp);

// True for the INT8 side files `ftx smoothquant` writes beside the weights of a layer GEMM (a
// gated FFN's gate projection included) (TensorRT-LLM's `*.weight.int8[.col].R.bin`, `*.scale_{x_orig_quant,w_quant_orig,y_accum_quant,
// y_quant_orig}[.col][.R].bin`; FasterTransformer's `*.scale{,_inter,_out}.bin`). The
// floating-point loader ignores them; the INT8 modes read them.
bool ft_is_int8_side_file(const std::string& file_name);

}  // namespace ftx
