// ftx generate: decode from an FT model folder (OUT/N-gpu/) on the CPU or a GPU, optionally over
// MPI ranks for tensor parallelism (`mpirun -np N ftx generate ...`). Parses flags, streams the
// prompts through lib/engine's Scheduler, writes results as they complete. See man/ftx-generate.1.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmd/batch_job_flags.h"
#include "cmd/decoding_flags.h"
#include "cmd/flag_checks.h"
#include "cmd/prompt_flags.h"
#include "cmd/run_control.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/input_file.h"
#include "formats/ft_dir.h"
#include "formats/output_file.h"
#include "lib/dist/communicator.h"
#include "lib/engine/generate_io.h"
#include "lib/engine/model_run.h"
#include "lib/engine/run_identity.h"
#include "lib/tokenizer/model_tokenizer.h"
#include "lib/model/model_dir.h"

namespace {

struct GenerateFlags {
  ftx::cmd::DecodingFlags d;
  ftx::cmd::PromptFlags prompt;
  std::string input_ids, prompts;
  ftx::cmd::BatchJobFlags job;
  std::vector<std::string> prompt_texts;  // --prompt, repeatable
  int64_t max_seq_len = 0;
  bool context_embeddings = false, stream = false, quiet = false;
};

int run_generate(GenerateFlags& f) {
  ftx::cmd::DecodingFlags& d = f.d;
  if (!f.input_ids.empty() && !f.prompts.empty())
    throw ftx::UsageError("give one of --input-ids FILE.csv and --prompts FILE, not both");
  if (f.input_ids.empty() && f.prompts.empty() && f.prompt_texts.empty())
    throw ftx::UsageError("give --prompt TEXT, --prompts FILE or --input-ids FILE.csv");
  // The input as errors, warnings and --resume name it: the file, or the --prompt texts alone.
  const std::string input = !f.input_ids.empty() ? f.input_ids : f.prompts;
  const std::string input_name = input.empty() ? "--prompt" : ftx::input_display_name(input);
  if (f.job.output == "-" && f.stream) throw ftx::UsageError("--stream and --output - would both write to standard output");
  ftx::cmd::check_decoding_flags(d);
  ftx::cmd::check_seed_flag(d, !f.prompts.empty());
  if (f.job.batch_size < 1 || f.job.batch_size > ftx::kMaxBatchSize)
    throw ftx::UsageError("--batch-size " + std::to_string(f.job.batch_size) + " outside [1, " +
                          std::to_string(ftx::kMaxBatchSize) + "]");
  ftx::cmd::check_range("--max-seq-len", f.max_seq_len, 0, ftx::cmd::kMaxFlagCount);
  if (!input.empty())
    ftx::cmd::check_distinct_files(f.prompts.empty() ? "--input-ids" : "--prompts", input, "--output", f.job.output);
  if (f.job.resume && f.job.force) throw ftx::UsageError("--resume continues an interrupted run, --force starts over: give one");
  if (d.memory_len > 0 && f.max_seq_len > 0)
    throw ftx::UsageError("--memory-len sets the KV cache length; --max-seq-len cannot be given with it");

  const auto cfg = ftx::read_model_config(d.model_dir);
  auto tokenizer = ftx::find_model_tokenizer(d.model_dir, d.tokenizer_dir);
  if (!tokenizer && !f.prompt_texts.empty())
    throw ftx::UsageError("--prompt TEXT needs a tokenizer: none found in " + d.model_dir + "; pass --tokenizer DIR");
  if (!tokenizer && d.echo_prompt)
    throw ftx::UsageError("--echo-prompt needs a tokenizer (for input_prompt and generated_text): none found in " +
                          d.model_dir + "; pass --tokenizer DIR");
  ftx::RequestDefaults defaults = ftx::cmd::request_defaults(d, cfg, tokenizer.get());
  defaults.output.context_embedding = f.context_embeddings;  // a JSON line's is_return_context_embeddings overrides it
  ftx::cmd::StopOnSignal stop_signal;

  const ftx::RuntimeOptions runtime = ftx::cmd::runtime_options(d);
  ftx::ModelRun run(runtime);
  ftx::dist::Communicator& comm = run.comm();
  int64_t default_task = -1;
  const auto prompt_tables =
      ftx::cmd::load_prompt_tables(f.prompt, d.model_dir, cfg, &default_task, comm.rank(), comm.size());
  const bool leader = comm.rank() == 0;

  // Model, input and output: every rank learns whether all loaded (and whether rank 0 could open
  // its files) before going on.
  std::unique_ptr<ftx::PromptReader> reader;
  std::unique_ptr<ftx::ResultJournal> journal;
  ftx::ResultFormat fmt;
  fmt.tokenizer = tokenizer.get();
  run.load("another rank failed to start (see its error)", [&] {
    if (leader) {
      const bool learned = cfg.position == ftx::PositionEmbedding::kLearned ||
                           cfg.position == ftx::PositionEmbedding::kSinusoidal;
      ftx::PromptLimits limits{cfg.vocab_size, learned ? cfg.max_pos_seq_len : 0, cfg.sliding_window, d.memory_len,
                               cfg.rope_scaling, cfg.hidden()};
      const bool csv = !f.input_ids.empty();
      reader = std::make_unique<ftx::PromptReader>(input, csv ? ftx::PromptFormat::kStartIdsCsv : ftx::PromptFormat::kText,
                                                   tokenizer.get(), defaults, limits);
      reader->add_prompts(f.prompt_texts);
      reader->set_prompt_tables(prompt_tables.get(), default_task);
      // What must not change between a run and its --resume besides each request (which its
      // fingerprint covers): the model and arithmetic (run_identity.h), the circular cache, and the
      // shape of a result line.
      nlohmann::ordered_json identity = ftx::run_identity(d.model_dir, runtime, run.layout());
      identity["memory_len"] = d.memory_len;
      identity["text"] = tokenizer != nullptr;
      identity["context_embeddings"] = f.context_embeddings;
      if (!f.prompt.table.empty()) identity["prompt_table"] = ftx::input_display_name(f.prompt.table);
      journal = std::make_unique<ftx::ResultJournal>(f.job.output,
                                                     ftx::ResultJournal::Options{f.job.force, f.job.resume, identity.dump()});
    }
  });

  ftx::Engine& engine = run.start_engine(ftx::cmd::engine_options(d, prompt_tables.get()));
  ftx::SchedulerOptions so;
  so.batch_size = f.job.batch_size;
  so.max_seq_len = f.max_seq_len;
  so.continuous = f.job.batching == "continuous";
  so.session_len = d.session_len;
  so.memory_len = d.memory_len;
  ftx::Scheduler& scheduler = run.start_scheduler(so);
  // --resume: the prompts whose results are kept are read again, checked, and their sessions'
  // contexts restored.
  std::string failure;
  if (leader) {
    try {
      ftx::skip_resumed(*reader, *journal, input_name, &scheduler);
    } catch (const ftx::Error& e) {
      failure = e.what();
    }
  }
  if (!comm.all_true(failure.empty())) throw ftx::Error(failure.empty() ? "rank 0 could not resume" : failure);

  ftx::StreamCallback on_token;
  if (f.stream && leader)
    on_token = [&](const ftx::StreamEvent& ev) {
      std::cout << ftx::stream_json(ev, tokenizer.get()) << '\n' << std::flush;
    };
  std::unique_ptr<ftx::OrderedResults> ordered;
  int64_t failed = 0;  // results that carry an error (non-finite logits); the first one's message
  std::string first_failure;
  if (leader)
    ordered = std::make_unique<ftx::OrderedResults>(journal->resumed(), [&](ftx::GenerationOutput&& out) {
      if (std::string e = ftx::result_error(out); !e.empty() && failed++ == 0) first_failure = std::move(e);
      journal->append(ftx::result_json(out, fmt), out.fingerprint);
    });
  if (auto code = ftx::cmd::run_to_journal(scheduler, reader.get(), ordered.get(), on_token, stop_signal, journal.get(),
                                           leader, "correct that line and "))
    return *code;

  if (scheduler.stats().requests == 0 && journal->resumed() == 0) {
    // Not an error (an empty batch is a batch), but never a summary of nothing.
    std::fprintf(stderr, "ftx: warning: %s has no prompts; %s holds no results\n", input_name.c_str(),
                 ftx::output_display_name(f.job.output).c_str());
    return 0;
  }
  if (!f.quiet) {
    const auto& st = scheduler.stats();
    std::fprintf(stderr,
                 "ftx generate: %lld prompts (%lld prompt tokens), %lld new tokens in %.3f s: %.2f tokens/s; "
                 "time to first token %.1f ms; prefill %.1f ms in %lld admissions; %lld steps; %s batching of %lld; "
                 "%s, %d rank(s) (%s)%s; KV cache: %lld prompt tokens from the prefix cache, %lld preemptions, "
                 "peak %lld rows, %lld block copies, %.1f MiB of blocks written; workspaces %.1f MiB\n",
                 static_cast<long long>(st.requests), static_cast<long long>(st.prompt_tokens),
                 static_cast<long long>(st.generated_tokens), st.total_s,
                 st.total_s > 0 ? st.generated_tokens / st.total_s : 0.0, st.first_token_s * 1e3, st.prefill_s * 1e3,
                 static_cast<long long>(st.prefills), static_cast<long long>(st.steps), f.job.batching.c_str(),
                 static_cast<long long>(f.job.batch_size), run.backend().name().c_str(), comm.size(),
                 run.layout().describe().c_str(),
                 journal->resumed() ? (" (resumed after " + std::to_string(journal->resumed()) + ")").c_str() : "",
                 static_cast<long long>(engine.tokens_reused()), static_cast<long long>(st.preemptions),
                 static_cast<long long>(st.peak_rows), static_cast<long long>(engine.kv_cache().stats().block_copies),
                 engine.kv_bytes_touched() / 1048576.0, engine.workspace_bytes() / 1048576.0);
  }
  if (failed > 0) return ftx::cmd::report_failed_results(failed, first_failure, f.job.output);
  return 0;
}

ftx::cmd::Action setup_generate(CLI::App* sub) {
  auto f = std::make_shared<GenerateFlags>();
  ftx::cmd::add_decoding_flags(sub, f->d, true);
  ftx::cmd::add_prompt_flags(sub, f->prompt);
  sub->add_option("--prompt", f->prompt_texts,
                  "A text prompt (repeatable); these come first, in the order given, before the prompts of "
                  "--prompts or --input-ids")
      ->expected(1)
      ->take_all();
  sub->add_option("--input-ids", f->input_ids, "FT start_ids CSV: one prompt of comma-separated ids per line (-: stdin)");
  sub->add_option("--prompts", f->prompts,
                  "Text prompts: one per line, or JSON lines with \"text\" or \"ids\" and per-request parameters "
                  "(-: stdin)");
  ftx::cmd::add_batch_job_flags(sub, f->job, "Results, one JSON line per prompt", "model, prompts, options");
  sub->add_option("--max-seq-len", f->max_seq_len, "KV cache length per row (default: grows with the requests)");
  sub->add_flag("--return-log-probs", f->d.log_probs, "Add output_log_probs (and cum_log_prob)");
  sub->add_flag("--return-cum-log-probs", f->d.cum_log_probs, "Add cum_log_prob");
  sub->add_flag("--return-context-log-probs", f->d.context_log_probs,
                "Add context_log_probs: the log probability of each prompt token after the first given those "
                "before it (with --max-new-tokens 0: scoring alone)");
  sub->add_flag("--echo-prompt", f->d.echo_prompt,
                "Add input_prompt, generated_text and generated_tokens (Megatron Core's result fields)");
  sub->add_flag("--return-context-embeddings", f->context_embeddings,
                "Add context_embedding: sum of the last layer's outputs over the prompt tokens");
  sub->add_flag("--stream", f->stream, "Print one JSON line per new token on standard output as it is made");
  sub->add_flag("-q,--quiet", f->quiet, "No summary on standard error");
  return [f] { return run_generate(*f); };
}

FTX_SUBCOMMAND("generate",
               "Generate tokens from an FT model folder (CPU or CUDA; continuous batching; tensor parallel under "
               "mpirun)",
               setup_generate);

}  // namespace
