#pragma once
// Flags shared by `ftx convert-megatron`, `convert-nemo` and `convert-hf` (FT/TensorRT-LLM names).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

#include "cmd/flag_checks.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/input_file.h"
#include "lib/convert/conversion.h"

namespace ftx::cmd {

struct ConvertFlags {
  ConvertOptions opt;
  std::string dtype = "fp32";
};

inline void add_convert_flags(CLI::App* sub, ConvertFlags& f) {
  sub->add_option("-i,--in-file", f.opt.in_path, "input checkpoint (file or folder)")->required();
  sub->add_option("-o,--saved-dir,--out-dir", f.opt.out_dir, "output folder; files go to OUT/<N>-gpu/")->required();
  sub->add_option("-g,--infer-gpu-num,--tensor-parallelism", f.opt.tp, "inference tensor parallel size");
  sub->add_option("-t,--weight-data-type,--storage-type", f.dtype, "fp32, fp16 or bf16 (or float32/float16/bfloat16)")
      ->capture_default_str();
  sub->add_option("-p,--processes", f.opt.processes, "worker threads")->capture_default_str();
  sub->add_option("--vocab-path", f.opt.vocab_path, "vocab.json to copy (and to read <|endoftext|> from)");
  sub->add_option("--merges-path", f.opt.merges_path, "merges.txt to copy");
  sub->add_option("--start-id", f.opt.start_id, "config.ini start_id (default: the tokenizer's)");
  sub->add_option("--end-id", f.opt.end_id, "config.ini end_id (default: the tokenizer's)");
  sub->add_flag("--force", f.opt.force, "replace an existing OUT/<N>-gpu/ folder");
  sub->add_flag("-q,--quiet", f.opt.quiet, "no progress on stderr");
}

// Checks the flags and runs plan -> write. Returns the exit code. `folder_only`: the source is
// always a folder (names it), so it cannot come on standard input; else "-i -" spools stdin to a
// temporary file (a .nemo archive on a pipe).
// `write` takes the plan (default: write_conversion; convert-hf --smoothquant quantizes it too).
template <typename Planner>
int run_convert(ConvertFlags& f, Planner plan_fn, const char* folder_only = nullptr,
                const std::function<void(ConversionPlan&, const ConvertOptions&)>& write = write_conversion) {
  if (f.opt.out_dir == "-") throw UsageError("-o: the output is a folder (OUT/<N>-gpu/), it cannot be standard output");
  check_range("-g", f.opt.tp, 1, kMaxRanks);
  check_range("-p", f.opt.processes, 1, kMaxThreads);
  if (f.opt.in_path == "-") {
    if (folder_only) throw UsageError(std::string("-i -: ") + folder_only + " is a folder; it cannot come on standard input");
    f.opt.in_path = spool_input("-", "the checkpoint");
  }
  check_token_id_flag("--start-id", f.opt.start_id);
  check_token_id_flag("--end-id", f.opt.end_id);
  f.opt.vocab_path = f.opt.vocab_path.empty() ? "" : spool_input(f.opt.vocab_path, "--vocab-path");
  f.opt.merges_path = f.opt.merges_path.empty() ? "" : spool_input(f.opt.merges_path, "--merges-path");
  for (const std::string* p : {&f.opt.vocab_path, &f.opt.merges_path})
    if (!p->empty() && ::access(p->c_str(), R_OK) != 0) throw Error(*p, "cannot read it: " + std::string(std::strerror(errno)));
  DType dt;
  try {
    dt = dtype_from_name(f.dtype);
  } catch (const Error&) {
    throw UsageError("--weight-data-type '" + f.dtype + "' is not one of fp32, fp16, bf16");
  }
  if (dt != DType::kFloat32 && dt != DType::kFloat16 && dt != DType::kBFloat16)
    throw UsageError("--weight-data-type '" + f.dtype + "' is not one of fp32, fp16, bf16");
  f.opt.dtype = dt;
  ConversionPlan plan = plan_fn(f.opt);
  write(plan, f.opt);
  return 0;
}

}  // namespace ftx::cmd
