// CudaBackend::moe_ffn (Backend::moe_ffn, lib/ops/backend.h; its CPU twin lib/cpu/moe_ffn.cc):
//   router GEMM (fp32 logits) -> routing kernel -> stable counting sort of the slots by expert ->
//   the slots' input rows gathered in expert order -> per non-empty expert, its fc (and gate) GEMM
//   on its run of rows -> one activation over all slots -> per expert, its proj GEMM into fp32
//   outputs -> the weighted combine per row.
// The GEMMs go through gemm(), so each expert's weights may be of any kind gemm takes (fp32/fp16/
// bf16, and the quantised ones). Their row counts come back to the host (one small copy and a
// stream synchronisation per layer): cuBLAS(Lt) takes a GEMM's M, also each group's M of its
// grouped GEMM, from the host, so sizing the experts' GEMMs needs them there whichever API runs
// them (docs/cuda.md#what-the-backend-does). Hence also no MoE inside a recorded CUDA graph.
#include <algorithm>
#include <string>
#include <vector>

#include "formats/error.h"
#include "kernels/common/cuda_check.h"
#include "kernels/cuda_backend/act_kinds.h"
#include "kernels/cuda_backend/cuda_backend_impl.h"
#include "kernels/memory/memory_kernels.h"
#include "kernels/moe/moe_kernels.h"

namespace ftx::cuda {

void CudaBackend::moe_ffn(ops::Act out, ops::Act in, int64_t rows, const ops::MoeLayer& m) {
  const int64_t H = m.hidden, I = m.inter, E = m.experts, K = m.top_k;
  if (!(H > 0 && I > 0 && E > 0 && K >= 1 && K <= E))
    throw Error("CUDA moe_ffn: hidden " + std::to_string(H) + ", inter " + std::to_string(I) + ", experts " +
                std::to_string(E) + ", top_k " + std::to_string(K) + ": top_k must be in [1, experts]");
  if (!m.fc || !m.proj || !m.router || (m.gate != nullptr) != m.act.is_gated())
    throw Error("CUDA moe_ffn: the layer needs a router, fc and proj weights, and gate weights exactly when its "
                "activation is gated");
  if (m.fc_bias || m.proj_bias)
    throw Error("CUDA moe_ffn: experts with biases (FT GPT-MoE's, Megatron-DeepSpeed's) are not implemented on "
                "this backend yet; decode such a model with --device cpu");
  if (m.local_experts() != E)
    throw Error("CUDA moe_ffn: whole experts per rank (moe_ep_size, experts [" + std::to_string(m.expert_begin) + ", " +
                std::to_string(m.expert_begin + m.local_experts()) + ") of " + std::to_string(E) +
                ") are not implemented on this backend yet; decode such a folder with --device cpu");
  if (m.shared_inter > 0)
    throw Error("CUDA moe_ffn: a shared expert (Qwen2-MoE's) is not implemented on this backend yet; decode such a "
                "model with --device cpu");
  if (rows <= 0) return;
  if (step_mode_ == StepMode::kCapture || step_mode_ == StepMode::kReplay)
    throw Error("CUDA moe_ffn: a mixture-of-experts layer cannot be recorded into a CUDA graph (its GEMMs are sized "
                "by the routing, read back each call); decode MoE models without CUDA graphs");
  act_kind(in, "moe_ffn");  // refuses a dtype activations are never held in
  const size_t S = static_cast<size_t>(rows * K), act_bytes = dtype_size(in.dtype);

  // Own buffers, not scratch(): the GEMMs below take scratch for themselves.
  const size_t sizes[] = {static_cast<size_t>(rows * E) * sizeof(float),  // logits
                          S * sizeof(int32_t),                            // expert per slot
                          S * sizeof(float),                              // weight per slot
                          static_cast<size_t>(E + 1) * sizeof(int32_t),   // offsets
                          S * sizeof(int32_t),                            // src_row per position
                          S * sizeof(int32_t),                            // position per slot
                          S * static_cast<size_t>(H) * act_bytes,         // inputs, in expert order
                          S * static_cast<size_t>(I) * act_bytes,         // fc, then activated
                          m.gate ? S * static_cast<size_t>(I) * act_bytes : 0,
                          S * static_cast<size_t>(H) * sizeof(float)};    // each position's expert output
  size_t total = 0;
  for (size_t b : sizes) total += round_up(b, 256);
  if (moe_cap_ < total) {
    const size_t cap = std::max(total, moe_cap_ * 2);
    release_graph_memory(moe_buf_);
    moe_buf_ = nullptr;
    moe_cap_ = 0;
    moe_buf_ = arena_.allocate(cap);
    moe_cap_ = cap;
  }
  std::vector<char*> part;
  size_t off = 0;
  for (size_t b : sizes) {
    part.push_back(static_cast<char*>(moe_buf_) + off);
    off += round_up(b, 256);
  }
  auto* logits = reinterpret_cast<float*>(part[0]);
  auto* expert = reinterpret_cast<int32_t*>(part[1]);
  auto* weight = reinterpret_cast<float*>(part[2]);
  auto* offsets = reinterpret_cast<int32_t*>(part[3]);
  auto* src_row = reinterpret_cast<int32_t*>(part[4]);
  auto* pos = reinterpret_cast<int32_t*>(part[5]);
  const ops::Act x(part[6], in.dtype), a(part[7], in.dtype), g = m.gate ? ops::Act(part[8], in.dtype) : ops::Act();
  auto* y = reinterpret_cast<float*>(part[9]);

  gemm(rows, E, H, in, m.router, false, ops::Act(logits), 0.0f);
  invoke_moe_route(stream_, logits, rows, E, K, m.routing == MoeRouting::kSoftmaxTopKRenorm, expert, weight);
  invoke_moe_sort(stream_, expert, static_cast<int64_t>(S), K, E, offsets, src_row, pos);
  // Every row of `in` is copied before `out` (which may be `in`) is written.
  invoke_copy_rows(stream_, x.data, nullptr, in.data, nullptr, src_row, static_cast<int64_t>(S),
                   H * static_cast<int64_t>(act_bytes));
  std::vector<int32_t> at(static_cast<size_t>(E + 1));
  FTX_CUDA_CHECK(cudaMemcpyAsync(at.data(), offsets, at.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  synchronize();

  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = at[e], n = at[e + 1] - at[e];
    if (n == 0) continue;
    gemm(n, I, H, x + first * H, m.fc[e], false, a + first * I, 0.0f);
    if (m.gate) gemm(n, I, H, x + first * H, m.gate[e], false, g + first * I, 0.0f);
  }
  bias_activation(a, nullptr, g, nullptr, static_cast<int64_t>(S), I, m.act);  // elementwise: all slots at once
  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = at[e], n = at[e + 1] - at[e];
    if (n == 0) continue;
    gemm(n, H, I, a + first * I, m.proj[e], false, ops::Act(y + first * H), 0.0f);
  }
  invoke_moe_combine(stream_, out.data, act_kind(out, "moe_ffn"), y, weight, pos, rows, K, H);
}

}  // namespace ftx::cuda
