#include "lib/engine/runtime.h"

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/dist/device_communicator.h"
#include "lib/model/model_config.h"
#include "lib/model/model_dir.h"

namespace ftx {

namespace {

EmbeddingSharding embedding_sharding(const RuntimeOptions& o) {
  if (o.embedding_sharding_dim >= 0 && !o.use_parallel_embedding)
    throw UsageError("--embedding-sharding-dim " + std::to_string(o.embedding_sharding_dim) +
                     " applies with --use-parallel-embedding only");
  if (o.embedding_sharding_dim > 1 || o.embedding_sharding_dim < -1)
    throw UsageError("--embedding-sharding-dim " + std::to_string(o.embedding_sharding_dim) +
                     ": expected 0 (vocabulary rows) or 1 (hidden columns)");
  EmbeddingSharding e;
  e.parallel = o.use_parallel_embedding;
  e.dim = o.embedding_sharding_dim < 0 ? 0 : o.embedding_sharding_dim;
  e.share = o.use_embedding_sharing;
  return e;
}

// TensorRT-LLM's rule: under TP the lm_head is split by vocabulary rows, so it can read the embedding
// table only when that is split the same way; and with pipeline stages the two are on other ranks.
void check_embedding_sharing(const EmbeddingSharding& e, const dist::ParallelLayout& layout, bool int8_lm_head) {
  if (!e.share) return;
  if (layout.tp > 1 && (!e.parallel || e.dim != 0))
    throw UsageError("--use-embedding-sharing with --tensor-para-size " + std::to_string(layout.tp) +
                     " needs --use-parallel-embedding --embedding-sharding-dim 0 (the lm_head is split by "
                     "vocabulary rows; TensorRT-LLM's rule)");
  if (layout.pp > 1)
    throw UsageError("--use-embedding-sharing with --pipeline-para-size " + std::to_string(layout.pp) +
                     ": the embedding (first stage) and the lm_head (last stage) are on different ranks");
  if (int8_lm_head)
    throw UsageError("--use-embedding-sharing with --int8-lm-head: the lm_head table would be int8 and the "
                     "embedding lookup reads it in floating point; give one");
}

// A folder whose config.ini says weight_only_precision = int4 (no flag needed to run it). An
// unreadable folder is not this check's to name: loading it does.
bool folder_holds_int4(const std::string& model_dir) {
  if (model_dir.empty()) return false;
  try {
    return read_model_config(model_dir).holds_int4();
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

Runtime make_runtime(const RuntimeOptions& o) {
  const std::string& device = o.device;
  if (device != "cuda" && !o.gemm_config.empty())
    throw UsageError("--gemm-config applies to --device cuda only (the " + device + " backend has no GEMM algorithms to choose)");
  if (o.int8_mode != 0 && o.int8_mode != 1 && o.int8_mode != 2)
    throw UsageError("--int8-mode " + std::to_string(o.int8_mode) + ": expected 0 (off), 1 (weight-only) or 2 (W8A8)");
  if ((o.per_token || o.per_channel) && o.int8_mode != 2)
    throw UsageError(std::string(o.per_token ? "--per-token" : "--per-channel") +
                     " applies to --int8-mode 2 (SmoothQuant W8A8) only");
  // An int8 head beside 4-bit layers is what llama.cpp's q4 files hold (a 6-bit head); beside
  // W8A8 or FP8 layers it is not offered.
  if (o.int8_lm_head && o.int8_mode != 1 && !o.int4 && !folder_holds_int4(o.model_dir))
    throw UsageError("--int8-lm-head applies to weight-only quantisation (--int8-mode 1 or "
                     "--weight-only-precision int4) only");
  if (o.fp8 && o.int8_mode != 0)
    throw UsageError("--fp8 and --int8-mode " + std::to_string(o.int8_mode) +
                     " both quantise the layer GEMMs: give one");
  if (o.fp8_kv_cache && o.int8_kv_cache) throw UsageError("--fp8-kv-cache and --int8-kv-cache: give one");
  if (o.int4 && (o.int8_mode != 0 || o.fp8))
    throw UsageError(std::string("--weight-only-precision int4 and ") +
                     (o.fp8 ? "--fp8" : "--int8-mode " + std::to_string(o.int8_mode)) +
                     " both quantise the layer GEMMs: give one");
  if (o.int4_group_size < 0)
    throw UsageError("--int4-group-size " + std::to_string(o.int4_group_size) +
                     ": expected rows per group (32, 64, 128, ...) or 0 for one group per column");
  Runtime rt;
  rt.embedding = embedding_sharding(o);
  rt.verbose = o.verbose;
  rt.comm = dist::make_communicator();
  // The grid is checked before any collective: every rank reaches the same verdict from its flags,
  // the world size and config.ini, and stops with the same one-line error.
  int64_t num_layer = -1;
  if (o.pipeline_para_size > 1)
    num_layer = read_model_config(o.model_dir).num_layer;
  const dist::ParallelLayout layout =
      dist::ParallelLayout::resolve(o.tensor_para_size, o.pipeline_para_size, rt.comm->size(), rt.comm->rank(),
                                    num_layer);
  check_embedding_sharing(rt.embedding, layout, o.int8_lm_head);
  rt.backend = ops::make_backend(device, o.threads, o.weight_dtype);
  if (o.int8_lm_head && !rt.backend->int8_lm_head_supported())
    throw UsageError("--int8-lm-head: the " + rt.backend->name() + " backend has no int8 lm_head GEMM yet (the cpu backend has)");
  if (o.fp8) rt.backend->require_fp8("--fp8");
  if (o.fp8_kv_cache) rt.backend->require_fp8("--fp8-kv-cache");
  rt.quant.int8_weight_only = o.int8_mode == 1;
  rt.quant.int8_lm_head = o.int8_lm_head;
  rt.quant.int4.on = o.int4;
  rt.quant.int4.group_size = o.int4_group_size;
  rt.quant.int4.zero_points = o.int4_zero_points;
  rt.quant.smoothquant.on = o.int8_mode == 2;
  rt.quant.smoothquant.per_token = o.per_token;
  rt.quant.smoothquant.per_channel = o.per_channel;
  rt.quant.int8_kv_cache = o.int8_kv_cache;
  rt.quant.fp8 = o.fp8;
  rt.quant.fp8_kv_cache = o.fp8_kv_cache;
  if (device == "cuda") rt.backend->use_gemm_config(o.gemm_config, o.model_dir);
  // The engine all-reduces activations in the backend's memory: device buffers need the device's
  // communicator (NCCL for cuda), registered from kernels/.
  rt.comm = dist::communicator_for_device(device, std::move(rt.comm), *rt.backend);
  rt.groups = std::make_unique<dist::ParallelGroups>(*rt.comm, layout);
  return rt;
}

}  // namespace ftx
