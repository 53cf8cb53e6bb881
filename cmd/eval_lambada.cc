// ftx eval-lambada: LAMBADA accuracy of an FT model folder, both of FT's protocols
// (lib/eval/lambada.h), on the CPU or under mpirun for tensor parallelism. See man/ftx-eval-lambada.1.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cmd/subcommand.h"
#include "formats/error.h"
#include "lib/dist/communicator.h"
#include "lib/engine/engine.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/runtime.h"
#include "lib/eval/lambada.h"
#include "lib/ops/backend.h"
#include "lib/tokenizer/model_tokenizer.h"

namespace {

struct EvalFlags {
  std::string gemm_config;
  std::string model_dir, tokenizer_dir, data, output, summary_json, device = "cpu", dtype = "fp32";
  int64_t batch_size = 16, max_examples = 0;
  int threads = 0;
  bool quiet = false;
};

// --data, else the copy installed with ftx (share/ftx), else the source tree's data/.
std::string default_data_path() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share/ftx/lambada/lambada_test.jsonl");
  candidates.push_back(fs::path(FTX_SOURCE_DATA_DIR) / "lambada/lambada_test.jsonl");
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c.string();
  throw ftx::Error(candidates.back().string(), "LAMBADA data not found; pass --data lambada_test.jsonl");
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw ftx::Error(path, "write failed");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw ftx::Error(path, "cannot rename " + tmp);
}

int run_eval(const EvalFlags& f) {
  if (f.batch_size < 1) throw ftx::UsageError("--batch-size must be at least 1");
  ftx::Runtime rt =
      ftx::make_runtime({f.device, f.threads, f.model_dir, f.gemm_config, ftx::dtype_from_name(f.dtype)});
  auto& backend = rt.backend;
  auto& comm = rt.comm;
  const bool leader = comm->rank() == 0;
  const bool tty = isatty(STDERR_FILENO) != 0;

  auto tokenizer = ftx::find_model_tokenizer(f.model_dir, f.tokenizer_dir);
  if (!tokenizer)
    throw ftx::Error(f.model_dir, "no tokenizer in the model folder or its parent; pass --tokenizer DIR");
  const std::string data = f.data.empty() ? default_data_path() : f.data;
  std::vector<ftx::LambadaExample> examples;
  for (const auto& text : ftx::read_lambada_jsonl(data, f.max_examples))
    examples.push_back(ftx::prepare_lambada_example(text, *tokenizer));

  auto weights = ftx::ModelWeights::load(f.model_dir, comm->rank(), comm->size(), *backend);
  ftx::Engine engine(weights, *backend, *comm);

  std::string lines;
  auto on_result = [&](const ftx::LambadaResult& r) {
    if (f.output.empty()) return;
    nlohmann::ordered_json j;
    j["index"] = r.index;
    j["last_token_target"] = r.last_token_target;
    j["last_token_predicted"] = r.last_token_predicted;
    j["last_token_correct"] = r.last_token_correct;
    j["word_target_ids"] = r.word_target_ids;
    j["word_predicted_ids"] = r.word_predicted_ids;
    j["word_correct"] = r.word_correct;
    j["word_logprob"] = r.word_logprob;
    lines += j.dump() + "\n";
  };
  auto progress = [&](int64_t done, int64_t total) {
    if (f.quiet) return;
    std::fprintf(stderr, "%seval-lambada: %lld/%lld examples%s", tty ? "\r" : "", static_cast<long long>(done),
                 static_cast<long long>(total), tty && done < total ? "" : "\n");
  };
  const auto s = ftx::evaluate_lambada(engine, *comm, examples, f.batch_size, on_result, progress);
  if (!leader) return 0;

  // FT's two summary lines (Triton backend's evaluate_lambada.py and lambada_task_example.py).
  std::printf("[INFO] last token accuracy: %5.2f%% (total token num: %lld)\n", s.last_token_accuracy(),
              static_cast<long long>(s.examples));
  std::printf("[INFO] accuracy: %0.4f%% (total : %lld)\n", s.word_accuracy(), static_cast<long long>(s.examples));
  std::printf("[INFO] target word log-likelihood: %.4f per example, perplexity %.3f per target token\n",
              s.mean_word_logprob(), s.word_token_perplexity());
  std::printf("[INFO] %lld examples in %.2f s (%.2f examples/s)\n", static_cast<long long>(s.examples), s.seconds,
              s.seconds > 0 ? s.examples / s.seconds : 0.0);
  if (!f.output.empty()) write_file_atomically(f.output, lines);
  if (!f.summary_json.empty()) {
    nlohmann::ordered_json j;
    j["examples"] = s.examples;
    j["last_token_correct"] = s.last_token_correct;
    j["last_token_accuracy"] = s.last_token_accuracy();
    j["word_correct"] = s.word_correct;
    j["word_accuracy"] = s.word_accuracy();
    j["word_tokens"] = s.word_tokens;
    j["mean_word_logprob"] = s.mean_word_logprob();
    j["word_token_perplexity"] = s.word_token_perplexity();
    j["seconds"] = s.seconds;
    j["examples_per_second"] = s.seconds > 0 ? s.examples / s.seconds : 0.0;
    write_file_atomically(f.summary_json, j.dump(2) + "\n");
  }
  return 0;
}

ftx::cmd::Action setup_eval(CLI::App* sub) {
  auto f = std::make_shared<EvalFlags>();
  sub->add_option("-m,--model", f->model_dir, "FT model folder (OUT/N-gpu)")->required();
  sub->add_option("--tokenizer", f->tokenizer_dir, "Tokenizer folder (default: the model folder's)");
  sub->add_option("--data", f->data, "LAMBADA JSONL, one {\"text\": ...} per line (default: the copy ftx ships)");
  sub->add_option("--batch-size", f->batch_size, "Examples per batch (default 16)");
  sub->add_option("--max-examples", f->max_examples, "Evaluate only the first N examples");
  sub->add_option("--device", f->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--gemm-config", f->gemm_config,
                  "gemm_config.in from ftx gemm-tune (cuda; default: MODEL/gemm_config.in, else ./gemm_config.in)");
  sub->add_option("--dtype", f->dtype,
                  "Weight matrices and GEMM inputs: fp32 (default), or fp16/bf16 with --device cuda")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "float32", "float16", "bfloat16"}));
  sub->add_option("--threads", f->threads, "CPU threads (default: OMP_NUM_THREADS, else all cores)");
  sub->add_option("--output", f->output, "Per-example results, one JSON line each");
  sub->add_option("--summary-json", f->summary_json, "Totals as one JSON object");
  sub->add_flag("--quiet", f->quiet, "No progress on standard error");
  return [f] { return run_eval(*f); };
}

FTX_SUBCOMMAND("eval-lambada", "LAMBADA accuracy of an FT model folder (both of FT's protocols)", setup_eval);

}  // namespace
