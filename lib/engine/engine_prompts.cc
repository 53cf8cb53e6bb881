// p-tuning and prefix prompts (lib/engine/prompt_tables.h) in the engine: the tables uploaded when
// it is made, and a prefix task's K/V written into a row's cache ahead of the row's tokens (its
// slots carry the task as their key, so rows of one task share them through the prefix cache).
// Soft prompts (requests.h's SoftPrompt): rows uploaded while their request runs.
#include "lib/engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/engine/prompt_tables.h"
#include "lib/ops/host_math.h"

namespace ftx {

void Engine::load_prompts(const PromptTables& p) {
  FTX_CHECK(p.hidden() == H_, "", "prompt tables of hidden size " + std::to_string(p.hidden()) +
                                      " for a model of hidden size " + std::to_string(H_));
  prompt_start_ = p.start_id();
  prompt_end_ = p.end_engine_id();
  if (!p.prefix()) {
    prompt_w_ = be_.upload_weight(p.rows().data(), p.dtype(), static_cast<size_t>(p.rows_total() * H_));
  } else {
    // The prefix goes into the KV cache as it is held here (copy_kv_2d), converted once now as the
    // attention stores every other K and V: fp32 as it is, fp16/bf16 rounded to nearest even (a
    // half model's cache, the CUDA default), int8 or fp8 with each layer's cache scale.
    const DType kv = w_.kv_dtype();
    const bool half = kv == DType::kFloat16 || kv == DType::kBFloat16;
    FTX_CHECK(kv == DType::kFloat32 || half || ops::kv_is_quantized(kv), "",
              std::string("prefix prompts need an fp32, fp16, bf16, int8 or fp8 KV cache; the ") + be_.name() +
                  " backend holds it in " + dtype_name(kv));
    FTX_CHECK(memory_len_ == 0, "", "prefix prompts do not combine with a circular KV cache (--memory-len)");
    const size_t el = dtype_size(p.dtype());
    for (size_t t = 0; t < p.tasks().size(); ++t) {
      const int64_t len = p.tasks()[t].length;
      const size_t per_layer = static_cast<size_t>(2 * shape_.kv_heads * len * shape_.head_dim);
      const size_t n = static_cast<size_t>(cfg_.num_layer) * per_layer;
      std::vector<float> host(n);
      ops::convert_weight(p.rows().data() + p.prefix_offset(static_cast<int64_t>(t)) * el, p.dtype(), host.data(),
                          DType::kFloat32, n);
      // int8 and fp8: four elements to a float slot of the buffer, fp16 and bf16 two; only this
      // stage's layers have an int8/fp8 scale (and are ever copied), the rest stay zero.
      const size_t slots = ops::kv_is_quantized(kv) ? (n + 3) / 4 : half ? (n + 1) / 2 : n;
      std::vector<float> held(slots, 0.0f);
      if (half) {
        ops::convert_weight(host.data(), DType::kFloat32, held.data(), kv, n);
      } else if (ops::kv_is_quantized(kv)) {
        auto* q = reinterpret_cast<uint8_t*>(held.data());
        for (size_t l = 0; l < w_.layers.size(); ++l) {
          const size_t first = static_cast<size_t>(w_.first_layer()) + l;
          const float kv_orig_quant = 1.0f / kv_scale(static_cast<int64_t>(l));  // fp32, as the attention stores
          for (size_t i = first * per_layer; i < (first + 1) * per_layer; ++i)
            q[i] = kv == DType::kInt8 ? static_cast<uint8_t>(ops::quantize_kv(host[i], kv_orig_quant))
                                      : ops::quantize_kv_fp8(host[i], kv_orig_quant);
        }
      } else {
        held.swap(host);
      }
      float* dev = be_.alloc(slots);
      be_.upload(dev, held.data(), slots);
      prefix_kv_.push_back(dev);
      prefix_len_.push_back(len);
      max_prefix_ = std::max(max_prefix_, len);
    }
  }
}

void Engine::add_soft_prompt(int32_t first_id, int64_t rows, const float* values) {
  FTX_CHECK(first_id >= soft_start_ && rows > 0 && soft_.count(first_id) == 0, "",
            "soft prompt ids from " + std::to_string(first_id) + " (" + std::to_string(rows) + " rows) are not new");
  // In the model's weight dtype, as FT casts request_prompt_embedding to T.
  soft_[first_id] = {rows, be_.upload_weight(values, DType::kFloat32, static_cast<size_t>(rows * H_))};
}

void Engine::drop_soft_prompt(int32_t first_id) {
  auto it = soft_.find(first_id);
  if (it == soft_.end()) return;
  be_.release_weight(it->second.w);
  soft_.erase(it);
}

void Engine::drop_soft_prompts() {
  for (auto& kv : soft_) be_.release_weight(kv.second.w);
  soft_.clear();
}

int64_t Engine::prefix_task(const std::vector<int32_t>& tokens) const {
  if (prefix_kv_.empty() || tokens.empty() || tokens[0] < prompt_start_) return -1;
  const int64_t t = tokens[0] - prompt_start_;
  FTX_CHECK(t < static_cast<int64_t>(prefix_kv_.size()), "", "prefix task marker " + std::to_string(tokens[0]) + " unknown");
  return t;
}

std::vector<int32_t> Engine::slot_keys(const std::vector<int32_t>& tokens) const {
  const int64_t t = prefix_task(tokens);
  if (t < 0) return tokens;
  // The prefix's slots carry the task as a negative key, which no token id is.
  std::vector<int32_t> keys(static_cast<size_t>(prefix_len_[t]), static_cast<int32_t>(-1 - t));
  keys.insert(keys.end(), tokens.begin() + 1, tokens.end());
  return keys;
}

std::vector<int32_t> Engine::place_prefix(const std::vector<int32_t>& tokens, int32_t row, int64_t held) {
  const int64_t t = prefix_task(tokens);
  if (t < 0) return std::vector<int32_t>(tokens.begin() + held, tokens.end());
  FTX_CHECK(kv_->table(row).slots == held, "", "a prefix prompt can only start an empty cache row");
  const int64_t len = prefix_len_[t], kvh = shape_.kv_heads, d = shape_.head_dim;
  const size_t el = dtype_size(w_.kv_dtype());
  if (held < len) {
    // This stage's layers only (all of them without pipeline parallelism): cache layer l is model
    // layer first_layer() + l, whose prefix sits at that index of the file's [layers, 2, ...].
    prepare_writes({row}, {len - held});
    for (int64_t l = 0; l < pool_->layers(); ++l)
      for (int kv = 0; kv < 2; ++kv) {
        const ops::KvCache& cache = kv == 0 ? pool_->k(l) : pool_->v(l);
        const int64_t model_layer = w_.first_layer() + l;
        ops::KvCache src(static_cast<char*>(static_cast<void*>(prefix_kv_[t])) +
                             static_cast<size_t>((model_layer * 2 + kv) * kvh * len * d) * el,
                         cache.dtype, cache.scale);
        pool_->write_slots(l, kv, kv_->table(row).blocks, held, len - held, src, len, held);
      }
    const std::vector<int32_t> keys(static_cast<size_t>(len - held), static_cast<int32_t>(-1 - t));
    kv_->commit(row, keys.data(), len - held);
  }
  kv_->set_prefix(row, len);
  // The marker stands for the prefix; tokens beyond it that the prefix cache held are not run.
  return std::vector<int32_t>(tokens.begin() + 1 + std::max<int64_t>(0, held - len), tokens.end());
}

}  // namespace ftx
