#include "lib/cpu/w8a8_gemm.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "formats/error.h"

namespace ftx::cpu {

namespace {

// Round half to even and saturate to [-128, 127]: cvt.rni.sat.s8.f32. std::nearbyint rounds half
// to even under the default rounding mode; NaN (0 · inf) becomes 0 as the PTX instruction makes it.
inline int8_t to_int8_rne(float v) {
  if (std::isnan(v)) return 0;
  const float r = std::nearbyint(v);
  return static_cast<int8_t>(std::min(127.0f, std::max(-128.0f, r)));
}

// One engine and stream for the process, and one matmul primitive per weight shape (N, K) with the
// row count M left to run time: decode and every prefill length share it, so no kernel is
// generated per M (oneDNN then picks its gemm:jit int8 kernel, AVX512-VNNI here, which measured as
// fast as the per-M brgemm one at M = 1 and within noise at M = 64). Weights stay in their plain
// [K, N] layout.
struct DnnlState {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mu;
  std::map<std::pair<int64_t, int64_t>, dnnl::matmul> cache;
};

DnnlState& dnnl_state() {
  static DnnlState s;
  return s;
}

}  // namespace

void quantize_per_tensor(const float* x, int64_t n, float scale, int8_t* q) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) q[i] = to_int8_rne(x[i] * scale);
}

void quantize_per_token(const float* x, int64_t M, int64_t K, int8_t* q, float* alpha_row) {
#pragma omp parallel for if (M * K > 65536)
  for (int64_t m = 0; m < M; ++m) {
    const float* row = x + m * K;
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
    const float s = 127.0f / amax;  // inf when amax is 0: every product is 0·inf = NaN -> 0
    for (int64_t k = 0; k < K; ++k) q[m * K + k] = to_int8_rne(row[k] * s);
    alpha_row[m] = amax / 127.0f;
  }
}

void dequantize_int32(const int32_t* acc, int64_t M, int64_t N, const float* alpha_row, float row_scale,
                      const float* alpha_col, float* C, float beta) {
#pragma omp parallel for if (M * N > 65536)
  for (int64_t m = 0; m < M; ++m) {
    const float ar = alpha_row ? alpha_row[m] : row_scale;
    for (int64_t n = 0; n < N; ++n) {
      const float y = static_cast<float>(acc[m * N + n]) * (ar * alpha_col[n]);
      C[m * N + n] = beta == 0.0f ? y : y + beta * C[m * N + n];
    }
  }
}

void int8_matmul_s32(int64_t M, int64_t N, int64_t K, const int8_t* q_a, const int8_t* q_w, int32_t* acc) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  DnnlState& st = dnnl_state();
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto key = std::make_pair(N, K);
    auto it = st.cache.find(key);
    if (it == st.cache.end()) {
      const int64_t rows = DNNL_RUNTIME_DIM_VAL;
      try {
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(dnnl::memory::desc({rows, K}, dt::s8, tag::ab),
                                                           dnnl::memory::desc({K, N}, dt::s8, tag::ab),
                                                           dnnl::memory::desc({rows, N}, dt::s32, tag::ab)),
                                        st.engine);
        it = st.cache.emplace(key, dnnl::matmul(pd)).first;
      } catch (const dnnl::error& e) {
        throw Error("oneDNN int8 matmul ?x" + std::to_string(K) + "x" + std::to_string(N) + ": " + e.what());
      }
    }
    prim = it->second;
  }
  dnnl::memory a({{M, K}, dt::s8, tag::ab}, st.engine, const_cast<int8_t*>(q_a));
  dnnl::memory w({{K, N}, dt::s8, tag::ab}, st.engine, const_cast<int8_t*>(q_w));
  dnnl::memory c({{M, N}, dt::s32, tag::ab}, st.engine, acc);
  prim.execute(st.stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, c}});
  st.stream.wait();
}

void w8a8_gemm(int64_t M, int64_t N, int64_t K, const float* A, const int8_t* q_w, const float* alpha_col,
               float act_scale, float out_scale, float* C, float beta) {
  // Scratch per thread: the engine calls the GEMMs one at a time, and rows are few at decode.
  thread_local std::vector<int8_t> q_a;
  thread_local std::vector<int32_t> acc;
  thread_local std::vector<float> alpha_row;
  q_a.resize(static_cast<size_t>(M * K));
  acc.resize(static_cast<size_t>(M * N));
  const bool per_token = !(act_scale > 0.0f);
  if (per_token) {
    alpha_row.resize(static_cast<size_t>(M));
    quantize_per_token(A, M, K, q_a.data(), alpha_row.data());
  } else {
    quantize_per_tensor(A, M * K, act_scale, q_a.data());
  }
  int8_matmul_s32(M, N, K, q_a.data(), q_w, acc.data());
  dequantize_int32(acc.data(), M, N, per_token ? alpha_row.data() : nullptr, out_scale, alpha_col, C, beta);
}

}  // namespace ftx::cpu
