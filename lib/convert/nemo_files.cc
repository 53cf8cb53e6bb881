#include "lib/convert/nemo_files.h"

#include <dirent.h>
#include <fnmatch.h>

#include <algorithm>

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

}  // namespace ftx
