#include "lib/engine/int8_weights.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "lib/engine/w8a8_weights.h"
#include "lib/model/int8_files.h"

namespace ftx {

namespace {

// The whole of `path`, which must hold exactly `bytes` bytes (`what` describes the expected tensor).
void read_exact(const std::string& path, void* dst, size_t bytes, const std::string& what) {
  auto file = MappedFile::open(path);
  if (file->size() != bytes)
    throw Error(path, std::to_string(file->size()) + " bytes, expected " + std::to_string(bytes) + " (" + what + ")");
  std::memcpy(dst, file->slice(0, bytes, path), bytes);
}

}  // namespace

void check_int8_folder_policy(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant) {
  if (!cfg.holds_int8()) return;
  const char* other = quant.smoothquant.on ? "--int8-mode 2"
                      : quant.fp8         ? "--fp8"
                      : quant.int4.on     ? "--weight-only-precision int4"
                                          : nullptr;
  if (other)
    throw Error(dir + "/config.ini", std::string("weight_only_precision = int8: the folder's layer GEMMs are INT8 "
                                                 "already, they cannot be run with ") + other);
}

bool is_int8_file_gemm(const std::string& dir, const ModelConfig& cfg, const QuantPolicy& quant,
                       const std::string& weight_name, std::string* gemm) {
  if (!cfg.holds_int8() || !is_w8a8_gemm(weight_name, gemm)) return false;
  check_int8_folder_policy(dir, cfg, quant);
  return true;
}

ops::Int8Columns read_int8_files(const std::string& dir, const std::string& gemm, int rank, int64_t rows,
                                 int64_t cols) {
  const std::string suffix = "." + std::to_string(rank) + ".bin";
  const std::string values = dir + "/" + int8_values_name(gemm) + suffix;
  const std::string scales = dir + "/" + int8_scales_name(gemm) + suffix;
  ops::Int8Columns m;
  m.rows = rows;
  m.cols = cols;
  m.values.resize(static_cast<size_t>(rows * cols));
  m.scales.resize(static_cast<size_t>(cols));
  read_exact(values, m.values.data(), m.values.size(),
             "int8 [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  read_exact(scales, m.scales.data(), m.scales.size() * sizeof(float), "fp32 [" + std::to_string(cols) + "]");
  ops::check_int8_columns(m, scales);
  return m;
}

ops::Weight upload_int8_columns(ops::Backend& backend, const ops::Int8Columns& m) {
  // The int8 bytes travel through the float-typed alloc/upload, padded to whole floats, as
  // Backend::upload_weight_int8's do.
  const size_t n = m.values.size(), words = std::max<size_t>((n + sizeof(float) - 1) / sizeof(float), 1);
  std::vector<float> packed(words, 0.0f);
  std::memcpy(packed.data(), m.values.data(), n);
  float* q = backend.alloc(words);
  float* s = backend.alloc(m.scales.size());
  backend.upload(q, packed.data(), words);
  backend.upload(s, m.scales.data(), m.scales.size());
  ops::Weight w(q, s);
  w.input_dtype = backend.weight_dtype();
  return w;
}

}  // namespace ftx
