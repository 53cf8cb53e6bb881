#pragma once
// The backend and communicator a command runs on: `device` picks the backend ("cpu" or "cuda");
// under mpirun the ranks talk over MPI, and over NCCL (device buffers) when the backend is CUDA.
// The ranks form FT's TP × PP grid (lib/dist/parallel.h): rank r is TP rank r mod T of pipeline
// stage r / T.
#include <memory>
#include <string>

#include "lib/dist/communicator.h"
#include "lib/dist/parallel.h"
#include "lib/engine/embedding_sharding.h"
#include "lib/engine/quant_policy.h"
#include "lib/ops/backend.h"

namespace ftx {

struct Runtime {
  std::unique_ptr<ops::Backend> backend;
  std::unique_ptr<dist::Communicator> comm;             // the world
  std::unique_ptr<dist::ParallelGroups> groups;         // TP and PP groups over comm
  QuantPolicy quant;  // the flags' quantisation, for ModelWeights::load
  EmbeddingSharding embedding;  // how the embedding table and lm_head are split, for ModelWeights::load
  bool verbose = false;         // --verbose: each rank reports what its weights hold
  const dist::ParallelLayout& layout() const { return groups->layout(); }
};

struct RuntimeOptions {
  std::string device = "cpu";  // "cpu" or "cuda"
  int threads = 0;             // CPU threads; 0 = OMP_NUM_THREADS, else all cores
  std::string model_dir;       // the model folder: where gemm_config.in is looked for
  std::string gemm_config;     // an explicit gemm_config.in (--gemm-config); "" = search
  DType weight_dtype = DType::kFloat32;  // --dtype: what weight matrices are held and multiplied in
  int int8_mode = 0;  // --int8-mode: 0 off, 1 weight-only (FT int8_mode 1), 2 SmoothQuant W8A8
  bool per_token = false, per_channel = false;  // --per-token / --per-channel (int8_mode 2 only)
  bool int8_lm_head = false;  // --int8-lm-head (int8_mode 1 only): the lm_head table in int8 too
  // --weight-only-precision int4 (with --int4-group-size, --int4-zero-points): the layer GEMMs in INT4.
  bool int4 = false;
  int64_t int4_group_size = 128;
  bool int4_zero_points = false;
  bool int8_kv_cache = false;  // --int8-kv-cache: K and V held in int8 with the folder's calibrated scales
  bool fp8 = false;            // --fp8: the layer GEMMs in FP8 E4M3 from the folder's FP8 files
  bool fp8_kv_cache = false;   // --fp8-kv-cache: K and V held in FP8 E4M3 with the folder's scales
  // --tensor-para-size / --pipeline-para-size; 0: the defaults (P = 1, T = ranks / P).
  int tensor_para_size = 0, pipeline_para_size = 0;
  // --use-parallel-embedding, --embedding-sharding-dim (-1: not given, 0), --use-embedding-sharing.
  bool use_parallel_embedding = false, use_embedding_sharing = false;
  int embedding_sharding_dim = -1;
  bool verbose = false;  // --verbose
};

// The backend (with its tuned GEMMs when the device has a choice of algorithms), communicator and
// quantisation policy.
// An explicit gemm_config with the CPU device is a UsageError: the CPU has no algorithms to pick;
// so is an int8_mode other than 0, 1 or 2, --per-token or --per-channel without int8_mode 2,
// --int8-lm-head without int8_mode 1 or on a backend without its GEMM, INT4 with an int8_mode or --fp8,
// a negative INT4 group size, --fp8
// with an int8_mode, and --fp8-kv-cache with --int8-kv-cache. A device without FP8 arithmetic
// refuses --fp8 and --fp8-kv-cache (Error naming the device).
// --embedding-sharding-dim without --use-parallel-embedding, or other than 0 or 1, and
// --use-embedding-sharing at T > 1 without --use-parallel-embedding --embedding-sharding-dim 0
// (TensorRT-LLM's rule), with P > 1 or with --int8-lm-head, are UsageErrors.
// T·P other than the
// number of ranks, or P more than model_dir's num_layer, is a UsageError on every rank (before any
// collective: no rank waits).
Runtime make_runtime(const RuntimeOptions& options);

}  // namespace ftx
