#include "kernels/gemm_tune/gemm_tuner.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/common/cuda_check.h"
#include "kernels/common/lt_algo.h"
#include "kernels/gemm_tune/fill_random.h"

namespace ftx::cuda {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later probes start clean
    return 0;
  }
  return n;
}

CudaDeviceInfo current_cuda_device() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("no CUDA device found (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e) + ")");
  }
  if (n == 0) throw Error("no CUDA device found (cudaGetDeviceCount returned 0 devices)");
  CudaDeviceInfo d;
  FTX_CUDA_CHECK(cudaGetDevice(&d.ordinal));
  cudaDeviceProp prop;
  FTX_CUDA_CHECK(cudaGetDeviceProperties(&prop, d.ordinal));
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  FTX_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  FTX_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  d.cublaslt_version = static_cast<int>(cublasLtGetVersion());
  FTX_CUDA_CHECK(cudaMemGetInfo(&d.free_memory, &d.total_memory));
  return d;
}

gemm::DeviceIdentity device_identity(const CudaDeviceInfo& d) {
  gemm::DeviceIdentity id;
  id.gpu_name = d.name;
  id.cc_major = d.cc_major;
  id.cc_minor = d.cc_minor;
  id.cuda_version = d.runtime_version;
  id.cublaslt_version = d.cublaslt_version;
  return id;
}

namespace {

cudaDataType_t cuda_type(TuneDType t) {
  switch (t) {
    case TuneDType::kFp32: return CUDA_R_32F;
    case TuneDType::kFp16: return CUDA_R_16F;
    case TuneDType::kBf16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

size_t type_size(TuneDType t) { return t == TuneDType::kFp32 ? 4 : 2; }

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  void reserve(size_t n) {
    if (n <= bytes) return;
    release();
    FTX_CUDA_CHECK(cudaMalloc(&ptr, n));
    bytes = n;
  }
  void release() {
    if (ptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
  }
  ~DeviceBuffer() { release(); }
};

// The matrix geometry shared by the cuBLAS and cuBLASLt calls of one problem.
struct Geometry {
  cublasOperation_t op_a;
  int m, n, k;  // cuBLAS's m (= output features), n (= rows), k
  int lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  int batch;
  cudaDataType_t a_type, b_type, c_type;
};

Geometry geometry(const GemmProblem& p, TuneDType dt) {
  Geometry g;
  g.op_a = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.m = p.n_out;
  g.n = p.m_rows;
  g.k = p.k;
  g.lda = p.transpose_a ? p.k : p.n_out;
  g.ldb = p.k;
  g.ldc = p.n_out;
  g.stride_a = static_cast<int64_t>(p.n_out) * p.k;
  g.stride_b = static_cast<int64_t>(p.k) * p.m_rows;
  g.stride_c = static_cast<int64_t>(p.n_out) * p.m_rows;
  g.batch = p.strided_batched ? p.batch_count : 1;
  g.a_type = g.b_type = cuda_type(dt);
  g.c_type = p.fp32_output ? CUDA_R_32F : cuda_type(dt);
  return g;
}

// One cuBLASLt configuration, in exactly the fields gemm_config.in stores.
struct LtConfig : LtAlgoFields {
  size_t workspace = 0;
  auto key() const { return std::make_tuple(algo_id, tile, stages, reduction, swizzle, custom, splitk); }
};

struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtDescs() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void make_layout(cublasLtMatrixLayout_t* out, cudaDataType_t t, int rows, int cols, int ld, int batch, int64_t stride) {
  FTX_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(out, t, rows, cols, ld));
  if (batch > 1) {
    int32_t b = batch;
    FTX_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
    FTX_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
}

template <typename T>
T get_cap(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS) return T{};
  return v;
}

std::vector<uint32_t> get_cap_list(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr,
                                   uint32_t if_none) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
    return {if_none};
  std::vector<uint32_t> v(bytes / sizeof(uint32_t));
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, v.data(), v.size() * sizeof(uint32_t), &written) !=
          CUBLAS_STATUS_SUCCESS ||
      v.empty())
    return {if_none};
  return v;
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

struct GemmTuner::Impl {
  TuneDType dtype;
  TuneOptions opt;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer buf_a, buf_b, buf_c, workspace;  // operands W, X and output C
  uint32_t seed = 1;
  const float alpha = 1.0f, beta = 0.0f;

  ~Impl() {
    if (lt) cublasLtDestroy(lt);
    if (blas) cublasDestroy(blas);
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
    if (stream) cudaStreamDestroy(stream);
  }

  // Median per-call milliseconds of `call`, or a negative value when the library refuses it.
  template <typename Call>
  float time(Call&& call) {
    for (int i = 0; i < std::max(1, opt.warmup); ++i)
      if (call() != CUBLAS_STATUS_SUCCESS) return -1.0f;
    FTX_CUDA_CHECK(cudaStreamSynchronize(stream));  // an asynchronous fault surfaces here as an Error
    std::vector<float> samples;
    const int iters = std::max(1, opt.iters_per_repeat);
    for (int r = 0; r < std::max(1, opt.repeats); ++r) {
      FTX_CUDA_CHECK(cudaEventRecord(start, stream));
      for (int i = 0; i < iters; ++i)
        if (call() != CUBLAS_STATUS_SUCCESS) return -1.0f;
      FTX_CUDA_CHECK(cudaEventRecord(stop, stream));
      FTX_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      FTX_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      samples.push_back(ms / iters);
    }
    return median(samples);
  }

  void prepare_buffers(const Geometry& g, const GemmProblem& p) {
    const size_t es = type_size(dtype);
    const size_t na = static_cast<size_t>(g.stride_a) * g.batch, nb = static_cast<size_t>(g.stride_b) * g.batch;
    const size_t nc = static_cast<size_t>(g.stride_c) * g.batch;
    buf_a.reserve(na * es);
    buf_b.reserve(nb * es);
    buf_c.reserve(nc * (p.fp32_output ? 4 : es));
    fill_random(buf_a.ptr, na, dtype, false, seed++, stream);
    fill_random(buf_b.ptr, nb, dtype, false, seed++, stream);
    FTX_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  cublasStatus_t run_classic(const Geometry& g, int algo) {
    if (p_strided)
      return cublasGemmStridedBatchedEx(blas, g.op_a, CUBLAS_OP_N, g.m, g.n, g.k, &alpha, buf_a.ptr, g.a_type,
                                        g.lda, g.stride_a, buf_b.ptr, g.b_type, g.ldb, g.stride_b, &beta, buf_c.ptr,
                                        g.c_type, g.ldc, g.stride_c, g.batch, CUBLAS_COMPUTE_32F,
                                        static_cast<cublasGemmAlgo_t>(algo));
    return cublasGemmEx(blas, g.op_a, CUBLAS_OP_N, g.m, g.n, g.k, &alpha, buf_a.ptr, g.a_type, g.lda, buf_b.ptr,
                        g.b_type, g.ldb, &beta, buf_c.ptr, g.c_type, g.ldc, CUBLAS_COMPUTE_32F,
                        static_cast<cublasGemmAlgo_t>(algo));
  }
  bool p_strided = false;

  // Rebuilds an algo from the stored fields; false when cuBLASLt rejects it or it needs more
  // workspace than allowed. Fills cfg->workspace with what AlgoCheck reports.
  // A half C never takes a split-K scheme that sums in the half type: ftx's GEMMs would refuse the
  // row (lt_algo.h, rounds_once), so it is not timed either.
  bool build_lt(const LtDescs& d, const Geometry& g, LtConfig* cfg, cublasLtMatmulAlgo_t* algo) {
    if (!rounds_once(*cfg, g.c_type)) return false;
    return build_lt_algo(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, g.a_type, g.b_type, g.c_type, *cfg, d.op, d.a, d.b, d.c,
                         opt.workspace_limit, algo, &cfg->workspace);
  }

  std::vector<LtConfig> heuristic_candidates(const LtDescs& d, const Geometry& g) {
    cublasLtMatmulPreference_t pref = nullptr;
    FTX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = opt.workspace_limit;
    cublasStatus_t st =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS) st = prefer_rounding_once(pref, g.c_type);
    std::vector<cublasLtMatmulHeuristicResult_t> res(std::max(1, opt.max_heuristic));
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(lt, d.op, d.a, d.b, d.c, d.c, pref, static_cast<int>(res.size()),
                                          res.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    std::vector<LtConfig> out;
    if (st != CUBLAS_STATUS_SUCCESS) return out;  // no heuristic answer is not fatal: the enumeration remains
    for (int i = 0; i < found; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
      LtConfig c;
      if (!read_lt_algo(res[i].algo, &c)) continue;
      cublasLtMatmulAlgo_t rebuilt;
      if (build_lt(d, g, &c, &rebuilt)) out.push_back(c);  // drop what the file could not reproduce
    }
    return out;
  }

  // Every combination the algos' capabilities allow that passes AlgoCheck, up to max_enumerated
  // and at most max_checks AlgoCheck calls.
  std::vector<LtConfig> enumerate_candidates(const LtDescs& d, const Geometry& g) {
    int ids[128];
    int n_ids = 0;
    if (cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, g.a_type, g.b_type, g.c_type, g.c_type, 100,
                                 ids, &n_ids) != CUBLAS_STATUS_SUCCESS)
      return {};
    std::vector<LtConfig> out;
    if (n_ids <= 0) return out;
    // Both budgets are shared evenly between algo ids so one id with a huge space cannot crowd out the rest.
    const int per_id = std::max(50, opt.max_enumerated / n_ids);
    const int checks_per_id = std::max(1000, opt.max_checks / n_ids);
    static const int kSplits[] = {2, 3, 4, 5, 6, 8, 12, 16, 32};
    for (int i = 0; i < n_ids && static_cast<int>(out.size()) < opt.max_enumerated; ++i) {
      cublasLtMatmulAlgo_t algo;
      if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, g.a_type, g.b_type, g.c_type, g.c_type, ids[i],
                                 &algo) != CUBLAS_STATUS_SUCCESS)
        continue;
      auto tiles = get_cap_list(algo, CUBLASLT_ALGO_CAP_TILE_IDS, CUBLASLT_MATMUL_TILE_UNDEFINED);
      auto stages = get_cap_list(algo, CUBLASLT_ALGO_CAP_STAGES_IDS, CUBLASLT_MATMUL_STAGES_UNDEFINED);
      const bool splitk_ok = get_cap<int32_t>(algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
      const uint32_t red_mask = get_cap<uint32_t>(algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
      const uint32_t swizzle_max = get_cap<uint32_t>(algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) ? 1 : 0;
      const int32_t custom_max = std::max<int32_t>(0, get_cap<int32_t>(algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX));
      std::vector<std::pair<int32_t, uint32_t>> split_red = {{1, CUBLASLT_REDUCTION_SCHEME_NONE}};
      if (splitk_ok)
        for (int s : kSplits)
          for (uint32_t bit = 1; bit <= CUBLASLT_REDUCTION_SCHEME_MASK; bit <<= 1)
            if (red_mask & bit) split_red.push_back({s, bit});
      int kept = 0, checks = 0;
      for (uint32_t tile : tiles)
        for (uint32_t st : stages)
          for (int32_t custom = 0; custom <= custom_max; ++custom)
            for (uint32_t sw = 0; sw <= swizzle_max; ++sw)
              for (auto [splitk, red] : split_red) {
                if (kept >= per_id || checks++ >= checks_per_id || static_cast<int>(out.size()) >= opt.max_enumerated)
                  goto next_id;
                LtConfig c;
                c.algo_id = ids[i];
                c.tile = tile;
                c.stages = st;
                c.custom = static_cast<uint32_t>(custom);
                c.swizzle = sw;
                c.splitk = splitk;
                c.reduction = red;
                cublasLtMatmulAlgo_t built;
                if (build_lt(d, g, &c, &built)) {
                  out.push_back(c);
                  ++kept;
                }
              }
    next_id:;
    }
    return out;
  }

  cublasStatus_t run_lt(const LtDescs& d, const cublasLtMatmulAlgo_t& algo, size_t ws) {
    return cublasLtMatmul(lt, d.op, &alpha, buf_a.ptr, d.a, buf_b.ptr, d.b, &beta, buf_c.ptr, d.c, buf_c.ptr, d.c,
                          &algo, ws ? workspace.ptr : nullptr, ws, stream);
  }
};

GemmTuner::GemmTuner(TuneDType dtype, const TuneOptions& options) : impl_(new Impl) {
  impl_->dtype = dtype;
  impl_->opt = options;
  FTX_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  FTX_CUDA_CHECK(cudaEventCreate(&impl_->start));
  FTX_CUDA_CHECK(cudaEventCreate(&impl_->stop));
  FTX_CUBLAS_CHECK(cublasCreate(&impl_->blas));
  FTX_CUBLAS_CHECK(cublasSetStream(impl_->blas, impl_->stream));
  FTX_CUBLAS_CHECK(cublasLtCreate(&impl_->lt));
  if (options.workspace_limit > 0) impl_->workspace.reserve(options.workspace_limit);
}

GemmTuner::~GemmTuner() = default;

TunedAlgo GemmTuner::tune(const GemmProblem& p, const TuneProgress& progress) {
  Impl& im = *impl_;
  if (p.m_rows <= 0 || p.n_out <= 0 || p.k <= 0 || p.batch_count <= 0)
    throw Error("gemm-tune: GEMM with a non-positive size (M=" + std::to_string(p.m_rows) + " N=" +
                std::to_string(p.n_out) + " K=" + std::to_string(p.k) + ")");
  const Geometry g = geometry(p, im.dtype);
  im.p_strided = p.strided_batched;
  im.prepare_buffers(g, p);

  // cuBLASLt candidates first, so the total is known for progress reports.
  LtDescs d;
  std::vector<LtConfig> lt_candidates;
  if (p.try_cublaslt) {
    FTX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = g.op_a, tb = CUBLAS_OP_N;
    FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    FTX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    make_layout(&d.a, g.a_type, p.transpose_a ? g.k : g.m, p.transpose_a ? g.m : g.k, g.lda, g.batch, g.stride_a);
    make_layout(&d.b, g.b_type, g.k, g.n, g.ldb, g.batch, g.stride_b);
    make_layout(&d.c, g.c_type, g.m, g.n, g.ldc, g.batch, g.stride_c);
    auto heur = im.heuristic_candidates(d, g);
    auto all = im.enumerate_candidates(d, g);
    std::set<decltype(LtConfig().key())> seen;
    for (const auto& c : heur)
      if (seen.insert(c.key()).second) lt_candidates.push_back(c);
    if (static_cast<int>(all.size()) <= im.opt.max_enumerated_timed) {
      for (const auto& c : all)
        if (seen.insert(c.key()).second) lt_candidates.push_back(c);
    } else {
      // Too many to time: like FT, add the zero-workspace ones, sampled evenly across the list.
      std::vector<LtConfig> zero;
      for (const auto& c : all)
        if (c.workspace == 0) zero.push_back(c);
      const size_t want = static_cast<size_t>(std::max(0, im.opt.max_enumerated_timed));
      const double step = zero.size() > want ? static_cast<double>(zero.size()) / want : 1.0;
      for (size_t j = 0; j < want && static_cast<size_t>(j * step) < zero.size(); ++j) {
        const auto& c = zero[static_cast<size_t>(j * step)];
        if (seen.insert(c.key()).second) lt_candidates.push_back(c);
      }
    }
  }

  const int first_algo = im.dtype == TuneDType::kFp32 ? CUBLAS_GEMM_DEFAULT : CUBLAS_GEMM_DEFAULT_TENSOR_OP;
  const int last_algo = im.dtype == TuneDType::kFp32 ? CUBLAS_GEMM_ALGO23 : CUBLAS_GEMM_ALGO15_TENSOR_OP;
  const int total = (last_algo - first_algo + 1) + static_cast<int>(lt_candidates.size());
  TunedAlgo best;
  best.time_ms = -1.0f;
  int timed = 0;
  auto report = [&] {
    ++timed;
    if (progress) progress(timed, total, best.time_ms);
  };

  for (int algo = first_algo; algo <= last_algo; ++algo) {
    float t = im.time([&] { return im.run_classic(g, algo); });
    if (t >= 0 && (best.time_ms < 0 || t < best.time_ms)) {
      best = TunedAlgo{};
      best.algo_id = algo;
      best.time_ms = t;
    }
    report();
  }
  for (auto& c : lt_candidates) {
    cublasLtMatmulAlgo_t algo;
    if (im.build_lt(d, g, &c, &algo)) {
      float t = im.time([&] { return im.run_lt(d, algo, c.workspace); });
      if (t >= 0 && (best.time_ms < 0 || t < best.time_ms)) {
        best.cublaslt = true;
        best.algo_id = c.algo_id;
        best.custom_option = static_cast<int>(c.custom);
        best.tile = static_cast<int>(c.tile);
        best.splitk = c.splitk;
        best.swizzle = static_cast<int>(c.swizzle);
        best.reduction_scheme = static_cast<int>(c.reduction);
        best.workspace_size = static_cast<int>(c.workspace);
        best.stages = static_cast<int>(c.stages);
        best.time_ms = t;
      }
    }
    report();
  }
  if (best.time_ms < 0)
    throw Error("gemm-tune: no cuBLAS or cuBLASLt algorithm ran for M=" + std::to_string(p.m_rows) +
                " N=" + std::to_string(p.n_out) + " K=" + std::to_string(p.k) +
                " batchCount=" + std::to_string(p.batch_count));
  best.candidates_timed = timed;
  return best;
}

}  // namespace ftx::cuda
