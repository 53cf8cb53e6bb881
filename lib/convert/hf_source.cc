// HuggingFace source adapter: config.json + pytorch_model.bin / *.safetensors (sharded or not).
// plan_hf is the driver every family shares (lib/convert/hf/family.h); what differs between
// families is in lib/convert/hf/<family>.cc.
#include <array>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/hf_index.h"
#include "lib/convert/conversion.h"
#include "lib/convert/hf/family.h"
#include "lib/convert/hf_common.h"
#include "lib/convert/hf_config.h"
#include "lib/convert/hf_families.h"
#include "lib/convert/layout_table.h"
#include "lib/convert/quantized/int4_plan.h"
#include "lib/convert/source_names.h"

namespace ftx {

namespace {

using json = nlohmann::json;

// The layout pass: every source through the family's hooks and layout table, q/k/v parts fused;
// `int4` are the quantised Linears' tensors, planned apart (plan_quantized_import).
void plan_tensors(const hf::HfFamily& f, hf::HfCheckpoint& in, const ArchLayout& layout, const std::set<std::string>& int4,
                  ConversionPlan& plan) {
  const ModelConfig& c = plan.cfg;
  JobContext ctx;
  ctx.heads_per_shard = c.head_num;
  ctx.head_dim = c.size_per_head;
  ctx.hidden = c.hidden();
  ctx.qkv = f.qkv;
  if (f.job_context) f.job_context(in, c, ctx);
  hf::TensorHooks plain;
  std::unique_ptr<hf::TensorHooks> own = f.hooks ? f.hooks() : nullptr;
  hf::TensorHooks& hooks = own ? *own : plain;
  hooks.in = &in;
  hooks.layout = &layout;
  std::vector<hf::Source> unfused;  // the sources with fused tensors in parts (HfFamily::unfuse)
  if (f.unfuse)
    for (const hf::Source& s : in.sources())
      for (hf::Source& part : f.unfuse(in, c, s)) unfused.push_back(std::move(part));
  const std::vector<hf::Source>& sources = f.unfuse ? unfused : in.sources();
  std::map<std::string, std::array<const hf::Source*, 3>> parts;  // ft name -> q, k, v
  for (const hf::Source& s : sources) {
    if (int4.count(s.name)) continue;
    std::string name = s.name;
    std::vector<TensorView> shards{s.t};
    if (!hooks.layout_takes(s, name, shards, plan)) continue;
    auto m = match_layout(layout, name, in.folder);
    if (!m) continue;
    if (m->rule->part >= 0) {
      parts[m->ft_name][static_cast<size_t>(m->rule->part)] = &s;
      continue;
    }
    add_layout_jobs(*m, shards, s.origin, ctx, plan.jobs);
  }
  for (auto& [ft_name, v] : parts) hooks.fuse_qkv(ft_name, v, ctx, plan);
  hooks.finish(plan);
}

}  // namespace

ConversionPlan plan_hf(const ConvertOptions& opt) {
  // -i is the model folder or one weight file in it (which is then the one converted).
  const std::string folder = hf_model_folder(opt.in_path);
  const std::string cfg_path = folder + "/config.json";
  json j;
  try {
    j = json::parse(read_text_file(cfg_path));
  } catch (const json::exception& e) {
    throw Error(cfg_path, std::string("bad JSON: ") + e.what());
  }
  FTX_CHECK(j.is_object(), cfg_path, "is not a JSON object");
  const std::string model_type = opt.model.empty() ? hf::str_or(j, "model_type", "", cfg_path) : opt.model;
  if (model_type.empty()) {
    const auto a = j.find("architectures");
    throw Error(cfg_path, "has no model_type" +
                              (a != j.end() && a->is_array() && !a->empty() ? " (architectures: " + a->dump() + ")" : "") +
                              "; --model TYPE names it (supported: " + hf::supported_list() + ")");
  }
  const hf::HfFamily* f = hf::find_family(model_type);
  if (!f)
    throw Error(cfg_path, "unsupported model_type '" + model_type + "'" + (opt.model.empty() ? "" : " (from --model)") +
                              " (supported: " + hf::supported_list() + ")");
  hf::refuse_common(j, cfg_path);
  hf::HfCheckpoint in(opt, j, folder, f->model_type, f->prefixes);

  ConversionPlan plan;
  plan.source_format = "hf";
  plan.source_path = opt.in_path;
  f->read(in, plan);
  plan.extra_ini.emplace_back("model_type", f->model_type);
  const ArchLayout& layout = f->layout(in, plan.cfg);
  NamePrefixes prefixes;
  for (const hf::Source& s : in.sources()) prefixes.add(s.stored, s.name);
  plan.source_names = checkpoint_names(layout, std::move(prefixes));
  const std::set<std::string> int4 =
      j.contains("quantization_config") ? hf::plan_quantized_import(*f, in, layout, plan) : std::set<std::string>{};
  for (const hf::Source& s : in.sources())
    if (!int4.count(s.name) && !layout_skips(layout, s.name)) check_float_weight(s.t, s.origin);
  plan_tensors(*f, in, layout, int4, plan);
  hf::add_tokenizer_files(folder, plan);
  for (const std::string& k : hf::unknown_keys(j, f->model_type))
    plan.warnings.push_back(cfg_path + ": key '" + k + "' = " + j[k].dump(-1).substr(0, 60) +
                            " is not one ftx knows for " + f->model_type +
                            "; it was not read (see ftx-convert-hf(1) for the keys that are)");
  return plan;
}

}  // namespace ftx
