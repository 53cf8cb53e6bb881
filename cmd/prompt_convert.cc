// ftx prompt-convert: flags only; the work is in lib/convert/prompt_source (see man/ftx-prompt-convert.1).
#include <cstdio>
#include <memory>

#include "cmd/flag_checks.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/input_file.h"
#include "formats/output_file.h"
#include "lib/convert/prompt_source.h"

namespace {

struct Flags {
  std::string in, out, model_dir, json;
  int64_t start_id = -1;
  bool force = false, quiet = false;
};

ftx::cmd::Action setup(CLI::App* sub) {
  auto f = std::make_shared<Flags>();
  sub->add_option("-i,--in-file", f->in, "NeMo prompt-learning checkpoint: .nemo (tar or tar.gz) or extracted folder")
      ->required();
  sub->add_option("-o,--out-file", f->out, "TensorRT-LLM table: float32 [tasks, max_len, hidden] .npy");
  sub->add_option("--model-dir", f->model_dir, "FT model folder (OUT/N-gpu) to add the tables to, FT's way");
  sub->add_option("--start-id", f->start_id,
                  "config.ini prompt_learning_start_id (default: the folder's, else end_id + 1)");
  sub->add_option("--json", f->json, "write the task summary as JSON to this file ('-': standard output)");
  sub->add_flag("--force", f->force, "replace an existing --out-file / --json file, or the folder's prompt tasks");
  sub->add_flag("-q,--quiet", f->quiet, "no task summary on stderr");
  return [f] {
    using ftx::UsageError;
    ftx::cmd::check_token_id_flag("--start-id", f->start_id);
    if (f->out.empty() == f->model_dir.empty())
      throw UsageError("give exactly one of -o/--out-file (a .npy table) and --model-dir (an FT folder)");
    if (!f->out.empty() && f->out != "-" && (f->out.size() < 4 || f->out.compare(f->out.size() - 4, 4, ".npy") != 0))
      throw UsageError("-o '" + f->out + "': the output is TensorRT-LLM's .npy table; its name must end in .npy");
    if (!f->out.empty() && f->start_id >= 0) throw UsageError("--start-id applies to --model-dir only");
    if (f->out == "-" && f->json == "-") throw UsageError("-o - and --json - cannot both be standard output");
    if (f->in == "-") f->in = ftx::spool_input("-", "the prompt checkpoint");
    const ftx::PromptArchive a = ftx::read_prompt_nemo(f->in);
    if (!f->out.empty()) ftx::write_prompt_npy(a, f->out, f->force);
    else ftx::add_prompt_tables(a, f->model_dir, f->start_id, f->force);
    if (!f->quiet) std::fputs(ftx::prompt_summary_text(a).c_str(), stderr);
    if (!f->json.empty()) ftx::write_output_file(f->json, ftx::prompt_summary_json(a), f->force);
    return 0;
  };
}

}  // namespace

FTX_SUBCOMMAND("prompt-convert",
               "Convert NeMo p-tuning prompt tables to TensorRT-LLM's .npy or into an FT model folder", setup);
