#pragma once
// `ftx gemm-tune` without the CLI: build the GEMM list, time every GEMM on the current GPU
// (kernels/gemm_tune, registered through register_gemm_tune_runner), write gemm_config.in. In a
// build without CUDA, run_gemm_tune throws.
#include <functional>
#include <string>
#include <vector>

#include "lib/gemm/gemm_config_file.h"
#include "lib/gemm/gemm_shapes.h"

namespace ftx::gemm {

struct GemmTuneArgs {
  GemmModelDims dims;
  GemmWorkload workload;
  GemmDType dtype = GemmDType::kFp16;
  int64_t int8_mode = 0;  // recorded in the header; weight GEMMs of int8 modes do not use cuBLAS
  std::string output = kGemmConfigFileName;  // "-": standard output
  bool force = false;                        // replace an existing output file
  bool quiet = false;
  int repeats = 9;        // timings per candidate (the median is kept)
};

// FT times cuBLASLt configurations only for FP16/BF16 and never for the batched attention GEMMs
// (1, 2) or the logits GEMM (10): FT's runtime calls those (and all FP32 GEMMs) through
// cublasGemmEx/cublasGemmStridedBatchedEx with the stored algoId alone, so a cuBLASLt row there
// would hand FT a meaningless algo id. ftx keeps the same rule so the file is safe for FT.
bool gemm_uses_cublaslt_search(const GemmShape& s, GemmDType dtype);

// The key columns of a row for `s` (algorithm columns left at their classic-cuBLAS defaults).
GemmAlgoRow gemm_row_key(const GemmShape& s, const GemmModelDims& dims, GemmDType dtype);

// Tunes and writes args.output; returns what was written. Progress on stderr unless quiet.
GemmConfigFile run_gemm_tune(const GemmTuneArgs& args);

// The GPU half of run_gemm_tune: times `shapes` (already checked) and writes args.output. kernels/
// registers it when the CUDA backend is built in (lib/ does not include kernels/).
using GemmTuneRunner = std::function<GemmConfigFile(const GemmTuneArgs& args, const std::vector<GemmShape>& shapes)>;
void register_gemm_tune_runner(GemmTuneRunner runner);

}  // namespace ftx::gemm
