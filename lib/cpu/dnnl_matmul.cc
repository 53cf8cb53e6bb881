#include "lib/cpu/dnnl_matmul.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <string>
#include <tuple>

#include "formats/error.h"
#include "lib/cpu/cpu_features.h"

namespace ftx::cpu {

namespace {
using dt = dnnl::memory::data_type;
using Dims = dnnl::memory::dims;
}  // namespace

struct DnnlMatmul::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  struct Prim {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };
  // (N, K, ldb, ldc, trans_b, beta != 0) -> the primitive, for any number of rows M (a runtime
  // dimension: prefill lengths vary, the primitive need not).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool>, Prim> prims;
  std::string last;

  Prim& get(int64_t N, int64_t K, int64_t ldb, int64_t ldc, bool trans_b, float beta) {
    const auto key = std::make_tuple(N, K, ldb, ldc, trans_b, beta != 0.0f);
    if (auto it = prims.find(key); it != prims.end()) return it->second;
    const dnnl::memory::dim M = DNNL_RUNTIME_DIM_VAL;
    const dnnl::memory::desc a({M, K}, dt::bf16, Dims{K, 1});
    // B as stored: [K, N] rows, or the transpose of an [N, K] table, by strides (no copy).
    const dnnl::memory::desc b({K, N}, dt::bf16, trans_b ? Dims{1, ldb} : Dims{ldb, 1});
    const dnnl::memory::desc c({M, N}, dt::f32, Dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);  // C = A·B + beta·C
      attr.set_post_ops(ops);
    }
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
      return prims.emplace(key, Prim{pd, dnnl::matmul(pd)}).first->second;
    } catch (const dnnl::error& e) {
      throw Error("oneDNN: no bf16 matmul for N=" + std::to_string(N) + " K=" + std::to_string(K) +
                  " on this CPU: " + e.what());
    }
  }
};

namespace {
// oneDNN capped with ftx's kernels (FTX_CPU_ISA): set before the first primitive, as it must be.
void cap_onednn_isa() {
  static const bool once = [] {
    if (cpu_isa() == detected_cpu_isa()) return true;
    dnnl::set_max_cpu_isa(cpu_isa() == CpuIsa::kAvx2 ? dnnl::cpu_isa::avx2 : dnnl::cpu_isa::sse41);
    return true;
  }();
  (void)once;
}
}  // namespace

DnnlMatmul::DnnlMatmul() : impl_((cap_onednn_isa(), std::make_unique<Impl>())) {}
DnnlMatmul::~DnnlMatmul() = default;

void DnnlMatmul::bf16(int64_t M, int64_t N, int64_t K, const uint16_t* A, const uint16_t* B, int64_t ldb, bool trans_b,
                      float* C, int64_t ldc, float beta) {
  Impl::Prim& p = impl_->get(N, K, ldb, ldc, trans_b, beta);
  dnnl::engine& eng = impl_->engine;
  dnnl::memory a(dnnl::memory::desc({M, K}, dt::bf16, Dims{K, 1}), eng, const_cast<uint16_t*>(A));
  dnnl::memory b(p.pd.weights_desc(), eng, const_cast<uint16_t*>(B));
  dnnl::memory c(dnnl::memory::desc({M, N}, dt::f32, Dims{ldc, 1}), eng, C);
  p.prim.execute(impl_->stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  impl_->stream.wait();
  impl_->last = p.pd.impl_info_str();
}

const char* DnnlMatmul::last_impl() const { return impl_->last.c_str(); }

}  // namespace ftx::cpu
