// The HuggingFace family registry (lib/convert/hf/family.h), what the families share, and the text
// built from the registry: the supported list, the subcommand's description and the man page's
// CONFIG.JSON KEYS tables.
#include "lib/convert/hf_families.h"

#include <algorithm>
#include <cctype>

#include "formats/error.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"

namespace ftx::hf {

namespace {

std::vector<HfFamily>& registry() {
  static std::vector<HfFamily> r;
  return r;
}

std::string lower(const std::string& s) {
  std::string l;
  for (char ch : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return l;
}

}  // namespace

FamilyRegistrar::FamilyRegistrar(HfFamily f) {
  auto& r = registry();
  r.push_back(std::move(f));
  std::stable_sort(r.begin(), r.end(), [](const HfFamily& a, const HfFamily& b) { return a.order < b.order; });
}

const std::vector<HfFamily>& families() { return registry(); }

const HfFamily* find_family(const std::string& type) {
  const std::string l = lower(type);
  for (const HfFamily& f : registry()) {
    if (lower(f.model_type) == l) return &f;
    for (const auto& a : f.aliases)
      if (lower(a) == l) return &f;
    for (const auto& a : f.spellings)
      if (lower(a) == l) return &f;
  }
  return nullptr;
}

HfCheckpoint::HfCheckpoint(const ConvertOptions& o, const json& c, std::string f, std::string t,
                           std::vector<std::string> prefixes)
    : opt(o), config(c), folder(std::move(f)), cfg_path(folder + "/config.json"), model_type(std::move(t)),
      prefixes_(std::move(prefixes)) {}

const std::vector<Source>& HfCheckpoint::sources() {
  if (!sources_) {
    sources_ = std::make_unique<std::vector<Source>>();
    for (auto& t : load_weights(opt.in_path)) {
      std::string n = t.name;
      for (const auto& p : prefixes_)
        if (n.rfind(p, 0) == 0) {
          n = n.substr(p.size());
          break;
        }
      by_name_[n] = sources_->size();  // the last of a name, as a map built from the list would
      sources_->push_back({n, t.tensor.storage.origin + ":" + t.name, t.tensor, t.name});
    }
  }
  return *sources_;
}

const Source* HfCheckpoint::find(const std::string& name) {
  sources();
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &(*sources_)[it->second];
}

bool TensorHooks::layout_takes(const Source&, std::string&, std::vector<TensorView>&, ConversionPlan&) { return true; }

void TensorHooks::fuse_qkv(const std::string& ft_name, const std::array<const Source*, 3>& v, const JobContext& ctx,
                           ConversionPlan& plan) {
  std::vector<TensorView> shards;
  for (size_t k = 0; k < 3; ++k) {
    FTX_CHECK(v[k] != nullptr, in->folder,
              std::string("no ") + "qkv"[k] + "_proj tensor for " + ft_name + " (q, k and v projections must all be present)");
    FTX_CHECK(v[k]->t.shape == v[0]->t.shape, v[k]->origin,
              "shape " + shape_to_string(v[k]->t.shape) + " differs from q_proj's " + shape_to_string(v[0]->t.shape));
    shards.push_back(v[k]->t);
  }
  auto m = match_layout(*layout, v[0]->name, in->folder);
  JobContext qctx = ctx;
  qctx.separate_qkv = true;
  add_layout_jobs(*m, shards, v[0]->origin + " (+ k_proj, v_proj)", qctx, plan.jobs);
}

void TensorHooks::finish(ConversionPlan&) {}

TensorJob replicated_job(const std::string& ft_name, TensorView t, const std::string& source) {
  TensorJob job;
  job.name = ft_name;
  job.source = source;
  job.shards = {std::move(t)};
  job.merge_axis = -1;
  job.split = OutSplit::kReplicated;
  return job;
}

std::string name_or(const json& j, const std::string& d, const std::string& origin) {
  std::string n = str_or(j, "_name_or_path", "", origin);
  return n.empty() ? d : n;
}

void set_heads(ModelConfig& c, int64_t H, int64_t heads, const std::string& origin) {
  FTX_CHECK(H % heads == 0, origin,
            "hidden size " + std::to_string(H) + " is not a multiple of the head count " + std::to_string(heads));
  c.head_num = heads;
  c.kv_head_num = heads;
  c.size_per_head = H / heads;
}

const char* const kDropout = "dropout: off at inference";

std::vector<KeyRule> rope_keys(const char* older_theta, const char* older_partial) {
  constexpr KeyUse R = KeyUse::kRead;
  std::vector<KeyRule> k = {
      {"rope_parameters", R, "5.x: rope_type (default, linear, llama3; others refused), rope_theta, "
                             "partial_rotary_factor, factor, low_freq_factor, high_freq_factor, "
                             "original_max_position_embeddings; any other field refused"},
      {"rope_scaling", R, "4.x: as rope_parameters"},
      {"rope_theta", R, "rotary_base (must agree with rope_parameters)"},
      {"partial_rotary_factor", R, "rotary_dim = int(head size x factor)"},
  };
  if (older_theta) k.push_back({older_theta, R, "older name of rope_theta"});
  if (older_partial) k.push_back({older_partial, R, "older name of partial_rotary_factor"});
  return k;
}

std::vector<KeyRule> join(std::vector<KeyRule> a, const std::vector<KeyRule>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<KeyRule> overriding(std::vector<KeyRule> k, const std::vector<KeyRule>& own) {
  for (KeyRule& r : k)
    for (const KeyRule& o : own)
      if (std::string(r.key) == o.key) r = o;
  return k;
}

// ---- Text built from the registry ----

std::string supported_list() {
  std::string s;
  for (const HfFamily& f : families()) {
    s += (s.empty() ? "" : ", ") + f.model_type;
    if (f.aliases.empty()) continue;
    s += " (aliases: ";
    for (size_t i = 0; i < f.aliases.size(); ++i) s += (i ? ", " : "") + f.aliases[i];
    s += ")";
  }
  return s;
}

std::string model_flag_list() {
  std::string s;
  for (const HfFamily& f : families()) {
    s += (s.empty() ? "" : ", ") + f.model_type;
    for (const auto& a : f.aliases) s += ", " + a;
  }
  return s;
}

std::string display_list(const std::string& sep, const std::string& last_sep) {
  std::string s;
  const auto& fs = families();
  for (size_t i = 0; i < fs.size(); ++i) s += (i == 0 ? "" : i + 1 == fs.size() ? last_sep : sep) + fs[i].display;
  return s;
}

namespace {

std::string roff(const std::string& s) {  // a dash is \- in roff
  std::string out;
  for (char ch : s) {
    if (ch == '-') out += '\\';
    out += ch;
  }
  return out;
}

std::string key_section(const std::string& title, const std::vector<KeyRule>& keys) {
  std::string s = ".SS " + title + "\nRead:\n";
  std::string none;
  for (const KeyRule& r : keys) {
    if (r.use == KeyUse::kRead)
      s += ".TP\n\\fB" + roff(r.key) + "\\fR\n" + roff(r.note) + "\n";
    else
      none += (none.empty() ? "" : ", ") + roff(r.key);
  }
  return s + ".PP\nNot part of the math: " + none + ".\n";
}

}  // namespace

std::string man_supported_table() {
  std::string s =
      ".SH SUPPORTED MODELS\n"
      "The model_types convert\\-hf reads (each one file of ftx's sources, lib/convert/hf/), with checkpoints of\n"
      "that model_type for example:\n";
  for (const HfFamily& f : families()) {
    s += ".TP\n\\fB" + roff(f.model_type) + "\\fR (" + roff(f.display);
    for (size_t i = 0; i < f.aliases.size(); ++i)
      s += std::string(i ? ", " : "; aliases ") + "\\fB" + roff(f.aliases[i]) + "\\fR";
    for (size_t i = 0; i < f.spellings.size(); ++i)
      s += std::string(i ? ", " : "; also written ") + roff(f.spellings[i]);
    s += ")\n" + roff(f.examples) + "\n";
  }
  return s;
}

std::string man_tables() {
  return ".\\\" ---- man/ftx-convert-hf.1: the SUPPORTED MODELS section ----\n" + man_supported_table() +
         ".\\\" ---- man/ftx-convert-hf.1: CONFIG.JSON KEYS, from its first .SS to the next .SH ----\n" +
         man_key_tables();
}

std::string man_key_tables() {
  std::string s;
  for (const HfFamily& f : families()) s += key_section(f.model_type, f.keys());
  return s + key_section("every architecture", common_keys());
}

const std::vector<KeyRule>& architecture_keys(const std::string& model_type) {
  static const std::vector<KeyRule> none;
  const HfFamily* f = find_family(model_type);
  return f ? f->keys() : none;
}

}  // namespace ftx::hf
