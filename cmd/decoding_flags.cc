#include "cmd/decoding_flags.h"

#include <cstdio>

#include "cmd/flag_checks.h"
#include "cmd/run_control.h"
#include "formats/error.h"
#include "formats/input_file.h"

namespace ftx::cmd {

void add_decoding_flags(CLI::App* sub, DecodingFlags& f, bool max_new_tokens_required) {
  sub->add_option("-m,--model", f.model_dir, "FT model folder (OUT/N-gpu) with config.ini and .bin files")->required();
  sub->add_option("--tokenizer", f.tokenizer_dir, "Tokenizer folder or .model file (default: the model folder's)");
  auto* mnt = sub->add_option("--max-new-tokens", f.max_new_tokens, "Tokens to generate per prompt");
  if (max_new_tokens_required) mnt->required();
  sub->add_option("--top-k", f.top_k, "Top-k sampling, 0..1024 (0 with top-p 0: greedy)");
  sub->add_option("--top-p", f.top_p, "Top-p (nucleus) sampling, 0..1");
  sub->add_option("--temperature", f.temperature, "Logit temperature (0: greedy)");
  sub->add_option("--repetition-penalty", f.repetition_penalty, "Repetition penalty (1.0: off)");
  sub->add_option("--presence-penalty", f.presence_penalty,
                  "Presence penalty (0.0: off): subtracted once from the logit of every id the prompt or output holds");
  sub->add_option("--frequency-penalty", f.frequency_penalty,
                  "Frequency penalty (0.0: off): subtracted from an id's logit times its count in the prompt and "
                  "output (applied with the other two, as TensorRT-LLM: repetition, presence, then frequency)");
  sub->add_option("--top-p-decay", f.top_p_decay,
                  "Factual-nucleus sampling (top-p with --top-k 0): after each token p = max(p x decay, --top-p-min), "
                  "in (0, 1] (1: off; FT's top_p_decay)");
  sub->add_option("--top-p-min", f.top_p_min, "Lowest p --top-p-decay reaches, in (0, 1] (default 1e-6; FT's top_p_min)");
  sub->add_option("--top-p-reset-ids", f.top_p_reset_ids,
                  "Token id that restores p to --top-p after it is drawn (FT's top_p_reset_ids; default: none)");
  sub->add_option("--len-penalty", f.len_penalty, "Beam search length penalty");
  sub->add_option("--min-length", f.min_length, "Ban end_id until this many tokens are generated");
  sub->add_option("--beam-width", f.beam_width, "Beam search width, 1..64 (1: sampling)");
  sub->add_option("--beam-search-diversity-rate", f.diversity_rate, "Diverse beam search rate");
  sub->add_option("--seed", f.seed, "Random seed of sampling, top-k or top-p (generate: a JSON line's \"seed\" overrides it)")
      ->each([&f](const std::string&) { f.seed_given = true; });
  sub->add_option("--start-id", f.start_id,
                  "Id an empty prompt starts from (generate; default: an empty prompt is an error; chat skips empty lines)");
  sub->add_option("--end-id", f.end_id, "End-of-sequence id (default: config.ini end_id)");
  sub->add_option("--stop-words", f.stop_words, "CSV of words that end generation (each tokenized separately)");
  sub->add_option("--bad-words", f.bad_words, "CSV of words that are never generated");
  sub->add_option("--session-len", f.session_len,
                  "Most tokens a session may hold: its context, a round's new tokens and output");
  sub->add_option("--memory-len", f.memory_len,
                  "Circular KV cache of the last N tokens per row (FT's memory_len); positions keep counting");
  sub->add_option("--kv-cache-memory", f.kv_cache_memory,
                  "KV cache memory per rank: auto (default: room for every row of --batch-size x --beam-width to hold "
                  "its longest request, grown as needed), bytes (2G, 512M, 1073741824) or a fraction in (0, 1] of "
                  "the memory free after the weights; a fixed budget admits requests as their blocks fit and "
                  "preempts (and later recomputes) the newest when it runs out");
  sub->add_option("--tokens-per-block", f.tokens_per_block,
                  "Tokens per KV-cache block, a power of two (TensorRT-LLM's tokens_per_block; default 64)");
  sub->add_flag("--no-prefix-cache", f.no_prefix_cache,
                "Never reuse the KV-cache blocks of an earlier prompt with the same start (default: reused)");
  sub->add_option("--device", f.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--gemm-config", f.gemm_config,
                  "gemm_config.in from ftx gemm-tune (cuda; default: MODEL/gemm_config.in, else ./gemm_config.in)");
  sub->add_option("--dtype", f.dtype,
                  "Weight matrices (layers, embedding table, lm_head) and GEMM inputs: fp32, fp16 or bf16 (default: "
                  "fp16 on cuda, fp32 on cpu; half the weight bytes; fp32 accumulation; on cuda the activations and "
                  "KV cache are held in it too, on cpu both stay fp32)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "float32", "float16", "bfloat16"}));
  add_int8_mode_flag(sub, f.int8_mode, f.per_token, f.per_channel, f.int8_lm_head);
  add_weight_only_flags(sub, f.weight_only);
  add_int8_kv_cache_flag(sub, f.int8_kv_cache);
  add_fp8_flags(sub, f.fp8, f.fp8_kv_cache);
  sub->add_option("--threads", f.threads, "CPU threads (default 0: OMP_NUM_THREADS, else all cores)");
  add_parallel_flags(sub, f.parallel);
}

void add_int8_mode_flag(CLI::App* sub, int& int8_mode, bool& per_token, bool& per_channel, bool& int8_lm_head) {
  sub->add_option("--int8-mode", int8_mode,
                  "1: weight-only INT8, FT's int8_mode 1 (layer GEMM weights quantised per output column at load, "
                  "activations stay floating point); 2: SmoothQuant W8A8 from an `ftx smoothquant` folder "
                  "(int8 x int8 layer GEMMs, per-tensor scales unless --per-token/--per-channel); 0: off");
  sub->add_flag("--per-token", per_token,
                "--int8-mode 2: quantise each GEMM input row with its own scale max|row|/127 (TensorRT-LLM --per_token)");
  sub->add_flag("--per-channel", per_channel,
                "--int8-mode 2: per-output-column weight scales, the .col files (TensorRT-LLM --per_channel)");
  sub->add_flag("--int8-lm-head", int8_lm_head,
                "--int8-mode 1 or --weight-only-precision int4: quantise the lm_head table to int8 too, per vocabulary "
                "row (TensorRT-LLM --quantize_lm_head; FT keeps it floating point; cpu only)");
}

void add_weight_only_flags(CLI::App* sub, WeightOnlyFlags& f) {
  sub->add_option("--weight-only-precision", f.precision,
                  "int4: the layer GEMM weights quantised to 4 bits at load, group by group along the input "
                  "(TensorRT-LLM's --weight_only_precision int4; a folder converted from a GPTQ, AWQ or "
                  "compressed-tensors checkpoint holds INT4 already and needs no flag); int8: --int8-mode 1")
      ->check(CLI::IsMember({"int8", "int4"}));
  f.group_size_option = sub->add_option("--int4-group-size", f.int4_group_size,
                                        "--weight-only-precision int4: input rows per scale (default 128; 0: one "
                                        "scale per output column)");
  sub->add_flag("--int4-zero-points", f.int4_zero_points,
                "--weight-only-precision int4: asymmetric groups with a zero point each (GPTQ's and AWQ's rule; "
                "default: symmetric, TensorRT-LLM's)");
}

void apply_weight_only_flags(const WeightOnlyFlags& f, RuntimeOptions& o) {
  const bool given = f.group_size_option && f.group_size_option->count() > 0;
  if (f.precision != "int4" && (given || f.int4_zero_points))
    throw UsageError(std::string(given ? "--int4-group-size" : "--int4-zero-points") +
                     " applies to --weight-only-precision int4 only");
  if (f.precision == "int8") {
    if (o.int8_mode != 0 && o.int8_mode != 1)
      throw UsageError("--weight-only-precision int8 is --int8-mode 1, not --int8-mode " + std::to_string(o.int8_mode));
    o.int8_mode = 1;
  }
  o.int4 = f.precision == "int4";
  o.int4_group_size = f.int4_group_size;
  o.int4_zero_points = f.int4_zero_points;
}

void add_int8_kv_cache_flag(CLI::App* sub, bool& int8_kv_cache) {
  sub->add_flag("--int8-kv-cache", int8_kv_cache,
                "Hold K and V in int8 with each layer's calibrated scale (TensorRT-LLM's --int8_kv_cache; the folder "
                "needs the scale files of ftx smoothquant --calibrate-kv-cache)");
}

void add_fp8_flags(CLI::App* sub, bool& fp8, bool& fp8_kv_cache) {
  sub->add_flag("--fp8", fp8,
                "FP8 E4M3 layer GEMMs: weights and activations with per-tensor scales (TensorRT-LLM's FP8; the folder "
                "needs the files of ftx smoothquant --fp8; GPUs from sm_89)");
  sub->add_flag("--fp8-kv-cache", fp8_kv_cache,
                "Hold K and V in FP8 E4M3 with each layer's calibrated scale (TensorRT-LLM's FP8 KV CACHE; the "
                "folder needs the scale files of ftx smoothquant --fp8)");
}

void check_decoding_flags(const DecodingFlags& f) {
  if (f.max_new_tokens == 0 && !f.context_log_probs)
    throw UsageError("--max-new-tokens 0 generates nothing (ftx generate allows it with --return-context-log-probs, "
                     "which scores the prompts)");
  check_range("--max-new-tokens", f.max_new_tokens, 0, kMaxNewTokens);
  check_range("--threads", f.threads, 0, kMaxThreads);
  check_range("--session-len", f.session_len, 0, kMaxFlagCount);
  check_range("--memory-len", f.memory_len, 0, kMaxFlagCount);
  check_range("--tensor-para-size", f.parallel.tensor_para_size, 0, kMaxRanks);
  check_range("--pipeline-para-size", f.parallel.pipeline_para_size, 0, kMaxRanks);
  // -1 is "not given" (empty prompts are an error; end_id from config.ini).
  check_token_id_flag("--start-id", f.start_id);
  check_token_id_flag("--end-id", f.end_id);
  check_token_id_flag("--top-p-reset-ids", f.top_p_reset_ids);
  if (f.tokens_per_block < 1 || f.tokens_per_block > 65536 || (f.tokens_per_block & (f.tokens_per_block - 1)) != 0)
    throw UsageError("--tokens-per-block " + std::to_string(f.tokens_per_block) + " is not a power of two in [1, 65536]");
  kv::KvCacheBudget::parse(f.kv_cache_memory);
}

void check_seed_flag(const DecodingFlags& f, bool requests_may_sample) {
  if (!f.seed_given || f.top_k != 0 || f.top_p != 0.0 || f.beam_width != 1) return;
  const std::string what = "--seed " + std::to_string(f.seed) + " has no effect with greedy decoding (--top-k 0 and --top-p 0)";
  if (!requests_may_sample) throw UsageError(what + "; set --top-k or --top-p to sample");
  std::fprintf(stderr, "ftx: warning: %s: only JSON lines that set their own \"top_k\" or \"top_p\" sample\n",
               what.c_str());
}

EngineOptions engine_options(const DecodingFlags& f, const PromptTables* prompts) {
  EngineOptions eo;
  eo.memory_len = f.memory_len;
  eo.prompts = prompts;
  eo.block_size = f.tokens_per_block;
  eo.kv_cache = kv::KvCacheBudget::parse(f.kv_cache_memory);
  eo.prefix_cache = !f.no_prefix_cache;
  return eo;
}

RequestDefaults request_defaults(DecodingFlags& f, const ModelConfig& cfg, const Tokenizer* tok) {
  RequestDefaults d;
  d.max_new_tokens = f.max_new_tokens;
  SamplingConfig& s = d.sampling;
  s.top_k = f.top_k;
  s.top_p = f.top_p;
  s.temperature = f.temperature;
  s.repetition_penalty = f.repetition_penalty;
  s.presence_penalty = f.presence_penalty;
  s.frequency_penalty = f.frequency_penalty;
  s.top_p_decay = f.top_p_decay;
  s.top_p_min = f.top_p_min;
  s.top_p_reset_id = static_cast<int32_t>(f.top_p_reset_ids);  // check_decoding_flags: -1 or an int32 id
  s.len_penalty = f.len_penalty;
  s.min_length = f.min_length;
  s.beam_width = f.beam_width;
  s.beam_search_diversity_rate = f.diversity_rate;
  s.seed = f.seed;
  s.end_id = static_cast<int32_t>(f.end_id >= 0 ? f.end_id : cfg.end_id);
  s.return_log_probs = f.log_probs || f.cum_log_probs;
  d.output.log_probs = f.log_probs;
  d.output.cum_log_probs = f.cum_log_probs;
  d.output.context_log_probs = f.context_log_probs;
  d.output.echo = f.echo_prompt;
  d.output.end_id = s.end_id;
  if (!f.stop_words.empty() || !f.bad_words.empty()) {
    if (!tok) throw Error(f.model_dir, "--stop-words/--bad-words need a tokenizer; pass --tokenizer DIR");
    if (!f.stop_words.empty()) s.stop_words = parse_word_list(f.stop_words, *tok);
    if (!f.bad_words.empty()) s.bad_words = parse_word_list(f.bad_words, *tok);
  }
  DecodeRequest probe{{0}, f.max_new_tokens, s};
  check_flags_as_request(probe, cfg.vocab_size);
  if (f.start_id >= cfg.vocab_size)
    throw UsageError("--start-id " + std::to_string(f.start_id) + " is outside the vocabulary [0, " +
                     std::to_string(cfg.vocab_size) + ")");
  d.start_id = static_cast<int32_t>(f.start_id);
  if (s.end_id >= cfg.vocab_size)
    std::fprintf(stderr,
                 "ftx: warning: %s: end_id %d is outside the vocabulary [0, %lld): generation will not stop on it "
                 "(FT's behaviour); --end-id sets another\n",
                 (f.end_id >= 0 ? std::string("--end-id") : f.model_dir + "/config.ini").c_str(), s.end_id,
                 static_cast<long long>(cfg.vocab_size));
  // FT's interactive limits: a learned position table bounds a session, and a
  // memory shorter than the session is worth a warning (older tokens drop out of attention).
  if (cfg.position == PositionEmbedding::kLearned && f.session_len > cfg.max_pos_seq_len) {
    std::fprintf(stderr, "ftx: warning: --session-len %lld exceeds the model's max_pos_seq_len %lld; using %lld\n",
                 static_cast<long long>(f.session_len), static_cast<long long>(cfg.max_pos_seq_len),
                 static_cast<long long>(cfg.max_pos_seq_len));
    f.session_len = cfg.max_pos_seq_len;
  }
  if (f.memory_len > 0 && f.session_len > 0 && f.memory_len != f.session_len)
    std::fprintf(stderr,
                 "ftx: warning: --memory-len %lld differs from --session-len %lld: attention sees only the last %lld "
                 "tokens of a session\n",
                 static_cast<long long>(f.memory_len), static_cast<long long>(f.session_len),
                 static_cast<long long>(f.memory_len));
  return d;
}

DType model_dtype(const std::string& device, const std::string& dtype) {
  if (!dtype.empty()) return dtype_from_name(dtype);
  return device == "cuda" ? DType::kFloat16 : DType::kFloat32;
}

RuntimeOptions runtime_options(const DecodingFlags& f) {
  RuntimeOptions o{f.device, f.threads, f.model_dir,
                   f.gemm_config.empty() ? "" : spool_input(f.gemm_config, "--gemm-config"),
                   model_dtype(f.device, f.dtype), f.int8_mode};
  o.per_token = f.per_token;
  o.per_channel = f.per_channel;
  o.int8_lm_head = f.int8_lm_head;
  o.int8_kv_cache = f.int8_kv_cache;
  o.fp8 = f.fp8;
  o.fp8_kv_cache = f.fp8_kv_cache;
  apply_weight_only_flags(f.weight_only, o);
  apply_parallel_flags(f.parallel, o);
  return o;
}

}  // namespace ftx::cmd
