#pragma once
// CudaBackend: the class behind make_cuda_backend() (docs/cuda.md#what-the-backend-does says what
// it does). Internal to kernels/: callers outside use the Backend interface; the NCCL communicator
// uses stream() to order its collectives with the backend's kernels.
//
// Its methods are in rooms that mirror lib/cpu/, one job each: cuda_backend.cc (making a backend
// and giving it back), cuda_memory.cc (the arena, transfers, scratch and metadata staging),
// cuda_graphs.cc (repeated steps as CUDA graphs), cuda_gemm.cc (the switch on the weight's kind and
// the quantised GEMMs), cuda_gemm_plan.cc (cuBLASLt plans, gemm_config.in, the call itself),
// cuda_ops.cc (norms, QK-norm, softcap, bias, activation, embedding, rotary), cuda_attention.cc
// (attention and the cache's copies), cuda_moe.cc (the mixture-of-experts layer) and
// cuda_sampling.cc (sample_rows); act_kinds.h holds the dtype checks they share.
//
// One host thread drives a backend (the CUDA device is selected in the constructor, per thread).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda_backend/device_arena.h"
#include "lib/gemm/gemm_algo_map.h"
#include "lib/ops/backend.h"

namespace ftx::cuda {

class CudaBackend : public ops::Backend {
 public:
  // weight_dtype: fp32, fp16 or bf16 (what upload_weight() holds matrices in).
  // kv_dtype: what the KV cache is held in (default: weight_dtype).
  // act_dtype: what activations are held in (default: weight_dtype): fp32, or weight_dtype.
  CudaBackend(int device, bool tf32, DType weight_dtype = DType::kFloat32, bool graphs = false,
              std::optional<DType> kv_dtype = std::nullopt, std::optional<DType> act_dtype = std::nullopt);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  void use_gemm_config(const std::string& explicit_path, const std::string& model_dir) override;
  const gemm::GemmAlgoMap& gemm_algo_map() const { return algo_map_; }
  int device() const { return device_; }
  bool tf32() const { return tf32_; }
  cudaStream_t stream() const { return stream_; }
  const DeviceArena& arena() const { return arena_; }
  void synchronize();

  void begin_repeatable(const std::string& key) override;
  void end_repeatable() override;
  void abort_repeatable() override;
  void forget_repeatables() override;
  // True while a recorded step is replayed: ops copy their metadata and launch nothing (the NCCL
  // communicator skips its all-reduce too, which the graph holds).
  bool replaying() const { return step_mode_ == StepMode::kReplay; }
  bool graphs() const { return graphs_; }
  size_t graphs_recorded() const;

  DType weight_dtype() const override { return weight_dtype_; }
  int64_t vocab_pad_multiple() const override { return weight_dtype_ == DType::kFloat32 ? 1 : 8; }
  // The unquantised cache's dtype (an int8 or FP8 one is asked for by alloc_kv's dtype).
  DType kv_dtype() const override { return kv_dtype_; }
  // FP8 needs sm_89 or later: Error naming the GPU otherwise (fp8_device.h).
  void require_fp8(const std::string& flag) const override;
  using ops::Backend::alloc_kv;
  ops::KvCache alloc_kv(size_t n, DType dtype) override;
  void release_kv(const ops::KvCache& c) override;
  ops::Weight upload_weight(const void* src, DType src_dtype, size_t n) override;
  void release_weight(const ops::Weight& w) override;
  // Held transposed, [N, K], for cuBLASLt's int8 TN form (kernels/quantization/int8_gemm_lt.h).
  ops::Weight upload_weight_w8a8(const int8_t* q, int64_t rows, int64_t cols, const float* alpha_col,
                                 float act_scale, float out_scale) override;
  // Held transposed, [N, K], for cuBLASLt's FP8 TN form (kernels/quantization/fp8_gemm_lt.h), with
  // the two scales in device memory ({weights_scaling_factor, activation_scaling_factor}, Weight::scale).
  ops::Weight upload_weight_fp8(const uint8_t* q, int64_t rows, int64_t cols, float activation_scaling_factor,
                                float weights_scaling_factor) override;
  // Held in 4 bits in kernels/quantization/int4_layout.h's layout: Weight::data the packed values,
  // scale the scales, int4_zeros the zero points (null: symmetric), int4_aux the act-order row
  // arrays ([K] groups, then [K] source rows; null without a group index), int4_group_size the rows
  // per group (0 with act-order). The GEMM is kernels/quantization/int4_gemm.h's, for every M.
  ops::Weight upload_weight_int4(const ops::Int4Matrix& m, DType input_dtype) override;

  float* alloc(size_t n) override;
  void release(float* p) override;
  void upload(float* dst, const float* host_src, size_t n) override;
  void download(float* host_dst, const float* src, size_t n) override;
  void copy(float* dst, const float* src, size_t n) override;
  void fill(float* dst, float value, size_t n) override;

  DType act_dtype() const override { return act_dtype_; }
  ops::Act alloc_act(size_t n) override;
  void release_act(const ops::Act& a) override;
  void upload_act(const ops::Act& dst, const float* host_src, size_t n) override;
  void download_act(float* host_dst, const ops::Act& src, size_t n) override;
  void copy_act(const ops::Act& dst, const ops::Act& src, size_t n) override;
  void copy_act_2d(const ops::Act& dst, int64_t dst_pitch, const ops::Act& src, int64_t src_pitch, int64_t width,
                   int64_t height) override;
  void copy_2d(float* dst, int64_t dst_pitch, const float* src, int64_t src_pitch, int64_t width,
               int64_t height) override;

  void gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& B, bool trans_b, ops::Act C,
            float beta) override;

  void layer_norm(ops::Act out, ops::Act x, const float* gamma, const float* beta, int64_t rows, int64_t H,
                  float eps) override;
  void add_residual_layer_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, const float* beta,
                               ops::Act norm_out, int64_t rows, int64_t H, float eps) override;
  void rms_norm(ops::Act out, ops::Act x, const float* gamma, int64_t rows, int64_t H, float eps) override;
  void add_residual_rms_norm(ops::Act x, ops::Act y, const float* bias, const float* gamma, ops::Act norm_out,
                             int64_t rows, int64_t H, float eps) override;
  void head_rms_norm(ops::Act qkv, int64_t rows, int64_t stride, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                     const float* gamma_q, const float* gamma_k, float eps) override;
  void softcap(float* x, int64_t rows, int64_t N, float cap) override;
  void add_bias(ops::Act x, const float* bias, int64_t rows, int64_t N) override;
  void bias_activation(ops::Act x, const float* bias, ops::Act gate, const float* gate_bias, int64_t rows, int64_t N,
                       Activation act) override;
  // kernels/moe/ around gemm() (cuda_moe.cc): one GEMM per non-empty expert, their row counts read
  // back; refused inside a recorded step (a CUDA graph cannot hold data-dependent GEMM shapes).
  void moe_ffn(ops::Act out, ops::Act in, int64_t rows, const ops::MoeLayer& layer) override;

  void embedding(ops::Act out, const ops::Weight& wte, const float* wpe, ops::PositionTable table,
                 int64_t position_offset, const int32_t* ids, const int32_t* positions, int64_t rows,
                 int64_t H, float scale) override;
  void rotary(ops::Act qkv, int64_t rows, int64_t stride, const int32_t* positions, int64_t heads,
              int64_t head_dim, int64_t rot_dim, RotaryStyle style, const ops::RotaryFrequencies& freq) override;

  void context_attention(ops::Act out, ops::Act qkv, int64_t B, int64_t S, const int32_t* lengths,
                         const ops::BlockTables& tables, const ops::KvCache& k_cache, const ops::KvCache& v_cache,
                         const ops::AttentionShape& shape, const int32_t* past = nullptr) override;
  void decode_attention(ops::Act out, ops::Act qkv, int64_t n, const ops::BlockTables& tables,
                        const int32_t* past, const ops::KvCache& k_cache, const ops::KvCache& v_cache,
                        const ops::AttentionShape& shape) override;
  size_t available_memory() const override;
  void copy_kv_2d(const ops::KvCache& dst, int64_t dst_pitch, const ops::KvCache& src, int64_t src_pitch,
                  int64_t width, int64_t height) override;
  void gather_cache_rows(const ops::KvCache& cache, const int32_t* dst, const int32_t* src, int64_t n,
                         int64_t row_elems) override;
  // kernels/sampling/ (cuda_sampling.cc): only the tokens and log probs come back.
  void sample_rows(float* logits, int64_t stride, int64_t vocab, const decoding::RowSamplingBatch& batch,
                   decoding::SampledToken* out) override;
  // kernels/sampling/log_prob_kernels.h (cuda_sampling.cc): one float per row comes back.
  void token_log_probs(const float* logits, int64_t rows, int64_t stride, int64_t vocab, const int32_t* targets,
                       float* out) override;

 private:
  // Host metadata for one op: each part is copied into a pinned slot, then with one async copy into
  // the slot's device buffer; returns the parts' device addresses (null for an empty part). A slot
  // is reused only after its previous copy has completed (its event), so the host may run up to
  // kSlots stagings ahead of the GPU.
  struct Part {
    const void* data;
    size_t bytes;
  };
  std::vector<const void*> stage(std::initializer_list<Part> parts);
  // Device scratch of at least n floats, kept between calls (stream order makes reuse safe).
  float* scratch(size_t n);
  // Several buffers of scratch at once, `bytes` each (0: none, null), each 256-byte aligned. One op
  // takes its parts in one call: a later call may return the same memory.
  std::vector<void*> scratch_parts(std::initializer_list<size_t> bytes);
  // A floating-point B (fp32, fp16 or bf16, its dtype `in`): A converted to `in` where held in
  // another type; cuBLASLt writes C itself when C is fp32 or of type `in`, else an fp32 result is
  // converted into it.
  void float_gemm(int64_t M, int64_t N, int64_t K, ops::Act A, const void* B, DType in, bool trans_b, ops::Act C,
                  float beta);
  // The cuBLASLt (or gemm_config.in's classic cuBLAS) call: C[M,N] (c_dtype: fp32 or `in`) = a · b
  // + beta·C, a and b both of dtype `in`, device pointers.
  void run_gemm(int64_t M, int64_t N, int64_t K, const void* a, const void* b, DType in, bool trans_b, void* c,
                DType c_dtype, float beta);
  // Weight-only INT8: q widened (exactly) to A's rounding type B.input_dtype, one GEMM into fp32
  // sums, then the column scales into C (the arithmetic of lib/ops/op_types.h).
  void gemm_int8(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& w, ops::Act C, float beta);
  // SmoothQuant W8A8: quantise A, int8 GEMM, dequantise into C (the arithmetic of lib/ops/op_types.h).
  void gemm_w8a8(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& w, ops::Act C, float beta);
  // FP8: quantise A to E4M3, cuBLASLt's FP8 GEMM into C (the arithmetic of lib/ops/op_types.h).
  void gemm_fp8(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& w, ops::Act C, float beta);
  // INT4 weight-only: one fused dequantising kernel (kernels/quantization/int4_gemm.h).
  void gemm_int4(int64_t M, int64_t N, int64_t K, ops::Act A, const ops::Weight& w, ops::Act C, float beta);
  // Whole blocks of `sh` that both caches' allocations hold, for check_block_ids (-1: unknown).
  int64_t cache_blocks(const ops::KvCache& k, const ops::KvCache& v, const ops::AttentionShape& sh) const;

  struct GemmPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    // gemm_config.in chose this classic cuBLAS algorithm (cublasGemmEx); -1 is CUBLAS_GEMM_DEFAULT,
    // a real choice, hence the separate flag.
    bool classic = false;
    int classic_algo = 0;
  };
  // M, N, K, trans_b, the alignments (bytes, ≤ 256) of A, B, C (cuBLASLt picks kernels by them),
  // the dtype of the A and B operands (B's: fp32, or fp16/bf16 with A rounded to it) and C's (fp32
  // or the operands').
  using GemmKey = std::tuple<int64_t, int64_t, int64_t, bool, uint32_t, uint32_t, uint32_t, DType, DType>;
  const GemmPlan& plan(const GemmKey& key);
  void clear_plans();

  // n rounded up to a multiple of a (the staging and scratch layouts' alignments).
  static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

  static constexpr size_t kSlots = 32;
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  static constexpr size_t kDownloadChunkBytes = size_t(64) << 20;

  struct Slot {
    void* host = nullptr;  // pinned
    void* dev = nullptr;   // from the arena
    size_t cap = 0;
    cudaEvent_t done = nullptr;
    bool pending = false;
  };

  // Repeated steps. kMeasure: the first run of a key, eager, counting its metadata bytes;
  // kCapture: the second, recorded into a graph; kReplay: later ones.
  enum class StepMode { kOff, kMeasure, kCapture, kReplay };
  struct StepGraph {
    bool measured = false;
    size_t meta_bytes = 0;
    cudaGraphExec_t exec = nullptr;
  };
  // Metadata of a step in capture or replay: into the fixed buffers at step_meta_off_.
  std::vector<const void*> stage_step(std::initializer_list<Part> parts);
  void launch_step(cudaGraphExec_t exec);
  void ensure_step_meta(size_t bytes);
  void retire_graphs();  // destroys every recorded graph, keeps the measurements
  // Releases device memory whose address recorded graphs may hold (the scratch buffer when it
  // grows): retires the graphs first, or after the capture under way ends.
  void release_graph_memory(void* p);
  void finish_deferred_releases();
  void check_not_in_step(const char* op) const;

  int device_;
  bool tf32_;
  DType weight_dtype_;
  DType kv_dtype_;
  DType act_dtype_;
  bool graphs_;
  int smem_optin_ = 48 * 1024;  // bytes of shared memory a block may opt in to (queried once)
  int sm_count_ = 0;            // streaming multiprocessors (decode attention splits keys to fill them)
  size_t max_pitch_ = 0;        // bytes: the largest pitch cudaMemcpy2D takes (queried once)
  StepMode step_mode_ = StepMode::kOff;
  StepGraph* step_ = nullptr;
  uint64_t step_allocations_ = 0;  // arena allocations when the capture began
  std::map<std::string, StepGraph> steps_;
  void* step_meta_host_ = nullptr;  // pinned
  void* step_meta_dev_ = nullptr;
  size_t step_meta_cap_ = 0, step_meta_off_ = 0;
  cudaEvent_t step_meta_copied_ = nullptr;
  bool step_meta_pending_ = false;
  cudaStream_t stream_ = nullptr;
  DeviceArena arena_;
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;  // only for gemm_config.in rows naming classic cuBLAS algorithms
  void* workspace_ = nullptr;
  std::map<GemmKey, GemmPlan> plans_;
  gemm::GemmAlgoMap algo_map_;  // gemm_config.in's algorithms; empty: heuristics only
  std::array<Slot, kSlots> slots_{};
  size_t next_slot_ = 0;
  void* download_buf_ = nullptr;  // pinned
  size_t download_cap_ = 0;
  float* scratch_ = nullptr;
  size_t scratch_cap_ = 0;
  void* moe_buf_ = nullptr;  // moe_ffn's buffers (its GEMMs use scratch_ meanwhile)
  size_t moe_cap_ = 0;
  std::vector<void*> deferred_releases_;  // released during a capture, freed when it ends
};

}  // namespace ftx::cuda
