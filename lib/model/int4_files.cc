#include "lib/model/int4_files.h"

#include <algorithm>
#include <cstring>

namespace ftx {

std::string int4_values_name(const std::string& gemm) { return gemm + ".weight.int4"; }
std::string int4_scales_name(const std::string& gemm) { return gemm + ".weight.int4_scales"; }
std::string int4_zeros_name(const std::string& gemm) { return gemm + ".weight.int4_zeros"; }
std::string int4_g_idx_name(const std::string& gemm) { return gemm + ".weight.int4_g_idx"; }

bool is_int4_side_file(const std::string& f) {
  if (f.rfind("model.layers.", 0) != 0 || f.size() < 4 || f.compare(f.size() - 4, 4, ".bin") != 0) return false;
  // <gemm>.weight.int4[_scales|_zeros|_g_idx].R.bin
  const std::string stem = f.substr(0, f.size() - 4);
  const size_t dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size()) return false;
  const std::string rank = stem.substr(dot + 1);
  if (!std::all_of(rank.begin(), rank.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  const std::string base = stem.substr(0, dot);
  for (const char* tail : {".weight.int4", ".weight.int4_scales", ".weight.int4_zeros", ".weight.int4_g_idx"}) {
    const size_t n = std::strlen(tail);
    if (base.size() > n && base.compare(base.size() - n, n, tail) == 0) return true;
  }
  return false;
}

}  // namespace ftx
