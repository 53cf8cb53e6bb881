#pragma once
// Attention ops as the op suite runs them: a scenario is a pool of KV-cache blocks (its dtype and
// starting contents: garbage that untouched slots must keep) and a sequence of prefill, append and
// decode calls; run_scenario runs it on a backend and returns each call's output and both whole
// caches, ref_scenario computes the same from the formula (reference.h).
#include <cstdint>
#include <string>
#include <vector>

#include "lib/ops/backend.h"
#include "unit/backend_ops/backend_ops.h"
#include "unit/backend_ops/reference.h"

namespace ftx::test {

// Heads and head size of one attention case.
struct AttnCase {
  int64_t q_heads, kv_heads, head_dim;
  bool alibi;
};
// MHA, MQA, grouped with an odd head_dim, ALiBi (6 heads: not a power of two), ALiBi + MQA, tiny and
// large heads (256: the CUDA kernel's opt-in shared memory).
extern const std::vector<AttnCase> kAttnCases;
std::string attn_name(const AttnCase& c);

// One call: a prefill (or, with `past`, an append) of B rows of S tokens, or one decode step of B
// rows at slots `past`; row i's block table is table[i · stride ...]. Or, with gather_dst set, a
// beam-style reorder of whole blocks in both caches (gather_cache_rows).
struct AttnCall {
  bool decode = false;
  std::vector<int32_t> gather_dst, gather_src;
  int64_t B = 0, S = 1;
  std::vector<int32_t> lengths;  // prefill: tokens per row
  std::vector<int32_t> past;     // decode: each row's slot; prefill: empty (none) or each row's past
  std::vector<float> qkv;        // [B, S, qkv_width]
  std::vector<int32_t> table;
  int64_t stride = 1;
  ops::BlockTables tables() const { return {table.data(), stride}; }
};

struct AttnScenario {
  ops::AttentionShape shape;
  std::vector<float> slopes;      // ALiBi slopes (shape.alibi_slopes points here once run)
  int64_t blocks = 0;             // blocks in the pool
  KvFormat format;                // the caches' dtype and scale
  bool backend_kv_dtype = false;  // caches from Backend::alloc_kv: int8 or FP8 as `format` says, else
                                  // in the backend's kv_dtype() (the inputs then representable in
                                  // `format` and in that dtype)
  std::vector<float> k0, v0;      // starting contents (KvFormat::store values)
  std::vector<AttnCall> calls;

  // Rows of max_seq slots in blocks of block_size (0: one block per row), a pool of `blocks`;
  // starting contents random stored values of `format` (set it first, or call random_start again).
  AttnScenario(OpTest& t, const AttnCase& c, int64_t max_seq, int64_t blocks, int64_t block_size = 0,
               KvFormat format = {});
  size_t cache_elems() const { return static_cast<size_t>(blocks * shape.block_elems()); }
  void random_start(OpTest& t);
  // Adds a call of lengths.size() (prefill) or past.size() (decode) rows whose block table is
  // `rows` (whole-row blocks, stride 1, unless the caller sets the call's stride), inputs uniform in
  // [-lim, lim] (rounded to the format's dtype when backend_kv_dtype).
  AttnCall& prefill(OpTest& t, int64_t S, std::vector<int32_t> lengths, std::vector<int32_t> rows,
                    std::vector<int32_t> past = {}, float lim = 2.0f);
  AttnCall& decode(OpTest& t, std::vector<int32_t> rows, std::vector<int32_t> past, float lim = 2.0f);
  // Block dst[i] := block src[i] in both caches, all reads before any write.
  void gather(std::vector<int32_t> dst, std::vector<int32_t> src);
};

Outs run_scenario(ops::Backend& b, const AttnScenario& sc);
Outs ref_scenario(const AttnScenario& sc);

// The attention tolerances (attention_scenario.cc).
constexpr Tol kAttentionTol{5e-7, 1e-5};

// expect_matches over a scenario, with the attention tolerances.
void expect_attention_matches(OpTest& t, const AttnScenario& sc, const BackendOptions& o = {});

}  // namespace ftx::test
