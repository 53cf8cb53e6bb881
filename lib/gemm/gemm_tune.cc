#include "lib/gemm/gemm_tune.h"

#include <vector>

#include "formats/error.h"
#include "formats/output_file.h"
#include "lib/ops/cuda_module.h"

namespace ftx::gemm {

bool gemm_uses_cublaslt_search(const GemmShape& s, GemmDType dtype) {
  return dtype != GemmDType::kFp32 && s.id != 1 && s.id != 2 && s.id != 10;
}

GemmAlgoRow gemm_row_key(const GemmShape& s, const GemmModelDims& dims, GemmDType dtype) {
  GemmAlgoRow r;
  r.batch_beam = static_cast<int>(s.batch_beam);
  r.seq_len = static_cast<int>(s.seq_len);
  r.head_num = static_cast<int>(dims.head_num);  // FT writes the global head count
  r.size_per_head = static_cast<int>(dims.size_per_head);
  r.dtype = static_cast<int>(dtype);
  r.batch_count = static_cast<int>(s.batch_count);
  r.n = static_cast<int>(s.n);
  r.m = static_cast<int>(s.m);
  r.k = static_cast<int>(s.k);
  return r;
}

// Everything that can be wrong with the request is reported before a GPU is looked for.
static std::vector<GemmShape> checked_shapes(const GemmTuneArgs& args) {
  args.dims.validate();
  if (args.int8_mode < 0 || args.int8_mode > 2)
    throw UsageError("--int8-mode must be 0, 1 or 2, got " + std::to_string(args.int8_mode));
  if (args.dtype != GemmDType::kFp32 && args.dtype != GemmDType::kFp16 && args.dtype != GemmDType::kBf16)
    throw Error(std::string("gemm-tune does not tune ") + gemm_dtype_name(args.dtype) +
                " GEMMs (use fp32, fp16 or bf16)");
  // Minutes of tuning must not end in a refusal to write: check the output first.
  const OutputTarget out = classify_output(args.output);
  if (out.kind == OutputKind::kRegular && out.exists && !args.force)
    throw Error(args.output, "exists; use --force to overwrite");
  return gpt_gemm_shapes_all_batches(args.dims, args.workload);
}

namespace {

GemmTuneRunner& tune_runner() {  // a function-local static: registered from static initializers
  static GemmTuneRunner r;
  return r;
}

}  // namespace

void register_gemm_tune_runner(GemmTuneRunner runner) { tune_runner() = std::move(runner); }

GemmConfigFile run_gemm_tune(const GemmTuneArgs& args) {
  const auto shapes = checked_shapes(args);
  if (!tune_runner()) ops::load_cuda_module();  // the ftx binary's CUDA pieces register when loaded
  if (!tune_runner()) throw Error("ftx was built without CUDA; gemm-tune needs an NVIDIA GPU");
  return tune_runner()(args, shapes);
}

}  // namespace ftx::gemm
