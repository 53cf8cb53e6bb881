#pragma once
// One HuggingFace model family per file: lib/convert/hf/<family>.cc defines an HfFamily and
// registers it with FTX_HF_FAMILY, as cmd/ files register subcommands. plan_hf (hf_source.cc) is
// the driver every family shares: it reads config.json, finds the family by model_type, refuses
// what every family refuses, loads the weights, strips the family's name prefixes, checks that
// weights are floats, maps names through the family's layout table, gathers q/k/v parts, copies
// the tokenizer and warns about config keys no table names. The family says only what is its own:
// the config keys (KeyRule table), how config.json becomes a ModelConfig, its layout table, the
// tensors it stores fused where others store them apart (unfuse), and the tensors no single layout
// rule makes (TensorHooks).
//
// The list of supported types, `convert-hf --help`, the subcommand's description and the man
// page's tables are built from the registry (hf_families.cc); nothing else lists the families.
// The files of lib/convert/hf/ are a library linked whole-archive (CMakeLists.txt), else the
// linker would drop registrars nothing references.
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/convert/conversion.h"
#include "lib/convert/hf_config.h"
#include "lib/convert/layout_table.h"

namespace ftx::hf {

using json = nlohmann::json;

// A source tensor, its name without the family's prefix.
struct Source {
  std::string name;    // normalised ("h.0.attn.c_attn.weight")
  std::string origin;  // "file:name as stored", for messages
  TensorView t;
  std::string stored;  // the name as stored
};

// The checkpoint as a family's functions see it.
class HfCheckpoint {
 public:
  HfCheckpoint(const ConvertOptions& opt, const json& config, std::string folder, std::string model_type,
               std::vector<std::string> prefixes);
  const ConvertOptions& opt;
  const json& config;
  const std::string folder;      // the model folder
  const std::string cfg_path;    // folder/config.json, the origin of config errors
  const std::string model_type;  // the family's canonical model_type
  // Every tensor, in file order; loaded on first use (GPT-2's reader looks at tensor names, the
  // others read config.json first, so that a refused config is named before any weight is read).
  const std::vector<Source>& sources();
  const Source* find(const std::string& name);  // by normalised name; nullptr when absent

 private:
  std::vector<std::string> prefixes_;
  std::unique_ptr<std::vector<Source>> sources_;
  std::map<std::string, size_t> by_name_;
};

// Per conversion: tensors that are not one layout rule's (derived, fused, split, dropped).
class TensorHooks {
 public:
  virtual ~TensorHooks() = default;
  // Before the layout lookup of `s`: return false to take it away from the layout (dropped, or
  // kept for finish()); may rename it (`name`) or change the views given to the layout rule
  // (`shards`, initially {s.t}).
  virtual bool layout_takes(const Source& s, std::string& name, std::vector<TensorView>& shards, ConversionPlan& plan);
  // One fused QKV from the q, k and v parts the layout's `part` rules gathered (in name order).
  // The default fuses them as three [H, H] shards (JobContext::separate_qkv).
  virtual void fuse_qkv(const std::string& ft_name, const std::array<const Source*, 3>& parts, const JobContext& ctx,
                        ConversionPlan& plan);
  // After every source: derived tensors, checks that need them all.
  virtual void finish(ConversionPlan& plan);

  HfCheckpoint* in = nullptr;
  const ArchLayout* layout = nullptr;
};

struct HfFamily {
  std::string model_type;              // the canonical model_type
  std::vector<std::string> aliases;    // other model_types taken as this one, listed with it
  std::vector<std::string> spellings;  // accepted too, not listed (gpt-j); all matched in any case
  int order = 0;                       // place in the lists (the order families came to ftx)
  std::string display;                 // "GPT-NeoX", for the description and the man page
  std::string examples;                // checkpoints that load as this family
  const std::vector<KeyRule>& (*keys)() = nullptr;  // every key of transformers' config class
  std::vector<std::string> prefixes;     // stripped from tensor names (the first that matches)
  QkvOrder qkv = QkvOrder::kNone;        // order of a fused QKV's output features
  // The config reader: plan.cfg from in.config (every key it reads is in keys(), refused by name
  // and value where ftx lacks it), and the family's own config.ini keys in plan.extra_ini.
  std::function<void(HfCheckpoint& in, ConversionPlan& plan)> read;
  std::function<const ArchLayout&(HfCheckpoint& in, const ModelConfig& c)> layout;
  std::function<std::unique_ptr<TensorHooks>()> hooks;  // null: layout rules only
  // The parts of a tensor the family stores fused, under the names of the families that store them
  // apart (Phi-3's qkv_proj -> q_proj, k_proj, v_proj), so that one layout table and one QKV fusion
  // serve both; {s} for a tensor stored as the layout wants it. Null: every tensor as stored.
  std::function<std::vector<Source>(HfCheckpoint& in, const ModelConfig& c, const Source& s)> unfuse;
  // The JobContext the layout jobs get, after the driver's defaults (heads, head size, hidden, qkv).
  std::function<void(HfCheckpoint& in, const ModelConfig& c, JobContext& ctx)> job_context;
};

// Every registered family, by `order`.
const std::vector<HfFamily>& families();
// The family whose model_type, aliases or spellings hold `type` (any case), or nullptr.
const HfFamily* find_family(const std::string& type);

struct FamilyRegistrar {
  explicit FamilyRegistrar(HfFamily f);
};

// Layout-rule pieces: a source layer "layers.N." or "h.N.", and FT's "model.layers.N.".
inline const std::string kL = R"(layers\.(\d+)\.)";
inline const std::string kH = R"(h\.(\d+)\.)";
inline const std::string kFL = "model.layers.$1.";

// Helpers families share.
TensorJob replicated_job(const std::string& ft_name, TensorView t, const std::string& source);
// _name_or_path, or `d` when absent or empty.
std::string name_or(const json& j, const std::string& d, const std::string& origin);
// Heads and head size from the hidden size, checked (kv heads = heads).
void set_heads(ModelConfig& c, int64_t H, int64_t heads, const std::string& origin);
// The keys of rope_parameters / rope_scaling / rope_theta / partial_rotary_factor (plus older
// names of the last two, when given).
std::vector<KeyRule> rope_keys(const char* older_theta, const char* older_partial);
std::vector<KeyRule> join(std::vector<KeyRule> a, const std::vector<KeyRule>& b);
// `k` with the rules of `own` in place of those of the same keys: a family's word on a shared key.
std::vector<KeyRule> overriding(std::vector<KeyRule> k, const std::vector<KeyRule>& own);
extern const char* const kDropout;

}  // namespace ftx::hf

#define FTX_HF_CONCAT_INNER(a, b) a##b
#define FTX_HF_CONCAT(a, b) FTX_HF_CONCAT_INNER(a, b)
// FTX_HF_FAMILY(make_fn): make_fn() returns the HfFamily to register (called at static init).
#define FTX_HF_FAMILY(make_fn) \
  static ::ftx::hf::FamilyRegistrar FTX_HF_CONCAT(ftx_hf_family_, __LINE__)(make_fn())
