#include "lib/engine/w8a8_weights.h"

#include <sys/stat.h>

#include <cstring>
#include <vector>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "formats/mapped_file.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/qkv_columns.h"

namespace ftx {

namespace {

const char* kGemms[] = {"attention.query_key_value", "attention.dense", "mlp.dense_h_to_4h", "mlp.dense_h_to_4h.gate",
                        "mlp.dense_4h_to_h"};

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The whole file as `count` values of `elem` bytes; a missing or mis-sized file is an Error naming it.
std::vector<uint8_t> read_exact(const std::string& path, int64_t count, size_t elem) {
  const size_t want = static_cast<size_t>(count) * elem;
  if (!exists(path))
    throw Error(path, "missing SmoothQuant file for --int8-mode 2 (write the folder with `ftx smoothquant --alpha A`)");
  auto file = MappedFile::open(path);
  if (file->size() != want)
    throw Error(path, std::to_string(file->size()) + " bytes, expected " + std::to_string(want) + " (" +
                          std::to_string(count) + (elem == 1 ? " int8" : " fp32") + " values)");
  const uint8_t* p = file->slice(0, want, path);
  return std::vector<uint8_t>(p, p + want);
}

std::vector<float> read_floats(const std::string& path, int64_t count) {
  const std::vector<uint8_t> b = read_exact(path, count, sizeof(float));
  std::vector<float> v(static_cast<size_t>(count));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// FasterTransformer's OPT W8A8 files of one GEMM (`base` = DIR/model.layers.L.<gemm>): the int8
// weight per rank; `scale` (QKV: three equal values), `scale_inter` (QKV: this rank's columns,
// [3, cols/3]) and `scale_out` (QKV: one per Q, K, V), once for all ranks. They are the
// per-tensor roles of TensorRT-LLM's scale_x_orig_quant, scale_y_accum_quant and
// scale_y_quant_orig: y = (q_x · q_w) · scale_out · scale_inter, with no int8 rounding of y in
// between. QKV's three output scales are folded into its column factors (rounded once, as
// the product out_scale · alpha_col of the per-tensor arithmetic is).
ops::Weight load_ft_w8a8_weight(const std::string& base, int rank, int64_t rows, int64_t cols, bool qkv,
                                ops::Backend& backend) {
  const int64_t segs = qkv ? 3 : 1;
  const std::vector<uint8_t> q = read_exact(base + ".weight.int8." + std::to_string(rank) + ".bin", rows * cols, 1);
  const std::vector<float> scale = read_floats(base + ".scale.bin", segs);
  const std::vector<float> inter = read_floats(base + ".scale_inter.bin", qkv ? cols : 1);
  const std::vector<float> out = read_floats(base + ".scale_out.bin", segs);
  if (!(scale[0] > 0.0f)) throw Error(base + ".scale.bin", "scale " + std::to_string(scale[0]) + " is not positive");
  for (float s : scale)
    if (s != scale[0])
      throw Error(base + ".scale.bin", "Q, K and V input scales differ (" + std::to_string(scale[0]) + ", " +
                                           std::to_string(s) + "): the three share one input, quantised once");
  std::vector<float> alpha(static_cast<size_t>(cols));
  float out_scale = out[0];
  if (qkv) {
    for (int64_t j = 0; j < cols; ++j) alpha[j] = inter[j] * out[j / (cols / 3)];
    out_scale = 1.0f;
  } else {
    std::fill(alpha.begin(), alpha.end(), inter[0]);
  }
  return backend.upload_weight_w8a8(reinterpret_cast<const int8_t*>(q.data()), rows, cols, alpha.data(), scale[0],
                                    out_scale);
}

}  // namespace

bool is_w8a8_gemm(const std::string& weight_name, std::string* gemm) {
  if (weight_name.rfind("model.layers.", 0) != 0) return false;
  const size_t dot = weight_name.find('.', 13);
  if (dot == std::string::npos) return false;
  const std::string rest = weight_name.substr(dot + 1);
  for (const char* g : kGemms)
    if (rest == std::string(g) + ".weight") {
      if (gemm) *gemm = weight_name.substr(0, weight_name.size() - 7);
      return true;
    }
  return false;
}

W8A8Files check_w8a8_folder(const std::string& dir, const ModelConfig& cfg, const SmoothQuant& mode) {
  const std::string ini_path = dir + "/config.ini";
  const IniFile ini = IniFile::read(ini_path);
  std::string alpha, format;
  for (const std::string& s : ini.sections()) {
    if (ini.has(s, "smoothquant")) alpha = ini.get(s, "smoothquant");
    if (ini.has(s, "int8_format")) format = ini.get(s, "int8_format");
  }
  if (alpha.empty() || alpha == "None")
    throw Error(ini_path, "--int8-mode 2 needs a folder written by `ftx smoothquant --alpha A`; config.ini has " +
                              (alpha.empty() ? std::string("no smoothquant key") : "smoothquant = None (KV-cache scales only)"));
  if (format == "ft") {
    if (cfg.kv_head_num > 0 && cfg.kv_head_num != cfg.head_num)
      throw Error(ini_path, "int8_format = ft: FasterTransformer's W8A8 files are for multi-head attention; this model "
                            "has kv_head_num " + std::to_string(cfg.kv_head_num) + " of head_num " +
                            std::to_string(cfg.head_num));
    if (mode.per_token || mode.per_channel)
      throw Error(ini_path, std::string("int8_format = ft: FasterTransformer's W8A8 files have per-tensor scales "
                                        "only; drop ") +
                                (mode.per_token ? "--per-token" : "--per-channel") +
                                " or export with ftx smoothquant --format trt-llm");
    return W8A8Files::kFt;
  }
  if (!format.empty() && format != "trt-llm")
    throw Error(ini_path, "int8_format = " + format + ": not a format ftx smoothquant writes (trt-llm or ft)");
  return W8A8Files::kTrtLlm;
}

ops::Weight load_w8a8_weight(const std::string& dir, const ModelConfig& cfg, const std::string& gemm, int rank, int tp,
                             int64_t rows, int64_t cols, const SmoothQuant& mode, W8A8Files files,
                             ops::Backend& backend) {
  const std::string base = dir + "/" + gemm;
  const std::string r = std::to_string(rank);
  auto ends_with = [&](const char* s) {
    const size_t n = std::strlen(s);
    return gemm.size() >= n && gemm.compare(gemm.size() - n, n, s) == 0;
  };
  const bool qkv = ends_with("attention.query_key_value");
  // QKV and FC1 split their output columns across ranks; attention.dense and FC2 their input rows.
  const bool column_parallel = qkv || ends_with("mlp.dense_h_to_4h") || ends_with("mlp.dense_h_to_4h.gate");
  if (files == W8A8Files::kFt) return load_ft_w8a8_weight(base, rank, rows, cols, qkv, backend);
  const std::string col = mode.per_channel ? ".col" : "";
  const std::vector<uint8_t> q = read_exact(base + ".weight.int8" + col + "." + r + ".bin", rows * cols, 1);
  // alpha_col: the per-column factor of the dequantisation (the W8A8 arithmetic of lib/ops/op_types.h).
  const std::string col_name = mode.per_token ? ".scale_w_quant_orig" : ".scale_y_accum_quant";
  std::vector<float> alpha(static_cast<size_t>(cols));
  if (mode.per_channel) {
    // Column-parallel GEMMs have their columns' scales per rank; row-parallel ones keep all columns.
    alpha = column_parallel ? read_floats(base + col_name + ".col." + r + ".bin", cols)
                            : read_floats(base + col_name + ".col.bin", cols);
  } else if (qkv) {
    // One value per column of the full QKV (Q's, K's and V's one value each, broadcast; [3, H] for
    // multi-head attention): this rank's columns of each of Q, K and V (qkv_columns.h).
    const std::vector<ColumnSegment> segs = qkv_column_segments(cfg);
    int64_t full = 0;
    for (const ColumnSegment& s : segs) full += s.width;
    if (rank_columns(segs, tp) != cols)
      throw Error(base + ".weight.int8." + r + ".bin", "holds " + std::to_string(cols) + " QKV columns, the config " +
                                                           std::to_string(rank_columns(segs, tp)));
    alpha = rank_part_of_columns(read_floats(base + col_name + ".bin", full), 1, segs, tp, rank);
  } else {
    const float v = read_floats(base + col_name + ".bin", 1)[0];
    std::fill(alpha.begin(), alpha.end(), v);
  }
  float act_scale = 0.0f, out_scale = 1.0f;  // per-token: both unused
  if (!mode.per_token) {
    act_scale = read_floats(base + ".scale_x_orig_quant.bin", 1)[0];
    out_scale = read_floats(base + ".scale_y_quant_orig.bin", 1)[0];
    if (!(act_scale > 0.0f))
      throw Error(base + ".scale_x_orig_quant.bin", "scale " + std::to_string(act_scale) + " is not positive");
  }
  return backend.upload_weight_w8a8(reinterpret_cast<const int8_t*>(q.data()), rows, cols, alpha.data(), act_scale,
                                    out_scale);
}

}  // namespace ftx
