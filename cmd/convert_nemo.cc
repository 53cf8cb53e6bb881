// ftx convert-nemo: flags only; the work is in lib/convert (see man/ftx-convert-nemo.1).
#include <memory>

#include "cmd/convert_common.h"
#include "lib/convert/prompt_source.h"

namespace {

struct PromptFlags {
  std::string in;
  int64_t start_id = -1;
};

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<ftx::cmd::ConvertFlags>();
  auto p = std::make_shared<PromptFlags>();
  ftx::cmd::add_convert_flags(sub, *f);
  sub->add_option("--prompt-in-file", p->in,
                  "NeMo p-tuning checkpoint whose tables are written too (FT's -p_i; see ftx prompt-convert)");
  sub->add_option("--prompt-start-id", p->start_id, "config.ini prompt_learning_start_id (default end_id + 1)");

  return [f, p] {
    ftx::cmd::check_token_id_flag("--prompt-start-id", p->start_id);
    if (p->in.empty()) {
      if (p->start_id >= 0) throw ftx::UsageError("--prompt-start-id needs --prompt-in-file");
      return ftx::cmd::run_convert(*f, ftx::plan_nemo);
    }
    if (p->in == "-") p->in = ftx::spool_input("-", "the prompt checkpoint");
    return ftx::cmd::run_convert(*f, [p](const ftx::ConvertOptions& opt) {
      ftx::ConversionPlan plan = ftx::plan_nemo(opt);
      // FT's start_id/end_id flags apply before the default prompt_learning_start_id is derived.
      if (opt.end_id >= 0) plan.cfg.end_id = opt.end_id;
      ftx::plan_prompt_tables(ftx::read_prompt_nemo(p->in), plan, p->start_id);
      return plan;
    });
  };
}

}  // namespace

FTX_SUBCOMMAND("convert-nemo", "Convert a NeMo GPT .nemo (or extracted folder) to FasterTransformer's layout", setup);
