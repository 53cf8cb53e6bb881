#pragma once
// Vocabulary-parallel embedding, TensorRT-LLM's --use_parallel_embedding, --embedding_sharding_dim and
// --use_embedding_sharing (docs/parallelism.md#vocabulary-parallel-embedding). Without it every TP rank
// holds the whole embedding table and TP rank 0 the whole lm_head. With it each TP rank holds a
// slice of both:
//  * the embedding table split by vocabulary rows (dim 0: a rank looks up the ids in its range,
//    zeros for the others, and one all-reduce sums the ranks' rows) or by hidden columns (dim 1: a
//    rank looks up its columns of every id, and one all-gather joins them);
//  * the lm_head split by vocabulary rows whatever the dim (a rank computes its logits, one
//    all-gather joins them), as TensorRT-LLM's lm_head always is under TP;
//  * sharing: a tied model's lm_head reads the embedding's own dim-0 slice instead of a copy.
// A vocabulary that does not divide by TP is padded with zero rows, as TensorRT-LLM pads it
// (pad_vocab_size): every rank holds ceil(V / T) rows, rounded up to the backend's
// vocab_pad_multiple; the padding logits are never read.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ftx {

struct EmbeddingSharding {
  bool parallel = false;  // --use-parallel-embedding
  int dim = 0;            // --embedding-sharding-dim: 0 vocabulary rows, 1 hidden columns
  bool share = false;     // --use-embedding-sharing (dim 0; a tied model)
};

// The vocabulary rows each of `tp` ranks holds: ceil(vocab / tp) rounded up to a multiple of `pad`.
int64_t vocab_rows_per_rank(int64_t vocab, int tp, int64_t pad);

// Rows [first, first + rows) of a row-major [total_rows, cols] table of `elem`-byte elements, with
// zero rows where the range passes total_rows (zero bits: 0.0 in fp32, fp16 and bf16).
std::vector<uint8_t> table_rows(const uint8_t* src, int64_t total_rows, int64_t cols, size_t elem, int64_t first,
                                int64_t rows);
// Columns [first, first + cols) of every row of a row-major [rows, total_cols] table.
std::vector<uint8_t> table_columns(const uint8_t* src, int64_t rows, int64_t total_cols, size_t elem, int64_t first,
                                   int64_t cols);

}  // namespace ftx
