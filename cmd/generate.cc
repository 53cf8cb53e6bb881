// ftx generate: decode from an FT model folder (OUT/N-gpu/) on the CPU or a GPU, optionally over
// MPI ranks for tensor parallelism (`mpirun -np N ftx generate ...`). Parses flags, streams the
// prompts through lib/engine's Scheduler, writes results as they complete. See man/ftx-generate.1.
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cmd/run_control.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/input_file.h"
#include "formats/ft_dir.h"
#include "formats/output_file.h"
#include "lib/dist/communicator.h"
#include "lib/engine/engine.h"
#include "lib/engine/generate_io.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/runtime.h"
#include "lib/engine/scheduler.h"
#include "lib/ops/backend.h"
#include "lib/tokenizer/model_tokenizer.h"

namespace {

struct GenerateFlags {
  std::string gemm_config;
  std::string model_dir, tokenizer_dir, input_ids, prompts, output, batching = "continuous";
  int64_t max_new_tokens = 0, batch_size = 16, max_seq_len = 0, session_len = 0, memory_len = 0;
  int64_t top_k = 0;
  double top_p = 0.0, temperature = 1.0, repetition_penalty = 1.0, presence_penalty = 0.0, len_penalty = 0.0;
  int64_t min_length = 0, beam_width = 1;
  double diversity_rate = 0.0;
  uint64_t seed = 0;
  int64_t start_id = -1, end_id = -1;
  std::string stop_words, bad_words;
  bool log_probs = false, cum_log_probs = false, context_embeddings = false, stream = false, quiet = false;
  bool force = false, resume = false;
  std::string device = "cpu", dtype = "fp32";
  int threads = 0;
};

// The flags' values as the defaults of every request, checked with FT's rules (usage errors naming
// the flag).
ftx::RequestDefaults request_defaults(const GenerateFlags& f, const ftx::ModelConfig& cfg, const ftx::Tokenizer* tok) {
  ftx::RequestDefaults d;
  d.max_new_tokens = f.max_new_tokens;
  ftx::SamplingConfig& s = d.sampling;
  s.top_k = f.top_k;
  s.top_p = f.top_p;
  s.temperature = f.temperature;
  s.repetition_penalty = f.repetition_penalty;
  s.presence_penalty = f.presence_penalty;
  s.len_penalty = f.len_penalty;
  s.min_length = f.min_length;
  s.beam_width = f.beam_width;
  s.beam_search_diversity_rate = f.diversity_rate;
  s.seed = f.seed;
  s.end_id = static_cast<int32_t>(f.end_id >= 0 ? f.end_id : cfg.end_id);
  s.return_log_probs = f.log_probs || f.cum_log_probs;
  d.output.log_probs = f.log_probs;
  d.output.cum_log_probs = f.cum_log_probs;
  d.output.end_id = s.end_id;
  if (!f.stop_words.empty() || !f.bad_words.empty()) {
    if (!tok) throw ftx::Error(f.model_dir, "--stop-words/--bad-words need a tokenizer; pass --tokenizer DIR");
    if (!f.stop_words.empty()) s.stop_words = ftx::parse_word_list(f.stop_words, *tok);
    if (!f.bad_words.empty()) s.bad_words = ftx::parse_word_list(f.bad_words, *tok);
  }
  ftx::DecodeRequest probe{{0}, f.max_new_tokens, s};
  ftx::cmd::check_flags_as_request(probe, cfg.vocab_size);
  if (f.start_id >= cfg.vocab_size)
    throw ftx::UsageError("--start-id " + std::to_string(f.start_id) + " is outside the vocabulary [0, " +
                          std::to_string(cfg.vocab_size) + ")");
  d.start_id = static_cast<int32_t>(f.start_id);
  if (s.end_id >= cfg.vocab_size)
    std::fprintf(stderr,
                 "ftx: warning: %s: end_id %d is outside the vocabulary [0, %lld): generation will not stop on it "
                 "(FT's behaviour); --end-id sets another\n",
                 (f.end_id >= 0 ? std::string("--end-id") : f.model_dir + "/config.ini").c_str(), s.end_id,
                 static_cast<long long>(cfg.vocab_size));
  return d;
}

int run_generate(const GenerateFlags& f) {
  if (f.input_ids.empty() == f.prompts.empty())
    throw ftx::UsageError("give exactly one of --input-ids FILE.csv and --prompts FILE");
  if (f.output == "-" && f.stream) throw ftx::UsageError("--stream and --output - would both write to standard output");
  if (f.max_new_tokens < 1) throw ftx::UsageError("--max-new-tokens must be at least 1");
  if (f.batch_size < 1 || f.batch_size > ftx::kMaxBatchSize)
    throw ftx::UsageError("--batch-size " + std::to_string(f.batch_size) + " outside [1, " +
                          std::to_string(ftx::kMaxBatchSize) + "]");
  if (f.max_seq_len < 0) throw ftx::UsageError("--max-seq-len " + std::to_string(f.max_seq_len) + " is negative");
  if (f.threads < 0) throw ftx::UsageError("--threads " + std::to_string(f.threads) + " must be at least 1 (0: all cores)");
  if (f.resume && f.force) throw ftx::UsageError("--resume continues an interrupted run, --force starts over: give one");
  if (f.session_len < 0) throw ftx::UsageError("--session-len " + std::to_string(f.session_len) + " is negative");
  if (f.memory_len < 0) throw ftx::UsageError("--memory-len " + std::to_string(f.memory_len) + " is negative");
  if (f.memory_len > 0 && f.max_seq_len > 0)
    throw ftx::UsageError("--memory-len sets the KV cache length; --max-seq-len cannot be given with it");

  const auto cfg = ftx::ModelConfig::from_ini(ftx::IniFile::read(f.model_dir + "/config.ini"));
  auto tokenizer = ftx::find_model_tokenizer(f.model_dir, f.tokenizer_dir);
  const ftx::RequestDefaults defaults = request_defaults(f, cfg, tokenizer.get());
  // FT's interactive limits (ft-runtime §2.11): a learned position table bounds a session, and a
  // memory shorter than the session is worth a warning (older tokens drop out of attention).
  GenerateFlags g = f;
  if (cfg.position == ftx::PositionEmbedding::kLearned && g.session_len > cfg.max_pos_seq_len) {
    std::fprintf(stderr, "ftx: warning: --session-len %lld exceeds the model's max_pos_seq_len %lld; using %lld\n",
                 static_cast<long long>(g.session_len), static_cast<long long>(cfg.max_pos_seq_len),
                 static_cast<long long>(cfg.max_pos_seq_len));
    g.session_len = cfg.max_pos_seq_len;
  }
  if (g.memory_len > 0 && g.session_len > 0 && g.memory_len != g.session_len)
    std::fprintf(stderr,
                 "ftx: warning: --memory-len %lld differs from --session-len %lld: attention sees only the last %lld "
                 "tokens of a session\n",
                 static_cast<long long>(g.memory_len), static_cast<long long>(g.session_len),
                 static_cast<long long>(g.memory_len));
  ftx::cmd::StopOnSignal stop_signal;

  ftx::Runtime rt =
      ftx::make_runtime({f.device, f.threads, f.model_dir,
                         f.gemm_config.empty() ? "" : ftx::spool_input(f.gemm_config, "--gemm-config"),
                         ftx::dtype_from_name(f.dtype)});
  auto& backend = rt.backend;
  auto& comm = rt.comm;
  const bool leader = comm->rank() == 0;

  // Model, input and output. A rank that fails must not leave the others waiting in a collective:
  // every rank learns whether all loaded (and whether rank 0 could open its files) before going on.
  ftx::ModelWeights weights;
  std::unique_ptr<ftx::PromptReader> reader;
  std::unique_ptr<ftx::ResultJournal> journal;
  ftx::ResultFormat fmt;
  fmt.context_embedding = f.context_embeddings;
  fmt.tokenizer = tokenizer.get();
  std::string failure;
  try {
    weights = ftx::ModelWeights::load(f.model_dir, comm->rank(), comm->size(), *backend);
    if (leader) {
      const bool learned = cfg.position == ftx::PositionEmbedding::kLearned ||
                           cfg.position == ftx::PositionEmbedding::kSinusoidal;
      ftx::PromptLimits limits{cfg.vocab_size, learned ? cfg.max_pos_seq_len : 0};
      const bool csv = !f.input_ids.empty();
      reader = std::make_unique<ftx::PromptReader>(csv ? f.input_ids : f.prompts,
                                                   csv ? ftx::PromptFormat::kStartIdsCsv : ftx::PromptFormat::kText,
                                                   tokenizer.get(), defaults, limits);
      // What must not change between a run and its --resume besides each request (which its
      // fingerprint covers): the model and the shape of a result line.
      nlohmann::ordered_json run;
      run["model"] = ftx::model_identity(f.model_dir);
      run["text"] = tokenizer != nullptr;
      run["context_embeddings"] = f.context_embeddings;
      journal = std::make_unique<ftx::ResultJournal>(f.output,
                                                     ftx::ResultJournal::Options{f.force, f.resume, run.dump()});
    }
  } catch (const ftx::UsageError&) {
    throw;
  } catch (const ftx::Error& e) {
    failure = e.what();
  }
  if (!comm->all_true(failure.empty()))
    throw ftx::Error(failure.empty() ? "another rank failed to start (see its error)" : failure);

  ftx::Engine engine(weights, *backend, *comm, ftx::EngineOptions{f.memory_len});
  ftx::SchedulerOptions so;
  so.batch_size = f.batch_size;
  so.max_seq_len = f.max_seq_len;
  so.continuous = f.batching == "continuous";
  so.context_embeddings = f.context_embeddings;
  so.session_len = g.session_len;
  so.memory_len = f.memory_len;
  so.max_positions = cfg.position == ftx::PositionEmbedding::kLearned ? cfg.max_pos_seq_len : 0;
  ftx::Scheduler scheduler(engine, *comm, so);
  // --resume: the prompts whose results are kept are read again, checked, and their sessions'
  // contexts restored.
  if (leader) {
    try {
      ftx::skip_resumed(*reader, *journal, ftx::input_display_name(f.input_ids.empty() ? f.prompts : f.input_ids),
                        &scheduler);
    } catch (const ftx::Error& e) {
      failure = e.what();
    }
  }
  if (!comm->all_true(failure.empty())) throw ftx::Error(failure.empty() ? "rank 0 could not resume" : failure);

  ftx::StreamCallback on_token;
  if (f.stream && leader)
    on_token = [&](const ftx::StreamEvent& ev) {
      std::cout << ftx::stream_json(ev, tokenizer.get()) << '\n' << std::flush;
    };
  std::unique_ptr<ftx::OrderedResults> ordered;
  if (leader)
    ordered = std::make_unique<ftx::OrderedResults>(journal->resumed(), [&](ftx::GenerationOutput&& out) {
      journal->append(ftx::result_json(out, fmt), out.fingerprint);
    });
  const auto status = scheduler.run(
      reader.get(), [&](ftx::GenerationOutput&& out) { ordered->add(std::move(out)); }, on_token,
      [&] { return stop_signal.requested(); });
  if (status == ftx::Scheduler::Status::kStopped) return stop_signal.report(leader ? journal.get() : nullptr);
  if (!leader) return 0;
  journal->finish();

  if (!f.quiet) {
    const auto& st = scheduler.stats();
    std::fprintf(stderr,
                 "ftx generate: %lld prompts (%lld prompt tokens), %lld new tokens in %.3f s: %.2f tokens/s; "
                 "time to first token %.1f ms; prefill %.1f ms in %lld admissions; %lld steps; %s batching of %lld; "
                 "%s, %d rank(s)%s\n",
                 static_cast<long long>(st.requests), static_cast<long long>(st.prompt_tokens),
                 static_cast<long long>(st.generated_tokens), st.total_s,
                 st.total_s > 0 ? st.generated_tokens / st.total_s : 0.0, st.first_token_s * 1e3, st.prefill_s * 1e3,
                 static_cast<long long>(st.prefills), static_cast<long long>(st.steps), f.batching.c_str(),
                 static_cast<long long>(f.batch_size), backend->name().c_str(), comm->size(),
                 journal->resumed() ? (" (resumed after " + std::to_string(journal->resumed()) + ")").c_str() : "");
  }
  return 0;
}

ftx::cmd::Action setup_generate(CLI::App* sub) {
  auto f = std::make_shared<GenerateFlags>();
  sub->add_option("-m,--model", f->model_dir, "FT model folder (OUT/N-gpu) with config.ini and .bin files")->required();
  sub->add_option("--tokenizer", f->tokenizer_dir, "Tokenizer folder or .model file (default: the model folder's)");
  sub->add_option("--input-ids", f->input_ids, "FT start_ids CSV: one prompt of comma-separated ids per line (-: stdin)");
  sub->add_option("--prompts", f->prompts,
                  "Text prompts: one per line, or JSON lines with \"text\" or \"ids\" and per-request parameters "
                  "(-: stdin)");
  sub->add_option("--max-new-tokens", f->max_new_tokens, "Tokens to generate per prompt")->required();
  sub->add_option("--output", f->output,
                  "Results, one JSON line per prompt in input order (-: stdout); written to OUTPUT.partial as they "
                  "complete, renamed at the end")
      ->required();
  sub->add_flag("--force", f->force, "Replace an existing output (or the .partial of an interrupted run)");
  sub->add_flag("--resume", f->resume, "Continue an interrupted run from OUTPUT.partial (same model, prompts, options)");
  sub->add_option("--batch-size", f->batch_size, "Requests decoded together (default 16)");
  sub->add_option("--batching", f->batching,
                  "continuous (default): a finished request's rows take the next request at once; static: a batch "
                  "waits for its longest request")
      ->check(CLI::IsMember({"continuous", "static"}));
  sub->add_option("--max-seq-len", f->max_seq_len, "KV cache length per row (default: grows with the requests)");
  sub->add_option("--session-len", f->session_len,
                  "Most tokens a session (JSON lines with \"session\") may hold: context, new tokens and output");
  sub->add_option("--memory-len", f->memory_len,
                  "Circular KV cache of the last N tokens per row (FT's memory_len); positions keep counting");
  sub->add_option("--top-k", f->top_k, "Top-k sampling, 0..1024 (0 with top-p 0: greedy)");
  sub->add_option("--top-p", f->top_p, "Top-p (nucleus) sampling, 0..1");
  sub->add_option("--temperature", f->temperature, "Logit temperature (0: greedy)");
  sub->add_option("--repetition-penalty", f->repetition_penalty, "Repetition penalty (1.0: off)");
  sub->add_option("--presence-penalty", f->presence_penalty, "Presence penalty (0.0: off)");
  sub->add_option("--len-penalty", f->len_penalty, "Beam search length penalty");
  sub->add_option("--min-length", f->min_length, "Ban end_id until this many tokens are generated");
  sub->add_option("--beam-width", f->beam_width, "Beam search width, 1..64 (1: sampling)");
  sub->add_option("--beam-search-diversity-rate", f->diversity_rate, "Diverse beam search rate");
  sub->add_option("--seed", f->seed, "Random seed (every prompt uses it unless its JSON line has \"seed\")");
  sub->add_option("--start-id", f->start_id, "Id an empty prompt starts from (default: empty prompts are an error)");
  sub->add_option("--end-id", f->end_id, "End-of-sequence id (default: config.ini end_id)");
  sub->add_option("--stop-words", f->stop_words, "CSV of words that end generation (each tokenized separately)");
  sub->add_option("--bad-words", f->bad_words, "CSV of words that are never generated");
  sub->add_flag("--return-log-probs", f->log_probs, "Add output_log_probs (and cum_log_prob)");
  sub->add_flag("--return-cum-log-probs", f->cum_log_probs, "Add cum_log_prob");
  sub->add_flag("--return-context-embeddings", f->context_embeddings,
                "Add context_embedding: sum of the last layer's outputs over the prompt tokens");
  sub->add_flag("--stream", f->stream, "Print one JSON line per new token on standard output as it is made");
  sub->add_option("--device", f->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--gemm-config", f->gemm_config,
                  "gemm_config.in from ftx gemm-tune (cuda; default: MODEL/gemm_config.in, else ./gemm_config.in)");
  sub->add_option("--dtype", f->dtype,
                  "Weight matrices and GEMM inputs: fp32 (default), or fp16/bf16 with --device cuda "
                  "(fp32 accumulation, activations and KV cache)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "float32", "float16", "bfloat16"}));
  sub->add_option("--threads", f->threads, "CPU threads (default 0: OMP_NUM_THREADS, else all cores)");
  sub->add_flag("--quiet", f->quiet, "No summary on standard error");
  return [f] { return run_generate(*f); };
}

FTX_SUBCOMMAND("generate",
               "Generate tokens from an FT model folder (CPU or CUDA; continuous batching; tensor parallel under "
               "mpirun)",
               setup_generate);

}  // namespace
