// config.ini's [structure] section: FasterTransformer's GPT-MoE keys (megatron_gpt_moe_ckpt_convert.py
// writes gpt_with_moe, expert_num and moe_layers, the last as Python's str of a list) and ftx's moe_k.
#include <algorithm>
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/model/config_ini_keys.h"

namespace ftx {

bool MoeConfig::is_moe_layer(int64_t layer) const {
  return gpt_with_moe && std::find(layers.begin(), layers.end(), layer) != layers.end();
}

namespace config_ini {

namespace {

constexpr const char* kSection = "structure";

// "[1, 3]" (FT), also "1,3" and "[]"; Error naming the key and the text otherwise.
std::vector<int64_t> layer_list(const std::string& text, const std::string& origin) {
  std::string t;
  for (char ch : text)
    if (ch != '[' && ch != ']' && ch != ' ' && ch != '\t') t += ch;
  std::vector<int64_t> v;
  size_t at = 0;
  while (!t.empty() && at <= t.size()) {
    const size_t comma = std::min(t.find(',', at), t.size());
    const std::string item = t.substr(at, comma - at);
    FTX_CHECK(!item.empty() && item.size() < 10 && item.find_first_not_of("0123456789") == std::string::npos, origin,
              "[structure] moe_layers = '" + text + "' is not a list of layer indices");
    v.push_back(std::stoll(item));
    at = comma + 1;
  }
  return v;
}

}  // namespace

void read_moe_structure(const IniFile& ini, ModelConfig& c) {
  c.moe = MoeConfig{};
  if (!ini.has_section(kSection)) return;
  const std::string& origin = ini.path();
  MoeConfig& m = c.moe;
  m.gpt_with_moe = ini.get_bool_or(kSection, "gpt_with_moe", false);
  m.expert_num = ini.get_int_or(kSection, "expert_num", 0);
  m.layers = layer_list(ini.get_or(kSection, "moe_layers", "[]"), origin);
  m.k = ini.get_int_or(kSection, "moe_k", 0);
  if (!m.gpt_with_moe) return;
  FTX_CHECK(m.expert_num > 0 && m.expert_num <= kMaxModelDim, origin,
            "[structure] expert_num = " + std::to_string(m.expert_num) + " must be positive with gpt_with_moe = 1");
  for (int64_t l : m.layers)
    FTX_CHECK(l < c.num_layer, origin, "[structure] moe_layers names layer " + std::to_string(l) + " of a model with " +
                                           std::to_string(c.num_layer) + " layers");
  FTX_CHECK(m.k >= 0 && m.k <= m.expert_num, origin,
            "[structure] moe_k = " + std::to_string(m.k) + " is not between 1 and expert_num " +
                std::to_string(m.expert_num));
}

void write_moe_structure(const ModelConfig& c, IniFile& ini) {
  if (!c.moe.gpt_with_moe) return;
  std::string list = "[";
  for (size_t i = 0; i < c.moe.layers.size(); ++i) list += (i ? ", " : "") + std::to_string(c.moe.layers[i]);
  ini.set(kSection, "gpt_with_moe", "1");
  ini.set(kSection, "expert_num", std::to_string(c.moe.expert_num));
  ini.set(kSection, "moe_layers", list + "]");
  if (c.moe.k > 0) ini.set(kSection, "moe_k", std::to_string(c.moe.k));
}

}  // namespace config_ini
}  // namespace ftx
