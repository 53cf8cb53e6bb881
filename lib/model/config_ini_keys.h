#pragma once
// ModelConfig::from_ini's readers, one per key set of config.ini's model section (the sets are
// listed at the top of model_config.cc): FasterTransformer's (config_ini_ft.cc), TensorRT-LLM's
// (config_ini_trtllm.cc) and ftx's own (config_ini_ftx.cc). from_ini (model_config.cc) picks the
// architecture and its defaults, runs the FT or the TensorRT-LLM reader (a folder is in one dialect
// or the other), then ftx's, whose explicit facts win. check_config_ini has already checked every
// key's type and range and that the keys stating one fact agree.
#include <cctype>
#include <cstdint>
#include <string>

#include "formats/ft_dir.h"
#include "lib/model/model_config.h"

namespace ftx::config_ini {

inline std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A reader over the model section `sec` of `ini`.
struct Reader {
  const IniFile& ini;
  std::string sec;
  const std::string& origin() const { return ini.path(); }
  bool has(const std::string& k) const { return ini.has(sec, k); }
  std::string get(const std::string& k) const { return ini.get(sec, k); }
  std::string get_or(const std::string& k, const std::string& d) const { return ini.get_or(sec, k, d); }
  int64_t i(const std::string& k) const { return ini.get_int(sec, k); }
  int64_t i_or(const std::string& k, int64_t d) const { return ini.get_int_or(sec, k, d); }
  double d_or(const std::string& k, double d) const { return ini.get_double_or(sec, k, d); }
  bool b_or(const std::string& k, bool d) const { return ini.get_bool_or(sec, k, d); }
};

// FT's keys (head_num, size_per_head, ..., activation_type, has_positional_encoding, ...): the
// sizes FT requires, then its optional keys, an absent one taking what a TensorRT-LLM key says
// before FT's default.
void read_ft_keys(const Reader& r, ModelConfig& c);
// A TensorRT-LLM-only folder (no head_num; hf_gpt_convert.py, nemo_ckpt_convert.py): n_embd, n_head,
// ... in HuggingFace's names.
void read_trtllm_keys(const Reader& r, ModelConfig& c);
// ftx's keys (activation, position_embedding_type, rotary_*, kv_head_num, hidden_size, ...).
void read_ftx_keys(const Reader& r, ModelConfig& c);
// Mixture of experts: FT's [structure] section (gpt_with_moe, expert_num, moe_layers) and ftx's
// moe_top_k, moe_router and moe_ep_size (config_ini_moe.cc), after the sizes (moe_layers is checked against num_layer).
void read_moe_keys(const Reader& r, ModelConfig& c);
// FT's prompt learning keys: num_tasks, prompt_learning_type, prompt_learning_start_id and the
// [task_K] sections.
void read_prompt_learning(const Reader& r, ModelConfig& c);

}  // namespace ftx::config_ini
