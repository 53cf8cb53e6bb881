// ftx convert-hf: flags only; the work is in lib/convert (see man/ftx-convert-hf.1).
#include <memory>

#include "cmd/convert_common.h"

namespace {

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<ftx::cmd::ConvertFlags>();
  ftx::cmd::add_convert_flags(sub, *f);
  sub->add_option("--model", f->opt.model, "override config.json model_type: gpt2, gpt_bigcode, santacoder, starcoder, gptj, gpt_neox, bloom, opt, xglm");
  return [f] { return ftx::cmd::run_convert(*f, ftx::plan_hf, "a HuggingFace model"); };
}

}  // namespace

FTX_SUBCOMMAND("convert-hf", "Convert a HuggingFace GPT-2 / GPTBigCode / GPT-J / GPT-NeoX / BLOOM / OPT / XGLM model folder to FasterTransformer's layout", setup);
