#include "lib/inspect/verify.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "formats/error.h"
#include "formats/ft_manifest.h"
#include "formats/tensor.h"
#include "lib/engine/model_weights.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_dir.h"

namespace ftx {

namespace {

std::string describe(DType dtype, const std::vector<int64_t>& shape) {
  return std::string(dtype_name(dtype)) + " " + shape_to_string(shape);
}

// The config.ini line the weights' dtype is read from, as written (FT's weight_data_type, else
// TensorRT-LLM's storage_dtype; ModelConfig checks that the two agree), for the messages.
std::string dtype_line(const IniFile& ini) {
  for (const char* key : {"weight_data_type", "storage_dtype"})
    for (const std::string& s : ini.sections())
      if (ini.has(s, key)) return std::string(key) + " = " + ini.get(s, key);
  return "no weight_data_type: fp32";
}

// What manifest.json says of a file, against itself and against config.ini (`implied`: the file's
// place in config.ini's layout, or null): the record must be one a loader can trust.
std::string record_problem(const FtManifestEntry& e, const FtWeightFile* implied, const ModelConfig& cfg,
                           const std::string& dtype_key) {
  if (e.bytes < -1) return "manifest.json records " + std::to_string(e.bytes) + " bytes";
  if (e.dtype && !e.shape.empty()) {
    int64_t n = 1;
    for (int64_t d : e.shape) {
      if (d < 0 || (d > 0 && n > (int64_t{1} << 50) / d)) return "manifest.json records the impossible shape " + shape_to_string(e.shape);
      n *= d;
    }
    const int64_t bytes = n * static_cast<int64_t>(dtype_size(*e.dtype));
    if (e.bytes >= 0 && bytes != e.bytes)
      return "manifest.json says " + describe(*e.dtype, e.shape) + " (" + std::to_string(bytes) + " bytes) and " +
             std::to_string(e.bytes) + " bytes";
  }
  if (!implied) return "";
  if (e.dtype && *e.dtype != cfg.weight_data_type)
    return "manifest.json says " + std::string(dtype_name(*e.dtype)) + ", config.ini " + dtype_key + " (" +
           dtype_name(cfg.weight_data_type) + ")";
  if (!e.shape.empty() && e.shape != implied->shape)
    return "manifest.json says shape " + shape_to_string(e.shape) + ", config.ini implies " +
           shape_to_string(implied->shape);
  return "";
}

int64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : -1;
}

}  // namespace

int64_t FolderVerification::failed() const {
  return std::count_if(files.begin(), files.end(), [](const VerifiedFile& f) { return !f.problem.empty(); });
}

FolderVerification verify_ft_folder(const std::string& dir, const std::function<void(const VerifiedFile&)>& on_file,
                                    bool with_data) {
  const IniFile ini = read_model_config_ini(dir);
  const ModelConfig cfg = ModelConfig::from_ini(ini);
  const std::string dtype_key = dtype_line(ini);
  FolderVerification out;
  auto report = [&](VerifiedFile v) {
    out.files.push_back(v);
    if (on_file) on_file(out.files.back());
  };
  // What config.ini describes, file by file.
  const std::vector<FtWeightFile> layout = ft_weight_files(cfg, cfg.tensor_para_size);
  std::map<std::string, const FtWeightFile*> implied;
  for (const FtWeightFile& w : layout) implied.emplace(w.file_name(), &w);
  // What to check: manifest.json's records, then the files config.ini implies that it does not list.
  std::vector<FtManifestEntry> entries;
  if (const auto m = read_ft_manifest(dir)) {
    out.has_manifest = true;
    entries = m->files;
    out.has_checksums = std::any_of(entries.begin(), entries.end(), [](const auto& e) { return e.crc32.has_value(); });
  }
  std::map<std::string, int> listed;
  for (const auto& e : entries) ++listed[e.file];
  for (const FtWeightFile& w : layout) {
    if (listed.count(w.file_name()) || (w.optional && file_size(dir + "/" + w.file_name()) < 0)) continue;
    FtManifestEntry e;
    e.file = w.file_name();
    entries.push_back(e);
  }
  std::set<std::string> seen;
  auto problem_of = [&](const FtManifestEntry& e) -> std::string {
    const auto it = implied.find(e.file);
    const FtWeightFile* w = it == implied.end() ? nullptr : it->second;
    const bool in_manifest = listed.count(e.file) > 0;
    if (!seen.insert(e.file).second) return "listed twice in manifest.json";
    if (in_manifest)
      if (std::string p = record_problem(e, w, cfg, dtype_key); !p.empty()) return p;
    const int64_t found = file_size(dir + "/" + e.file);
    if (!in_manifest && found < 0)
      return "missing (config.ini implies it: " + describe(cfg.weight_data_type, w->shape) + ", tensor_para_size " +
             std::to_string(cfg.tensor_para_size) + ")";
    FtManifestEntry check = e;
    if (!in_manifest) check.dtype = cfg.weight_data_type;  // values are scanned as config.ini's dtype
    if (std::string p = check_manifest_file(dir, check, with_data, &out.bytes); !p.empty()) return p;
    // What the loader checks: the size config.ini implies, whatever the manifest says, and no file
    // config.ini does not describe.
    if (w) {
      const int64_t want = w->numel() * static_cast<int64_t>(dtype_size(cfg.weight_data_type));
      if (found != want)
        return std::to_string(found) + " bytes, config.ini implies " + std::to_string(want) + " (" +
               describe(cfg.weight_data_type, w->shape) + "; " + dtype_key + ")";
    } else if (ModelWeights::unexpected_file(e.file)) {
      return "config.ini describes no such tensor (num_layer " + std::to_string(cfg.num_layer) + ", tensor_para_size " +
             std::to_string(cfg.tensor_para_size) + "): ftx generate refuses the folder";
    }
    return "";
  };
  for (const auto& e : entries) report({e.file, problem_of(e)});
  // Weight files nobody describes: a leftover of another conversion, or a file config.ini forgot.
  std::vector<std::string> extra;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      const bool bin = n.size() > 4 && n.compare(n.size() - 4, 4, ".bin") == 0;
      // Without a manifest, INT8 side files (smoothquant's, the KV-cache scales) are not config.ini's to describe.
      if (bin && !seen.count(n) && (out.has_manifest || !ft_is_int8_side_file(n))) extra.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(extra.begin(), extra.end());
  for (const auto& n : extra)
    report({n, out.has_manifest ? "not listed in manifest.json" : "config.ini describes no such tensor"});
  // Last, the loader's own file checks (the TP size against the folder, the layer count, sizes,
  // extras, the manifest): a folder that passes --verify loads. When no file above failed, what
  // they find is the folder's problem.
  if (out.failed() == 0) {
    try {
      ModelWeights::check_files(dir, cfg, cfg.tensor_para_size);
    } catch (const Error& e) {
      report({"config.ini", e.what()});
    }
  }
  return out;
}

}  // namespace ftx
