// NeMo prompt-learning tables -> TensorRT-LLM .npy or FT model-folder files (see prompt_source.h).
#include "lib/convert/prompt_source.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <dirent.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "formats/checksum.h"
#include "formats/error.h"
#include "formats/ft_dir.h"
#include "formats/npy.h"
#include "formats/output_file.h"
#include "formats/torch_checkpoint.h"
#include "lib/convert/nemo_files.h"
#include "lib/convert/tensor_job.h"
#include "lib/engine/model_weights.h"
#include "lib/model/model_config.h"
#include "lib/model/model_dir.h"

namespace ftx {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The bytes of a table as a replicated [len, H] tensor in `dtype` (fp32, fp16 or bf16).
std::vector<uint8_t> table_bytes(const PromptTable& t, DType dtype) {
  TensorJob job;
  job.name = "model.prompt_table." + t.name + ".weight";
  job.source = t.source;
  job.shards = {t.table};
  std::vector<uint8_t> out;
  run_tensor_job(job, 1, dtype, [&](const JobOutput& o) { out.assign(o.data, o.data + o.nbytes); });
  return out;
}

std::string table_file(const std::string& task) { return "model.prompt_table." + task + ".weight.bin"; }

}  // namespace

PromptArchive read_prompt_nemo(const std::string& path) {
  NemoFiles files(path);
  PromptArchive a;
  a.path = path;
  const std::string ymember = files.find_one("model_config.yaml");
  FTX_CHECK(!ymember.empty(), path, "has no model_config.yaml (not a NeMo checkpoint)");
  const std::string yorigin = files.origin(ymember);
  YAML::Node y;
  try {
    Storage s = files.get(ymember);
    y = YAML::Load(std::string(reinterpret_cast<const char*>(s.data), s.nbytes));
  } catch (const YAML::Exception& e) {
    throw Error(yorigin, std::string("bad YAML: ") + e.what());
  }
  if (y["model"] && y["model"].IsMap() && !y["task_templates"] && !y["peft"]) y = y["model"];
  const bool peft = y["peft"] && !y["peft"].IsNull();
  std::vector<std::string> templates;
  if (y["task_templates"] && y["task_templates"].IsSequence()) {
    for (const auto& t : y["task_templates"]) {
      FTX_CHECK(t.IsMap() && t["taskname"], yorigin, "a task_templates entry has no taskname");
      const std::string name = t["taskname"].as<std::string>();
      FTX_CHECK(!name.empty() && name.find('/') == std::string::npos && name.find('\n') == std::string::npos,
                yorigin, "taskname '" + name + "' cannot name a file");
      templates.push_back(name);
    }
  }
  FTX_CHECK(peft || !templates.empty(), yorigin,
            "has neither task_templates nor peft: not a prompt-learning (p-tuning) checkpoint");

  std::string wmember;
  for (const char* m : {"model_weights.ckpt", "mp_rank_00/model_weights.ckpt", "tp_rank_00_pp_rank_000/model_weights.ckpt"})
    if (files.has(m)) { wmember = m; break; }
  FTX_CHECK(!wmember.empty(), path, "has no model_weights.ckpt (looked at the root and under mp_rank_00/)");
  ValuePtr root = load_torch_checkpoint(files.get(wmember));
  if (auto sd = root->get("state_dict"); sd && sd->is_dict()) root = sd;
  std::vector<NamedTensor> tensors;
  std::vector<NamedValue> others;
  flatten_value(root, "", tensors, others);
  const std::string worigin = files.origin(wmember);

  if (peft) {
    a.layout = "peft";
    const std::string key = "model.embedding.adapter_layer.ptuning_adapter.inference_table";
    const NamedTensor* found = nullptr;
    for (auto& t : tensors)
      if (t.name == key) found = &t;
    for (auto& t : tensors)
      if (!found && t.name.find("adapter_layer.ptuning_adapter") != std::string::npos) found = &t;
    FTX_CHECK(found, worigin, "the config has `peft` but the checkpoint has no adapter_layer.ptuning_adapter tensor");
    a.tables.push_back({templates.empty() ? "ptuning" : templates[0], found->tensor, found->name});
  } else {
    a.layout = "classic";
    for (const auto& name : templates) {
      const std::string suffix = "prompt_table." + name + ".prompt_embeddings.weight";
      const NamedTensor* found = nullptr;
      for (auto& t : tensors)
        if (t.name == suffix || ends_with(t.name, "." + suffix)) found = &t;
      if (found) a.tables.push_back({name, found->tensor, found->name});
      else a.without_table.push_back(name);
    }
    FTX_CHECK(!a.tables.empty(), worigin,
              "has no prompt_table.<task>.prompt_embeddings.weight for any of the " + std::to_string(templates.size()) +
                  " task templates");
  }
  for (auto& t : a.tables) {
    FTX_CHECK(t.table.shape.size() == 2 && t.table.shape[0] > 0 && t.table.shape[1] > 0, worigin,
              t.source + " has shape " + shape_to_string(t.table.shape) + ", not [virtual tokens, hidden]");
    FTX_CHECK(t.table.dtype == DType::kFloat32 || t.table.dtype == DType::kFloat16 || t.table.dtype == DType::kBFloat16,
              worigin,
              t.source + " has dtype " + dtype_name(t.table.dtype) + " (expected float32, float16 or bfloat16)");
    if (a.hidden == 0) a.hidden = t.table.shape[1];
    FTX_CHECK(t.table.shape[1] == a.hidden, worigin,
              t.source + " has hidden size " + std::to_string(t.table.shape[1]) + " but " + a.tables[0].source +
                  " has " + std::to_string(a.hidden));
  }
  return a;
}

void write_prompt_npy(const PromptArchive& a, const std::string& out, bool force) {
  int64_t max_len = 0;
  for (auto& t : a.tables) max_len = std::max(max_len, t.table.shape[0]);
  const int64_t n = static_cast<int64_t>(a.tables.size()), H = a.hidden;
  std::vector<float> stack(static_cast<size_t>(n * max_len * H), 0.0f);  // zero padding
  for (int64_t i = 0; i < n; ++i) {
    const auto bytes = table_bytes(a.tables[i], DType::kFloat32);
    std::memcpy(stack.data() + i * max_len * H, bytes.data(), bytes.size());
  }
  AtomicOutput o(out, force);
  o.write(npy_header(DType::kFloat32, {n, max_len, H}));
  o.write(stack.data(), stack.size() * sizeof(float));
  o.commit();
}

void plan_prompt_tables(const PromptArchive& a, ConversionPlan& plan, int64_t start_id) {
  ModelConfig& c = plan.cfg;
  FTX_CHECK(a.hidden == c.hidden(), a.path,
            "prompt tables have hidden size " + std::to_string(a.hidden) + " but the model (" + plan.source_path +
                ") has hidden size " + std::to_string(c.hidden()));
  c.prompt.type = PromptLearningType::kPTuning;
  c.prompt.start_id = start_id >= 0 ? start_id : c.end_id + 1;
  c.prompt.tasks.clear();
  for (auto& t : a.tables) {
    c.prompt.tasks.push_back({t.name, t.table.shape[0]});
    TensorJob job;
    job.name = "model.prompt_table." + t.name + ".weight";
    job.source = a.path + ":" + t.source;
    job.shards = {t.table};
    plan.jobs.push_back(std::move(job));
  }
}

void add_prompt_tables(const PromptArchive& a, const std::string& model_dir_in, int64_t start_id, bool force) {
  std::string dir = model_dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const IniFile ini = read_model_config_ini(dir);
  ModelConfig cfg = ModelConfig::from_ini(ini);
  FTX_CHECK(a.hidden == cfg.hidden(), a.path,
            "prompt tables have hidden size " + std::to_string(a.hidden) + " but the model (" + dir +
                "/config.ini) has hidden size " + std::to_string(cfg.hidden()));
  const bool had = cfg.prompt.any();
  FTX_CHECK(!had || force, dir, "already has " + std::to_string(cfg.prompt.tasks.size()) +
                                    " prompt task(s) in config.ini; --force replaces them");
  FTX_CHECK(cfg.prompt.type != PromptLearningType::kPrefixPrompt || force, dir,
            "config.ini has prompt_learning_type = 2 (prefix); --force replaces it with p-tuning tables");
  std::set<std::string> old_files;
  for (auto& t : cfg.prompt.tasks) {
    old_files.insert(table_file(t.name));
    for (int64_t r = 0; r < cfg.tensor_para_size; ++r)
      old_files.insert("model.prefix_prompt." + t.name + ".weight." + std::to_string(r) + ".bin");
  }
  const int64_t start = start_id >= 0 ? start_id
                        : ini.has("gpt", "prompt_learning_start_id") || ini.has("gptj", "prompt_learning_start_id") ||
                                  ini.has("gptneox", "prompt_learning_start_id")
                            ? cfg.prompt.start_id
                            : cfg.end_id + 1;

  // The new config.ini: the old one's text with the prompt keys and task sections dropped (every
  // other line kept as it is, whoever wrote it), the prompt keys appended to the model section,
  // then fresh [task_K] sections.
  const char* sec = ini.has_section("gpt") ? "gpt" : ini.has_section("gptj") ? "gptj" : "gptneox";
  std::string text = read_text_file(dir + "/config.ini");
  std::string kept;
  {
    std::istringstream in(text);
    std::string line, cur;
    bool drop_section = false;
    while (std::getline(in, line)) {
      std::string t = line;
      t.erase(0, t.find_first_not_of(" \t"));
      if (!t.empty() && t[0] == '[') {
        cur = t.substr(1, t.find(']') - 1);
        drop_section = cur.rfind("task_", 0) == 0 || cur.rfind(cfg.model_name + "_task_", 0) == 0;
      }
      if (drop_section) continue;
      if (cur == sec) {
        std::string key = t.substr(0, t.find_first_of("=: \t"));
        if (key == "num_tasks" || key == "prompt_learning_start_id" || key == "prompt_learning_type") continue;
      }
      kept += line + "\n";
    }
  }
  // Insert the prompt keys at the end of the model section.
  std::string keys = "num_tasks = " + std::to_string(a.tables.size()) + "\nprompt_learning_start_id = " +
                     std::to_string(start) + "\nprompt_learning_type = 3\n";
  {
    std::istringstream in(kept);
    std::string line, cur, result;
    bool inserted = false;
    std::vector<std::string> lines;
    while (std::getline(in, line)) lines.push_back(line);
    size_t last_in_sec = std::string::npos;
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string t = lines[i];
      t.erase(0, t.find_first_not_of(" \t"));
      if (!t.empty() && t[0] == '[') cur = t.substr(1, t.find(']') - 1);
      else if (cur == sec && !t.empty()) last_in_sec = i;
    }
    for (size_t i = 0; i < lines.size(); ++i) {
      result += lines[i] + "\n";
      if (i == last_in_sec) { result += keys; inserted = true; }
    }
    if (!inserted) result += std::string("[") + sec + "]\n" + keys;
    kept = result;
  }
  for (size_t k = 0; k < a.tables.size(); ++k)
    kept += "\n[task_" + std::to_string(k) + "]\ntask_name = " + a.tables[k].name +
            "\nprompt_length = " + std::to_string(a.tables[k].table.shape[0]) + "\n";
  // The result must read back as what we mean.
  const ModelConfig check = ModelConfig::from_ini(IniFile::parse(kept, dir + "/config.ini"));
  FTX_CHECK(check.prompt.tasks.size() == a.tables.size(), dir, "internal error: config.ini does not read back");

  OutputDir out(dir, /*force=*/true);
  // Unchanged files: hard links (no copy; nothing below writes through them).
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == ".." || n == "config.ini" || n == "manifest.json" || old_files.count(n)) continue;
      const std::string from = dir + "/" + n, to = out.file(n);
      if (is_directory(from)) {
        ::closedir(d);
        throw Error(from, "model folder holds a sub-folder; prompt-convert --model-dir updates plain folders only");
      }
      if (::link(from.c_str(), to.c_str()) != 0) {
        // A file system without hard links: copy instead.
        std::error_code ec;
        std::filesystem::copy_file(from, to, ec);
        if (ec) {
          ::closedir(d);
          throw Error(from, "cannot copy into the updated folder: " + ec.message());
        }
      }
    }
    ::closedir(d);
  }
  const DType dt = cfg.weight_data_type;
  nlohmann::json added = nlohmann::json::array();
  std::set<std::string> new_files;
  for (auto& t : a.tables) {
    const std::string f = table_file(t.name);
    FTX_CHECK(new_files.insert(f).second, a.path, "task '" + t.name + "' appears twice");
    const auto bytes = table_bytes(t, dt);
    write_file(out.file(f), bytes.data(), bytes.size());
    added.push_back({{"file", f},
                     {"tensor", "model.prompt_table." + t.name + ".weight"},
                     {"rank", -1},
                     {"dtype", dtype_name(dt)},
                     {"shape", {t.table.shape[0], a.hidden}},
                     {"bytes", bytes.size()},
                     {"crc32", crc32_bytes(bytes.data(), bytes.size())}});
  }
  write_file(out.file("config.ini"), kept.data(), kept.size());
  const std::string mpath = dir + "/manifest.json";
  if (path_exists(mpath)) {
    nlohmann::json m;
    try {
      m = nlohmann::json::parse(read_text_file(mpath));
    } catch (const nlohmann::json::exception& e) {
      throw Error(mpath, std::string("not valid JSON: ") + e.what());
    }
    if (m.is_object() && m.contains("files") && m["files"].is_array()) {
      nlohmann::json files = nlohmann::json::array();
      for (auto& e : m["files"]) {
        const std::string f = e.is_object() && e.contains("file") && e["file"].is_string() ? e["file"].get<std::string>() : "";
        if (old_files.count(f) || new_files.count(f)) continue;
        files.push_back(e);
      }
      for (auto& e : added) files.push_back(e);
      m["files"] = files;
    }
    m["prompt_source"] = a.path;
    const std::string mt = m.dump(1) + "\n";
    write_file(out.file("manifest.json"), mt.data(), mt.size());
  }
  // Check the result as the engine will, before it replaces the folder.
  const ModelConfig newcfg = ModelConfig::from_ini(IniFile::read(out.file("config.ini")));
  ModelWeights::check_files(out.tmp_path(), newcfg, static_cast<int>(newcfg.tensor_para_size));
  out.commit();
}

std::string prompt_summary_json(const PromptArchive& a) {
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t i = 0; i < a.tables.size(); ++i)
    tasks.push_back({{"id", i}, {"name", a.tables[i].name}, {"virtual_tokens", a.tables[i].table.shape[0]}});
  nlohmann::json j = {{"source", a.path}, {"layout", a.layout}, {"hidden", a.hidden}, {"tasks", tasks},
                      {"skipped", a.without_table}};
  return j.dump() + "\n";
}

std::string prompt_summary_text(const PromptArchive& a) {
  std::string s;
  for (size_t i = 0; i < a.tables.size(); ++i)
    s += "task " + std::to_string(i) + "  " + a.tables[i].name + "  " + std::to_string(a.tables[i].table.shape[0]) +
         " virtual tokens\n";
  for (auto& n : a.without_table) s += "skipped  " + n + "  (listed in task_templates, no table in the checkpoint)\n";
  return s;
}

}  // namespace ftx
