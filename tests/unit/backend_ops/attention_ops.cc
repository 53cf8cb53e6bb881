// Attention over the paged fp32 KV cache: prefill of right-padded batches, appends after a past,
// decode steps over short and long histories, block sizes that split a CUDA key tile or hold two,
// a circular cache (memory_len), MHA/MQA/GQA and ALiBi, Gemma 2's score softcap and sliding
// windows. Every call's output and both whole caches (slots no call writes keep their garbage)
// against the float64 formula (CPU) or the CPU (CUDA); the caches exactly. Caches of other dtypes: kv_cache_ops.cc.
#include <algorithm>
#include <numeric>
#include <random>

#include "unit/backend_ops/attention_scenario.h"

namespace ftx::test {

namespace {

// Rows of `stride` blocks each, drawn from a pool of `blocks` shuffled by `seed`: a prefill of
// `lengths`, an append of `more` after it and three decode steps, the cache one call writes read
// by the next.
void prefill_append_decode(OpTest& t, AttnScenario& sc, int64_t blocks, int64_t stride, uint32_t seed,
                           std::vector<int32_t> lengths, const std::vector<int32_t>& more) {
  const int64_t B = static_cast<int64_t>(lengths.size());
  std::vector<int32_t> ids(static_cast<size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  ids.resize(static_cast<size_t>(B * stride));
  sc.prefill(t, *std::max_element(lengths.begin(), lengths.end()), lengths, ids).stride = stride;
  sc.prefill(t, *std::max_element(more.begin(), more.end()), more, ids, lengths).stride = stride;
  for (int64_t b = 0; b < B; ++b) lengths[static_cast<size_t>(b)] += more[static_cast<size_t>(b)];
  for (int step = 0; step < 3; ++step) {
    sc.decode(t, ids, lengths).stride = stride;
    for (auto& l : lengths) ++l;
  }
  expect_attention_matches(t, sc);
}

}  // namespace

// Prefill of a right-padded batch into permuted cache rows (one row unused); padded query
// positions give zeros.
BACKEND_OP_TEST(ContextAttention, "context_attention") {
  struct Batch {
    int64_t S;
    std::vector<int32_t> lengths, rows;
  };
  const Batch batches[] = {{5, {5, 1, 3}, {2, 0, 3}}, {37, {37, 20, 1}, {1, 3, 0}}, {1, {1}, {2}},
                           {70, {70, 33}, {3, 1}}};
  for (const AttnCase& c : kAttnCases)
    for (const Batch& bt : batches) {
      SCOPED_TRACE(attn_name(c) + " S " + std::to_string(bt.S));
      AttnScenario sc(*this, c, 80, 4);
      sc.prefill(*this, bt.S, bt.lengths, bt.rows);
      expect_attention_matches(*this, sc);
    }
}

// One decode step over histories of different lengths (slot 0, around a 32-key tile, the last
// slot of the cache), rows in any order. On CUDA a 150-slot cache takes 5 warps and one pass, a
// 1000-slot cache 8 warps and up to 4 passes each, some warps with no key.
BACKEND_OP_TEST(DecodeAttention, "decode_attention") {
  for (const AttnCase& c : kAttnCases)
    for (const int64_t max_seq : {int64_t(150), int64_t(1000)}) {
      SCOPED_TRACE(attn_name(c) + " max_seq " + std::to_string(max_seq));
      AttnScenario sc(*this, c, max_seq, 6);
      const int32_t last = static_cast<int32_t>(max_seq - 1);
      sc.decode(*this, {3, 0, 5, 1, 4, 2}, {0, 31, 32, last, random_int(1, last - 1), std::min<int32_t>(last, 257)});
      expect_attention_matches(*this, sc);
    }
}

// One row (batch-1 decoding) over a long cache: on CUDA few (row, head) pairs, so each pair's keys
// are split over many blocks and merged (flash-decoding); histories ending on and around split
// boundaries, at slot 0 and at the last slot, and over a circular cache whose position wrapped.
BACKEND_OP_TEST(DecodeAttentionSplitAcrossBlocks, "decode_attention") {
  for (const AttnCase& c : {AttnCase{2, 2, 64, false}, AttnCase{8, 1, 128, true}, AttnCase{4, 2, 25, false}})
    for (const int64_t max_seq : {int64_t(4000), int64_t(1024)}) {
      SCOPED_TRACE(attn_name(c) + " max_seq " + std::to_string(max_seq));
      AttnScenario sc(*this, c, max_seq, 2);  // one step per history length, each its own output
      for (const int32_t past : {0, 287, 288, 289, 1023, static_cast<int32_t>(max_seq - 1)})
        if (past < max_seq) sc.decode(*this, {1}, {past});
      expect_attention_matches(*this, sc);
    }
  SCOPED_TRACE("circular");
  AttnScenario sc(*this, AttnCase{4, 4, 32, true}, 2048, 1);
  sc.shape.memory_len = 2048;
  sc.decode(*this, {0}, {5000});
  expect_attention_matches(*this, sc);
}

// Prefill then decode steps: the cache one path writes is read by the other.
BACKEND_OP_TEST(PrefillThenDecode, "context_attention", "decode_attention") {
  for (const AttnCase& c : kAttnCases) {
    SCOPED_TRACE(attn_name(c));
    AttnScenario sc(*this, c, 20, 3);
    std::vector<int32_t> lengths = {9, 2, 5};
    const std::vector<int32_t> rows = {1, 2, 0};
    sc.prefill(*this, 9, lengths, rows, {}, 1.0f);
    for (int step = 0; step < 4; ++step) {
      sc.decode(*this, rows, lengths, 1.0f);
      for (auto& l : lengths) ++l;
    }
    expect_attention_matches(*this, sc);
  }
}

// Appending to rows that already hold tokens (a session's next round).
BACKEND_OP_TEST(ContextAttentionAppendsAfterPast, "context_attention") {
  for (const AttnCase& c : kAttnCases) {
    SCOPED_TRACE(attn_name(c));
    AttnScenario sc(*this, c, 120, 4);
    sc.prefill(*this, 19, {19, 4, 1}, {2, 0, 3}, {0, 33, 100});
    expect_attention_matches(*this, sc);
  }
}

// The paged layout: each row's blocks anywhere in the pool, in block sizes that split a CUDA key
// tile (1, 16) or hold two (64): a prefill, an append after it and decode steps.
BACKEND_OP_TEST(PagedAttention, "context_attention", "decode_attention") {
  for (const AttnCase& c : kAttnCases)
    for (const int64_t bs : {int64_t(1), int64_t(16), int64_t(64)}) {
      SCOPED_TRACE(attn_name(c) + " block size " + std::to_string(bs));
      const int64_t max_seq = 192, B = 3, stride = max_seq / bs, blocks = B * stride + 5;
      AttnScenario sc(*this, c, max_seq, blocks, bs);
      prefill_append_decode(*this, sc, blocks, stride, static_cast<uint32_t>(bs), {37, 20, 1}, {3, 30, 17});
    }
}

// A circular cache (memory_len): decode positions before, at and well past the wrap (slot =
// position % memory_len, attention over the last memory_len positions, ALiBi by position).
BACKEND_OP_TEST(DecodeAttentionOverACircularCache, "decode_attention") {
  for (const AttnCase& c : kAttnCases) {
    SCOPED_TRACE(attn_name(c));
    AttnScenario sc(*this, c, 48, 5);
    sc.shape.memory_len = 48;
    sc.decode(*this, {1, 4, 0, 3, 2}, {3, 47, 48, 100, 1000});
    expect_attention_matches(*this, sc);
  }
}

// Gemma 2's attention logit softcapping (AttentionShape::softcap): scores scale·q·k capped as
// cap·tanh(s/cap) before ALiBi and the softmax. A cap of 1 against scores of about ±2 (inputs in
// ±2), so the cap bends most of them: prefill of a padded batch, an append and decode steps.
BACKEND_OP_TEST(AttentionLogitSoftcap, "context_attention", "decode_attention") {
  for (const AttnCase& c : kAttnCases) {
    SCOPED_TRACE(attn_name(c));
    AttnScenario sc(*this, c, 120, 3);
    sc.shape.softcap = 1.0f;
    std::vector<int32_t> lengths = {37, 20, 1};
    const std::vector<int32_t> rows = {1, 2, 0};
    sc.prefill(*this, 37, lengths, rows);
    sc.prefill(*this, 33, {33, 4, 1}, rows, lengths);
    lengths = {70, 24, 2};
    for (int step = 0; step < 3; ++step) {
      sc.decode(*this, rows, lengths);
      for (auto& l : lengths) ++l;
    }
    expect_attention_matches(*this, sc);
  }
}

// A sliding window (AttentionShape::window) shorter than the sequence: the query at p sees
// positions p - window + 1 .. p. Windows of 1 (itself), 7, and 40 (across a CUDA key tile and the
// CPU's 32-query blocks), over paged rows of blocks of 16 anywhere in the pool: a prefill of 70
// tokens, an append of 30 and decode steps; with a softcap too.
BACKEND_OP_TEST(SlidingWindowAttention, "context_attention", "decode_attention") {
  for (const AttnCase& c : kAttnCases)
    for (const int64_t window : {int64_t(1), int64_t(7), int64_t(40)})
      for (const float cap : {0.0f, 1.0f}) {
        SCOPED_TRACE(attn_name(c) + " window " + std::to_string(window) + " softcap " + std::to_string(cap));
        const int64_t max_seq = 128, bs = 16, B = 2, stride = max_seq / bs, blocks = B * stride + 3;
        AttnScenario sc(*this, c, max_seq, blocks, bs);
        sc.shape.window = window;
        sc.shape.softcap = cap;
        prefill_append_decode(*this, sc, blocks, stride, static_cast<uint32_t>(window), {70, 33}, {30, 5});
      }
}

// Batch-1 decode over a long cache behind a window: on CUDA the keys are split over many blocks,
// the splits wholly behind the window have no key and the merge skips them.
BACKEND_OP_TEST(SlidingWindowDecodeSplitAcrossBlocks, "decode_attention") {
  for (const AttnCase& c : {AttnCase{2, 2, 64, false}, AttnCase{8, 1, 128, true}, AttnCase{4, 2, 25, false}})
    for (const int64_t window : {int64_t(100), int64_t(1500)}) {
      SCOPED_TRACE(attn_name(c) + " window " + std::to_string(window));
      AttnScenario sc(*this, c, 4000, 2);
      sc.shape.window = window;
      for (const int32_t past : {0, 99, 100, 287, 1023, 2000, 3999}) sc.decode(*this, {1}, {past});
      expect_attention_matches(*this, sc);
    }
}

// A sliding window over a circular cache (memory_len 48): windows shorter than the ring mask its
// slots by position (positions before, at and well past the wrap, with ALiBi by position); a window
// of the ring's size or more changes nothing. A prefill before the wrap first.
BACKEND_OP_TEST(SlidingWindowOverACircularCache, "context_attention", "decode_attention") {
  for (const AttnCase& c : kAttnCases)
    for (const int64_t window : {int64_t(5), int64_t(20), int64_t(48), int64_t(100)}) {
      SCOPED_TRACE(attn_name(c) + " window " + std::to_string(window));
      AttnScenario sc(*this, c, 48, 5);
      sc.shape.memory_len = 48;
      sc.shape.window = window;
      sc.shape.softcap = window == 20 ? 1.0f : 0.0f;
      sc.prefill(*this, 40, {40, 9}, {1, 2});
      sc.decode(*this, {1, 4, 0, 3, 2}, {40, 47, 48, 100, 1000});
      expect_attention_matches(*this, sc);
    }
}

}  // namespace ftx::test
