// ftx convert-hf: flags only; the work is in lib/convert (see man/ftx-convert-hf.1).
#include <memory>

#include "cmd/convert_common.h"
#include "cmd/lambada_data.h"
#include "lib/quant/smoothquant.h"

namespace {

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<ftx::cmd::ConvertFlags>();
  ftx::cmd::add_convert_flags(sub, *f);
  sub->add_option("--model", f->opt.model, "override config.json model_type: gpt2, gpt_bigcode, santacoder, starcoder, gptj, gpt_neox, bloom, opt, xglm, llama, mistral, qwen2");
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

FTX_SUBCOMMAND("convert-hf", "Convert a HuggingFace GPT-2 / GPTBigCode / GPT-J / GPT-NeoX / BLOOM / OPT / XGLM / Llama / Mistral / Qwen2 model folder to FasterTransformer's layout", setup);
