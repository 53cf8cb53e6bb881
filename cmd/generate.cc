// ftx generate: decode from an FT model folder (OUT/N-gpu/) on the CPU, optionally over MPI ranks
// for tensor parallelism (`mpirun -np N ftx generate ...`). Parses flags, builds the requests,
// calls lib/engine, prints results. See man/ftx-generate.1.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/dist/communicator.h"
#include "lib/engine/engine.h"
#include "lib/engine/generate_io.h"
#include "lib/engine/generator.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/runtime.h"
#include "lib/ops/backend.h"
#include "lib/tokenizer/model_tokenizer.h"

namespace {

struct GenerateFlags {
  std::string gemm_config;
  std::string model_dir, tokenizer_dir, input_ids, prompts, output;
  int64_t max_new_tokens = 0, batch_size = 0, max_seq_len = 0;
  int64_t top_k = 0;
  double top_p = 0.0, temperature = 1.0, repetition_penalty = 1.0, presence_penalty = 0.0, len_penalty = 0.0;
  int64_t min_length = 0, beam_width = 1;
  double diversity_rate = 0.0;
  uint64_t seed = 0;
  int64_t start_id = -1, end_id = -1;
  std::string stop_words, bad_words;
  bool log_probs = false, cum_log_probs = false, context_embeddings = false, stream = false, quiet = false;
  std::string device = "cpu", dtype = "fp32";
  int threads = 0;
};

int run_generate(const GenerateFlags& f) {
  if (f.input_ids.empty() == f.prompts.empty())
    throw ftx::UsageError("give exactly one of --input-ids FILE.csv and --prompts FILE");
  if (f.max_new_tokens < 1) throw ftx::UsageError("--max-new-tokens must be at least 1");
  ftx::Runtime rt =
      ftx::make_runtime({f.device, f.threads, f.model_dir, f.gemm_config, ftx::dtype_from_name(f.dtype)});
  auto& backend = rt.backend;
  auto& comm = rt.comm;
  const bool leader = comm->rank() == 0;

  const auto cfg = ftx::ModelConfig::from_ini(ftx::IniFile::read(f.model_dir + "/config.ini"));
  auto tokenizer = ftx::find_model_tokenizer(f.model_dir, f.tokenizer_dir);

  // Requests.
  std::vector<std::vector<int32_t>> prompts;
  std::string origin;
  if (!f.input_ids.empty()) {
    prompts = ftx::read_start_ids_csv(f.input_ids);
    origin = f.input_ids;
  } else {
    if (!tokenizer)
      throw ftx::Error(f.model_dir, "--prompts needs a tokenizer: none found in the model folder; pass --tokenizer DIR");
    for (const auto& text : ftx::read_text_prompts(f.prompts)) prompts.push_back(tokenizer->encode(text));
    origin = f.prompts;
  }
  // FT semantics: a request with no input starts from start_id (only when --start-id is given).
  if (f.start_id >= 0)
    for (auto& p : prompts)
      if (p.empty()) p.push_back(static_cast<int32_t>(f.start_id));
  const bool learned_positions = cfg.position == ftx::PositionEmbedding::kLearned ||
                                 cfg.position == ftx::PositionEmbedding::kSinusoidal;
  ftx::check_prompts(prompts, origin, cfg.vocab_size, f.max_new_tokens,
                     learned_positions ? cfg.max_pos_seq_len : 0);

  ftx::SamplingConfig s;
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
  if (!f.stop_words.empty() || !f.bad_words.empty()) {
    if (!tokenizer) throw ftx::Error(f.model_dir, "--stop-words/--bad-words need a tokenizer; pass --tokenizer DIR");
    if (!f.stop_words.empty()) s.stop_words = ftx::parse_word_list(f.stop_words, *tokenizer);
    if (!f.bad_words.empty()) s.bad_words = ftx::parse_word_list(f.bad_words, *tokenizer);
  }
  if (f.beam_width < 1) throw ftx::UsageError("--beam-width must be at least 1");
  std::vector<ftx::DecodeRequest> requests;
  for (auto& p : prompts) requests.push_back({std::move(p), f.max_new_tokens, s});

  // Model and engine. A rank that fails must not leave the others waiting in a collective: every
  // rank learns whether all loaded (and whether rank 0 could create the output) before going on.
  ftx::ModelWeights weights;
  std::string load_error;
  try {
    weights = ftx::ModelWeights::load(f.model_dir, comm->rank(), comm->size(), *backend);
  } catch (const ftx::Error& e) {
    load_error = e.what();
  }
  const std::string tmp = f.output + ".tmp";
  std::ofstream out;
  if (leader && load_error.empty()) {
    out.open(tmp, std::ios::binary | std::ios::trunc);
    if (!out) load_error = f.output + ": cannot create output: " + std::strerror(errno);
  }
  if (!comm->all_true(load_error.empty())) {
    if (leader && out.is_open()) {
      out.close();
      std::remove(tmp.c_str());
    }
    throw ftx::Error(load_error.empty() ? "another rank failed to load the model (see its error)" : load_error);
  }
  ftx::Engine engine(weights, *backend, *comm);
  ftx::GenerateOptions go;
  go.batch_size = f.batch_size;
  go.max_seq_len = f.max_seq_len;
  go.context_embeddings = f.context_embeddings;
  ftx::Generator generator(engine, *comm, go);

  ftx::StreamCallback on_token;
  if (f.stream && leader)
    on_token = [&](const ftx::StreamEvent& ev) {
      std::cout << ftx::stream_json(ev, tokenizer.get()) << '\n' << std::flush;
    };
  std::vector<ftx::GenerationOutput> results;
  try {
    results = generator.run(requests, on_token);
  } catch (...) {
    if (leader) std::remove(tmp.c_str());
    throw;
  }
  if (!leader) return 0;

  ftx::ResultFormat fmt;
  fmt.end_id = s.end_id;
  fmt.beam_width = f.beam_width;
  fmt.log_probs = f.log_probs;
  fmt.cum_log_probs = f.cum_log_probs;
  fmt.context_embedding = f.context_embeddings;
  fmt.tokenizer = tokenizer.get();
  for (size_t i = 0; i < results.size(); ++i) out << ftx::result_json(static_cast<int64_t>(i), results[i], fmt) << '\n';
  out.close();
  if (!out) throw ftx::Error(f.output, "write failed");
  if (std::rename(tmp.c_str(), f.output.c_str()) != 0)
    throw ftx::Error(f.output, std::string("cannot rename ") + tmp + ": " + std::strerror(errno));

  if (!f.quiet) {
    const auto& st = generator.stats();
    std::fprintf(stderr,
                 "ftx generate: %zu prompts (%lld prompt tokens), %lld new tokens in %.3f s: %.2f tokens/s; "
                 "time to first token %.1f ms; prefill %.1f ms; %lld batch(es); %s, %d rank(s)\n",
                 results.size(), static_cast<long long>(st.prompt_tokens),
                 static_cast<long long>(st.generated_tokens), st.total_s,
                 st.total_s > 0 ? st.generated_tokens / st.total_s : 0.0, st.first_token_s * 1e3,
                 st.prefill_s * 1e3, static_cast<long long>(st.batches), backend->name().c_str(), comm->size());
  }
  return 0;
}

ftx::cmd::Action setup_generate(CLI::App* sub) {
  auto f = std::make_shared<GenerateFlags>();
  sub->add_option("-m,--model", f->model_dir, "FT model folder (OUT/N-gpu) with config.ini and .bin files")->required();
  sub->add_option("--tokenizer", f->tokenizer_dir, "Tokenizer folder or .model file (default: the model folder's)");
  sub->add_option("--input-ids", f->input_ids, "FT start_ids CSV: one prompt of comma-separated ids per line");
  sub->add_option("--prompts", f->prompts, "Text prompts: one per line, or JSON lines with \"text\"");
  sub->add_option("--max-new-tokens", f->max_new_tokens, "Tokens to generate per prompt")->required();
  sub->add_option("--output", f->output, "Results, one JSON line per prompt in input order")->required();
  sub->add_option("--batch-size", f->batch_size, "Prompts per batch (default: all)");
  sub->add_option("--max-seq-len", f->max_seq_len, "KV cache length per row (default: longest prompt + max new tokens)");
  sub->add_option("--top-k", f->top_k, "Top-k sampling (0 with top-p 0: greedy)");
  sub->add_option("--top-p", f->top_p, "Top-p (nucleus) sampling");
  sub->add_option("--temperature", f->temperature, "Logit temperature");
  sub->add_option("--repetition-penalty", f->repetition_penalty, "Repetition penalty (1.0: off)");
  sub->add_option("--presence-penalty", f->presence_penalty, "Presence penalty (0.0: off)");
  sub->add_option("--len-penalty", f->len_penalty, "Beam search length penalty");
  sub->add_option("--min-length", f->min_length, "Ban end_id until this many tokens are generated");
  sub->add_option("--beam-width", f->beam_width, "Beam search width (1: sampling)");
  sub->add_option("--beam-search-diversity-rate", f->diversity_rate, "Diverse beam search rate");
  sub->add_option("--seed", f->seed, "Random seed (every prompt uses it)");
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
  sub->add_option("--threads", f->threads, "CPU threads (default: OMP_NUM_THREADS, else all cores)");
  sub->add_flag("--quiet", f->quiet, "No summary on standard error");
  return [f] { return run_generate(*f); };
}

FTX_SUBCOMMAND("generate", "Generate text from an FT model folder (CPU; tensor parallel under mpirun)", setup_generate);

}  // namespace
