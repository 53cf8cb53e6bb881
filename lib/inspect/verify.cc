#include "lib/inspect/verify.h"

#include <dirent.h>

#include <algorithm>
#include <set>

#include "formats/error.h"
#include "formats/ft_manifest.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_dir.h"

namespace ftx {

int64_t FolderVerification::failed() const {
  return std::count_if(files.begin(), files.end(), [](const VerifiedFile& f) { return !f.problem.empty(); });
}

FolderVerification verify_ft_folder(const std::string& dir, const std::function<void(const VerifiedFile&)>& on_file,
                                    bool with_data) {
  const ModelConfig cfg = read_model_config(dir);
  FolderVerification out;
  // What to check: manifest.json's records, then the files config.ini implies that it does not list.
  std::vector<FtManifestEntry> entries;
  if (const auto m = read_ft_manifest(dir)) {
    out.has_manifest = true;
    entries = m->files;
    out.has_checksums = std::any_of(entries.begin(), entries.end(), [](const auto& e) { return e.crc32.has_value(); });
  }
  std::set<std::string> listed;
  for (const auto& e : entries) listed.insert(e.file);
  for (const FtWeightFile& w : ft_weight_files(cfg, cfg.tensor_para_size)) {
    if (listed.count(w.file_name())) continue;
    FtManifestEntry e;
    e.file = w.file_name();
    e.dtype = cfg.weight_data_type;
    e.bytes = w.numel() * static_cast<int64_t>(dtype_size(cfg.weight_data_type));
    if (w.optional && check_manifest_file(dir, e, false) == "listed in manifest.json but missing") continue;
    entries.push_back(e);
    listed.insert(e.file);
  }
  for (const auto& e : entries) {
    VerifiedFile v{e.file, check_manifest_file(dir, e, with_data, &out.bytes)};
    if (!out.has_manifest && v.problem == "listed in manifest.json but missing") v.problem = "missing";
    out.files.push_back(v);
    if (on_file) on_file(v);
  }
  // Weight files nobody describes: a leftover of another conversion, or a file config.ini forgot.
  std::vector<std::string> extra;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      const bool bin = n.size() > 4 && n.compare(n.size() - 4, 4, ".bin") == 0;
      // Without a manifest, INT8 side files (smoothquant's, the KV-cache scales) are not config.ini's to describe.
      if (bin && !listed.count(n) && (out.has_manifest || !ft_is_int8_side_file(n))) extra.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(extra.begin(), extra.end());
  for (const auto& n : extra) {
    VerifiedFile v{n, out.has_manifest ? "not listed in manifest.json" : "config.ini describes no such tensor"};
    out.files.push_back(v);
    if (on_file) on_file(v);
  }
  return out;
}

}  // namespace ftx
