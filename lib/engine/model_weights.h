#pragma once
// ModelWeights: one TP rank's tensors of an FT model folder (`OUT/N-gpu/`), checked and loaded
// onto a backend as fp32.
//
// Memory trade-off: weights are converted to fp32 once at load (fp16/bf16 files take 2x their file
// size in memory). GEMMs then run at full fp32 BLAS speed with no per-call conversion, and the
// numbers match an fp32 reference exactly up to summation order.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/model/model_config.h"
#include "lib/ops/backend.h"

namespace ftx {

struct LayerWeights {
  // Null when the model has no such tensor (no bias, GPT-J's missing LN2, ...).
  const float *ln1_gamma = nullptr, *ln1_beta = nullptr;
  const float *qkv_w = nullptr, *qkv_b = nullptr;       // [H, qkv_cols], [qkv_cols]
  const float *dense_w = nullptr, *dense_b = nullptr;   // [H/T, H], [H]
  const float *ln2_gamma = nullptr, *ln2_beta = nullptr;
  const float *fc_w = nullptr, *fc_b = nullptr;         // [H, I/T], [I/T]
  const float *gate_w = nullptr, *gate_b = nullptr;     // gated FFN second projection
  const float *proj_w = nullptr, *proj_b = nullptr;     // [I/T, H], [H]
};

class ModelWeights {
 public:
  // Reads `dir`/config.ini and the files of `rank` out of `tp` ranks. Throws Error for: a folder
  // converted for another TP size, a missing/short/long file (naming the file, bytes found and
  // expected), an unexpected extra model.*.bin, a manifest.json that disagrees.
  static ModelWeights load(const std::string& dir, int rank, int tp, ops::Backend& backend);
  // Checks the folder's files (sizes and extras) without loading: the same errors as load().
  static void check_files(const std::string& dir, const ModelConfig& cfg, int tp);

  ModelWeights() = default;
  ModelWeights(ModelWeights&&) noexcept;
  ModelWeights& operator=(ModelWeights&&) noexcept;
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;
  ~ModelWeights();

  const ModelConfig& config() const { return config_; }
  int rank() const { return rank_; }
  int tp() const { return tp_; }

  const float *wte = nullptr, *wpe = nullptr;
  const float *lm_head_w = nullptr, *lm_head_b = nullptr;  // lm_head_w == wte when tied
  const float *pre_ln_gamma = nullptr, *pre_ln_beta = nullptr;
  const float *final_ln_gamma = nullptr, *final_ln_beta = nullptr;
  std::vector<LayerWeights> layers;
  size_t bytes() const { return bytes_; }  // fp32 bytes held on the backend

 private:
  ModelConfig config_;
  int rank_ = 0, tp_ = 1;
  ops::Backend* backend_ = nullptr;
  std::vector<float*> owned_;
  size_t bytes_ = 0;
};

}  // namespace ftx
