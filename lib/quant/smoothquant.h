#pragma once
// `ftx smoothquant`: calibrate an FT folder with ftx's engine, smooth it (optional), and write a
// complete FT folder OUT/<tp>-gpu/ with the smoothed floating-point weights and TensorRT-LLM's
// INT8 files beside them (docs/ft-layout.md#quantization-side-files), and with --fp8 its FP8 files
// (fp8_export.h) from the same calibration. See man/ftx-smoothquant.1.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "formats/dtype.h"
#include "lib/convert/conversion.h"

namespace ftx::quant {

struct SmoothQuantOptions {
  std::string model_dir;               // an FT folder (OUT/N-gpu), any TP size
  std::string out_dir;                 // OUT; files go to OUT/<tp>-gpu/
  int64_t tp = 1;
  DType dtype = DType::kFloat32;       // of the floating-point weights written
  std::optional<double> alpha;         // smoothing strength; none: --calibrate-kv-cache only
  bool calibrate_kv_cache = false;
  bool fp8 = false;                    // TensorRT-LLM's FP8 weight, activation and KV-cache files too
  std::string calib_data;              // JSON lines; the caller resolves the default (LAMBADA)
  int64_t calib_samples = 512;
  int64_t calib_seq_len = 512;
  std::string format = "trt-llm";      // only TensorRT-LLM's files are written today
  std::string device = "cpu";
  int threads = 0;
  std::string save_act_ranges;         // write the calibrated ranges (before smoothing) here
  std::string act_ranges;              // read ranges from here instead of calibrating
  bool force = false;
  bool quiet = false;
  std::string source;                  // manifest.json's "source" (default: model_dir)
  // Keys added to config.ini's model section after ftx's own (convert-hf's converter-specific keys).
  std::vector<std::pair<std::string, std::string>> extra_ini;
};

// UsageError for bad options (α outside [0, 1], neither α nor KV calibration, ...); Error for bad
// input. Nothing is left behind on failure: the output folder appears only when complete.
void run_smoothquant(const SmoothQuantOptions& options);

// `convert-hf --smoothquant A / --calibrate-kv-cache` (TensorRT-LLM's hf_gpt_convert.py flags):
// writes `plan` unsplit in fp32 to a temporary folder inside options.out_dir (removed afterwards),
// then runs run_smoothquant on it, so calibration and smoothing see the checkpoint's full-precision
// weights and only the output is rounded to convert_options.dtype. The plan's converter-specific
// config.ini keys are kept. sq's model_dir, out_dir, tp, dtype, force and quiet come from
// convert_options.
void convert_then_smoothquant(ConversionPlan& plan, const ConvertOptions& convert_options, SmoothQuantOptions sq);

}  // namespace ftx::quant
