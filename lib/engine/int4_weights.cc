#include "lib/engine/int4_weights.h"

#include <sys/stat.h>

#include <cstring>
#include <vector>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "lib/engine/w8a8_weights.h"
#include "lib/model/int4_files.h"
#include "lib/ops/int4_matrix.h"

namespace ftx {

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


bool is_int4_gemm(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant, const std::string& weight_name,
                  std::string* gemm) {
  if (!cfg.holds_int4() && !quant.int4.on) return false;
  if (!is_w8a8_gemm(weight_name, gemm)) return false;
  if (cfg.holds_int4()) {
    const char* other = quant.int8_weight_only ? "--int8-mode 1"
                        : quant.smoothquant.on ? "--int8-mode 2"
                        : quant.fp8            ? "--fp8"
                                               : nullptr;
    if (other)
      throw Error(dir + "/config.ini", std::string("weight_only_precision = int4: the folder's layer GEMMs are INT4 "
                                                   "already, they cannot be run with ") + other);
  }
  return true;
}

ops::Weight load_int4_weight(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant,
                             const std::string& gemm, int rank, int64_t rows, int64_t cols, const void* float_src,
                             DType src_dtype, ops::Backend& backend, size_t* bytes) {
  const ops::Int4Matrix m =
      cfg.holds_int4() ? read_int4_files(dir, gemm, rank, rows, cols, cfg.int4_group_size)
                       : ops::quantize_int4(float_src, src_dtype, rows, cols, quant.int4.group_size, quant.int4.zero_points);
  *bytes = m.packed.size() + m.scales.size() * sizeof(float) + m.zeros.size() + m.group_index.size() * sizeof(int32_t);
  // The model's float type: what the GEMMs round A to (bf16 activations for a bf16 model, as FT's
  // and TensorRT-LLM's weight-only GEMMs take them).
  return backend.upload_weight_int4(m, backend.weight_dtype());
}

double int4_bytes_per_weight(const ModelConfig& cfg, const QuantPolicy& quant, int64_t rows) {
  const int64_t g = cfg.holds_int4() ? cfg.int4_group_size : quant.int4.group_size;
  const double group = static_cast<double>(g <= 0 || g > rows ? rows : g);
  return 0.5 + (4.0 + 1.0) / group;  // 4 bits, and per group an fp32 scale and a zero point
}

}  // namespace ftx
