#pragma once
// The GPU half of `ftx gemm-tune`, registered with lib/gemm (gemm::register_gemm_tune_runner).
#include <vector>

#include "lib/gemm/gemm_tune.h"

namespace ftx::cuda {

// Times `shapes` on the current GPU (Error without one) and writes args.output; returns the file.
gemm::GemmConfigFile run_gemm_tune_on_gpu(const gemm::GemmTuneArgs& args, const std::vector<gemm::GemmShape>& shapes);

}  // namespace ftx::cuda
