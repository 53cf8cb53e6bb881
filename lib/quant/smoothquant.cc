#include "lib/quant/smoothquant.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/convert/conversion.h"
#include "lib/convert/hf_common.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/quant/calibrate.h"
#include "lib/quant/fp8_export.h"
#include "lib/quant/host_model.h"
#include "lib/quant/int8_export.h"
#include "lib/quant/kv_head_copies.h"
#include "lib/quant/smoothing.h"
#include "lib/tokenizer/model_tokenizer.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/model/model_dir.h"

namespace ftx::quant {

namespace {

void check_options(const SmoothQuantOptions& o) {
  if (o.alpha && !(*o.alpha >= 0.0 && *o.alpha <= 1.0)) {
    std::ostringstream s;
    s << "--alpha " << *o.alpha << " is outside [0, 1]";
    throw UsageError(s.str());
  }
  if (!o.alpha && !o.calibrate_kv_cache && !o.fp8)
    throw UsageError("nothing to do: give --alpha (SmoothQuant W8A8 files), --calibrate-kv-cache and/or --fp8");
  if (o.tp < 1) throw UsageError("-g " + std::to_string(o.tp) + " must be at least 1");
  if (o.calib_samples < 1) throw UsageError("--calib-samples must be at least 1");
  if (o.calib_seq_len < 1) throw UsageError("--calib-seq-len must be at least 1");
  if (o.format != "trt-llm" && o.format != "ft")
    throw UsageError("--format '" + o.format + "' is not trt-llm (TensorRT-LLM's files) or ft (FasterTransformer's OPT W8A8 files)");
  if (o.format == "ft" && !o.alpha)
    throw UsageError("--format ft writes FasterTransformer's W8A8 files: give --alpha (0 keeps the weights unsmoothed)");
  if (!o.act_ranges.empty() && !o.save_act_ranges.empty())
    throw UsageError("--act-ranges reads ranges, --save-act-ranges writes calibrated ones: give one");
}

// Every layer GEMM has ranges of the right sizes (a file from another model is refused); a gated
// FFN's gate projection only when W8A8 quantises it (`with_gate`; FP8 takes FC1's input range).
void check_ranges(const ActRanges& r, const HostModel& m, const std::string& origin, bool with_gate) {
  for (int64_t l = 0; l < m.cfg.num_layer; ++l)
    for (const std::string& s : with_gate ? quantized_gemms(m.cfg) : gemm_suffixes()) {
      const std::string key = gemm_key(l, s);
      auto it = r.gemms.find(key);
      if (it == r.gemms.end()) throw Error(origin, "no activation ranges for " + key);
      const HostTensor& w = m.at(key + ".weight");
      const size_t in = static_cast<size_t>(w.shape.front()), out = static_cast<size_t>(w.numel() / w.shape.front());
      if (it->second.x.size() != in || it->second.y.size() != out || it->second.w.size() != out)
        throw Error(origin, key + ": ranges of sizes x " + std::to_string(it->second.x.size()) + ", y " +
                                std::to_string(it->second.y.size()) + ", w " + std::to_string(it->second.w.size()) +
                                " do not fit the weight " + shape_to_string(w.shape));
    }
}

// FasterTransformer's W8A8 files are those of its OPT converter: a multi-head GPT-family model with
// a plain FFN (TensorRT-LLM's files carry the rest).
void check_ft_format(const ModelConfig& cfg, const std::string& dir) {
  std::string why;
  if (cfg.ft_variant == FtVariant::kGptJ || cfg.ft_variant == FtVariant::kGptNeoX)
    why = std::string("exist for its GPT model only, not ") + ft_variant_name(cfg.ft_variant);
  else if (cfg.kv_head_num > 0 && cfg.kv_head_num != cfg.head_num)
    why = "have one [3, H] layout for QKV: multi-head attention only (kv_head_num " + std::to_string(cfg.kv_head_num) +
          " of head_num " + std::to_string(cfg.head_num) + ")";
  else if (cfg.activation.is_gated())
    why = std::string("have no gate projection (activation ") + activation_name(cfg.activation) + ")";
  if (!why.empty()) throw Error(dir, "--format ft: FasterTransformer's W8A8 files " + why + " (use --format trt-llm)");
}

bool in_ini_has(const std::vector<std::pair<std::string, std::string>>& kv, const std::string& key) {
  for (const auto& e : kv)
    if (e.first == key) return true;
  return false;
}

std::string format_double(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

ActRanges calibrate_folder(const SmoothQuantOptions& o, const HostModel& model) {
  std::unique_ptr<Tokenizer> tok = find_model_tokenizer(o.model_dir, "");
  const auto samples =
      read_calibration_samples(o.calib_data, tok.get(), o.calib_samples, o.calib_seq_len, model.cfg.vocab_size);
  CalibrationOptions co{o.device, o.threads, o.quiet};
  if (model.cfg.tensor_para_size == 1) return calibrate(o.model_dir, model, samples, co);
  // The ranges must be those of the full tensors: calibrate an unsplit copy of a split folder.
  namespace fs = std::filesystem;
  const fs::path tmp = fs::path(o.out_dir) / (".ftx-calibrate-" + std::to_string(::getpid()));
  const TransientDir scratch(tmp.string());  // gone however this function ends
  ConversionPlan plan = plan_host_model(model, 1);
  ConvertOptions copt;
  copt.out_dir = tmp.string();
  copt.tp = 1;
  copt.dtype = model.cfg.weight_data_type;
  copt.quiet = true;
  write_conversion(plan, copt);
  return calibrate((tmp / "1-gpu").string(), model, samples, co);
}

}  // namespace

void run_smoothquant(const SmoothQuantOptions& o) {
  check_options(o);
  const std::string final_dir = o.out_dir + "/" + std::to_string(o.tp) + "-gpu";
  if (!o.force && std::filesystem::exists(final_dir))
    throw Error(final_dir, "output folder exists (--force replaces it)");
  HostModel model = HostModel::read(o.model_dir);
  if (o.format == "ft") check_ft_format(model.cfg, o.model_dir);
  // Smoothing divides the norms' gammas by s; a (1 + γ) norm's file holds γ, which that would not
  // divide (Gemma). Unsmoothed W8A8 (--alpha 0) leaves the norms alone.
  if (o.alpha && *o.alpha > 0 && model.cfg.norm_unit_offset)
    throw Error(o.model_dir + "/config.ini",
                "norm_unit_offset = 1: --alpha " + format_double(*o.alpha) +
                    " would fold the smoothing into norms that scale by 1 + gamma, which ftx smoothquant does not "
                    "(use --alpha 0)");
  {
    ModelConfig out_cfg = model.cfg;  // as written: K/V heads copied for more ranks than it has (below)
    out_cfg.kv_head_num = kv_heads_for(model.cfg, o.tp, o.model_dir + "/config.ini");
    out_cfg.validate(o.tp, o.model_dir);
  }

  ActRanges ranges;
  if (!o.act_ranges.empty()) {
    ranges = ActRanges::load(o.act_ranges);
    check_ranges(ranges, model, o.act_ranges, o.alpha.has_value());
  } else {
    ranges = calibrate_folder(o, model);
    check_ranges(ranges, model, o.model_dir, o.alpha.has_value());
    if (!o.save_act_ranges.empty()) ranges.save(o.save_act_ranges, o.force);
  }

  std::map<std::string, QuantRange> q = to_quant_ranges(ranges);
  if (o.alpha && smooth_model(model, q, *o.alpha) == 0 && !o.quiet)
    std::fprintf(stderr, "ftx: note: %s: post-layernorm blocks have no layernorm that only feeds a GEMM, so nothing "
                         "was smoothed (the INT8 files use the calibrated ranges as they are)\n", o.model_dir.c_str());

  const int64_t source_kv_heads = copy_kv_heads(model, q, o.tp);

  std::vector<SideTensor> side;
  if (o.format == "ft") {
    side = ft_int8_files(model, q, o.tp, o.dtype);
    // The INT8 KV-cache scale has no FasterTransformer file: TensorRT-LLM's is written.
    if (o.calibrate_kv_cache)
      for (SideTensor& f : trtllm_int8_files(model, q, o.tp, o.dtype, true)) side.push_back(std::move(f));
  } else if (o.alpha || o.calibrate_kv_cache) {
    side = trtllm_int8_files(model, q, o.tp, o.dtype, !o.alpha);
  }
  if (o.fp8) {
    const std::string origin = o.act_ranges.empty() ? o.model_dir : o.act_ranges;
    for (SideTensor& f : trtllm_fp8_files(model, q, ranges.kv, o.tp, o.dtype, origin)) side.push_back(std::move(f));
  }
  ConversionPlan plan = plan_host_model(std::move(model), o.tp);
  plan.side_tensors = std::move(side);
  plan.source_format = "ft-smoothquant";
  if (!o.source.empty()) plan.source_path = o.source;
  // The input's own keys that ftx's configuration does not write (a converter's, e.g. TensorRT-LLM's
  // HF attributes) are kept, before the ones below, which replace any earlier quantization's.
  {
    const IniFile in_ini = read_model_config_ini(o.model_dir);
    const IniFile ours = plan.cfg.to_ini();
    const std::string section = ours.sections().front();
    for (const auto& kv : in_ini.entries(section))
      if (!ours.has(section, kv.first)) plan.extra_ini.push_back(kv);
  }
  // The folder's K/V heads copied per rank: the checkpoint's count, as convert-hf records it.
  if (source_kv_heads > 0 && !in_ini_has(plan.extra_ini, "source_kv_head_num"))
    plan.extra_ini.emplace_back("source_kv_head_num", std::to_string(source_kv_heads));
  // TensorRT-LLM's converter records its arguments in config.ini under these names.
  plan.extra_ini.emplace_back("smoothquant", o.alpha ? format_double(*o.alpha) : "None");
  plan.extra_ini.emplace_back("calibrate_kv_cache", o.calibrate_kv_cache ? "True" : "False");
  plan.extra_ini.emplace_back("int8_format", o.format);
  plan.extra_ini.emplace_back("fp8", o.fp8 ? "True" : "False");
  plan.extra_ini.emplace_back("int8_calib_samples", std::to_string(ranges.samples));
  if (o.act_ranges.empty()) plan.extra_ini.emplace_back("int8_calib_seq_len", std::to_string(o.calib_seq_len));
  for (const auto& kv : o.extra_ini) plan.extra_ini.push_back(kv);
  hf::add_tokenizer_files(o.model_dir, plan);
  if (plan.copy_files.empty()) hf::add_tokenizer_files(o.model_dir + "/..", plan);

  ConvertOptions copt;
  copt.in_path = o.model_dir;
  copt.out_dir = o.out_dir;
  copt.tp = o.tp;
  copt.dtype = o.dtype;
  copt.force = o.force;
  copt.quiet = o.quiet;
  write_conversion(plan, copt);
}

void convert_then_smoothquant(ConversionPlan& plan, const ConvertOptions& convert_options, SmoothQuantOptions sq) {
  namespace fs = std::filesystem;
  sq.out_dir = convert_options.out_dir;
  sq.tp = convert_options.tp;
  sq.dtype = convert_options.dtype;
  sq.force = convert_options.force;
  sq.quiet = convert_options.quiet;
  check_options(sq);
  const std::string final_dir = sq.out_dir + "/" + std::to_string(sq.tp) + "-gpu";
  if (!sq.force && fs::exists(final_dir)) throw Error(final_dir, "output folder exists (--force replaces it)");
  const fs::path tmp = fs::path(sq.out_dir) / (".ftx-convert-" + std::to_string(::getpid()));
  const TransientDir scratch(tmp.string());  // gone however this function ends
  ConvertOptions full = convert_options;
  full.out_dir = tmp.string();
  full.tp = 1;
  full.dtype = DType::kFloat32;
  full.force = false;
  write_conversion(plan, full);
  sq.model_dir = (tmp / "1-gpu").string();
  sq.source = convert_options.in_path;
  for (const auto& kv : plan.extra_ini) sq.extra_ini.push_back(kv);
  run_smoothquant(sq);
}

}  // namespace ftx::quant
