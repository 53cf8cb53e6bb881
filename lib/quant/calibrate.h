#pragma once
// SmoothQuant calibration with ftx's own engine: each sample run alone (batch 1) through the
// unsplit model, recording every GEMM's ranges (act_ranges.h) through a RecordingBackend.
#include <cstdint>
#include <string>
#include <vector>

#include "lib/quant/act_ranges.h"
#include "lib/quant/host_model.h"

namespace ftx {
class Tokenizer;
}

namespace ftx::quant {

// The first `max_samples` lines of a JSON-lines file: {"text": "..."} (tokenized with `tokenizer`,
// which may be null only when every line has ids) or {"ids": [...]}, each truncated to `seq_len`
// tokens. Errors name the file and line: bad JSON, neither key, a sample with no tokens, an id
// outside [0, vocab_size) (when vocab_size > 0), an empty file, text without a tokenizer.
std::vector<std::vector<int32_t>> read_calibration_samples(const std::string& path, const Tokenizer* tokenizer,
                                                           int64_t max_samples, int64_t seq_len,
                                                           int64_t vocab_size = 0);

struct CalibrationOptions {
  std::string device = "cpu";
  int threads = 0;
  bool quiet = false;
};

// Runs `samples` through the TP-1 FT folder `tp1_dir` (whose tensors `model` holds: the GEMM
// biases added to "y" come from it) and returns x and y of every GEMM; w is filled from `model`'s
// weights as TensorRT-LLM does (max |W| per output column, clipped at 1e-8); kv holds each layer's
// max |K| and |V| as the cache stores them (keys "model.layers.L.attention"). Progress on stderr.
ActRanges calibrate(const std::string& tp1_dir, const HostModel& model,
                    const std::vector<std::vector<int32_t>>& samples, const CalibrationOptions& options);

// max |W[i, j]| over rows i, per column j, of a [rows, cols] weight, clipped at `floor`.
std::vector<float> column_abs_max(const HostTensor& w, float floor);

}  // namespace ftx::quant
