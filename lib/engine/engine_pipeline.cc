// Pipeline parallelism (see engine.h): the rows of a call go through the
// stages in micro-batches; a stage sends micro-batch m on and goes on with m+1 while the next stage
// works on m. The last stage keeps every micro-batch's logits on the device and sends them to world
// rank 0 once, after the last micro-batch: a send per micro-batch could deadlock with blocking sends
// (rank 0 still sending micro-batch m+1 while the last stage sends it the logits of m).
#include "lib/engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ftx {

int64_t Engine::micro_batch_rows(int64_t n) const {
  const int64_t P = par_.layout().pp;
  if (P == 1) return std::max<int64_t>(n, 1);
  if (micro_batch_ > 0) return micro_batch_;
  return std::max<int64_t>(1, (n + P - 1) / P);
}

// FT halves inter-stage traffic with TP: each TP rank sends only its 1/T slice of the hidden
// states to its peer of the next stage, which all-gathers the slices within its TP group
// (as FT does). Used when the slices divide evenly; else every rank sends everything.
bool Engine::sliced_transfer(int64_t n) const {
  const int T = par_.layout().tp;
  return T > 1 && (n * H_) % T == 0;
}

void Engine::stage_input(const int32_t* ids, const int32_t* positions, int64_t n, int64_t virtual_from) {
  if (!w_.has_embeddings()) {
    const int prev = par_.layout().stage() - 1;
    if (sliced_transfer(n)) {
      const size_t part = static_cast<size_t>(n * H_ / par_.layout().tp);
      const ops::Act mine = x_ + static_cast<int64_t>(part) * par_.layout().tp_rank();
      par_.pp().recv(mine.data, part, mine.dtype, prev);
      tp_.all_gather(x_.data, part, x_.dtype);
    } else {
      par_.pp().recv(x_.data, static_cast<size_t>(n * H_), x_.dtype, prev);
    }
    return;
  }
  embed(ids, positions, n, virtual_from);
  if (w_.pre_ln_gamma)
    be_.layer_norm(x_, x_, w_.pre_ln_gamma, w_.pre_ln_beta, n, H_, static_cast<float>(cfg_.layernorm_eps));
}

void Engine::stage_output(int64_t n) {
  if (par_.layout().last_stage()) return;
  const int next = par_.layout().stage() + 1;
  if (sliced_transfer(n)) {
    const size_t part = static_cast<size_t>(n * H_ / par_.layout().tp);
    const ops::Act mine = x_ + static_cast<int64_t>(part) * par_.layout().tp_rank();
    par_.pp().send(mine.data, part, mine.dtype, next);
  } else {
    par_.pp().send(x_.data, static_cast<size_t>(n * H_), x_.dtype, next);
  }
}

int64_t Engine::logits_stride() const { return w_.padded_vocab(); }

void Engine::download_logits(int64_t n, float* host) {
  const int64_t V = cfg_.vocab_size, Vp = w_.padded_vocab();
  if (Vp == V) return be_.download(host, logits_, static_cast<size_t>(n * V));
  std::vector<float> padded(static_cast<size_t>(n * Vp));
  be_.download(padded.data(), logits_, padded.size());
  for (int64_t r = 0; r < n; ++r) std::copy_n(padded.begin() + r * Vp, V, host + r * V);
}

void Engine::deliver_logits(int64_t n, float* logits) {
  const size_t count = static_cast<size_t>(n * cfg_.vocab_size);
  if (comm_.rank() == 0 && computes_logits_) {
    if (logits) download_logits(n, logits);
  } else if (delivers_logits_) {
    std::vector<float> host(count);
    download_logits(n, host.data());
    comm_.send_host(host.data(), count * sizeof(float), 0);
  } else if (comm_.rank() == 0) {
    std::vector<float> scratch(logits ? 0 : count);
    comm_.recv_host(logits ? logits : scratch.data(), count * sizeof(float), last_stage_leader());
  }
}

void Engine::deliver_context_embeddings(std::vector<float>* ctx) {
  if (!ctx || par_.layout().pp == 1) return;
  const size_t bytes = ctx->size() * sizeof(float);
  if (delivers_logits_) comm_.send_host(ctx->data(), bytes, 0);
  else if (comm_.rank() == 0) comm_.recv_host(ctx->data(), bytes, last_stage_leader());
}

int Engine::last_stage_leader() const { return par_.layout().world_rank(par_.layout().pp - 1, 0); }

}  // namespace ftx
