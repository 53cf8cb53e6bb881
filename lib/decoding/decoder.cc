#include "lib/decoding/decoder.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "formats/error.h"
#include "lib/decoding/beam_search.h"
#include "lib/decoding/logit_processing.h"
#include "lib/decoding/logits_device.h"
#include "lib/decoding/request_rng.h"
#include "lib/decoding/row_sampling.h"
#include "lib/decoding/sampling.h"

namespace ftx {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEndId: return "end_id";
    case FinishReason::kStopWords: return "stop_words";
    case FinishReason::kNonFiniteLogits: return "non_finite_logits";
    case FinishReason::kNone: break;
  }
  return "none";
}

namespace {

using decoding::RequestRng;
using decoding::SamplingMode;

struct Row {
  std::vector<int32_t> history;  // prompt + generated, following beam parents
  int64_t generated = 0;         // tokens generated (end_id included), never counting forced fill
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  double cum_log_prob = 0.0;
  std::vector<float> output_log_probs;
  double score = 0.0;  // beam search: length-penalised cum of the last selection
  double top_p = 0.0;  // top-p layer: current nucleus (factual-nucleus decay)
};

// One request in its slot: the request (with temperature 0 resolved to greedy), its sampling mode
// and its own random stream.
struct SlotState {
  DecodeRequest request;
  SamplingMode mode;
  RequestRng rng{0};
  int64_t prompt_len = 0;
  int32_t fill_token = 0;  // what a finished row emits: end_id when it is a real id, else 0
};

std::string where(size_t slot) { return "request " + std::to_string(slot); }

std::string fmt(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

void check_decode_request(const DecodeRequest& r, int64_t vocab) {
  const SamplingConfig& s = r.sampling;
  auto fail = [](const std::string& msg) { throw Error(msg); };
  if (r.input_ids.empty()) fail("empty prompt");
  for (int32_t id : r.input_ids) {
    if (id < 0 || (id >= vocab && id >= r.virtual_id_end))
      fail("input id " + std::to_string(id) + " outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  if (r.max_new_tokens < 0) fail("max_new_tokens " + std::to_string(r.max_new_tokens) + " is negative");
  if (r.max_new_tokens > kMaxNewTokens)
    fail("max_new_tokens " + std::to_string(r.max_new_tokens) + " is more than " + std::to_string(kMaxNewTokens) +
         " (no KV cache row holds that many)");
  if (s.beam_width < 1 || s.beam_width > kMaxBeamWidth)
    fail("beam_width " + std::to_string(s.beam_width) + " outside [1, " + std::to_string(kMaxBeamWidth) +
         "] (FT's beam search kernels)");
  if (s.top_k < 0 || s.top_k > kMaxTopK)
    fail("top_k " + std::to_string(s.top_k) + " outside [0, " + std::to_string(kMaxTopK) + "] (FT's top-k kernels)");
  if (!(s.top_p >= 0.0 && s.top_p <= 1.0)) fail("top_p " + fmt(s.top_p) + " outside [0, 1]");
  if (!(s.temperature >= 0.0) || !std::isfinite(s.temperature))
    fail("temperature " + fmt(s.temperature) + " must be >= 0 (0: greedy)");
  if (s.temperature == 0.0 && s.beam_width > 1)
    fail("temperature 0 (greedy) has no meaning with beam search (beam_width " + std::to_string(s.beam_width) + ")");
  if (!(s.repetition_penalty > 0.0) || !std::isfinite(s.repetition_penalty))
    fail("repetition_penalty " + fmt(s.repetition_penalty) + " must be > 0");
  if (!std::isfinite(s.presence_penalty)) fail("presence_penalty " + fmt(s.presence_penalty) + " is not finite");
  if (!std::isfinite(s.frequency_penalty)) fail("frequency_penalty " + fmt(s.frequency_penalty) + " is not finite");
  if (s.min_length < 0) fail("min_length " + std::to_string(s.min_length) + " is negative");
  // Settings the request could never honour are errors, not silent no-ops.
  if (r.max_new_tokens > 0 && s.min_length > r.max_new_tokens)
    fail("min_length " + std::to_string(s.min_length) + " is more than max_new_tokens " +
         std::to_string(r.max_new_tokens) + " (the end id would be banned for every new token)");
  if (s.beam_width > 1 && (s.top_k != 0 || s.top_p != 0.0))
    fail(std::string(s.top_k != 0 ? "top_k " + std::to_string(s.top_k) : "top_p " + fmt(s.top_p)) +
         " has no effect with beam search (beam_width " + std::to_string(s.beam_width) +
         "): beams are not sampled; drop one of them");
  if (s.beam_width == 1 && s.top_k == 0 && s.top_p == 0.0 && s.temperature != 1.0 && s.temperature != 0.0)
    fail("temperature " + fmt(s.temperature) +
         " has no effect with greedy decoding (top_k 0 and top_p 0); set top_k or top_p to sample");
  if (!std::isfinite(s.len_penalty)) fail("len_penalty " + fmt(s.len_penalty) + " is not finite");
  if (!std::isfinite(s.beam_search_diversity_rate))
    fail("beam_search_diversity_rate " + fmt(s.beam_search_diversity_rate) + " is not finite");
  // FT's TopPSamplingLayer warns and falls back to 1.0 / 0.5 for these; a typo is refused here.
  if (!(s.top_p_decay > 0.0 && s.top_p_decay <= 1.0)) fail("top_p_decay " + fmt(s.top_p_decay) + " outside (0, 1]");
  if (!(s.top_p_min > 0.0 && s.top_p_min <= 1.0)) fail("top_p_min " + fmt(s.top_p_min) + " outside (0, 1]");
  if (s.top_p_reset_id < -1 || s.top_p_reset_id >= vocab)
    fail("top_p_reset_ids " + std::to_string(s.top_p_reset_id) + " outside the vocabulary [0, " +
         std::to_string(vocab) + ") (-1: none)");
  // Only FT's top-p layer (top_k 0, top_p > 0, one beam) decays its nucleus.
  const bool top_p_layer = s.top_k == 0 && s.top_p > 0.0 && s.beam_width == 1 && s.temperature != 0.0;
  if (!top_p_layer && (s.top_p_decay != 1.0 || s.top_p_reset_id >= 0))
    fail(std::string(s.top_p_decay != 1.0 ? "top_p_decay " + fmt(s.top_p_decay)
                                          : "top_p_reset_ids " + std::to_string(s.top_p_reset_id)) +
         " has no effect outside top-p sampling (top_k 0, top_p > 0, beam_width 1, temperature > 0): "
         "FT decays only the top-p layer's nucleus");
}

struct Decoder::Impl {
  int64_t vocab = 0;
  int64_t beam_width = 1;
  std::vector<SlotState> slots;
  std::vector<uint8_t> used;  // per slot
  std::vector<uint8_t> paused;  // per slot: preempted, skipped by step()
  std::vector<Row> rows;
  StepOutput out;
  std::vector<uint8_t> finished_now;  // per row; std::vector<bool> cannot take concurrent writes
  // Per-thread scratch: slots are decoded in parallel, each wholly by one thread.
  struct Scratch {
    decoding::SamplingWorkspace ws;
    decoding::TokenCounts seen;  // penalty counts, all zero between uses
  };
  std::vector<Scratch> scratch;
  // Sampling rows of the current step (prepare_sampling / finish_sampling).
  decoding::RowSamplingBatch batch;
  std::vector<int64_t> batch_slots;  // slot of each batch entry
  std::vector<decoding::SampledToken> sampled;
  decoding::TokenCounts resolve_seen;  // add_row_sampling's scratch
  std::vector<float> host_logits;     // step(device, ...) with beams: the rows, downloaded

  void append(Row& row, const SlotState& rs, int32_t token, double log_prob, double output_log_prob) {
    row.history.push_back(token);
    ++row.generated;
    if (!rs.request.sampling.return_log_probs) return;  // beam_step sets the beam's cum itself
    row.cum_log_prob += log_prob;
    row.output_log_probs.push_back(static_cast<float>(output_log_prob));
  }

  // Stop criteria after a token was appended: end_id, then stop words, then the length limit.
  void check_finished(Row& row, const SlotState& rs) {
    const SamplingConfig& s = rs.request.sampling;
    if (s.end_id >= 0 && row.history.back() == s.end_id) {
      row.finished = true;
      row.reason = FinishReason::kEndId;
      return;
    }
    for (const auto& word : s.stop_words) {
      if (!word.empty() && decoding::ends_with_prefix(row.history, word, word.size())) {
        row.finished = true;
        row.reason = FinishReason::kStopWords;
        return;
      }
    }
    if (row.generated >= rs.request.max_new_tokens) {
      row.finished = true;
      row.reason = FinishReason::kLength;
    }
  }

  // Sampling rows (beam width 1) of the live slots: a finished row emits its fill token, the others
  // are resolved into `batch` (their uniforms drawn here, in slot order, from their own streams).
  void prepare_sampling(const std::vector<int64_t>& live) {
    batch.clear();
    batch_slots.clear();
    if (static_cast<int64_t>(resolve_seen.size()) < vocab) resolve_seen.assign(static_cast<size_t>(vocab), 0);
    for (int64_t b : live) {
      SlotState& rs = slots[b];
      Row& row = rows[b];
      out.parents[b] = static_cast<int32_t>(b);
      if (row.finished) {
        out.tokens[b] = rs.fill_token;
        finished_now[b] = 1;
        continue;
      }
      const double p = rs.mode.kind == SamplingMode::kTopP ? row.top_p : rs.mode.top_p;
      decoding::add_row_sampling(batch, b, vocab, rs.request.sampling, rs.mode, p, rs.rng.uniform(), row.history,
                                 row.generated, resolve_seen);
      batch_slots.push_back(b);
    }
    sampled.resize(batch.rows.size());
  }

  // The drawn tokens into the rows: history, log probs, the factual nucleus, the stop criteria.
  void finish_sampling() {
    for (size_t i = 0; i < batch_slots.size(); ++i) {
      const int64_t b = batch_slots[i];
      SlotState& rs = slots[b];
      Row& row = rows[b];
      const decoding::SampledToken& t = sampled[i];
      if (t.nonfinite) {  // nothing was drawn: the request ends before this step
        row.finished = true;
        row.reason = FinishReason::kNonFiniteLogits;
        out.tokens[b] = rs.fill_token;
        finished_now[b] = 1;
        continue;
      }
      append(row, rs, t.token, t.log_prob, t.output_log_prob);
      if (rs.mode.kind == SamplingMode::kTopP) {
        const SamplingConfig& c = rs.request.sampling;
        row.top_p = decoding::next_top_p(row.top_p, rs.mode.top_p, t.token, c.top_p_decay, c.top_p_min, c.top_p_reset_id);
      }
      check_finished(row, rs);
      out.tokens[b] = t.token;
      finished_now[b] = row.finished;
    }
  }

  std::vector<int64_t> live_slots() const {
    std::vector<int64_t> live;
    for (size_t b = 0; b < slots.size(); ++b)
      if (used[b] && !paused[b]) live.push_back(static_cast<int64_t>(b));
    return live;
  }

  const StepOutput& publish() {
    for (size_t r = 0; r < finished_now.size(); ++r) out.finished[r] = finished_now[r] != 0;
    return out;
  }

  void beam_step(size_t b, float* logits, Scratch& sc) {
    SlotState& rs = slots[b];
    const SamplingConfig& s = rs.request.sampling;
    const int64_t K = beam_width;
    const int64_t r0 = static_cast<int64_t>(b) * K;
    bool all_done = true, finite = true;
    for (int64_t k = 0; k < K; ++k)
      if (!rows[r0 + k].finished) finite = finite && !decoding::overflowed(logits + (r0 + k) * vocab, vocab);
    if (!finite) {
      // A beam's logits overflowed: no selection means anything, so the request ends before this
      // step, every unfinished beam with kNonFiniteLogits.
      for (int64_t k = 0; k < K; ++k) {
        Row& row = rows[r0 + k];
        if (!row.finished) row.reason = FinishReason::kNonFiniteLogits;
        row.finished = true;
        out.tokens[r0 + k] = rs.fill_token;
        out.parents[r0 + k] = static_cast<int32_t>(r0 + k);
        finished_now[r0 + k] = 1;
      }
      return;
    }
    std::vector<decoding::BeamState> states(K);
    for (int64_t k = 0; k < K; ++k) {
      Row& row = rows[r0 + k];
      all_done = all_done && row.finished;
      if (!row.finished) decoding::process_logits(logits + (r0 + k) * vocab, vocab, s, row.history, row.generated, sc.seen);
      // FT's penalty length: sequence_length is prompt - 1 + generated and gains 1 for a live beam's
      // candidate, so a live beam scores len = prompt + generated-before-the-candidate and a finished
      // beam keeps the len it was chosen with. Uses this request's own prompt length, not the
      // batch's padded width, so the result does not depend on the batch.
      states[k] = {row.cum_log_prob, rs.prompt_len + row.generated - (row.finished ? 1 : 0), row.finished};
    }
    if (all_done) {
      for (int64_t k = 0; k < K; ++k) {
        out.tokens[r0 + k] = rs.fill_token;
        out.parents[r0 + k] = static_cast<int32_t>(r0 + k);
        finished_now[r0 + k] = 1;
      }
      return;
    }
    const std::vector<decoding::BeamCandidate> chosen = decoding::select_beams(
        logits + r0 * vocab, vocab, states, s.len_penalty, s.beam_search_diversity_rate, rs.fill_token, sc.ws);
    std::vector<Row> old(rows.begin() + r0, rows.begin() + r0 + K);
    for (int64_t k = 0; k < K; ++k) {
      const decoding::BeamCandidate& c = chosen[k];
      Row row = old[c.parent];
      if (!row.finished) {
        append(row, rs, c.token, c.step_log_prob, c.step_log_prob);
        row.cum_log_prob = c.cum_log_prob;  // same sum, taken from the selection to stay bit-equal
        check_finished(row, rs);
      }
      row.score = c.score;
      out.tokens[r0 + k] = c.token;
      out.parents[r0 + k] = static_cast<int32_t>(r0 + c.parent);
      finished_now[r0 + k] = row.finished;
      rows[r0 + k] = std::move(row);
    }
  }

  // Index of slot b's best row: the highest length-penalised score, first on ties.
  int64_t best_row(size_t b) const {
    const int64_t r0 = static_cast<int64_t>(b) * beam_width;
    int64_t best = r0;
    for (int64_t k = 1; k < beam_width; ++k) {
      if (rows[r0 + k].score > rows[best].score) best = r0 + k;
    }
    return best;
  }

  RequestResult result(size_t b) const {
    const SlotState& rs = slots[b];
    const int64_t K = beam_width;
    const int64_t r0 = static_cast<int64_t>(b) * K;
    std::vector<int64_t> order(K);
    std::iota(order.begin(), order.end(), r0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return rows[x].score > rows[y].score; });
    RequestResult res;
    for (int64_t r : order) {
      const Row& row = rows[r];
      BeamResult beam;
      beam.output_ids.assign(row.history.begin() + rs.prompt_len, row.history.end());
      beam.cum_log_prob = row.cum_log_prob;
      beam.output_log_probs = row.output_log_probs;
      beam.finish_reason = row.finished ? row.reason : FinishReason::kNone;
      res.beams.push_back(std::move(beam));
    }
    return res;
  }

  void check_slot(int64_t b) const {
    if (b < 0 || b >= static_cast<int64_t>(slots.size()))
      throw Error("decoder: slot " + std::to_string(b) + " out of range [0, " + std::to_string(slots.size()) + ")");
  }
  void check_occupied(int64_t b) const {
    check_slot(b);
    if (!used[b]) throw Error("decoder: slot " + std::to_string(b) + " is free");
  }
};

Decoder::Decoder(int64_t slots, int64_t beam_width, int64_t vocab_size) : impl_(new Impl) {
  try {
    if (slots < 1) throw Error("decoder: " + std::to_string(slots) + " slots");
    if (vocab_size <= 0 || vocab_size > INT32_MAX) throw Error("decoder: vocab_size " + std::to_string(vocab_size) + " out of range");
    if (beam_width < 1 || beam_width > kMaxBeamWidth)
      throw Error("beam_width " + std::to_string(beam_width) + " outside [1, " + std::to_string(kMaxBeamWidth) + "]");
    Impl& im = *impl_;
    im.vocab = vocab_size;
    im.beam_width = beam_width;
    im.slots.resize(static_cast<size_t>(slots));
    im.used.assign(static_cast<size_t>(slots), 0);
    im.paused.assign(static_cast<size_t>(slots), 0);
    const size_t n = static_cast<size_t>(slots * beam_width);
    im.rows.resize(n);
    im.finished_now.assign(n, 1);
    im.out.tokens.assign(n, 0);
    im.out.parents.resize(n);
    std::iota(im.out.parents.begin(), im.out.parents.end(), 0);
    im.out.finished.assign(n, true);
  } catch (...) {
    delete impl_;
    throw;
  }
}

namespace {
int64_t first_beam_width(const std::vector<DecodeRequest>& requests) {
  if (requests.empty()) throw Error("decoder: no requests");
  return requests[0].sampling.beam_width;
}
}  // namespace

Decoder::Decoder(std::vector<DecodeRequest> requests, int64_t vocab_size)
    : Decoder(static_cast<int64_t>(requests.size()), first_beam_width(requests), vocab_size) {
  for (size_t b = 0; b < requests.size(); ++b) add(static_cast<int64_t>(b), std::move(requests[b]));
}

Decoder::~Decoder() { delete impl_; }

int64_t Decoder::batch_size() const { return static_cast<int64_t>(impl_->slots.size()); }
int64_t Decoder::beam_width() const { return impl_->beam_width; }

void Decoder::add(int64_t b, DecodeRequest req) {
  Impl& im = *impl_;
  im.check_slot(b);
  if (im.used[b]) throw Error("decoder: slot " + std::to_string(b) + " is occupied");
  try {
    check_decode_request(req, im.vocab);
    if (req.sampling.beam_width != im.beam_width)
      throw Error("beam_width " + std::to_string(req.sampling.beam_width) + " differs from the batch's " +
                  std::to_string(im.beam_width));
  } catch (const Error& e) {
    throw Error(where(static_cast<size_t>(b)) + ": " + e.what());
  }
  SamplingConfig& s = req.sampling;
  if (s.temperature == 0.0) {  // documented meaning: greedy on the unscaled logits
    s.temperature = 1.0;
    s.top_k = 1;
    s.top_p = 0.0;
  }
  SlotState& rs = im.slots[b];
  rs.mode = decoding::resolve_sampling_mode(s.top_k, s.top_p, im.vocab);
  rs.rng = RequestRng(s.seed);
  rs.prompt_len = static_cast<int64_t>(req.input_ids.size());
  rs.fill_token = (s.end_id >= 0 && s.end_id < im.vocab) ? s.end_id : 0;
  rs.request = std::move(req);
  const int64_t K = im.beam_width;
  for (int64_t k = 0; k < K; ++k) {
    Row& row = im.rows[b * K + k];
    row = Row();
    row.history = rs.request.input_ids;
    row.top_p = rs.mode.top_p;
    // FT initialises cum_log_probs to 0 for beam 0 and -MAX for the others, so the first step
    // expands beam 0 only (all beams share the prompt).
    row.cum_log_prob = k == 0 ? 0.0 : -FLT_MAX;
    row.score = row.cum_log_prob;
    if (rs.request.max_new_tokens == 0) {
      row.finished = true;
      row.reason = FinishReason::kLength;
    }
    im.out.tokens[b * K + k] = 0;
    im.out.parents[b * K + k] = static_cast<int32_t>(b * K + k);
    im.out.finished[b * K + k] = row.finished;
    im.finished_now[b * K + k] = row.finished;
  }
  im.used[b] = 1;
}

bool Decoder::occupied(int64_t b) const {
  impl_->check_slot(b);
  return impl_->used[b] != 0;
}

bool Decoder::slot_finished(int64_t b) const {
  impl_->check_occupied(b);
  const int64_t K = impl_->beam_width;
  for (int64_t k = 0; k < K; ++k)
    if (!impl_->rows[b * K + k].finished) return false;
  return true;
}

RequestResult Decoder::take(int64_t b) {
  Impl& im = *impl_;
  im.check_occupied(b);
  RequestResult res = im.result(static_cast<size_t>(b));
  im.used[b] = 0;
  im.paused[b] = 0;
  const int64_t K = im.beam_width;
  for (int64_t k = 0; k < K; ++k) {
    im.rows[b * K + k] = Row();
    im.out.finished[b * K + k] = true;
    im.finished_now[b * K + k] = 1;
  }
  im.slots[b].request = DecodeRequest();  // frees the prompt and word lists now
  return res;
}

const StepOutput& Decoder::step(float* logits) {
  Impl& im = *impl_;
  const std::vector<int64_t> live = im.live_slots();
  if (im.beam_width == 1) {
    im.prepare_sampling(live);
    decoding::sample_rows_on_host(logits, im.vocab, im.vocab, im.batch, im.sampled.data());
    im.finish_sampling();
    return im.publish();
  }
  const int64_t n = static_cast<int64_t>(live.size());
  int threads = 1;
#ifdef _OPENMP
  // Threads only pay off when there is real work per step (large vocab or many rows).
  if (n * im.beam_width * im.vocab >= (int64_t{1} << 16)) {
    threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n));
  }
#endif
  if (static_cast<int>(im.scratch.size()) < threads) {
    im.scratch.resize(threads);
    for (auto& sc : im.scratch) sc.seen.resize(im.vocab, 0);
  }
  // Slots are independent (own rows, own RNG), so the result does not depend on the threads.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
  for (int64_t i = 0; i < n; ++i) {
    int t = 0;
#ifdef _OPENMP
    t = omp_get_thread_num();
#endif
    im.beam_step(static_cast<size_t>(live[i]), logits, im.scratch[t]);
  }
  return im.publish();
}

const StepOutput& Decoder::step(decoding::LogitsDevice& device, float* logits, int64_t stride) {
  Impl& im = *impl_;
  if (stride < im.vocab)
    throw Error("decoder: logits stride " + std::to_string(stride) + " is less than the vocabulary " +
                std::to_string(im.vocab));
  if (im.beam_width == 1) {
    im.prepare_sampling(im.live_slots());
    device.sample_rows(logits, stride, im.vocab, im.batch, im.sampled.data());
    im.finish_sampling();
    return im.publish();
  }
  // Beam search runs on the host: the rows come down, their padding columns dropped.
  const int64_t rows = this->rows();
  im.host_logits.resize(static_cast<size_t>(rows * stride));
  device.download(im.host_logits.data(), logits, im.host_logits.size());
  for (int64_t r = 1; r < rows; ++r)
    std::copy_n(im.host_logits.begin() + r * stride, im.vocab, im.host_logits.begin() + r * im.vocab);
  return step(im.host_logits.data());
}

bool Decoder::all_finished() const {
  for (size_t b = 0; b < impl_->slots.size(); ++b)
    if (impl_->used[b] && !slot_finished(static_cast<int64_t>(b))) return false;
  return true;
}

int64_t Decoder::best_beam(int64_t b) const {
  impl_->check_occupied(b);
  // results() orders beams by score with a stable sort, so its first beam is the first best row.
  return impl_->best_row(static_cast<size_t>(b)) - b * impl_->beam_width;
}

std::vector<int32_t> Decoder::current_best(int64_t b) const {
  if (b < 0 || b >= batch_size() || !impl_->used[b])
    throw Error("decoder: request index " + std::to_string(b) + " out of range");
  const Row& row = impl_->rows[impl_->best_row(b)];
  const int64_t prompt_len = impl_->slots[b].prompt_len;
  return std::vector<int32_t>(row.history.begin() + prompt_len, row.history.end());
}

void Decoder::set_paused(int64_t b, bool paused) {
  Impl& im = *impl_;
  im.check_occupied(b);
  im.paused[b] = paused ? 1 : 0;
  const int64_t K = im.beam_width;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t r = b * K + k;
    im.out.tokens[r] = im.slots[b].fill_token;
    im.out.parents[r] = static_cast<int32_t>(r);
    im.finished_now[r] = paused ? 1 : (im.rows[r].finished ? 1 : 0);
    im.out.finished[r] = im.finished_now[r] != 0;
  }
}

const std::vector<int32_t>& Decoder::history(int64_t row) const {
  if (row < 0 || row >= rows()) throw Error("decoder: row " + std::to_string(row) + " out of range");
  return impl_->rows[static_cast<size_t>(row)].history;
}

bool Decoder::row_finished(int64_t row) const {
  if (row < 0 || row >= rows()) throw Error("decoder: row " + std::to_string(row) + " out of range");
  return impl_->rows[static_cast<size_t>(row)].finished;
}

std::vector<RequestResult> Decoder::results() const {
  std::vector<RequestResult> results;
  for (size_t b = 0; b < impl_->slots.size(); ++b)
    if (impl_->used[b]) results.push_back(impl_->result(b));
  return results;
}

}  // namespace ftx
