// The model's math on this rank (docs/runtime.md#the-models-math): the embedding (with p-tuning's virtual
// tokens), the decoder stack, the final norm and the lm_head. One code path for every
// architecture; ModelConfig selects the blocks.
//
// Tensor parallelism: QKV and FFN-in are column-parallel (this rank's heads /
// inter columns), attention.dense and FFN-out are row-parallel, so each rank holds a partial sum
// that one all-reduce completes. A mixture-of-experts layer slices every expert so (FT's GPT-MoE):
// each rank routes the same rows to the same experts and sums its columns' share. Row-parallel biases are replicated and added once, after the
// all-reduce, except GPT-NeoX with parallel residual, whose `mlp.attention.bias.sum` file holds
// (attention bias + MLP bias) / TP for adding on every rank before it, as FT's runtime does.
#include "lib/engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "formats/error.h"

namespace ftx {

namespace {

ops::PositionTable table_for(const ModelWeights& w, const ModelConfig& cfg, int64_t* offset) {
  *offset = 0;  // FT position tables already start at the first real position
  if (w.wpe) return ops::PositionTable::kLearned;
  if (cfg.position == PositionEmbedding::kSinusoidal) {
    *offset = cfg.position_offset;
    return ops::PositionTable::kSinusoidal;
  }
  return ops::PositionTable::kNone;
}

}  // namespace

bool Engine::has_virtual(const int32_t* ids, int64_t n, int64_t virtual_from) const {
  if (!prompt_w_ && soft_.empty()) return false;
  const int64_t from = soft_.empty() ? virtual_from : std::min(virtual_from, soft_start_);
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] >= from) return true;
  return false;
}

void Engine::lookup(const int32_t* ids, const int32_t* positions, int64_t n) {
  int64_t offset = 0;
  const auto table = table_for(w_, cfg_, &offset);
  const float scale = static_cast<float>(cfg_.embedding_scale);
  const EmbeddingSharding& es = w_.embedding_sharding();
  if (!es.parallel) {
    be_.embedding(x_, w_.wte, w_.wpe, table, offset, ids, positions, n, H_, scale);
    return;
  }
  const int rank = w_.rank(), T = w_.tp();
  if (es.dim == 0) {
    // This rank's rows; the ids of other ranks read the zero row last in the table. TP rank 0 adds the
    // position term. Every other rank's term is +0, so the sum is TP 1's value bit for bit in fp32.
    const int64_t rows = w_.vocab_rows_per_rank(), lo = rows * rank;
    std::vector<int32_t> local(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      local[i] = ids[i] >= lo && ids[i] < lo + rows ? static_cast<int32_t>(ids[i] - lo) : static_cast<int32_t>(rows);
    const bool pos = rank == 0;
    be_.embedding(x_, w_.wte, pos ? w_.wpe : nullptr, pos ? table : ops::PositionTable::kNone, offset, local.data(),
                  positions, n, H_, scale);
    all_reduce(x_, n * H_);
    return;
  }
  // dim 1: this rank's columns of every id into its part of f_ (free until the first layer), the
  // parts all-gathered ([T, n, H/T]) and laid side by side into x_ [n, H]; then the position term,
  // added as TP 1 adds it (wte·scale first, then the term).
  const int64_t cols = H_ / T;
  be_.embedding(f_ + rank * n * cols, w_.wte, nullptr, ops::PositionTable::kNone, 0, ids, positions, n, cols, scale);
  tp_.all_gather(f_.data, static_cast<size_t>(n * cols), f_.dtype);
  for (int t = 0; t < T; ++t) be_.copy_act_2d(x_ + t * cols, H_, f_ + t * n * cols, cols, cols, n);
  if (table == ops::PositionTable::kNone) return;
  const std::vector<int32_t> zeros(static_cast<size_t>(n), 0);
  be_.embedding(f_, zero_row_, w_.wpe, table, offset, zeros.data(), positions, n, H_, 1.0f);
  add_residual_norm(x_, f_, nullptr, nullptr, nullptr, nullptr, n);  // x += the position term
}

void Engine::embed(const int32_t* ids, const int32_t* positions, int64_t n, int64_t virtual_from) {
  int64_t offset = 0;
  const auto table = table_for(w_, cfg_, &offset);
  const float scale = static_cast<float>(cfg_.embedding_scale);
  if (!has_virtual(ids, n, virtual_from)) {
    lookup(ids, positions, n);
    return;
  }
  // Virtual tokens (p-tuning's tables, soft prompts' rows): the real ones from wte, then, table by
  // table, the virtual ones into scratch (a_ is free until the first layer) at their positions
  // (position embeddings added, as FT adds them to both), copied over their rows run by run.
  struct Lookup {
    std::vector<int32_t> rows, pos;
    std::vector<int64_t> at;
  };
  std::map<const void*, std::pair<ops::Weight, Lookup>> by_table;
  std::vector<int32_t> real(ids, ids + n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    ops::Weight w;
    int64_t row = 0;
    if (!soft_.empty() && id >= soft_start_) {
      auto it = soft_.upper_bound(static_cast<int32_t>(id));
      FTX_CHECK(it != soft_.begin() && id < (--it)->first + it->second.rows, "",
                "soft prompt id " + std::to_string(id) + " is not held (its request's rows were not added)");
      w = it->second.w;
      row = id - it->first;
    } else if (id >= virtual_from) {
      FTX_CHECK(id < prompt_end_, "", "virtual token id " + std::to_string(id) + " beyond the prompt tables");
      w = prompt_w_;
      row = id - prompt_start_;
    } else {
      continue;
    }
    auto& e = by_table[w.data];
    e.first = w;
    e.second.rows.push_back(static_cast<int32_t>(row));
    e.second.pos.push_back(positions[i]);
    e.second.at.push_back(i);
    real[i] = 0;
  }
  lookup(real.data(), positions, n);
  for (const auto& kv : by_table) {
    const Lookup& l = kv.second.second;
    const int64_t m = static_cast<int64_t>(l.at.size());
    be_.embedding(a_, kv.second.first, w_.wpe, table, offset, l.rows.data(), l.pos.data(), m, H_, scale);
    for (int64_t j = 0; j < m;) {
      int64_t k = j + 1;
      while (k < m && l.at[k] == l.at[k - 1] + 1) ++k;
      be_.copy_act(x_ + l.at[j] * H_, a_ + j * H_, static_cast<size_t>((k - j) * H_));
      j = k;
    }
  }
}

void Engine::ffn(const LayerWeights& lw, ops::Act in, ops::Act out, int64_t n) {
  // Experts, each sliced over the ranks as the dense FFN, or whole on the rank holding them (every
  // rank routes every row, replicated): a partial sum the same all-reduce completes either way.
  if (lw.moe_router) {
    ops::MoeLayer m;
    m.hidden = H_;
    m.inter = local_expert_inter_;
    m.experts = cfg_.expert_num;
    if (cfg_.moe_ep_size > 1) {
      m.expert_count = cfg_.expert_num / cfg_.moe_ep_size;
      m.expert_begin = w_.rank() * m.expert_count;
    }
    m.top_k = cfg_.moe_top_k;
    m.routing = cfg_.moe_routing;
    m.act = cfg_.activation;
    m.router = lw.moe_router;
    m.fc = lw.moe_fc.data();
    m.gate = lw.moe_gate.empty() ? nullptr : lw.moe_gate.data();
    m.proj = lw.moe_proj.data();
    m.fc_bias = lw.moe_fc_b;
    m.proj_bias = tp_.rank() == 0 ? lw.moe_proj_b : nullptr;  // once in the all-reduced sum
    m.shared_inter = local_shared_inter_;
    m.shared_fc = lw.moe_shared_fc;
    m.shared_gate = lw.moe_shared_gate;
    m.shared_proj = lw.moe_shared_proj;
    m.shared_weigher = lw.moe_shared_weigher;
    be_.moe_ffn(out, in, n, m);
    return;
  }
  be_.gemm(n, local_inter_, H_, in, lw.fc_w, false, inter_, 0.0f);
  if (lw.gate_w) be_.gemm(n, local_inter_, H_, in, lw.gate_w, false, gate_, 0.0f);
  be_.bias_activation(inter_, lw.fc_b, lw.gate_w ? gate_ : ops::Act(), lw.gate_b, n, local_inter_,
                      cfg_.activation);
  be_.gemm(n, H_, local_inter_, inter_, lw.proj_w, false, out, 0.0f);
}

void Engine::norm(ops::Act out, ops::Act x, const float* gamma, const float* beta, int64_t n) {
  const float eps = static_cast<float>(cfg_.layernorm_eps);
  if (cfg_.normalization == Normalization::kRmsNorm) be_.rms_norm(out, x, gamma, n, H_, eps);
  else be_.layer_norm(out, x, gamma, beta, n, H_, eps);
}

void Engine::add_residual_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, const float* beta,
                               ops::Act out, int64_t n) {
  const float eps = static_cast<float>(cfg_.layernorm_eps);
  if (cfg_.normalization == Normalization::kRmsNorm) be_.add_residual_rms_norm(x, y, bias, gamma, out, n, H_, eps);
  else be_.add_residual_layer_norm(x, y, bias, gamma, beta, out, n, H_, eps);
}

void Engine::run_layers(int64_t n, const std::vector<int32_t>& positions, const std::function<void(int64_t)>& attend) {
  const bool pre = cfg_.norm == NormPlacement::kPre;
  const int64_t L = static_cast<int64_t>(w_.layers.size());  // this stage's
  const int64_t local_h = shape_.q_heads * shape_.head_dim;
  const int64_t rot_heads = shape_.q_heads + shape_.kv_heads;
  const bool rotary = cfg_.position == PositionEmbedding::kRotary && cfg_.rotary_dim > 0;
  // Completes a row-parallel partial sum; returns the bias still to be added after it.
  auto reduce = [&](ops::Act partial, const float* bias) -> const float* {
    if (bias_before_reduce_ && bias) be_.add_bias(partial, bias, n, H_);
    all_reduce(partial, n * H_);
    return bias_before_reduce_ ? nullptr : bias;
  };

  if (pre && L > 0)
    norm(ln_, x_, w_.layers[0].ln1_gamma, w_.layers[0].ln1_beta, n);
  for (int64_t l = 0; l < L; ++l) {
    const LayerWeights& lw = w_.layers[static_cast<size_t>(l)];
    const LayerWeights* next = l + 1 < L ? &w_.layers[static_cast<size_t>(l + 1)] : nullptr;
    const ops::Act in = pre ? ln_ : x_;  // ln_ holds LN1(x) here for pre-LN models

    be_.gemm(n, qkv_cols_, H_, in, lw.qkv_w, false, qkv_, 0.0f);
    be_.add_bias(qkv_, lw.qkv_b, n, qkv_cols_);
    if (lw.q_norm_gamma)
      be_.head_rms_norm(qkv_, n, qkv_cols_, shape_.q_heads, shape_.kv_heads, shape_.head_dim, lw.q_norm_gamma,
                        lw.k_norm_gamma, static_cast<float>(cfg_.layernorm_eps));
    shape_.window = cfg_.window_of(w_.first_layer() + l);  // Gemma's sliding layers; 0: all positions
    if (rotary) {
      // Gemma 3's windowed layers turn with their own base, unscaled.
      const bool local = shape_.window > 0 && cfg_.rotary_base_local > 0;
      be_.rotary(qkv_, n, qkv_cols_, positions.data(), rot_heads, shape_.head_dim, cfg_.rotary_dim, cfg_.rotary_style,
                 local ? ops::RotaryFrequencies(cfg_.rotary_base_local)
                       : ops::RotaryFrequencies(cfg_.rotary_base, cfg_.rope_scaling));
    }
    attend(l);
    be_.gemm(n, H_, local_h, attn_, lw.dense_w, false, a_, 0.0f);

    if (cfg_.parallel_residual) {
      // y = x + attn(LN1 x) + ffn(LN x): GPT-J shares LN1, NeoX uses LN2. One all-reduce for both.
      ops::Act ffn_in = ln_;
      if (!cfg_.shared_input_norm) {
        norm(f_, x_, lw.ln2_gamma, lw.ln2_beta, n);
        ffn_in = f_;
      }
      ffn(lw, ffn_in, f_, n);
      add_residual_norm(a_, f_, nullptr, nullptr, nullptr, nullptr, n);  // a += f
      const float* bias = nullptr;
      if (bias_before_reduce_) {
        be_.add_bias(a_, lw.dense_b, n, H_);
        be_.add_bias(a_, lw.proj_b, n, H_);
        all_reduce(a_, n * H_);
      } else {
        all_reduce(a_, n * H_);
        if (lw.dense_b && lw.proj_b) be_.add_bias(x_, lw.dense_b, n, H_);
        bias = lw.proj_b ? lw.proj_b : lw.dense_b;
      }
      add_residual_norm(x_, a_, bias, next ? next->ln1_gamma : nullptr, next ? next->ln1_beta : nullptr, ln_, n);
    } else if (pre) {
      // Sandwich norms (Gemma): the completed sum, its bias added, is normalised before the residual add.
      auto post_norm = [&](ops::Act y, const float* b, const float* gamma, const float* beta) -> const float* {
        if (!gamma) return b;
        if (b) be_.add_bias(y, b, n, H_);
        norm(y, y, gamma, beta, n);
        return nullptr;
      };
      const float* b = post_norm(a_, reduce(a_, lw.dense_b), lw.post_attn_gamma, lw.post_attn_beta);
      add_residual_norm(x_, a_, b, lw.ln2_gamma, lw.ln2_beta, ln_, n);
      ffn(lw, ln_, f_, n);
      b = post_norm(f_, reduce(f_, lw.proj_b), lw.post_ffn_gamma, lw.post_ffn_beta);
      add_residual_norm(x_, f_, b, next ? next->ln1_gamma : nullptr, next ? next->ln1_beta : nullptr, ln_, n);
    } else {
      // Post-LN (OPT-post): x = LN1(x + attn(x)); x = LN2(x + ffn(x)).
      const float* b = reduce(a_, lw.dense_b);
      add_residual_norm(x_, a_, b, lw.ln1_gamma, lw.ln1_beta, x_, n);
      ffn(lw, x_, f_, n);
      b = reduce(f_, lw.proj_b);
      add_residual_norm(x_, f_, b, lw.ln2_gamma, lw.ln2_beta, x_, n);
    }
  }
}

void Engine::all_reduce(ops::Act x, int64_t n) { tp_.all_reduce_sum(x.data, static_cast<size_t>(n), x.dtype); }

void Engine::compute_logits(ops::Act hidden, int64_t n, int64_t first) {
  if (!runs_head_) return;
  if (w_.final_ln_gamma)
    norm(hidden, hidden, w_.final_ln_gamma, w_.final_ln_beta, n);
  // rows are padded_vocab wide, their first V read
  lm_head(hidden, n, computes_logits_ ? logits_ + first * w_.padded_vocab() : nullptr);
}

void Engine::lm_head(ops::Act hidden, int64_t n, float* out) {
  const int64_t Vp = w_.padded_vocab();
  // A split lm_head: this rank's vocabulary rows into its part of head_gather_, the parts
  // all-gathered ([T, n, rows]) and laid side by side into out [n, Vp] on TP rank 0.
  const int64_t N = head_split_ ? w_.vocab_rows_per_rank() : Vp;
  float* mine = head_split_ ? head_gather_ + w_.rank() * n * N : out;
  be_.gemm(n, N, H_, hidden, w_.lm_head_w, true, mine, 0.0f);
  be_.add_bias(mine, w_.lm_head_b, n, N);
  // Gemma 2's final softcap; the padding rows stay 0 (softcap(0) = 0), as the decoder expects.
  if (cfg_.final_logit_softcap > 0) be_.softcap(mine, n, N, static_cast<float>(cfg_.final_logit_softcap));
  if (!head_split_) return;
  FTX_CHECK(n <= head_gather_rows_, "", "lm_head of " + std::to_string(n) + " rows exceeds the reserved " +
                                            std::to_string(head_gather_rows_));
  tp_.all_gather(head_gather_, static_cast<size_t>(n * N), DType::kFloat32);
  if (out)
    for (int t = 0; t < w_.tp(); ++t) be_.copy_2d(out + t * N, Vp, head_gather_ + t * n * N, N, N, n);
}

}  // namespace ftx
