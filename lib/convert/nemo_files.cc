#include "lib/convert/nemo_files.h"

#include <dirent.h>
#include <fnmatch.h>

#include <algorithm>
#include <cstdio>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "lib/convert/conversion.h"

namespace ftx {

NemoFiles::NemoFiles(const std::string& path) : path_(path) {
  FTX_CHECK(path_exists(path), path, "does not exist");
  if (is_directory(path)) {
    walk(path, "", 0);
  } else {
    tar_ = TarArchive::open(path);
    for (auto& e : tar_->entries())
      if (e.is_file()) names_.push_back(e.name);
  }
}

bool NemoFiles::has(const std::string& n) const { return std::find(names_.begin(), names_.end(), n) != names_.end(); }

Storage NemoFiles::get(const std::string& n) const {
  if (tar_) return tar_->member(n);
  auto mf = MappedFile::open(path_ + "/" + n);
  return Storage{mf->data(), mf->size(), mf, mf, 0, path_ + "/" + n};
}

std::string NemoFiles::origin(const std::string& n) const { return path_ + (tar_ ? ":" : "/") + n; }

std::vector<std::string> NemoFiles::glob(const std::string& pattern) const {
  std::vector<std::string> out;
  for (auto& n : names_)
    if (::fnmatch(pattern.c_str(), n.c_str(), FNM_PATHNAME) == 0) out.push_back(n);
  return out;
}

std::string NemoFiles::find_one(const std::string& base) const {
  std::vector<std::string> found;
  for (auto& n : names_)
    if (n == base || (n.size() > base.size() + 1 && n.compare(n.size() - base.size() - 1, base.size() + 1, "/" + base) == 0))
      found.push_back(n);
  FTX_CHECK(found.size() <= 1, path_, "has several " + base + " members");
  return found.empty() ? std::string() : found[0];
}

void NemoFiles::walk(const std::string& dir, const std::string& rel, int depth) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> entries;
  while (dirent* e = ::readdir(d)) entries.push_back(e->d_name);
  ::closedir(d);
  std::sort(entries.begin(), entries.end());
  for (auto& n : entries) {
    if (n == "." || n == "..") continue;
    std::string full = dir + "/" + n, r = rel.empty() ? n : rel + "/" + n;
    if (is_directory(full)) {
      if (depth < 2) walk(full, r, depth + 1);
    } else {
      names_.push_back(r);
    }
  }
}

std::string nemo_weights_member(const NemoFiles& files, int64_t t, int64_t p, int64_t Tt, int64_t PP) {
  char a[64], b[64];
  std::snprintf(a, sizeof a, "mp_rank_%02lld/model_weights.ckpt", static_cast<long long>(t));
  std::snprintf(b, sizeof b, "tp_rank_%02lld_pp_rank_%03lld/model_weights.ckpt", static_cast<long long>(t),
                static_cast<long long>(p));
  if (Tt == 1 && PP == 1 && files.has("model_weights.ckpt")) return "model_weights.ckpt";
  if (PP == 1 && files.has(a)) return a;
  if (files.has(b)) return b;
  // A distributed model_weights/ whose .metadata is gone is not a legacy checkpoint missing a shard.
  for (const auto& n : files.names())
    if (n.size() > 7 && n.compare(n.size() - 7, 7, ".distcp") == 0)
      throw Error(files.origin(n), "is a torch_dist chunk file, but model_weights/.metadata, which maps the tensors "
                                   "to the .distcp files, is missing: the distributed checkpoint is incomplete");
  throw Error(files.path(), std::string("missing weights ") + (PP == 1 ? a : b) + " (model_config.yaml says " +
                                std::to_string(Tt) + " tensor parallel x " + std::to_string(PP) + " pipeline shards)");
}

}  // namespace ftx
