#pragma once
// What Gemma 2 and Gemma 3 share on top of llama_like (gemma_like.cc): every norm scales by 1 + γ,
// the embeddings by sqrt(hidden_size) in the weights' dtype, the scores by
// query_pre_attn_scalar^-1/2; the attention and final logit softcaps; sliding windows on the layers
// layer_types names. The two differ in their defaults (GemmaDefaults) and Gemma 3's own keys.
#include <cstdint>
#include <vector>

#include "lib/convert/hf/family.h"
#include "lib/convert/hf/llama_like.h"

namespace ftx::hf {

struct GemmaDefaults {
  // attn_logit_softcapping and final_logit_softcapping when absent; 0: none (null is always none).
  double attention_softcap = 0.0;
  double final_logit_softcap = 0.0;
  // Without layer_types, layer i slides unless (i + 1) % sliding_period == 0 (Gemma 2: 2, the even
  // layers; Gemma 3: sliding_window_pattern, absent 6).
  int64_t sliding_period = 2;
};

// What the family's defaults make of three shared keys, for its key table.
struct GemmaKeyNotes {
  const char* layer_types;
  const char* attention_softcap;
  const char* final_logit_softcap;
};

// The LlamaLike settings both families take: eos 1 and bos 2 when absent, head_dim its own key
// (absent: 256), the sandwich norms, hidden_activation gelu_pytorch_tanh (GeGLU with the tanh GELU),
// tied embeddings by default, the whole head rotated.
LlamaLike gemma_spec();

// The shared keys' rules.
std::vector<KeyRule> gemma_keys(const GemmaKeyNotes& n);
// The shared keys into plan.cfg: norm_unit_offset, embedding_scale, attention_scale, the softcaps
// and layer_window. Error naming the key and value for use_bidirectional_attention true, a softcap
// that is not positive, an unknown layer type or sliding_window null with a sliding layer.
void read_gemma(HfCheckpoint& in, ConversionPlan& plan, const GemmaDefaults& d);

}  // namespace ftx::hf
