#pragma once
// Prefill attention of one head over a block of consecutive queries as two GEMMs (OpenBLAS's
// sgemm, on the calling thread): scores = scale · Q·Kᵀ (+ ALiBi), the causal mask, a softmax per
// row, then out = P·V. One key at a time (a 64-long dot product and a reduction per key, as
// decode does it) ran prefill attention at a few percent of the cores' FMA peak; as GEMMs the keys
// and values are read once per block of queries instead of once per query.
#include <cstdint>
#include <vector>

namespace ftx::cpu {

struct AttentionBlock {
  const float* q;    // first query of the block; query i at q + i·ldq
  int64_t ldq;
  int64_t rows;      // queries in the block
  int64_t pos0;      // position of the first query; query i sees keys [0, pos0 + i]
  const float* k;    // keys [key0, pos0 + rows), key s at k + (s - key0)·d (fp32: an int8 cache dequantised first)
  const float* v;    // values, the same layout
  int64_t d;         // head dimension
  float scale;       // applied to Q·K
  float slope;       // ALiBi: + slope·(s - pos); 0 for none
  float* out;        // query i's output at out + i·ldo (d values)
  int64_t ldo;
  float softcap = 0.0f;  // > 0: scores capped as softcap·tanh(s / softcap) before ALiBi (AttentionShape)
  int64_t window = 0;    // > 0: query i sees keys [pos0 + i - window + 1, pos0 + i] only
  int64_t key0 = 0;      // the first key k holds: at most first_key(pos0, window)
};
// The first key a block's queries see: 0, or behind a sliding window the first query's window start.
inline int64_t first_key(int64_t pos0, int64_t window) { return window > 0 && pos0 >= window ? pos0 - window + 1 : 0; }

// scratch: reused between calls (rows · keys floats).
void attend_block(const AttentionBlock& b, std::vector<float>& scratch);

}  // namespace ftx::cpu
