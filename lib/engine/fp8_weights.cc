#include "lib/engine/fp8_weights.h"

#include <sys/stat.h>

#include <cstring>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "lib/engine/kv_cache_scales.h"
#include "lib/engine/w8a8_weights.h"
#include "lib/model/fp8_files.h"

namespace ftx {

namespace {
const char kWriteThem[] = "write the folder with `ftx smoothquant --fp8`";
}  // namespace

bool is_fp8_gemm(const std::string& weight_name, std::string* gemm) { return is_w8a8_gemm(weight_name, gemm); }

ops::Weight load_fp8_weight(const std::string& dir, const std::string& gemm, int rank, int64_t rows, int64_t cols,
                            ops::Backend& backend) {
  const std::string path = dir + "/" + fp8_weight_name(gemm) + "." + std::to_string(rank) + ".bin";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw Error(path, std::string("missing: --fp8 needs the FP8 weights; ") + kWriteThem);
  const size_t want = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  auto file = MappedFile::open(path);
  if (file->size() != want)
    throw Error(path, std::to_string(file->size()) + " bytes, expected " + std::to_string(want) + " (E4M3 [" +
                          std::to_string(rows) + ", " + std::to_string(cols) + "])");
  const uint8_t* q = file->slice(0, want, path);
  for (size_t i = 0; i < want; ++i)
    if ((q[i] & 0x7f) == 0x7f)
      throw Error(path, "element " + std::to_string(i) + " is an E4M3 NaN code: not FP8 weights (" + kWriteThem + ")");
  const std::string needs = std::string("--fp8 needs the FP8 scales; ") + kWriteThem;
  const float act = read_scale_file(dir + "/" + fp8_act_scale_name(gemm) + ".bin", needs);
  const float wgt = read_scale_file(dir + "/" + fp8_weight_scale_name(gemm) + ".bin", needs);
  return backend.upload_weight_fp8(q, rows, cols, act, wgt);
}

float read_fp8_kv_scale(const std::string& dir, int64_t layer) {
  return read_scale_file(dir + "/" + fp8_kv_scale_name(layer) + ".bin",
                         std::string("--fp8-kv-cache needs the layers' FP8 KV-cache scales; ") + kWriteThem);
}

}  // namespace ftx
