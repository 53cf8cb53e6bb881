#pragma once
// ModelWeights: one TP rank's tensors of an FT model folder (`OUT/N-gpu/`), checked and loaded
// onto a backend. Under pipeline parallelism a rank loads only its stage's layers (and the
// embeddings on the first stage, the final layernorm and lm_head on the last) from the same folder:
// PP needs no other layout.
//
// Weight matrices (the QKV, dense and FFN weights, the embedding table and lm_head) are held in the
// backend's weight dtype: fp32 on the CPU (an fp16/bf16 file takes 2x its size in memory, and
// GEMMs run at full fp32 BLAS speed with no per-call conversion), fp16/bf16 on a GPU asked for it.
// Vectors (biases, norms) and the position table are always fp32: they are small, and the
// elementwise kernels read them in fp32.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/dist/parallel.h"
#include "lib/engine/embedding_sharding.h"
#include "lib/engine/quant_policy.h"
#include "lib/model/model_config.h"
#include "lib/ops/backend.h"

namespace ftx {

struct LayerWeights {
  // Null when the model has no such tensor (no bias, GPT-J's missing LN2, ...).
  const float *ln1_gamma = nullptr, *ln1_beta = nullptr;
  ops::Weight qkv_w;                     // [H, qkv_cols]
  const float* qkv_b = nullptr;          // [qkv_cols]
  const float* q_norm_gamma = nullptr;   // [head_dim], qk_norm only
  const float* k_norm_gamma = nullptr;   // [head_dim], qk_norm only
  ops::Weight dense_w;                   // [H/T, H]
  const float* dense_b = nullptr;        // [H]
  // sandwich_norm only: the norms of the attention's and the FFN's outputs.
  const float *post_attn_gamma = nullptr, *post_attn_beta = nullptr;
  const float *post_ffn_gamma = nullptr, *post_ffn_beta = nullptr;
  const float *ln2_gamma = nullptr, *ln2_beta = nullptr;
  ops::Weight fc_w;                      // [H, I/T]
  const float* fc_b = nullptr;           // [I/T]
  ops::Weight gate_w;                    // gated FFN second projection
  const float* gate_b = nullptr;
  ops::Weight proj_w;                    // [I/T, H]
  const float* proj_b = nullptr;         // [H]
  // A mixture-of-experts layer (ModelConfig::is_moe_layer; fc_w, gate_w and proj_w stay empty):
  // the router [H, E], and expert e's FFN on this rank, moe_fc[e] and moe_gate[e] [H, I/T],
  // moe_proj[e] [I/T, H] (each a slice of the stacked file, uploaded as its own matrix).
  ops::Weight moe_router;
  std::vector<ops::Weight> moe_fc, moe_gate, moe_proj;
  // Expert biases (has_bias: FT GPT-MoE's Megatron-DeepSpeed experts): [E, I/T] and [E, H].
  const float *moe_fc_b = nullptr, *moe_proj_b = nullptr;
  // Its shared expert, when the model has one (ModelConfig::moe_shared_inter_size): [H, Is/T] and
  // [Is/T, H] on this rank, and the sigmoid gate's [H, 1].
  ops::Weight moe_shared_fc, moe_shared_gate, moe_shared_proj, moe_shared_weigher;
  // INT8 or FP8 KV cache only (ModelWeights::kv_dtype() int8 or fp8): the layer's kv_quant_orig
  // (kv_cache_scales.h) or kv_cache_scaling_factor (fp8_weights.h); 0 otherwise.
  float kv_scale = 0.0f;
};

class ModelWeights {
 public:
  // Reads `dir`/config.ini and the files of `rank` out of `tp` ranks, quantised as `quant` says
  // (with the folder's int8 or FP8 files and scales where it asks for them). Throws Error for: a
  // folder converted for another TP size, a missing/short/long file (naming the file, bytes found
  // and expected), an unexpected extra model.*.bin, a manifest.json that disagrees.
  static ModelWeights load(const std::string& dir, int rank, int tp, ops::Backend& backend,
                           const QuantPolicy& quant = {});
  // The tensors of world rank layout.rank: TP shard layout.tp_rank() of stage layout.stage()'s layers.
  // No default policy here: a caller holding a Runtime passes its `quant`, or a run made with
  // --int8-mode or --fp8 would load (and silently run) the unquantised model.
  // `embedding`: the embedding table and lm_head split over the TP ranks (embedding_sharding.h);
  // Error naming model.lm_head.weight.bin when sharing is asked of a model with its own lm_head.
  static ModelWeights load(const std::string& dir, const dist::ParallelLayout& layout, ops::Backend& backend,
                           const QuantPolicy& quant, const EmbeddingSharding& embedding = {});
  // Checks the folder's files (sizes and extras) without loading: the same errors as load().
  static void check_files(const std::string& dir, const ModelConfig& cfg, int tp);
  // A file the loader refuses when config.ini's layout does not name it: a model.*.bin that is no
  // INT8 or FP8 side file (scales, quantised weights).
  static bool unexpected_file(const std::string& name);

  ModelWeights() = default;
  ModelWeights(ModelWeights&&) noexcept;
  ModelWeights& operator=(ModelWeights&&) noexcept;
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;
  ~ModelWeights();

  const ModelConfig& config() const { return config_; }
  int rank() const { return rank_; }  // TP rank
  int tp() const { return tp_; }
  // layers[i] is model layer first_layer() + i; has_embeddings(): the stage holds the embeddings.
  int64_t first_layer() const { return first_layer_; }
  bool has_embeddings() const { return has_embeddings_; }

  // [V, H]; split by embedding_sharding(): dim 0 [vocab_rows_per_rank() + 1, H], this rank's rows
  // and a zero row last (what ids outside them look up), dim 1 [V, H / tp()], this rank's columns.
  ops::Weight wte;
  const float* wpe = nullptr;
  ops::Weight lm_head_w;             // [padded_vocab, H]; == wte when tied; split: this rank's rows
  const float* lm_head_b = nullptr;  // [padded_vocab]; split: this rank's
  // The vocabulary rounded up to the backend's vocab_pad_multiple(): the rows of lm_head_w (and of
  // wte when tied) and of lm_head_b; rows past config().vocab_size are zero. Split: tp() times
  // vocab_rows_per_rank(), the logits' width once the ranks' are joined.
  int64_t padded_vocab() const { return padded_vocab_; }
  const EmbeddingSharding& embedding_sharding() const { return embedding_; }
  // Split only: the vocabulary rows [rank() * this, (rank() + 1) * this) of this rank's lm_head (and
  // dim-0 embedding) slice.
  int64_t vocab_rows_per_rank() const { return vocab_rows_; }
  // Bytes the embedding table and the lm_head (its bias included) take on this rank (0 for the
  // lm_head when it reads the embedding table), and a line saying so (--verbose).
  size_t embedding_bytes() const { return embedding_bytes_; }
  size_t lm_head_bytes() const { return head_bytes_; }
  bool lm_head_shared() const { return head_shared_; }
  std::string table_report() const;
  const float *pre_ln_gamma = nullptr, *pre_ln_beta = nullptr;
  const float *final_ln_gamma = nullptr, *final_ln_beta = nullptr;
  std::vector<LayerWeights> layers;  // this stage's layers only
  size_t bytes() const { return bytes_; }  // bytes held on the backend
  // What the KV cache for these weights is held in: int8 or FP8 E4M3 when the policy they were
  // loaded with asks for it (each layer's LayerWeights::kv_scale read), else the backend's kv_dtype().
  DType kv_dtype() const { return kv_dtype_; }

 private:
  ModelConfig config_;
  int rank_ = 0, tp_ = 1;
  int64_t first_layer_ = 0;
  int64_t padded_vocab_ = 0, vocab_rows_ = 0;
  EmbeddingSharding embedding_;
  size_t embedding_bytes_ = 0, head_bytes_ = 0;
  bool head_shared_ = false;
  DType kv_dtype_ = DType::kFloat32;
  bool has_embeddings_ = true, has_head_ = true;
  ops::Backend* backend_ = nullptr;
  std::vector<float*> owned_;
  std::vector<ops::Weight> owned_weights_;
  void release_all();
  // A split run's model.wte, model.lm_head.weight or model.lm_head.bias (src: the whole file).
  void load_split_table(const std::string& name, const uint8_t* src, DType dtype, bool tied, bool int8_head);
  size_t bytes_ = 0;
};

}  // namespace ftx
