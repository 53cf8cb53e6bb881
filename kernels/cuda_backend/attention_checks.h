#pragma once
// Host checks of the CUDA attention ops' arguments (Backend::context_attention, decode_attention).
// The CPU backend trusts what the engine gives it; on the GPU a bad slot or block id would read or
// write device memory silently, so the backend checks on the host, where it is free. Each throws
// ftx::Error("CUDA <op>: ...") naming the offending value. No CUDA here: unit-tested on the CPU
// (tests/unit/attention_checks_test.cc).
#include <cstdint>

#include "lib/ops/backend.h"

namespace ftx::cuda {

// Non-empty heads and rows, block tables that cover max_seq, slots that fit 32 bits; a window of 0
// or more, a softcap of 0 or a finite positive number.
void check_attention_shape(const ops::AttentionShape& sh, const ops::BlockTables& tables, const char* op);

// Prefill or append: row b writes lengths[b] ≤ S tokens at slots past[b] (0 without past) onward,
// within the row's max_seq slots, and, with a circular cache, without wrapping it (as the CPU's
// context_attention refuses: the engine feeds a wrapping append one token at a time). max_seq is
// whole blocks, so it can exceed memory_len: the wrap check is its own.
void check_append_slots(const int32_t* lengths, const int32_t* past, int64_t B, int64_t S,
                        const ops::AttentionShape& sh);

// Decode: row r writes slot past[r] (any with a circular cache, which wraps).
void check_decode_slots(const int32_t* past, int64_t n, const ops::AttentionShape& sh);

// The block ids of `items` rows: each in [0, blocks_in_cache); blocks_in_cache < 0: unknown (the
// upper bound is not checked).
void check_block_ids(const ops::BlockTables& tables, int64_t items, int64_t blocks_in_cache, const char* op);

// Whole blocks of `shape` in a cache allocation of `bytes` bytes of `dtype` (0 bytes: unknown, -1).
int64_t blocks_in_cache(size_t bytes, DType dtype, const ops::AttentionShape& shape);

}  // namespace ftx::cuda
