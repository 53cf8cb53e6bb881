// Making an Engine (one TP rank of one pipeline stage): the check that the weights are this
// rank's, the attention's shape, the limits a position must keep. See engine.h for the contract
// and docs/runtime.md for the math. The engine's other rooms:
//   engine_append.cc    prefill() and append(): new tokens after the rows' ends, as one batch
//   engine_decode.cc    decode(): one token per row, a step the backend may replay
//   engine_forward.cc   the model's math: embedding, the decoder stack, final norm and lm_head
//   engine_pipeline.cc  micro-batches, hidden states between stages, the logits to world rank 0
//   engine_cache.cc     the rows' blocks of the paged KV cache, and what a call would take
//   engine_prompts.cc   p-tuning tables and prefix prompts
//   engine_memory.cc    the KV pool and the workspaces: sizing, a fixed budget, reserve()
#include "lib/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/error.h"
#include "lib/engine/prompt_tables.h"
#include "lib/engine/sliding_window.h"
#include "lib/model/rope_scaling.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/ops/host_math.h"

namespace ftx {

Engine::Engine(const ModelWeights& weights, ops::Backend& backend, dist::Communicator& comm, EngineOptions options)
    : Engine(std::make_unique<dist::ParallelGroups>(dist::ParallelGroups::tensor_only(comm)), weights, backend,
             options) {}

Engine::Engine(const ModelWeights& weights, ops::Backend& backend, const dist::ParallelGroups& groups,
               EngineOptions options)
    : Engine(nullptr, weights, backend, options, &groups) {}

Engine::Engine(std::unique_ptr<dist::ParallelGroups> own, const ModelWeights& weights, ops::Backend& backend,
               EngineOptions options, const dist::ParallelGroups* groups)
    : own_groups_(std::move(own)),
      w_(weights),
      cfg_(weights.config()),
      be_(backend),
      par_(groups ? *groups : *own_groups_),
      comm_(par_.world()),
      tp_(par_.tp()),
      micro_batch_(options.micro_batch),
      memory_len_(options.memory_len) {
  FTX_CHECK(memory_len_ >= 0, "", "memory_len " + std::to_string(memory_len_) + " is negative");
  FTX_CHECK(micro_batch_ >= 0, "", "micro_batch " + std::to_string(micro_batch_) + " is negative");
  const dist::ParallelLayout& lay = par_.layout();
  FTX_CHECK(weights.tp() == lay.tp && weights.rank() == lay.tp_rank() &&
                weights.first_layer() == lay.first_layer(cfg_.num_layer) &&
                static_cast<int64_t>(weights.layers.size()) ==
                    lay.end_layer(cfg_.num_layer) - lay.first_layer(cfg_.num_layer),
            "", "engine: the weights were loaded for another rank than " + lay.describe() + " rank " +
                    std::to_string(lay.rank));
  computes_logits_ = lay.last_stage() && lay.tp_rank() == 0;
  delivers_logits_ = computes_logits_ && lay.rank != 0;
  const EmbeddingSharding& es = weights.embedding_sharding();
  head_split_ = es.parallel;
  runs_head_ = lay.last_stage() && (head_split_ || lay.tp_rank() == 0);
  if (es.parallel && es.dim == 1 && weights.has_embeddings()) {
    const std::vector<float> zeros(static_cast<size_t>(cfg_.hidden()), 0.0f);
    zero_row_ = be_.upload_weight(zeros.data(), DType::kFloat32, zeros.size());
  }
  const int64_t tp = weights.tp();
  H_ = cfg_.hidden();
  local_inter_ = cfg_.inter_size / tp;
  local_expert_inter_ = cfg_.moe_local_inter(tp);
  local_shared_inter_ = cfg_.moe_shared_inter_size / tp;
  qkv_cols_ = ft_qkv_columns_per_rank(cfg_, tp);
  shape_.q_heads = cfg_.head_num / tp;
  shape_.kv_heads = cfg_.kv_heads_per_rank(tp);
  shape_.head_dim = cfg_.size_per_head;
  shape_.scale = static_cast<float>(cfg_.attention_scale > 0 ? cfg_.attention_scale
                                                             : 1.0 / std::sqrt(static_cast<double>(cfg_.size_per_head)));
  shape_.memory_len = memory_len_;
  shape_.softcap = static_cast<float>(cfg_.attention_softcap);
  if (cfg_.position == PositionEmbedding::kAlibi) {
    const auto all = ops::alibi_slopes(cfg_.head_num);
    alibi_.assign(all.begin() + weights.rank() * shape_.q_heads,
                  all.begin() + (weights.rank() + 1) * shape_.q_heads);
    shape_.alibi_slopes = alibi_.data();
  }
  bias_before_reduce_ = cfg_.ft_variant == FtVariant::kGptNeoX && cfg_.parallel_residual;
  if (ops::kv_is_quantized(w_.kv_dtype()))
    for (size_t l = 0; l < weights.layers.size(); ++l)
      FTX_CHECK(weights.layers[l].kv_scale > 0.0f, "",
                std::string("a ") + dtype_name(w_.kv_dtype()) + " KV cache needs layer " +
                    std::to_string(weights.first_layer() + static_cast<int64_t>(l)) +
                    "'s scale: ModelWeights::load reads it when its QuantPolicy quantises the KV cache");
  if (options.prompts) load_prompts(*options.prompts);
  soft_start_ = soft_prompt_first_id(cfg_.vocab_size, options.prompts);
  make_kv_cache(options);
}

Engine::~Engine() {
  free_buffers();
  if (prompt_w_) be_.release_weight(prompt_w_);
  drop_soft_prompts();
  if (zero_row_) be_.release_weight(zero_row_);
  for (float* p : prefix_kv_) be_.release(p);
}

float Engine::kv_scale(int64_t l) const {
  // An fp32/fp16 cache has no scale; an int8 or fp8 one the layer's calibrated scale.
  return ops::kv_is_quantized(w_.kv_dtype()) ? w_.layers[static_cast<size_t>(l)].kv_scale : 1.0f;
}

void Engine::check_positions(int64_t first, int64_t last) const {
  // A learned position table has max_pos_seq_len rows: a later position would read past it.
  if (w_.wpe && last >= cfg_.max_pos_seq_len)
    throw Error("position " + std::to_string(std::max(first, cfg_.max_pos_seq_len)) +
                " is beyond the model's position table (max_pos_seq_len " + std::to_string(cfg_.max_pos_seq_len) + ")");
  const int64_t beyond = first_position_beyond_window(cfg_.sliding_window, memory_len_, first, last);
  if (beyond >= 0) throw Error(beyond_window_message(beyond, cfg_.sliding_window));
  if (rope_beyond_original(cfg_.rope_scaling, last + 1)) throw Error(rope_beyond_original_message(cfg_.rope_scaling, last + 1));
}

}  // namespace ftx
