#include "lib/model/int4_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "formats/error.h"
#include "formats/mapped_file.h"

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

namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The whole of `path`, which must hold exactly `bytes` bytes (`what` describes the expected tensor).
std::vector<uint8_t> read_exact(const std::string& path, size_t bytes, const std::string& what) {
  auto file = MappedFile::open(path);
  if (file->size() != bytes)
    throw Error(path, std::to_string(file->size()) + " bytes, expected " + std::to_string(bytes) + " (" + what + ")");
  const uint8_t* p = file->slice(0, bytes, path);
  return std::vector<uint8_t>(p, p + bytes);
}

std::string shape(int64_t a, int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; }

}  // namespace

ops::Int4Matrix read_int4_files(const std::string& dir, const std::string& gemm, int rank, int64_t rows, int64_t cols,
                                int64_t group_size) {
  const std::string suffix = "." + std::to_string(rank) + ".bin";
  const std::string values = dir + "/" + int4_values_name(gemm) + suffix;
  const std::string scales = dir + "/" + int4_scales_name(gemm) + suffix;
  const std::string zeros = dir + "/" + int4_zeros_name(gemm) + suffix;
  const std::string g_idx = dir + "/" + int4_g_idx_name(gemm) + suffix;
  FTX_CHECK(cols % 2 == 0, values, "an INT4 weight of " + std::to_string(cols) + " columns (two per byte: it must be even)");
  ops::Int4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.group_size = group_size <= 0 || group_size >= rows ? rows : group_size;
  m.packed = read_exact(values, static_cast<size_t>(rows * (cols / 2)), "uint8 " + shape(rows, cols / 2));
  if (exists(g_idx)) {
    auto file = MappedFile::open(g_idx);
    FTX_CHECK(file->size() == static_cast<size_t>(rows) * 4, g_idx,
              std::to_string(file->size()) + " bytes, expected " + std::to_string(rows * 4) + " (int32 [" +
                  std::to_string(rows) + "])");
    m.group_index.resize(static_cast<size_t>(rows));
    std::memcpy(m.group_index.data(), file->slice(0, file->size(), g_idx), file->size());
    auto sfile = MappedFile::open(scales);
    FTX_CHECK(sfile->size() > 0 && sfile->size() % (static_cast<size_t>(cols) * 4) == 0, scales,
              std::to_string(sfile->size()) + " bytes: not a whole number of fp32 rows of " + std::to_string(cols));
    m.groups = static_cast<int64_t>(sfile->size() / (static_cast<size_t>(cols) * 4));
  } else {
    m.groups = (rows + m.group_size - 1) / m.group_size;
  }
  const std::vector<uint8_t> s = read_exact(scales, static_cast<size_t>(m.groups * cols) * 4, "fp32 " + shape(m.groups, cols));
  m.scales.resize(static_cast<size_t>(m.groups * cols));
  std::memcpy(m.scales.data(), s.data(), s.size());
  if (exists(zeros)) m.zeros = read_exact(zeros, static_cast<size_t>(m.groups * cols), "uint8 " + shape(m.groups, cols));
  ops::check_int4(m, values);
  return m;
}

}  // namespace ftx
