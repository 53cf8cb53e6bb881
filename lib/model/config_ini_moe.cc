// Mixture-of-experts keys of config.ini (docs/ft-layout.md#mixture-of-experts): FT's GPT-MoE
// [structure] section (gpt_with_moe, expert_num, moe_layers, as FT's megatron_gpt_moe_ckpt_convert.py
// writes it: moe_layers a Python list, "[0, 2]") and ftx's moe_top_k, moe_router, moe_inter_size
// and moe_shared_expert_inter_size in the model section. FT leaves the top-k to the run (moe_k); a
// folder without moe_top_k is refused by name rather than run with a guessed k.
#include <string>
#include <vector>

#include "formats/error.h"
#include "lib/model/config_ini_keys.h"

namespace ftx::config_ini {

namespace {

[[noreturn]] void bad(const IniFile& ini, const std::string& sec, const std::string& key, const std::string& why) {
  throw Error(ini.path(), "[" + sec + "] " + key + " = " + ini.get_or(sec, key, "") + ": " + why);
}

int64_t integer(const IniFile& ini, const std::string& sec, const std::string& key, int64_t lo, int64_t hi) {
  const std::string v = ini.get(sec, key);
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (...) {
    used = 0;
  }
  while (used < v.size() && (v[used] == ' ' || v[used] == '\t' || v[used] == '\r')) ++used;
  if (v.empty() || used != v.size()) bad(ini, sec, key, "not an integer");
  if (x < lo || x > hi) bad(ini, sec, key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

// "[0, 2]" (FT: str() of a Python list) or "0,2".
std::vector<int64_t> layer_list(const IniFile& ini, const std::string& sec, const std::string& key, int64_t layers) {
  std::string v = ini.get(sec, key), item;
  for (char& ch : v)
    if (ch == '[' || ch == ']' || ch == ' ' || ch == '\t' || ch == '\r') ch = ' ';
  std::vector<int64_t> out;
  auto flush = [&] {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a == std::string::npos) {
      item.clear();
      return false;
    }
    const std::string t = item.substr(a, b - a + 1);
    item.clear();
    if (t.find_first_not_of("0123456789") != std::string::npos || t.size() > 9)
      bad(ini, sec, key, "'" + t + "' is not a layer index");
    const int64_t l = std::stoll(t);
    if (l >= layers) bad(ini, sec, key, "layer " + t + " is not below num_layer " + std::to_string(layers));
    if (!out.empty() && l <= out.back()) bad(ini, sec, key, "layers must be listed once each, in ascending order");
    out.push_back(l);
    return true;
  };
  for (char ch : v) {
    if (ch == ',') {
      if (!flush()) bad(ini, sec, key, "an empty item");
    } else {
      item += ch;
    }
  }
  flush();
  return out;
}

}  // namespace

void read_moe_keys(const Reader& r, ModelConfig& c) {
  const IniFile& ini = r.ini;
  const std::string s = "structure";
  for (const char* k : {"moe_top_k", "moe_router", "moe_inter_size", "moe_shared_expert_inter_size", "moe_ep_size"})
    if (r.has(k) && !(ini.has(s, "gpt_with_moe") && ini.get_bool_or(s, "gpt_with_moe", false)))
      throw Error(ini.path(), "[" + r.sec + "] " + k + " = " + r.get(k) +
                                  " without [structure] gpt_with_moe = 1: the model has no experts to route to");
  if (!ini.has_section(s) || !ini.has(s, "gpt_with_moe")) return;
  const int64_t with = integer(ini, s, "gpt_with_moe", 0, 1);
  if (with == 0) return;
  for (const char* k : {"expert_num", "moe_layers"})
    if (!ini.has(s, k)) throw Error(ini.path(), std::string("[structure] gpt_with_moe = 1 without ") + k);
  c.expert_num = integer(ini, s, "expert_num", 1, 1 << 16);
  c.moe_layers = layer_list(ini, s, "moe_layers", c.num_layer);
  if (c.moe_layers.empty()) bad(ini, s, "moe_layers", "gpt_with_moe = 1 needs at least one layer with experts");
  if (!r.has("moe_top_k"))
    throw Error(ini.path(), "[" + r.sec + "] has no moe_top_k: the experts each token is routed to (FasterTransformer "
                            "takes it at run time as moe_k; add moe_top_k = K to config.ini)");
  c.moe_top_k = integer(ini, r.sec, "moe_top_k", 1, c.expert_num);
  const std::string router = lower(r.get_or("moe_router", "softmax_topk_renorm"));
  if (router == "softmax_topk_renorm") c.moe_routing = MoeRouting::kSoftmaxTopKRenorm;
  else if (router == "softmax_topk") c.moe_routing = MoeRouting::kSoftmaxTopK;
  else bad(ini, r.sec, "moe_router", "not a router ftx runs (softmax_topk_renorm, softmax_topk)");
  if (r.has("moe_inter_size")) c.moe_inter_size = integer(ini, r.sec, "moe_inter_size", 1, kMaxModelDim);
  if (r.has("moe_shared_expert_inter_size"))
    c.moe_shared_inter_size = integer(ini, r.sec, "moe_shared_expert_inter_size", 1, kMaxModelDim);
  // Whole experts per rank (convert-hf --moe-ep-size); checked against the ranks by validate().
  if (r.has("moe_ep_size")) c.moe_ep_size = integer(ini, r.sec, "moe_ep_size", 1, c.expert_num);
}

}  // namespace ftx::config_ini
