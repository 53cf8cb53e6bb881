// ftx eval-summarize: summarization ROUGE of an FT model folder as TensorRT-LLM's summarize.py
// measures it (lib/eval/summarize.h, lib/eval/rouge.h), decoded by the scheduler with generate's
// flags, on the CPU or a GPU, under mpirun for TP/PP. See man/ftx-eval-summarize.1.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "cmd/batch_job_flags.h"
#include "cmd/decoding_flags.h"
#include "cmd/flag_checks.h"
#include "cmd/run_control.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/input_file.h"
#include "formats/output_file.h"
#include "lib/dist/communicator.h"
#include "lib/engine/generate_io.h"
#include "lib/engine/model_run.h"
#include "lib/engine/run_identity.h"
#include "lib/eval/summarize.h"
#include "lib/model/model_dir.h"
#include "lib/tokenizer/model_tokenizer.h"

namespace {

struct SummarizeFlags {
  ftx::cmd::DecodingFlags d;
  std::string data, input_key = "article", output_key = "highlights";
  ftx::cmd::BatchJobFlags job;
  int64_t max_examples = 0, max_input_length = 923;
  double rouge1_threshold = 0;
  bool threshold_given = false, max_examples_given = false, quiet = false;
};

int run_summarize(SummarizeFlags& f) {
  ftx::cmd::DecodingFlags& d = f.d;
  ftx::cmd::check_decoding_flags(d);
  ftx::cmd::check_seed_flag(d, false);
  ftx::cmd::check_range("--batch-size", f.job.batch_size, 1, ftx::kMaxBatchSize);
  ftx::cmd::check_range("--max-input-length", f.max_input_length, 1, ftx::cmd::kMaxFlagCount);
  if (f.max_examples_given) ftx::cmd::check_range("--max-examples", f.max_examples, 1, INT64_MAX);  // 0 is not "all"
  if (f.threshold_given) ftx::cmd::check_range("--rouge1-threshold", f.rouge1_threshold, -1e300, 1e300);
  if (f.input_key.empty() || f.output_key.empty())
    throw ftx::UsageError("--input-key and --output-key cannot be empty");
  ftx::cmd::check_distinct_files("--data", f.data, "--output", f.job.output);
  if (f.job.resume && f.job.force) throw ftx::UsageError("--resume continues an interrupted run, --force starts over: give one");

  const auto cfg = ftx::read_model_config(d.model_dir);
  auto tokenizer = ftx::find_model_tokenizer(d.model_dir, d.tokenizer_dir);
  if (!tokenizer) throw ftx::Error(d.model_dir, "no tokenizer in the model folder or its parent; pass --tokenizer DIR");
  const ftx::RequestDefaults defaults = ftx::cmd::request_defaults(d, cfg, tokenizer.get());
  ftx::cmd::StopOnSignal stop_signal;

  const ftx::RuntimeOptions runtime = ftx::cmd::runtime_options(d);
  ftx::ModelRun run(runtime);
  ftx::dist::Communicator& comm = run.comm();
  const bool leader = comm.rank() == 0;
  const std::string data_name = ftx::input_display_name(f.data);

  // Rank 0 reads the data (standard input reaches it alone) and makes every request; the other ranks
  // follow the scheduler's broadcasts.
  std::vector<ftx::SummarizeExample> examples;
  std::unique_ptr<ftx::VectorSource> source;
  std::unique_ptr<ftx::ResultJournal> journal;
  run.load("another rank failed to start (see its error)", [&] {
    if (!leader) return;
    examples = ftx::read_summarize_jsonl(f.data, f.input_key, f.output_key, f.max_examples);
    const bool learned = cfg.position == ftx::PositionEmbedding::kLearned ||
                         cfg.position == ftx::PositionEmbedding::kSinusoidal;
    const ftx::PromptLimits limits{cfg.vocab_size, learned ? cfg.max_pos_seq_len : 0, cfg.sliding_window,
                                   d.memory_len, cfg.rope_scaling};
    std::vector<ftx::Request> requests;
    requests.reserve(examples.size());
    for (size_t i = 0; i < examples.size(); ++i) {
      ftx::Request r;
      r.index = static_cast<int64_t>(i);
      r.decode.input_ids = ftx::summarize_prompt_ids(examples[i].article, *tokenizer, f.max_input_length);
      r.decode.max_new_tokens = defaults.max_new_tokens;
      r.decode.sampling = defaults.sampling;
      r.output = defaults.output;
      ftx::check_prompt_request(r, limits, data_name + ": example " + std::to_string(i + 1));
      // The reference is part of what a kept result stands for.
      const std::string& ref = examples[i].reference;
      r.fingerprint = ftx::fingerprint64(ref.data(), ref.size(), ftx::request_fingerprint(r));
      requests.push_back(std::move(r));
    }
    source = std::make_unique<ftx::VectorSource>(std::move(requests));
    nlohmann::ordered_json identity = ftx::run_identity(d.model_dir, runtime, run.layout());
    identity["memory_len"] = d.memory_len;
    identity["summarize"] = true;
    journal =
        std::make_unique<ftx::ResultJournal>(f.job.output, ftx::ResultJournal::Options{f.job.force, f.job.resume, identity.dump()});
  });

  run.start_engine(ftx::cmd::engine_options(d, nullptr));
  ftx::SchedulerOptions so;
  so.batch_size = f.job.batch_size;
  so.continuous = f.job.batching == "continuous";
  so.session_len = d.session_len;
  so.memory_len = d.memory_len;
  ftx::Scheduler& scheduler = run.start_scheduler(so);

  // --resume: the kept results are checked against their requests and count in the means.
  ftx::SummarizeTotals totals;
  std::string failure;
  if (leader) {
    try {
      ftx::skip_resumed(*source, *journal, data_name);
      journal->for_each_resumed([&](int64_t i, const std::string& line) {
        const std::string where = journal->partial_path() + ": line " + std::to_string(i + 1);
        const ftx::SummarizeResult r = ftx::summarize_result_from_json(line, where);
        if (r.index != i)
          throw ftx::Error(where, "holds the result of example " + std::to_string(r.index + 1) + ", not of example " +
                                      std::to_string(i + 1) + "; --force starts over");
        totals.add(r.rouge);
      });
    } catch (const ftx::Error& e) {
      failure = e.what();
    }
  }
  if (!comm.all_true(failure.empty())) throw ftx::Error(failure.empty() ? "rank 0 could not resume" : failure);
  const int64_t resumed = leader ? journal->resumed() : 0;

  const bool tty = isatty(STDERR_FILENO) != 0;
  int64_t failed = 0;  // results whose logits went non-finite: written with "error", the run fails
  std::string first_failure;
  std::unique_ptr<ftx::OrderedResults> ordered;
  if (leader)
    ordered = std::make_unique<ftx::OrderedResults>(resumed, [&](ftx::GenerationOutput&& out) {
      ftx::SummarizeResult r;
      r.index = out.index;
      if (!out.result.beams.empty())
        r.summary = ftx::result_text(*tokenizer, out.result.beams.front().output_ids, out.output.end_id);
      r.reference = examples[static_cast<size_t>(out.index)].reference;
      r.rouge = ftx::rouge_scores(r.reference, r.summary);
      r.error = ftx::result_error(out);
      if (!r.error.empty() && failed++ == 0) first_failure = r.error;
      totals.add(r.rouge);
      journal->append(ftx::summarize_result_json(r), out.fingerprint);
      if (!f.quiet) {
        const auto done = static_cast<long long>(journal->records());
        const auto total = static_cast<long long>(examples.size());
        std::fprintf(stderr, "%seval-summarize: %lld/%lld examples%s", tty ? "\r" : "", done, total,
                     tty && done < total ? "" : "\n");
      }
    });
  if (auto code = ftx::cmd::run_to_journal(scheduler, source.get(), ordered.get(), nullptr, stop_signal, journal.get(),
                                           leader, ""))
    return *code;

  // summarize.py's lines (its logger's "  rouge1: 21.86..."): the means x 100. Standard error when
  // the results go to standard output.
  std::FILE* report = f.job.output == "-" ? stderr : stdout;
  std::fputs(totals.report().c_str(), report);
  const auto& st = scheduler.stats();
  std::fprintf(report, "[INFO] %lld examples (%lld new tokens in %.2f s)%s\n", static_cast<long long>(totals.examples),
               static_cast<long long>(st.generated_tokens), st.total_s,
               resumed ? (", " + std::to_string(resumed) + " resumed").c_str() : "");
  std::fflush(report);
  if (failed > 0) return ftx::cmd::report_failed_results(failed, first_failure, f.job.output);
  if (f.threshold_given && !totals.passes(f.rouge1_threshold)) {
    std::fprintf(stderr, "ftx: error: %s\n", totals.threshold_failure(f.rouge1_threshold).c_str());
    return 1;
  }
  return 0;
}

ftx::cmd::Action setup_summarize(CLI::App* sub) {
  auto f = std::make_shared<SummarizeFlags>();
  f->d.max_new_tokens = 100;  // summarize.py's --output_len
  ftx::cmd::add_decoding_flags(sub, f->d, false);
  sub->get_option("--max-new-tokens")
      ->description("Tokens generated per summary at most (default 100, summarize.py's --output_len)");
  sub->add_option("--data", f->data,
                  "JSON lines, one article and its reference each (cnn_dailymail's \"article\" and \"highlights\"; "
                  "-: stdin)")
      ->required();
  sub->add_option("--input-key", f->input_key,
                  "The article's field (summarize.py's dataset_input_key; default article)");
  sub->add_option("--output-key", f->output_key,
                  "The reference summary's field (summarize.py's dataset_output_key; default highlights)");
  auto* max_examples = sub->add_option("--max-examples", f->max_examples, "Evaluate only the first N examples");
  sub->add_option("--max-input-length", f->max_input_length,
                  "Prompt ids kept, the first N (summarize.py's --max_input_length; default 923)");
  auto* threshold = sub->add_option("--rouge1-threshold", f->rouge1_threshold,
                                    "Exit 1 unless the mean ROUGE-1 x 100 is above T (summarize.py's "
                                    "--check_accuracy --tensorrt_llm_rouge1_threshold T)");
  ftx::cmd::add_batch_job_flags(sub, f->job, "Per-example results, one JSON line each", "model, data, options");
  sub->add_flag("-q,--quiet", f->quiet, "No progress on standard error");
  return [f, max_examples, threshold] {
    f->max_examples_given = max_examples->count() > 0;
    f->threshold_given = threshold->count() > 0;
    return run_summarize(*f);
  };
}

FTX_SUBCOMMAND("eval-summarize",
               "Summarization ROUGE of an FT model folder (TensorRT-LLM's summarize.py on cnn_dailymail)",
               setup_summarize);

}  // namespace
