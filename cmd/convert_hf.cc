// ftx convert-hf: flags only; the work is in lib/convert (see man/ftx-convert-hf.1).
#include <cstdio>
#include <memory>
#include <string>

#include "cmd/convert_common.h"
#include "cmd/lambada_data.h"
#include "lib/convert/hf_families.h"
#include "lib/quant/smoothquant.h"

namespace {

std::string description() {
  return "Convert a HuggingFace " + ftx::hf::display_list(" / ", " / ") + " model folder to FasterTransformer's layout";
}

ftx::cmd::Action setup(CLI::App* sub) {
  // Hidden (group ""): prints the man page's SUPPORTED MODELS and CONFIG.JSON KEYS sections as the
  // registered families make them, to paste into man/ftx-convert-hf.1 (tests/unit/hf_config_test.cc
  // fails until they are).
  // It is declared before the help flag: CLI11 2.1 ends --help with a blank line when the hidden
  // group comes after the "Options" one.
  const std::string help_name = sub->get_help_ptr()->get_name(false, true);
  const std::string help_text = sub->get_help_ptr()->get_description();
  sub->set_help_flag();
  sub->add_flag_callback(
         "--print-man-tables",
         [] {
           std::fputs(ftx::hf::man_tables().c_str(), stdout);
           throw CLI::Success();
         })
      ->group("");
  sub->set_help_flag(help_name, help_text);
  auto f = std::make_shared<ftx::cmd::ConvertFlags>();
  ftx::cmd::add_convert_flags(sub, *f);
  // The families register themselves (lib/convert/hf/family.h): their names are read here, in
  // main(), never in a static initialiser (which may run before theirs).
  sub->description(description());
  sub->add_option("--model", f->opt.model, "override config.json model_type: " + ftx::hf::model_flag_list());
  sub->add_option("--moe-ep-size", f->opt.moe_ep_size,
                  "mixture of experts: 1 slices every expert over the -g ranks; -g's value places whole experts, "
                  "E/g per rank (expert parallelism)")
      ->capture_default_str();
  // TensorRT-LLM's hf_gpt_convert.py flags: convert, then `ftx smoothquant` on the result.
  auto sq = std::make_shared<ftx::quant::SmoothQuantOptions>();
  auto alpha = std::make_shared<double>(0.0);
  auto* alpha_opt = sub->add_option("--smoothquant,--sq", *alpha,
                                    "SmoothQuant with this alpha in [0, 1] and write INT8 files (see ftx-smoothquant(1))");
  sub->add_flag("--calibrate-kv-cache,--kv", sq->calibrate_kv_cache, "write the INT8 KV-cache scale (ftx-smoothquant(1))");
  sub->add_option("--calib-data", sq->calib_data, "calibration JSON lines (default: LAMBADA shipped with ftx)");
  sub->add_option("--calib-samples", sq->calib_samples, "calibration samples")->capture_default_str();
  sub->add_option("--calib-seq-len", sq->calib_seq_len, "tokens per calibration sample")->capture_default_str();
  return [f, sq, alpha, alpha_opt] {
    if (f->opt.moe_ep_size != 1 && f->opt.moe_ep_size != f->opt.tp)
      throw ftx::UsageError("--moe-ep-size " + std::to_string(f->opt.moe_ep_size) + ": 1 or -g's value (" +
                            std::to_string(f->opt.tp) + "); experts both sliced and spread are not supported");
    ftx::cmd::check_range("--calib-samples", sq->calib_samples, 1, ftx::cmd::kMaxFlagCount);
    ftx::cmd::check_range("--calib-seq-len", sq->calib_seq_len, 1, ftx::cmd::kMaxFlagCount);
    if (alpha_opt->count() == 0 && !sq->calibrate_kv_cache) {
      if (!sq->calib_data.empty()) throw ftx::UsageError("--calib-data needs --smoothquant or --calibrate-kv-cache");
      return ftx::cmd::run_convert(*f, ftx::plan_hf, "a HuggingFace model");
    }
    if (alpha_opt->count() > 0) sq->alpha = *alpha;
    if (sq->calib_data.empty()) sq->calib_data = ftx::cmd::default_lambada_path();
    return ftx::cmd::run_convert(*f, ftx::plan_hf, "a HuggingFace model",
                                 [sq](ftx::ConversionPlan& plan, const ftx::ConvertOptions& opt) {
                                   ftx::quant::convert_then_smoothquant(plan, opt, *sq);
                                 });
  };
}

}  // namespace

// The description is set in setup() from the registry (see there).
FTX_SUBCOMMAND("convert-hf", "Convert a HuggingFace model folder to FasterTransformer's layout", setup);
