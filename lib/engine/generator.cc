// Batching, KV fan-out and reordering, the step loop, streaming and timing. See generator.h.
#include "lib/engine/generator.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "formats/error.h"

namespace ftx {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(Engine& engine, dist::Communicator& comm, GenerateOptions options)
    : engine_(engine), comm_(comm), opt_(options) {}

std::vector<GenerationOutput> Generator::run(const std::vector<DecodeRequest>& requests,
                                             const StreamCallback& on_token) {
  std::vector<GenerationOutput> out(requests.size());
  const int64_t n = static_cast<int64_t>(requests.size());
  const int64_t bs = opt_.batch_size > 0 ? opt_.batch_size : std::max<int64_t>(n, 1);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < n; first += bs) {
    std::vector<DecodeRequest> batch(requests.begin() + first, requests.begin() + std::min(n, first + bs));
    run_batch(batch, first, out, on_token);
  }
  stats_.total_s += seconds_since(t0);
  return out;
}

void Generator::run_batch(const std::vector<DecodeRequest>& batch, int64_t first_index,
                          std::vector<GenerationOutput>& out, const StreamCallback& on_token) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t B = static_cast<int64_t>(batch.size());
  const int64_t K = std::max<int64_t>(1, batch.front().sampling.beam_width);
  const int64_t rows = B * K;
  const int64_t V = engine_.vocab_size();
  int64_t longest = 0, need = 0, max_new = 0;
  for (const auto& r : batch) {
    FTX_CHECK(std::max<int64_t>(1, r.sampling.beam_width) == K, "",
              "all requests of a batch must use the same beam width");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.input_ids.size()));
    need = std::max<int64_t>(need, static_cast<int64_t>(r.input_ids.size()) + r.max_new_tokens);
    max_new = std::max<int64_t>(max_new, r.max_new_tokens);
  }
  const int64_t max_seq = opt_.max_seq_len > 0 ? opt_.max_seq_len : need;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = static_cast<int64_t>(batch[b].input_ids.size());
    if (len + batch[b].max_new_tokens > max_seq)
      throw Error("prompt " + std::to_string(first_index + b + 1) + ": " + std::to_string(len) +
                  " prompt tokens + " + std::to_string(batch[b].max_new_tokens) +
                  " new tokens exceed --max-seq-len " + std::to_string(max_seq));
  }
  engine_.reserve(rows, max_seq, B * longest);

  const bool leader = comm_.rank() == 0;
  // The Decoder validates the requests on rank 0; the other ranks must hear of a rejection rather
  // than wait for it in the first all-reduce.
  std::unique_ptr<Decoder> decoder;
  std::string rejected;
  if (leader) {
    try {
      decoder = std::make_unique<Decoder>(batch, V);
    } catch (const Error& e) {
      rejected = e.what();
    }
  }
  if (!comm_.all_true(rejected.empty()))
    throw Error(rejected.empty() ? "rank 0 rejected the requests" : rejected);

  // Prefill one row per request (its first beam), then give every beam a copy of its history.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> first_rows;
  for (int64_t b = 0; b < B; ++b) {
    prompts.push_back(batch[b].input_ids);
    first_rows.push_back(static_cast<int32_t>(b * K));
    out[first_index + b].input_length = static_cast<int64_t>(batch[b].input_ids.size());
    stats_.prompt_tokens += out[first_index + b].input_length;
  }
  std::vector<float> logits(leader ? static_cast<size_t>(rows * V) : 0);
  std::vector<float> first_logits(leader ? static_cast<size_t>(B * V) : 0);
  std::vector<float> ctx;
  engine_.prefill(prompts, first_rows, leader ? first_logits.data() : nullptr,
                  opt_.context_embeddings ? &ctx : nullptr);
  if (opt_.context_embeddings) {
    const int64_t H = static_cast<int64_t>(ctx.size()) / B;
    for (int64_t b = 0; b < B; ++b)
      out[first_index + b].context_embedding.assign(ctx.begin() + b * H, ctx.begin() + (b + 1) * H);
  }
  if (K > 1) {
    std::vector<int32_t> dst, src;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 1; k < K; ++k) {
        dst.push_back(static_cast<int32_t>(b * K + k));
        src.push_back(static_cast<int32_t>(b * K));
      }
    engine_.copy_rows(dst, src);
  }
  if (leader)
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(first_logits.begin() + (r / K) * V, V, logits.begin() + r * V);
  stats_.prefill_s += seconds_since(t0);

  // Each step: rank 0 decides, everyone receives [tokens | parents | finished] for all rows.
  std::vector<int32_t> msg(static_cast<size_t>(3 * rows));
  std::vector<char> was_finished(static_cast<size_t>(rows), 0);
  std::vector<float> step_logits;
  for (int64_t step = 0;; ++step) {
    if (leader) {
      const StepOutput& so = decoder->step(logits.data());
      for (int64_t r = 0; r < rows; ++r) {
        msg[r] = so.tokens[r];
        msg[rows + r] = so.parents[r];
        msg[2 * rows + r] = so.finished[r] ? 1 : 0;
      }
    }
    comm_.broadcast(msg.data(), msg.size() * sizeof(int32_t), 0);
    if (step == 0 && stats_.first_token_s < 0) stats_.first_token_s = seconds_since(t0);
    const int32_t* tokens = msg.data();
    const int32_t* parents = msg.data() + rows;
    const int32_t* finished = msg.data() + 2 * rows;

    if (leader && on_token) {
      for (int64_t b = 0; b < B; ++b) {
        bool live = false;
        for (int64_t k = 0; k < K; ++k) live |= !was_finished[b * K + k];
        if (!live) continue;
        StreamEvent ev;
        ev.index = first_index + b;
        ev.step = step;
        if (K == 1) {
          ev.token = tokens[b];
        } else {
          ev.best = decoder->current_best(b);
          ev.token = ev.best.empty() ? tokens[b * K] : ev.best.back();
        }
        on_token(ev);
      }
    }
    bool all_done = true;
    for (int64_t r = 0; r < rows; ++r) {
      was_finished[r] = finished[r] != 0;
      all_done &= finished[r] != 0;
    }
    if (all_done || step + 1 >= max_new) break;

    if (K > 1) {
      std::vector<int32_t> dst, src;
      for (int64_t r = 0; r < rows; ++r)
        if (parents[r] != r) {
          dst.push_back(static_cast<int32_t>(r));
          src.push_back(parents[r]);
        }
      engine_.copy_rows(dst, src);
    }
    // Only unfinished rows run; finished rows are forced to end_id by the Decoder anyway.
    std::vector<int32_t> active, feed;
    for (int64_t r = 0; r < rows; ++r)
      if (!finished[r]) {
        active.push_back(static_cast<int32_t>(r));
        feed.push_back(tokens[r]);
      }
    const int64_t na = static_cast<int64_t>(active.size());
    if (leader) step_logits.resize(static_cast<size_t>(na * V));
    engine_.decode(feed, active, leader ? step_logits.data() : nullptr);
    if (leader)
      for (int64_t i = 0; i < na; ++i)
        std::copy_n(step_logits.begin() + i * V, V, logits.begin() + static_cast<int64_t>(active[i]) * V);
  }

  if (leader) {
    auto results = decoder->results();
    for (int64_t b = 0; b < B; ++b) {
      if (!results[b].beams.empty()) stats_.generated_tokens += results[b].beams[0].output_ids.size();
      out[first_index + b].result = std::move(results[b]);
    }
  }
  ++stats_.batches;
}

}  // namespace ftx
