// ftx convert-nemo: flags only; the work is in lib/convert (see man/ftx-convert-nemo.1).
#include <memory>

#include "cmd/convert_common.h"

namespace {

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<ftx::cmd::ConvertFlags>();
  ftx::cmd::add_convert_flags(sub, *f);

  return [f] { return ftx::cmd::run_convert(*f, ftx::plan_nemo); };
}

}  // namespace

FTX_SUBCOMMAND("convert-nemo", "Convert a NeMo GPT .nemo (or extracted folder) to FasterTransformer's layout", setup);
