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
  const float* k;    // keys [0, pos0 + rows), key s at k + s·d (fp32: an int8 cache dequantised first)
  const float* v;    // values, the same layout
  int64_t d;         // head dimension
  float scale;       // applied to Q·K
  float slope;       // ALiBi: + slope·(s - pos); 0 for none
  float* out;        // query i's output at out + i·ldo (d values)
  int64_t ldo;
};

// scratch: reused between calls (rows · keys floats).
void attend_block(const AttentionBlock& b, std::vector<float>& scratch);

}  // namespace ftx::cpu
