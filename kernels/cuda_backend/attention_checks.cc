#include "kernels/cuda_backend/attention_checks.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "formats/error.h"

namespace ftx::cuda {

void check_attention_shape(const ops::AttentionShape& sh, const ops::BlockTables& tables, const char* op) {
  if (sh.q_heads < 1 || sh.kv_heads < 1 || sh.head_dim < 1 || sh.max_seq < 1)
    throw Error(std::string("CUDA ") + op + ": empty attention shape (q_heads " + std::to_string(sh.q_heads) +
                ", kv_heads " + std::to_string(sh.kv_heads) + ", head_dim " + std::to_string(sh.head_dim) +
                ", max_seq " + std::to_string(sh.max_seq) + ")");
  // Slots are 32-bit in the kernels.
  if (sh.block_size < 1 || tables.stride < 1 || !tables.ids || tables.stride * sh.block_size < sh.max_seq ||
      sh.max_seq > INT32_MAX)
    throw Error(std::string("CUDA ") + op + ": block tables of " + std::to_string(tables.stride) + " blocks of " +
                std::to_string(sh.block_size) + " tokens for rows of " + std::to_string(sh.max_seq) + " slots");
  if (sh.window < 0)
    throw Error(std::string("CUDA ") + op + ": sliding window " + std::to_string(sh.window) + " is negative");
  if (!(sh.softcap >= 0.0f) || !std::isfinite(sh.softcap))
    throw Error(std::string("CUDA ") + op + ": softcap " + std::to_string(sh.softcap) +
                " is not a positive number or 0");
}

void check_append_slots(const int32_t* lengths, const int32_t* past, int64_t B, int64_t S,
                        const ops::AttentionShape& sh) {
  for (int64_t b = 0; b < B; ++b) {
    const int64_t p0 = past ? past[b] : 0, end = p0 + lengths[b];
    if (lengths[b] < 0 || lengths[b] > S || p0 < 0 || end > sh.max_seq)
      throw Error("CUDA context_attention: row " + std::to_string(b) + " appends " + std::to_string(lengths[b]) +
                  " tokens after " + std::to_string(p0) + " (padded width " + std::to_string(S) + ", row of " +
                  std::to_string(sh.max_seq) + " slots)");
    if (sh.memory_len > 0 && end > sh.memory_len)
      throw Error("CUDA context_attention: row " + std::to_string(b) + "'s positions " + std::to_string(p0) + ".." +
                  std::to_string(end - 1) + " wrap the circular cache of " + std::to_string(sh.memory_len));
  }
}

void check_decode_slots(const int32_t* past, int64_t n, const ops::AttentionShape& sh) {
  for (int64_t r = 0; r < n; ++r)
    if (past[r] < 0 || (sh.memory_len == 0 && past[r] >= sh.max_seq))
      throw Error("CUDA decode_attention: row " + std::to_string(r) + " writes slot " + std::to_string(past[r]) +
                  " (rows of " + std::to_string(sh.max_seq) + " slots)");
}

void check_block_ids(const ops::BlockTables& tables, int64_t items, int64_t blocks_in_cache, const char* op) {
  for (int64_t i = 0; i < items * tables.stride; ++i)
    if (tables.ids[i] < 0 || (blocks_in_cache >= 0 && tables.ids[i] >= blocks_in_cache))
      throw Error(std::string("CUDA ") + op + ": block id " + std::to_string(tables.ids[i]) + " in row " +
                  std::to_string(i / tables.stride) + "'s table" +
                  (blocks_in_cache >= 0 ? " (the cache holds " + std::to_string(blocks_in_cache) + " blocks)" : ""));
}

int64_t blocks_in_cache(size_t bytes, DType dtype, const ops::AttentionShape& shape) {
  const int64_t block_bytes = shape.block_elems() * static_cast<int64_t>(dtype_size(dtype));
  if (bytes == 0 || block_bytes <= 0) return -1;
  return static_cast<int64_t>(bytes) / block_bytes;
}

}  // namespace ftx::cuda
