#pragma once
// How one admission's prompts are cut into prefill calls. A prefill call runs its rows as one
// right-padded batch (engine.h): every row costs as many tokens as the longest, in every GEMM. A
// batch job's prompts are of very mixed lengths (a few tokens beside a few hundred), and one padded
// call then runs several times the tokens the prompts hold. Each call, on the other hand, reads all
// the weights once more. prefill_groups() picks the cut that minimises the tokens run plus
// `pass_tokens` per call: the rows sorted by length, each call a run of neighbours, found exactly by
// dynamic programming over the sorted lengths.
//
// A row's logits and cache do not depend on which rows share its call (the GEMMs' sums are per row,
// lib/cpu/widening_gemm.h; attention is per row), so the cut changes the time, never the tokens.
#include <cstdint>
#include <vector>

namespace ftx {

// What one more call costs, in padded tokens: about what a pass over the weights costs beside the
// arithmetic of one token row (a GEMM of fewer rows than this is bound by reading the weights at
// the CPU's bandwidth-to-FMA balance, 14 fp32 rows on a 2-core AVX2 machine and fewer with narrower
// weights), with room for the per-call work that does not shrink with the rows (the logits, the
// block tables, the threads' start).
constexpr int64_t kPrefillPassTokens = 64;

// Groups of indices into `lengths` (each group ascending; groups in the order of their longest
// row, longest first). Every index appears once; an empty input gives no group.
std::vector<std::vector<int64_t>> prefill_groups(const std::vector<int64_t>& lengths,
                                                 int64_t pass_tokens = kPrefillPassTokens);

// The tokens the largest of those calls runs (its rows times its longest row).
int64_t largest_group_tokens(const std::vector<int64_t>& lengths, const std::vector<std::vector<int64_t>>& groups);

}  // namespace ftx
