// ftx convert-megatron: flags only; the work is in lib/convert (see man/ftx-convert-megatron.1).
#include <memory>

#include "cmd/convert_common.h"

namespace {

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<ftx::cmd::ConvertFlags>();
  ftx::cmd::add_convert_flags(sub, *f);
  sub->add_option("--head-num", f->opt.head_num, "attention heads (checkpoints without args)");
  sub->add_option("--trained-tensor-parallel-size", f->opt.trained_tp, "training TP size (checkpoints without args)");
  return [f] {
    ftx::cmd::check_range("--head-num", f->opt.head_num, 0, ftx::cmd::kMaxFlagCount);  // 0: from the checkpoint's args
    ftx::cmd::check_range("--trained-tensor-parallel-size", f->opt.trained_tp, 0, ftx::cmd::kMaxRanks);
    return ftx::cmd::run_convert(*f, ftx::plan_megatron, "a Megatron checkpoint");
  };
}

}  // namespace

FTX_SUBCOMMAND("convert-megatron", "Convert a Megatron-LM GPT checkpoint (or a Megatron-DeepSpeed MoE one) to FasterTransformer's layout", setup);
