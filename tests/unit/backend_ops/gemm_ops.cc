// GEMMs with floating-point and weight-only int8 weights, and the weight uploads that feed them:
// C = A·B + beta·C by lib/ops/backend.h's contract (A rounded to a half or int8 weight's input
// dtype, products summed exactly in the float64 reference), B held row-major, transposed or in the
// backend's own layout; a tuned GEMM file read by the backend. Quantised activations: W8A8 and FP8
// in quantized_gemm_ops.cc.
//
// Tolerance of an output, relative to Σ_k |a·b| (+ |beta·c|): the CPU 1e-6 against float64 (fp32
// sums of up to 1100 products; about 4x what any level gives on random inputs), a device 1e-5
// against the CPU.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "lib/gemm/gemm_config_file.h"
#include "lib/ops/host_math.h"
#include "unit/backend_ops/backend_ops.h"
#include "unit/backend_ops/reference.h"

#ifdef FTX_HAVE_CUDA
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/gemm_tune/gemm_tuner.h"
#endif

namespace ftx::test {
namespace {

constexpr Tol kGemmTol{1e-6, 1e-5};

struct Shape {
  int64_t M, N, K;
};

std::string shape_name(const Shape& s) {
  return "M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K);
}

// One fp32 GEMM: B uploaded with upload_weight, or a plain buffer at an odd offset (misalign 1:
// nothing may assume 256-byte alignment); beta 0 must ignore C, even NaN.
void expect_gemm(OpTest& t, const Shape& s, bool trans_b, float beta, int64_t misalign) {
  SCOPED_TRACE(shape_name(s) + " trans_b " + std::to_string(trans_b) + " beta " + std::to_string(beta) +
               " misalign " + std::to_string(misalign));
  const auto ha = t.random(static_cast<size_t>(s.M * s.K + misalign)), hb = t.random(static_cast<size_t>(s.K * s.N + misalign));
  std::vector<float> hc = t.random(static_cast<size_t>(s.M * s.N + misalign));
  if (beta == 0.0f) hc.assign(hc.size(), std::nanf(""));
  t.expect_matches(
      [&](ops::Backend& b) {
        Buffers mem(b);
        float* a = mem.put(ha);
        float* c = mem.put(hc);
        const ops::Weight w = misalign ? ops::Weight(mem.put(hb) + misalign) : b.upload_weight(hb.data(), DType::kFloat32, hb.size());
        b.gemm(s.M, s.N, s.K, a + misalign, w, trans_b, c + misalign, beta);
        if (!misalign) b.release_weight(w);
        return Outs{{"C", mem.get(c + misalign, static_cast<size_t>(s.M * s.N))}};
      },
      [&] {
        const GemmRef r = gemm_ref(s.M, s.N, s.K, widen({ha.begin() + misalign, ha.end()}),
                                   widen({hb.begin() + misalign, hb.end()}), trans_b,
                                   {hc.begin() + misalign, hc.end()}, beta);
        return Outs{{"C", r.c, r.scale}};
      },
      kGemmTol);
}

}  // namespace

BACKEND_OP_TEST(Gemm, "gemm", "upload_weight", "release_weight") {
  for (const Shape s : {Shape{1, 1, 1}, Shape{1, 257, 129}, Shape{3, 5, 7}, Shape{17, 33, 65}, Shape{64, 96, 128},
                        Shape{5, 1001, 64}, Shape{2, 64, 1024}})
    for (bool trans_b : {false, true})
      for (float beta : {0.0f, 0.5f})
        for (int64_t misalign : {0, 1}) expect_gemm(*this, s, trans_b, beta, misalign);
}

// gemm_config.in (generate's --gemm-config): a GPU backend runs the GEMMs it lists with the file's
// algorithm (classic cuBLAS rows through cublasGemmEx; a row cuBLASLt rejects falls back to the
// heuristic) and reports which GEMMs it served; the CPU has no algorithm to choose and ignores it.
// Results stay those of any GEMM either way.
BACKEND_OP_TEST(GemmFromTunedFile, "use_gemm_config", "gemm") {
  gemm::GemmConfigFile file;
  file.header.has_ftx_metadata = true;
  file.header.device.gpu_name = "a GPU";
#ifdef FTX_HAVE_CUDA
  if (!on_cpu()) file.header.device = cuda::device_identity(cuda::current_cuda_device());
#endif
  file.header.dtype = "fp32";
  auto row = [](int m, int n, int k, int algo, bool lt) {
    gemm::GemmAlgoRow r;
    r.batch_beam = 1;
    r.seq_len = m;
    r.head_num = 1;
    r.size_per_head = n;
    r.dtype = 0;  // FT's FLOAT_DATATYPE
    r.batch_count = 1;
    r.m = m;
    r.n = n;
    r.k = k;
    r.algo_id = algo;
    if (lt) r.custom_option = r.tile = r.splitk = r.swizzle = r.reduction_scheme = r.workspace_size = r.stages = 0;
    r.exec_time_ms = 0.01f;
    return r;
  };
  // The last: an algorithm id no cuBLASLt has, which must be refused, not run.
  file.rows = {row(3, 48, 32, -1, false), row(17, 33, 65, 0, false), row(8, 64, 64, 100000, true)};
  char dir[] = "/tmp/ftx-gemmcfg-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/gemm_config.in";
  gemm::write_gemm_config(path, file);
  be().use_gemm_config(path, "");
#ifdef FTX_HAVE_CUDA
  auto* impl = dynamic_cast<cuda::CudaBackend*>(&be().inner());
  if (!on_cpu()) {
    ASSERT_NE(impl, nullptr);
    ASSERT_TRUE(impl->gemm_algo_map().active()) << impl->gemm_algo_map().rejection();
  }
#endif
  for (bool trans_b : {false, true}) {
    expect_gemm(*this, {3, 48, 32}, trans_b, 0.0f, 0);
    expect_gemm(*this, {17, 33, 65}, trans_b, 0.5f, 1);
    expect_gemm(*this, {8, 64, 64}, trans_b, 0.0f, 0);
    expect_gemm(*this, {5, 7, 9}, trans_b, 0.0f, 0);  // not in the file: the heuristic
  }
#ifdef FTX_HAVE_CUDA
  if (impl) EXPECT_EQ(impl->gemm_algo_map().hits(), 3u);  // rows looked up (the refused one is warned about)
#endif
  std::remove(path.c_str());
  rmdir(dir);
}

// Half weights (a backend made for fp16/bf16): B held in the half type, uploaded from fp32
// (converted by the backend) or from half bytes (copied as they are); A rounded to it; fp32 sums.
// Also, the same C against the unrounded operands within the dtype's reach (1e-2 of the GEMM scale
// in fp16, 4e-2 in bf16).
BACKEND_OP_TEST(HalfWeightGemm, "weight_dtype", "upload_weight", "gemm", "release_weight") {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    EXPECT_EQ(be({t}).weight_dtype(), t);
    for (const Shape s : {Shape{1, 1, 1}, Shape{1, 3072, 1024}, Shape{3, 5, 7}, Shape{8, 96, 128},
                          Shape{37, 1000, 64}, Shape{128, 256, 512}})
      for (bool trans_b : {false, true}) {
        const auto ha = random(static_cast<size_t>(s.M * s.K)), hb = random(static_cast<size_t>(s.K * s.N));
        std::optional<Outs> ref;  // the same for both uploads
        for (bool from_half : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_name(s) + " trans_b " + std::to_string(trans_b) +
                       " from_half " + std::to_string(from_half));
          expect_matches(
              {t},
              [&](ops::Backend& b) {
                Buffers mem(b);
                ops::Weight w;
                if (from_half) {
                  std::vector<uint16_t> bits(hb.size());
                  ops::convert_weight(hb.data(), DType::kFloat32, bits.data(), t, hb.size());
                  w = b.upload_weight(bits.data(), t, hb.size());
                } else {
                  w = b.upload_weight(hb.data(), DType::kFloat32, hb.size());
                }
                EXPECT_EQ(w.dtype, t);
                float* a = mem.put(ha);
                float* c = mem.alloc(static_cast<size_t>(s.M * s.N));
                b.gemm(s.M, s.N, s.K, a, w, trans_b, c, 0.0f);
                b.release_weight(w);
                const std::vector<float> got = mem.get(c, static_cast<size_t>(s.M * s.N));
                return Outs{{"C", got}, {"C against fp32 operands", got}};
              },
              [&] {
                if (ref) return *ref;
                const GemmRef r = gemm_ref(s.M, s.N, s.K, widen(round_to(t, ha)), widen(round_to(t, hb)), trans_b, {}, 0.0f);
                GemmRef fp32 = gemm_ref(s.M, s.N, s.K, widen(ha), widen(hb), trans_b, {}, 0.0f);
                const double reach = (t == DType::kFloat16 ? 1e-2 : 4e-2) / kGemmTol.cpu;  // in tolerances
                for (double& x : fp32.scale) x *= reach;
                ref = Outs{{"C", r.c, r.scale}, {"C against fp32 operands", fp32.c, fp32.scale}};
                return *ref;
              },
              kGemmTol);
        }
      }
  }
}

// Layer matrices (only ever a GEMM's B, never transposed), which a backend may hold in a layout of
// its own (the CPU: column panels of a width chosen per matrix), in each weight dtype, from fp32 or
// half sources: one row, groups of rows, K in pieces, many rows.
BACKEND_OP_TEST(WeightMatrixGemm, "upload_weight_matrix", "gemm", "release_weight") {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (DType src : {DType::kFloat32, t})
      for (const Shape s : {Shape{1, 768, 100}, Shape{2, 2304, 40}, Shape{8, 640, 300}, Shape{40, 640, 34},
                            Shape{1, 5000, 64}, Shape{17, 64, 2}, Shape{70, 520, 766}, Shape{3, 256, 1100}}) {
        if (src == t && t == DType::kFloat32 && s.M > 8) continue;  // once is enough for fp32 from fp32
        SCOPED_TRACE(std::string(dtype_name(t)) + " from " + dtype_name(src) + " " + shape_name(s));
        const auto ha = random(static_cast<size_t>(s.M * s.K)), hb = random(static_cast<size_t>(s.K * s.N));
        const auto hc = random(static_cast<size_t>(s.M * s.N));
        const float beta = s.M % 2 ? 1.0f : 0.0f;
        expect_matches(
            {t},
            [&](ops::Backend& b) {
              Buffers mem(b);
              std::vector<uint16_t> bits(hb.size());
              if (src != DType::kFloat32) ops::convert_weight(hb.data(), DType::kFloat32, bits.data(), src, hb.size());
              const ops::Weight w = b.upload_weight_matrix(src == DType::kFloat32 ? static_cast<const void*>(hb.data())
                                                                                  : bits.data(),
                                                           src, s.K, s.N);
              float* a = mem.put(ha);
              float* c = mem.put(hc);
              b.gemm(s.M, s.N, s.K, a, w, false, c, beta);
              b.release_weight(w);
              return Outs{{"C", mem.get(c, static_cast<size_t>(s.M * s.N))}};
            },
            [&] {
              const GemmRef r = gemm_ref(s.M, s.N, s.K, widen(round_to(t, ha)), widen(round_to(t, round_to(src, hb))),
                                         false, hc, beta);
              return Outs{{"C", r.c, r.scale}};
            },
            kGemmTol);
      }
}

// Weight-only INT8 (FT's int8_mode 1): the matrix quantised per column at upload by FT's rule, the
// GEMM (A rounded to the model's dtype) · q · scale, for fp32 and half models, few rows and many.
// And --int8-lm-head's table (quantised per row, used transposed) where the backend supports it.
BACKEND_OP_TEST(Int8WeightOnlyGemm, "upload_weight_int8", "int8_lm_head_supported", "gemm", "release_weight") {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    const bool lm_head = be({t}).int8_lm_head_supported();
    for (const Shape s : {Shape{1, 1, 1}, Shape{1, 3072, 1024}, Shape{3, 5, 7}, Shape{8, 96, 128},
                          Shape{37, 1000, 64}, Shape{128, 256, 512}})
      for (bool rows : {false, true}) {
        if (rows && !lm_head) continue;
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + shape_name(s) + (rows ? " per-row table, transposed" : ""));
        const auto ha = random(static_cast<size_t>(s.M * s.K)), hb = random(static_cast<size_t>(s.K * s.N));
        expect_matches(
            {t},
            [&](ops::Backend& b) {
              Buffers mem(b);
              const ops::Weight w = rows ? b.upload_weight_int8_rows(hb.data(), DType::kFloat32, s.N, s.K)
                                         : b.upload_weight_int8(hb.data(), DType::kFloat32, s.K, s.N);
              EXPECT_EQ(w.dtype, DType::kInt8);
              EXPECT_EQ(w.input_dtype, t);
              float* a = mem.put(ha);
              float* c = mem.alloc(static_cast<size_t>(s.M * s.N));
              b.gemm(s.M, s.N, s.K, a, w, rows, c, 0.0f);
              b.release_weight(w);
              return Outs{{"C", mem.get(c, static_cast<size_t>(s.M * s.N))}};
            },
            [&] {
              const GemmRef r = gemm_ref(s.M, s.N, s.K, widen(round_to(t, ha)),
                                         rows ? int8_weight_only_values(hb, s.N, s.K, true)
                                              : int8_weight_only_values(hb, s.K, s.N, false),
                                         rows, {}, 0.0f);
              return Outs{{"C", r.c, r.scale}};
            },
            kGemmTol);
      }
  }
}

}  // namespace ftx::test
