#pragma once
// FT files that no single source tensor holds, computed in memory: OPT's embeddings multiplied by
// project_in / project_out, GPT-NeoX's summed parallel-residual bias, XGLM's sinusoidal position
// table and scaled embeddings, mesh-transformer-jax's shard biases summed and its embedding bias
// folded into the table. Each result is an fp32 TensorView that owns its memory, so it takes
// the same TensorJob path (split, cast, write, manifest) as a tensor mapped from a checkpoint.
#include <cstdint>
#include <string>
#include <vector>

#include "formats/tensor.h"

namespace ftx {

// Wraps `values` (C order, `shape`) as a tensor; `origin` names it in errors and the manifest.
TensorView owned_tensor(std::vector<float> values, std::vector<int64_t> shape, const std::string& origin);

// a [R, K] times b [K, N] (or, with b_transposed, bᵀ for b [N, K]); float64 sums rounded once.
TensorView matmul_tensor(const TensorView& a, const TensorView& b, bool b_transposed, const std::string& origin);

// What FT's GPT-NeoX converter writes for `mlp.attention.bias.sum`: each term is stored in the
// file dtype, divided by `divisor` (the TP size) in that dtype, written, read back and the two
// added in float32 (numpy's half arithmetic) before the final rounding to `dtype` by the writer.
TensorView ft_divided_sum(const std::vector<TensorView>& terms, int64_t divisor, DType dtype,
                          const std::string& origin);

// fairseq / HF XGLMSinusoidalPositionalEmbedding table rows [first, first + rows) of width H:
// row p = [sin(p·f_0..f_{h-1}) | cos(p·f_0..f_{h-1}) | 0 if H is odd], h = H/2,
// f_i = exp(-i·ln(10000)/(h-1)). Computed in float64 and rounded once.
TensorView sinusoidal_table(int64_t first, int64_t rows, int64_t H, const std::string& origin);

// t's rows (axis 0) in blocks of `block` rows, each block repeated `times` times in place:
// [b0 b1] -> [b0 b0 b1 b1] for times 2. Grouped-query K/V projections copied to more ranks than
// they have heads (as TensorRT-LLM does). Exact: the values are only copied.
TensorView repeated_row_blocks(const TensorView& t, int64_t block, int64_t times, const std::string& origin);

// Rows [begin, begin + count) of t (axis 0), a view of the same storage: the parts of a tensor a
// checkpoint stores fused (Phi-3's qkv_proj and gate_up_proj). Error naming `origin` when the range
// is not inside t.
TensorView row_range(const TensorView& t, int64_t begin, int64_t count, const std::string& origin);

// The element-wise sum of same-shaped tensors (float64 sums rounded once): a bias every training
// shard adds before an all-reduce (mesh-transformer-jax's embedding and MLP output biases).
TensorView sum_tensors(const std::vector<TensorView>& terms, const std::string& origin);

// `blocks` ([R_k, C] each) concatenated on axis 0, with `row` ([C]) added to every row (float64 sums
// rounded once): an embedding table with its bias folded in.
TensorView rows_plus(const std::vector<TensorView>& blocks, const TensorView& row, const std::string& origin);

// t · s (float64 product rounded once).
TensorView scaled_tensor(const TensorView& t, double s, const std::string& origin);

}  // namespace ftx
