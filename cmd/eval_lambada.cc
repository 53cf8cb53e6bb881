// ftx eval-lambada: LAMBADA accuracy of an FT model folder, both of FT's protocols
// (lib/eval/lambada.h), on the CPU or under mpirun for tensor parallelism. See man/ftx-eval-lambada.1.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cmd/decoding_flags.h"
#include "cmd/flag_checks.h"
#include "cmd/lambada_data.h"
#include "cmd/prompt_flags.h"
#include "cmd/parallel_flags.h"
#include "cmd/run_control.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/ft_dir.h"
#include "formats/input_file.h"
#include "formats/output_file.h"
#include "lib/dist/communicator.h"
#include "lib/engine/generate_io.h"
#include "lib/engine/model_run.h"
#include "lib/engine/run_identity.h"
#include "lib/eval/lambada.h"
#include "lib/tokenizer/model_tokenizer.h"
#include "lib/model/model_dir.h"

namespace {

struct EvalFlags {
  std::string gemm_config;
  std::string model_dir, tokenizer_dir, data, output, summary_json, device = "cpu", dtype;  // "": device default
  int64_t batch_size = 16, max_examples = 0;
  int threads = 0;
  int int8_mode = 0;
  bool per_token = false, per_channel = false, int8_lm_head = false;
  ftx::cmd::WeightOnlyFlags weight_only;
  bool int8_kv_cache = false;
  bool fp8 = false, fp8_kv_cache = false;
  bool quiet = false, force = false, resume = false, max_examples_given = false;
  ftx::cmd::PromptFlags prompt;
  ftx::cmd::ParallelFlags parallel;
};

// --data, else the copy installed with ftx (share/ftx), else the source tree's data/.
std::string default_data_path() { return ftx::cmd::default_lambada_path(); }

int run_eval(const EvalFlags& f) {
  ftx::cmd::check_range("--batch-size", f.batch_size, 1, ftx::kMaxBatchSize);
  if (f.max_examples_given) ftx::cmd::check_range("--max-examples", f.max_examples, 1, INT64_MAX);  // 0 is not "all"
  ftx::cmd::check_range("--threads", f.threads, 0, ftx::cmd::kMaxThreads);
  ftx::cmd::check_range("--tensor-para-size", f.parallel.tensor_para_size, 0, ftx::cmd::kMaxRanks);
  ftx::cmd::check_range("--pipeline-para-size", f.parallel.pipeline_para_size, 0, ftx::cmd::kMaxRanks);
  ftx::cmd::check_distinct_files("--data", f.data, "--output", f.output);
  ftx::cmd::check_distinct_files("--data", f.data, "--summary-json", f.summary_json);
  ftx::cmd::check_distinct_files("--output", f.output, "--summary-json", f.summary_json);
  if (f.resume && f.force) throw ftx::UsageError("--resume continues an interrupted run, --force starts over: give one");
  if (f.resume && f.output.empty()) throw ftx::UsageError("--resume continues the --output of an interrupted run: give --output");
  ftx::cmd::StopOnSignal stop_signal;
  ftx::RuntimeOptions ro{f.device, f.threads, f.model_dir,
                         f.gemm_config.empty() ? "" : ftx::spool_input(f.gemm_config, "--gemm-config"),
                         ftx::cmd::model_dtype(f.device, f.dtype), f.int8_mode};
  ro.per_token = f.per_token;
  ro.per_channel = f.per_channel;
  ro.int8_lm_head = f.int8_lm_head;
  ro.int8_kv_cache = f.int8_kv_cache;
  ro.fp8 = f.fp8;
  ro.fp8_kv_cache = f.fp8_kv_cache;
  ftx::cmd::apply_weight_only_flags(f.weight_only, ro);
  ftx::cmd::apply_parallel_flags(f.parallel, ro);
  ftx::ModelRun run(ro);
  ftx::dist::Communicator& comm = run.comm();
  const bool leader = comm.rank() == 0;
  const bool tty = isatty(STDERR_FILENO) != 0;
  // Prompt learning: with --task, every example starts with all of the task's virtual tokens (or
  // its prefix prompt).
  const auto model_cfg = ftx::read_model_config(f.model_dir);
  int64_t task = -1;
  const auto prompt_tables =
      ftx::cmd::load_prompt_tables(f.prompt, f.model_dir, model_cfg, &task, comm.rank(), comm.size());
  std::vector<int32_t> virtual_prefix;  // engine ids: the task's virtual tokens, or its prefix marker
  if (task >= 0) {
    if (!prompt_tables->prefix())
      virtual_prefix = prompt_tables->virtual_ids(task, prompt_tables->tasks()[task].length, "--task");
    prompt_tables->map_ids(virtual_prefix, task, "--task");
  }

  auto tokenizer = ftx::find_model_tokenizer(f.model_dir, f.tokenizer_dir);
  if (!tokenizer)
    throw ftx::Error(f.model_dir, "no tokenizer in the model folder or its parent; pass --tokenizer DIR");
  // Standard input reaches rank 0 only: it reads the data and every rank gets the token ids.
  std::vector<ftx::LambadaExample> examples;
  std::string failure;
  if (leader) {
    try {
      const std::string data = f.data.empty() ? default_data_path() : f.data;
      for (const auto& text : ftx::read_lambada_jsonl(data, f.max_examples)) {
        examples.push_back(ftx::prepare_lambada_example(text, *tokenizer));
        auto& ex = examples.back();
        ex.full_ids.insert(ex.full_ids.begin(), virtual_prefix.begin(), virtual_prefix.end());
        ex.context_ids.insert(ex.context_ids.begin(), virtual_prefix.begin(), virtual_prefix.end());
      }
      const auto cfg = ftx::read_model_config(f.model_dir);
      const bool learned = cfg.position == ftx::PositionEmbedding::kLearned;
      ftx::check_lambada_lengths(examples, learned ? cfg.max_pos_seq_len : 0, ftx::input_display_name(data));
    } catch (const ftx::Error& e) {
      failure = e.what();
    }
  }
  if (!comm.all_true(failure.empty())) throw ftx::Error(failure.empty() ? "rank 0 could not read the data" : failure);
  ftx::broadcast_lambada_examples(comm, examples);

  // The summary of a resumed run counts the results it already has.
  ftx::LambadaSummary earlier;
  std::unique_ptr<ftx::ResultJournal> journal;
  run.load("another rank failed to start (see its error)", [&] {
    if (leader && !f.output.empty()) {
      nlohmann::ordered_json identity = ftx::run_identity(f.model_dir, ro, run.layout());
      identity["examples"] = examples.size();
      journal =
          std::make_unique<ftx::ResultJournal>(f.output, ftx::ResultJournal::Options{f.force, f.resume, identity.dump()});
      journal->for_each_resumed([&](int64_t i, const std::string& line) {
        const std::string where = journal->partial_path() + ": line " + std::to_string(i + 1);
        const ftx::LambadaResult r = ftx::lambada_result_from_json(line, where);
        if (i >= static_cast<int64_t>(examples.size()) || r.index != i ||
            journal->fingerprint(i) != ftx::lambada_fingerprint(i, examples[static_cast<size_t>(i)]))
          throw ftx::Error(where, "does not match example " + std::to_string(i + 1) +
                                      " of the data: the data changed; --force starts over");
        earlier.add(r);
      });
    }
  });
  int64_t first = leader && journal ? journal->resumed() : 0;
  comm.broadcast(&first, sizeof first, 0);
  ftx::EngineOptions eo;
  eo.prompts = prompt_tables.get();
  ftx::Engine& engine = run.start_engine(eo);

  auto on_result = [&](const ftx::LambadaResult& r) {
    if (journal) journal->append(ftx::lambada_result_json(r), ftx::lambada_fingerprint(r.index, examples[r.index]));
  };
  auto progress = [&](int64_t done, int64_t total) {
    if (f.quiet) return;
    std::fprintf(stderr, "%seval-lambada: %lld/%lld examples%s", tty ? "\r" : "", static_cast<long long>(done),
                 static_cast<long long>(total), tty && done < total ? "" : "\n");
  };
  bool stopped = false;
  ftx::LambadaSummary s = ftx::evaluate_lambada(engine, comm, examples, f.batch_size, on_result, progress, first,
                                                [&] { return stop_signal.requested(); }, &stopped);
  if (stopped) return stop_signal.report(journal.get());
  if (!leader) return 0;
  if (journal) journal->finish();
  const double seconds = s.seconds;
  const int64_t evaluated = s.examples;
  s.merge(earlier);

  // FT's two summary lines (Triton backend's evaluate_lambada.py and lambada_task_example.py).
  std::printf("[INFO] last token accuracy: %5.2f%% (total token num: %lld)\n", s.last_token_accuracy(),
              static_cast<long long>(s.examples));
  std::printf("[INFO] accuracy: %0.4f%% (total : %lld)\n", s.word_accuracy(), static_cast<long long>(s.examples));
  std::printf("[INFO] target word log-likelihood: %.4f per example, perplexity %.3f per target token\n",
              s.mean_word_logprob(), s.word_token_perplexity());
  std::printf("[INFO] %lld examples in %.2f s (%.2f examples/s)%s\n", static_cast<long long>(evaluated), seconds,
              seconds > 0 ? evaluated / seconds : 0.0,
              earlier.examples ? (", " + std::to_string(earlier.examples) + " resumed").c_str() : "");
  std::fflush(stdout);
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
    j["seconds"] = seconds;
    j["examples_per_second"] = seconds > 0 ? evaluated / seconds : 0.0;
    ftx::write_output_file(f.summary_json, j.dump(2) + "\n", f.force || f.resume);
  }
  return 0;
}

ftx::cmd::Action setup_eval(CLI::App* sub) {
  auto f = std::make_shared<EvalFlags>();
  sub->add_option("-m,--model", f->model_dir, "FT model folder (OUT/N-gpu)")->required();
  sub->add_option("--tokenizer", f->tokenizer_dir, "Tokenizer folder (default: the model folder's)");
  sub->add_option("--data", f->data,
                  "LAMBADA JSONL, one {\"text\": ...} per line (-: stdin; default: the copy ftx ships)");
  sub->add_option("--batch-size", f->batch_size, "Examples per batch (default 16)");
  auto* max_examples = sub->add_option("--max-examples", f->max_examples, "Evaluate only the first N examples");
  sub->add_option("--device", f->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--gemm-config", f->gemm_config,
                  "gemm_config.in from ftx gemm-tune (cuda; default: MODEL/gemm_config.in, else ./gemm_config.in)");
  sub->add_option("--dtype", f->dtype,
                  "Weight matrices (layers, embedding table, lm_head) and GEMM inputs: fp32, fp16 or bf16 (default: "
                  "fp16 on cuda, fp32 on cpu; half the weight bytes; fp32 accumulation; on cuda the activations are "
                  "held in it too)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "float32", "float16", "bfloat16"}));
  ftx::cmd::add_int8_mode_flag(sub, f->int8_mode, f->per_token, f->per_channel, f->int8_lm_head);
  ftx::cmd::add_weight_only_flags(sub, f->weight_only);
  ftx::cmd::add_int8_kv_cache_flag(sub, f->int8_kv_cache);
  ftx::cmd::add_fp8_flags(sub, f->fp8, f->fp8_kv_cache);
  sub->add_option("--threads", f->threads, "CPU threads (default: OMP_NUM_THREADS, else all cores)");
  ftx::cmd::add_parallel_flags(sub, f->parallel);
  sub->add_option("--output", f->output,
                  "Per-example results, one JSON line each (-: stdout); written to OUTPUT.partial as they complete");
  sub->add_option("--summary-json", f->summary_json, "Totals as one JSON object (-: stdout)");
  sub->add_flag("--force", f->force, "Replace existing outputs (or the .partial of an interrupted run)");
  sub->add_flag("--resume", f->resume, "Continue an interrupted run from OUTPUT.partial");
  sub->add_flag("-q,--quiet", f->quiet, "No progress on standard error");
  ftx::cmd::add_prompt_flags(sub, f->prompt);
  return [f, max_examples] {
    f->max_examples_given = max_examples->count() > 0;
    return run_eval(*f);
  };
}

FTX_SUBCOMMAND("eval-lambada", "LAMBADA accuracy of an FT model folder (both of FT's protocols)", setup_eval);

}  // namespace
