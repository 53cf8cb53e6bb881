#include "lib/gemm/gemm_tune.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "formats/error.h"
#include "formats/output_file.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/gemm_tune/gemm_tuner.h"
#endif

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

#ifndef FTX_HAVE_CUDA

GemmConfigFile run_gemm_tune(const GemmTuneArgs& args) {
  checked_shapes(args);
  throw Error("ftx was built without CUDA; gemm-tune needs an NVIDIA GPU");
}

#else

namespace {

cuda::TuneDType tune_dtype(GemmDType t) {
  switch (t) {
    case GemmDType::kFp32: return cuda::TuneDType::kFp32;
    case GemmDType::kBf16: return cuda::TuneDType::kBf16;
    default: return cuda::TuneDType::kFp16;  // checked_shapes admits only these three
  }
}

}  // namespace

GemmConfigFile run_gemm_tune(const GemmTuneArgs& args) {
  const auto shapes = checked_shapes(args);
  const cuda::TuneDType dt = tune_dtype(args.dtype);
  const cuda::CudaDeviceInfo dev = cuda::current_cuda_device();  // Error without a GPU

  GemmConfigFile file;
  file.header.has_ftx_metadata = true;
  file.header.device = cuda::device_identity(dev);
  file.header.dtype = gemm_dtype_name(args.dtype);
  file.header.int8_mode = args.int8_mode;
  format_gemm_header(file.header);  // fail before tuning if the header cannot be written

  const bool tty = isatty(STDERR_FILENO) != 0;
  if (!args.quiet)
    std::fprintf(stderr, "gemm-tune: %s (sm_%d%d), CUDA %d, cuBLASLt %d, %s, %zu GEMMs\n", dev.name.c_str(),
                 dev.cc_major, dev.cc_minor, dev.runtime_version, dev.cublaslt_version, file.header.dtype.c_str(),
                 shapes.size());

  cuda::TuneOptions opt;
  opt.repeats = args.repeats;
  cuda::GemmTuner tuner(dt, opt);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& s = shapes[i];
    cuda::GemmProblem p;
    p.m_rows = static_cast<int>(s.timed_m);
    p.n_out = static_cast<int>(s.timed_n);
    p.k = static_cast<int>(s.timed_k);
    p.batch_count = static_cast<int>(s.batch_count);
    p.strided_batched = s.strided_batched;
    // Q*K^T reads K transposed (FT: CUBLAS_OP_T on the K operand); the logits weight is [V, H].
    p.transpose_a = s.transpose_weight || s.id == 1;
    p.fp32_output = s.fp32_output;
    p.try_cublaslt = gemm_uses_cublaslt_search(s, args.dtype);

    char what[256];
    std::snprintf(what, sizeof what, "[%zu/%zu] batch %lld, GEMM %d %s (batchCount %lld, M %lld N %lld K %lld)", i + 1,
                  shapes.size(), static_cast<long long>(s.batch_beam), s.id, s.label,
                  static_cast<long long>(s.batch_count), static_cast<long long>(s.m), static_cast<long long>(s.n),
                  static_cast<long long>(s.k));
    auto last = std::chrono::steady_clock::now();
    auto progress = [&](int done, int total, float best_ms) {
      if (args.quiet || !tty) return;
      auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::milliseconds(200) && done != total) return;
      last = now;
      std::fprintf(stderr, "\r\033[Kgemm-tune: %s: candidate %d/%d, best %.4f ms", what, done, total,
                   static_cast<double>(best_ms));
    };
    const cuda::TunedAlgo a = tuner.tune(p, progress);

    GemmAlgoRow r = gemm_row_key(s, args.dims, args.dtype);
    r.algo_id = a.algo_id;
    if (a.cublaslt) {
      r.custom_option = a.custom_option;
      r.tile = a.tile;
      r.splitk = a.splitk;
      r.swizzle = a.swizzle;
      r.reduction_scheme = a.reduction_scheme;
      r.workspace_size = a.workspace_size;
      r.stages = a.stages;
    }
    r.exec_time_ms = a.time_ms;
    file.rows.push_back(r);
    if (!args.quiet)
      std::fprintf(stderr, "%sgemm-tune: %s: %.4f ms, %s algo %d (%d candidates)\n", tty ? "\r\033[K" : "", what,
                   static_cast<double>(a.time_ms), a.cublaslt ? "cuBLASLt" : "cuBLAS", a.algo_id,
                   a.candidates_timed);
  }
  write_gemm_config(args.output, file, args.force);
  if (!args.quiet)
    std::fprintf(stderr, "gemm-tune: wrote %zu rows to %s in %.1f s\n", file.rows.size(), args.output.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return file;
}

#endif

}  // namespace ftx::gemm
