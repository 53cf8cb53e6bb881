// A half GEMM's output is rounded once, after the fp32 sum (lib/ops/backend.h), also when cuBLASLt
// splits K: split-K partial sums must not be added in the half type (kernels/common/lt_algo.h,
// rounds_once). Label gpu; the scheme rule itself needs no device.
//
// The inputs make the check exact instead of statistical: every operand is a multiple of 1/8 with
// at most 8 significant bits (exact in fp16 and bf16), the second half of K repeats the first with
// B negated plus a sparse difference D, so each partial sum of a K-chunk is large (hundreds) while
// C = Σ_{k<K/2} A·D is small and exact in both half types. Every partial sum of any order is a
// multiple of 1/8 below 2^20: exact in fp32. So a GEMM that keeps partial sums in fp32 returns C
// bit for bit, whatever its order or split; one that adds them in fp16 or bf16 (ulp 0.5 to 4 at
// those magnitudes) loses the eighths. Checked on shapes where cuBLASLt's heuristic likes split-K
// (few rows, long K), and with a gemm_config.in row that names an in-place (half-type) split-K
// algorithm, which the backend must refuse.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "lib/ops/backend.h"

#ifdef FTX_HAVE_CUDA
#include <cublasLt.h>
#include <unistd.h>

#include "kernels/common/lt_algo.h"
#include "kernels/cuda_backend/cuda_backend.h"
#include "kernels/gemm_tune/gemm_tuner.h"
#include "lib/gemm/gemm_config_file.h"
#endif

namespace ftx {
namespace {

#ifdef FTX_HAVE_CUDA

TEST(LtReductionScheme, HalfOutputKeepsSplitKSumsInFp32) {
  auto fields = [](int32_t splitk, uint32_t reduction) {
    cuda::LtAlgoFields f;
    f.splitk = splitk;
    f.reduction = reduction;
    return f;
  };
  for (cudaDataType_t half : {CUDA_R_16F, CUDA_R_16BF}) {
    EXPECT_TRUE(cuda::rounds_once(fields(1, CUBLASLT_REDUCTION_SCHEME_NONE), half));
    EXPECT_TRUE(cuda::rounds_once(fields(1, CUBLASLT_REDUCTION_SCHEME_INPLACE), half));  // no split: one sum
    EXPECT_TRUE(cuda::rounds_once(fields(8, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE), half));
    EXPECT_FALSE(cuda::rounds_once(fields(8, CUBLASLT_REDUCTION_SCHEME_INPLACE), half));
    EXPECT_FALSE(cuda::rounds_once(fields(8, CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE), half));
    EXPECT_EQ(cuda::reductions_rounding_once(half), static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
  }
  for (uint32_t r : {CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                     CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE})
    EXPECT_TRUE(cuda::rounds_once(fields(8, r), CUDA_R_32F));
}

struct Case {
  int64_t M, N, K;
  std::vector<float> a, b;  // [M, K], [K, N]
  std::vector<float> c;     // the exact result (a multiple of 1/8, exact in fp16 and bf16)
};

Case make_case(int64_t M, int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> small(-3, 3), eighths(-127, 127), diff(-16, 16);
  std::uniform_int_distribution<int64_t> row(0, K / 2 - 1);
  Case c{M, N, K, std::vector<float>(M * K), std::vector<float>(K * N), std::vector<float>(M * N, 0.0f)};
  const int64_t L = K / 2;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < L; ++k) c.a[m * K + k] = c.a[m * K + k + L] = static_cast<float>(small(g));
  std::vector<float> d(L * N, 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int i = 0; i < 4; ++i) d[row(g) * N + n] = diff(g) / 8.0f;
  for (int64_t k = 0; k < L; ++k)
    for (int64_t n = 0; n < N; ++n) {
      c.b[k * N + n] = eighths(g) / 8.0f;
      c.b[(k + L) * N + n] = -c.b[k * N + n] + d[k * N + n];
    }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < L; ++k) s += static_cast<double>(c.a[m * K + k]) * d[k * N + n];
      c.c[m * N + n] = static_cast<float>(s);  // |s| <= 24, a multiple of 1/8: exact
    }
  return c;
}

// C = A·B on `be` (half weights, activations in the backend's dtype), C in the activations' dtype.
std::vector<float> run(ops::Backend& be, const Case& c) {
  const ops::Weight w = be.upload_weight(c.b.data(), DType::kFloat32, c.b.size());
  const ops::Act a = be.alloc_act(c.a.size()), out = be.alloc_act(c.c.size());
  be.upload_act(a, c.a.data(), c.a.size());
  be.gemm(c.M, c.N, c.K, a, w, false, out, 0.0f);
  std::vector<float> got(c.c.size());
  be.download_act(got.data(), out, got.size());
  be.release_act(a);
  be.release_act(out);
  be.release_weight(w);
  return got;
}

::testing::AssertionResult exact(const std::vector<float>& got, const Case& c) {
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != c.c[i] && wrong++ == 0) first = i;
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << wrong << " of " << got.size() << " outputs not the exact sum (M=" << c.M
                                       << " N=" << c.N << " K=" << c.K << "); first at " << first << ": "
                                       << got[first] << ", exact " << c.c[first];
}

std::unique_ptr<ops::Backend> half_backend(DType t) {
  cuda::CudaBackendOptions o;
  o.weight_dtype = t;  // activations (and so C) in t too
  return cuda::make_cuda_backend(o);
}

TEST(CudaHalfGemmRounding, SplitKPartialSumsStayFp32) {
  REQUIRE_CUDA_DEVICE();
  struct Shape {
    int64_t M, N, K;
  };
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    auto be = half_backend(t);
    ASSERT_EQ(be->act_dtype(), t);
    uint32_t seed = 1;
    for (const Shape s : {Shape{1, 64, 8192}, Shape{2, 128, 16384}, Shape{8, 256, 4096}, Shape{1, 768, 3072},
                          Shape{4, 1024, 8192}, Shape{64, 64, 16384}}) {
      SCOPED_TRACE(dtype_name(t));
      const Case c = make_case(s.M, s.N, s.K, seed++);
      EXPECT_TRUE(exact(run(*be, c), c));
    }
  }
}

// cuBLASLt's view of a row-major C[M,N] = A[M,K]·B[K,N] with half operands and C, as the backend
// plans it (column-major C^T = B^T·A^T).
struct LtView {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  LtView(int64_t M, int64_t N, int64_t K, cudaDataType_t t) {
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&a, t, N, K, N);
    cublasLtMatrixLayoutCreate(&b, t, K, M, K);
    cublasLtMatrixLayoutCreate(&c, t, N, M, N);
  }
  ~LtView() {
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
  }
};

// An in-place (half-type) split-K algorithm cuBLASLt accepts for the shape, or false.
bool find_inplace_split_k(cublasLtHandle_t lt, const LtView& v, cudaDataType_t t, cuda::LtAlgoFields* out) {
  const size_t ws_limit = size_t(32) << 20;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  const uint64_t ws = ws_limit;
  const uint32_t inplace = CUBLASLT_REDUCTION_SCHEME_INPLACE;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &inplace, sizeof inplace);
  cublasLtMatmulHeuristicResult_t res[16] = {};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(lt, v.op, v.a, v.b, v.c, v.c, pref, 16, res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  cuda::LtAlgoFields f;
  for (int i = 0; i < found; ++i)
    if (res[i].state == CUBLAS_STATUS_SUCCESS && cuda::read_lt_algo(res[i].algo, &f) && f.splitk > 1 &&
        f.reduction == CUBLASLT_REDUCTION_SCHEME_INPLACE) {
      *out = f;
      return true;
    }
  // None offered: force split-K in place onto each heuristic algorithm in turn.
  for (int i = 0; i < found; ++i) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS || !cuda::read_lt_algo(res[i].algo, &f)) continue;
    for (int32_t splits : {4, 8, 16}) {
      f.splitk = splits;
      f.reduction = CUBLASLT_REDUCTION_SCHEME_INPLACE;
      cublasLtMatmulAlgo_t algo;
      size_t need = 0;
      if (cuda::build_lt_algo(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, t, t, t, f, v.op, v.a, v.b, v.c, ws_limit, &algo,
                              &need)) {
        *out = f;
        return true;
      }
    }
  }
  return false;
}

TEST(CudaHalfGemmRounding, TunedInPlaceSplitKRowIsRefused) {
  REQUIRE_CUDA_DEVICE();
  const int64_t M = 2, N = 128, K = 16384;
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    const cudaDataType_t ct = t == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasLtHandle_t lt = nullptr;
    ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
    cuda::LtAlgoFields f;
    bool have = false;
    {
      const LtView v(M, N, K, ct);
      have = find_inplace_split_k(lt, v, ct, &f);
    }
    cublasLtDestroy(lt);
    if (!have) {
      std::printf("cuBLASLt offers no in-place split-K for %s M=%lld N=%lld K=%lld: nothing to refuse\n",
                  dtype_name(t), static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K));
      continue;
    }
    gemm::GemmConfigFile file;
    file.header.has_ftx_metadata = true;
    file.header.device = cuda::device_identity(cuda::current_cuda_device());
    file.header.dtype = t == DType::kFloat16 ? "fp16" : "bf16";
    gemm::GemmAlgoRow r;
    r.batch_beam = 1;
    r.seq_len = static_cast<int>(M);
    r.head_num = 1;
    r.size_per_head = static_cast<int>(N);
    r.dtype = t == DType::kFloat16 ? 1 : 2;
    r.batch_count = 1;
    r.m = static_cast<int>(M);
    r.n = static_cast<int>(N);
    r.k = static_cast<int>(K);
    r.algo_id = f.algo_id;
    r.custom_option = static_cast<int>(f.custom);
    r.tile = static_cast<int>(f.tile);
    r.splitk = f.splitk;
    r.swizzle = static_cast<int>(f.swizzle);
    r.reduction_scheme = static_cast<int>(f.reduction);
    r.workspace_size = 0;
    r.stages = static_cast<int>(f.stages);
    r.exec_time_ms = 0.01f;
    file.rows = {r};
    char dir[] = "/tmp/ftx-gemm-rounding-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/gemm_config.in";
    gemm::write_gemm_config(path, file);
    auto be = half_backend(t);
    be->use_gemm_config(path, "");
    const Case c = make_case(M, N, K, 99);
    EXPECT_TRUE(exact(run(*be, c), c)) << "with a tuned row of algorithm " << f.algo_id << ", split-K " << f.splitk
                                       << " in place";
    std::remove(path.c_str());
    rmdir(dir);
  }
}

#else
TEST(CudaHalfGemmRounding, NotBuilt) { GTEST_SKIP() << "ftx was built without CUDA"; }
#endif

}  // namespace
}  // namespace ftx
