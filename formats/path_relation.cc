#include "formats/path_relation.h"

#include <filesystem>

namespace ftx {

namespace fs = std::filesystem;

std::string resolved_path(const std::string& path) {
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  if (ec) abs = path;
  // weakly_canonical: canonical() of the longest existing prefix, then the remaining elements.
  fs::path p = fs::weakly_canonical(abs, ec);
  if (ec) p = abs;
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool path_within(const std::string& inner, const std::string& outer) {
  const fs::path in(inner), out(outer);
  auto i = in.begin();
  for (auto o = out.begin(); o != out.end(); ++o, ++i) {
    if (i == in.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace ftx
