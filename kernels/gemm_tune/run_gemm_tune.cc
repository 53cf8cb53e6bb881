// The GPU half of `ftx gemm-tune` (lib/gemm/gemm_tune.h's run_gemm_tune checks the request, then
// calls this through the registry): time every GEMM on the current GPU, write gemm_config.in.
#include "kernels/gemm_tune/run_gemm_tune.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "formats/error.h"
#include "kernels/gemm_tune/gemm_tuner.h"

namespace ftx::cuda {

namespace {

TuneDType tune_dtype(gemm::GemmDType t) {
  switch (t) {
    case gemm::GemmDType::kFp32: return TuneDType::kFp32;
    case gemm::GemmDType::kBf16: return TuneDType::kBf16;
    default: return TuneDType::kFp16;  // run_gemm_tune's checks admit only these three
  }
}

}  // namespace

gemm::GemmConfigFile run_gemm_tune_on_gpu(const gemm::GemmTuneArgs& args, const std::vector<gemm::GemmShape>& shapes) {
  using namespace gemm;
  const TuneDType dt = tune_dtype(args.dtype);
  const CudaDeviceInfo dev = current_cuda_device();  // Error without a GPU

  GemmConfigFile file;
  file.header.has_ftx_metadata = true;
  file.header.device = device_identity(dev);
  file.header.dtype = gemm_dtype_name(args.dtype);
  file.header.int8_mode = args.int8_mode;
  format_gemm_header(file.header);  // fail before tuning if the header cannot be written

  const bool tty = isatty(STDERR_FILENO) != 0;
  if (!args.quiet)
    std::fprintf(stderr, "gemm-tune: %s (sm_%d%d), CUDA %d, cuBLASLt %d, %s, %zu GEMMs\n", dev.name.c_str(),
                 dev.cc_major, dev.cc_minor, dev.runtime_version, dev.cublaslt_version, file.header.dtype.c_str(),
                 shapes.size());

  TuneOptions opt;
  opt.repeats = args.repeats;
  GemmTuner tuner(dt, opt);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& s = shapes[i];
    GemmProblem p;
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
    const TunedAlgo a = tuner.tune(p, progress);

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


}  // namespace ftx::cuda
