#include "lib/model/side_file_names.h"

#include <algorithm>
#include <cstring>

namespace ftx {

bool is_layer_side_file(const std::string& f, std::initializer_list<const char*> tails) {
  if (f.rfind("model.layers.", 0) != 0 || f.size() < 4 || f.compare(f.size() - 4, 4, ".bin") != 0) return false;
  const std::string stem = f.substr(0, f.size() - 4);
  const size_t dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size()) return false;
  const std::string rank = stem.substr(dot + 1);
  if (!std::all_of(rank.begin(), rank.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  const std::string base = stem.substr(0, dot);
  for (const char* tail : tails) {
    const size_t n = std::strlen(tail);
    if (base.size() > n && base.compare(base.size() - n, n, tail) == 0) return true;
  }
  return false;
}

}  // namespace ftx
