// ftx triton-repo: flags only; the work is in lib/serve/ (see man/ftx-triton-repo.1).
#include <cstdio>
#include <memory>

#include "cmd/flag_checks.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "lib/serve/triton_repo.h"

namespace {

ftx::cmd::Action setup(CLI::App* sub) {
  auto o = std::make_shared<ftx::serve::TritonRepoOptions>();
  auto quiet = std::make_shared<bool>(false);
  sub->add_option("-m,--model-dir", o->model_dir, "converted model folder (OUT/N-gpu) to serve")->required();
  sub->add_option("-o,--output", o->output, "model repository folder to write (DIR/NAME/..., NAME: --model-name)")->required();
  auto* tp = sub->add_option("--tensor-para-size", o->tensor_para_size,
                             "TP size of the grid (default: the folder's; must match it)");
  sub->add_option("--pipeline-para-size", o->pipeline_para_size, "PP size of the grid (must divide the layers)")
      ->capture_default_str();
  sub->add_option("-t,--data-type", o->data_type, "fp32, fp16 or bf16 (default: the folder's weight_data_type)");
  sub->add_option("--int8-mode", o->int8_mode, "0, 1 (weight-only) or 2 (SmoothQuant W8A8; GPT only)")->capture_default_str();
  sub->add_option("--max-batch-size", o->max_batch_size, "Triton's max_batch_size")->capture_default_str();
  sub->add_flag("--streaming", o->streaming, "decoupled transaction policy: a response per generated token");
  sub->add_flag("--enable-custom-all-reduce", o->custom_all_reduce, "the backend's custom all-reduce (TP on one node)");
  sub->add_flag("--copy", o->copy, "copy the folder's files into the repository instead of linking the folder");
  sub->add_option("--gemm-config", o->gemm_config, "gemm_config.in (ftx gemm-tune) to place in DIR, where the server starts");
  sub->add_option("--server-path", o->server_path,
                  "DIR as the server will see it, e.g. /models in a container (default: DIR's absolute path)");
  sub->add_flag("--force", o->force,
                "replace an existing DIR folder (never a file or link, nor a folder that is, holds or lies in -m, "
                "or holds --gemm-config or --tokenizer)");
  sub->add_option("--model-name", o->model_name, "the FasterTransformer model's name and folder in DIR")
      ->capture_default_str();
  sub->add_flag("--ensemble", o->ensemble,
                "also write the preprocessing and postprocessing Python models (with the tokenizer) and the "
                "ensemble that chains them to the model");
  sub->add_option("--tokenizer", o->tokenizer,
                  "--ensemble's tokenizer: a folder or tokenizer.json (default: the model folder's, else its parent's)");
  sub->add_flag("-q,--quiet", *quiet, "no summary on stderr");
  return [o, quiet, tp] {
    using ftx::cmd::check_range;
    if (tp->count()) check_range("--tensor-para-size", o->tensor_para_size, 1, ftx::cmd::kMaxRanks);
    check_range("--pipeline-para-size", o->pipeline_para_size, 1, ftx::cmd::kMaxRanks);
    check_range("--int8-mode", o->int8_mode, 0, 2);
    check_range("--max-batch-size", o->max_batch_size, 1, ftx::cmd::kMaxFlagCount);
    if (!o->server_path.empty() && o->server_path.front() != '/')
      throw ftx::UsageError("--server-path '" + o->server_path + "': give the repository's absolute path on the server");
    if (!o->tokenizer.empty() && !o->ensemble)
      throw ftx::UsageError("--tokenizer '" + o->tokenizer + "': only the Python models of --ensemble tokenize; add --ensemble");
    const ftx::serve::TritonRepoResult r = ftx::serve::write_triton_repo(*o);
    if (!*quiet) {
      const auto& s = r.spec;
      std::fprintf(stderr, "ftx triton-repo: %s: %s, %s, TP %lld x PP %lld, int8_mode %lld, max_batch_size %lld, %s\n",
                   r.config_path.c_str(), ftx::serve::ft_model_type_name(s.model_type), s.data_type.c_str(),
                   static_cast<long long>(s.tensor_para_size), static_cast<long long>(s.pipeline_para_size),
                   static_cast<long long>(s.int8_mode), static_cast<long long>(s.max_batch_size),
                   s.decoupled ? "streaming (decoupled)" : "not streaming");
      std::fprintf(stderr, "ftx triton-repo: %s %s; serve with: tritonserver --model-repository=%s%s\n",
                   r.model_path.c_str(), r.linked_to.empty() ? "holds a copy of the folder" : ("links " + r.linked_to).c_str(),
                   r.server_repo.c_str(), o->gemm_config.empty() ? "" : " (started there: FT reads ./gemm_config.in)");
      if (o->ensemble)
        std::fprintf(stderr, "ftx triton-repo: %s/ensemble: preprocessing, %s, postprocessing; the Python models "
                     "tokenize with %s (the backend's Python needs the tokenizers package)\n",
                     o->output.c_str(), o->model_name.c_str(), r.tokenizer.c_str());
    }
    return 0;
  };
}

}  // namespace

FTX_SUBCOMMAND("triton-repo", "Write a Triton model repository for FasterTransformer's backend from a converted folder",
               setup);
