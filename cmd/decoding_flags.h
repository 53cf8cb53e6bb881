#pragma once
// The flags `ftx generate` and `ftx chat` share: the model and runtime (device, dtype, threads,
// GEMM config), sampling (FT's names and ranges), sessions (--session-len, --memory-len), and how
// they become the defaults of every request. One definition, so the two commands cannot drift.
#include <cstdint>
#include <memory>
#include <string>

#include "cmd/parallel_flags.h"
#include "cmd/subcommand.h"
#include "lib/engine/engine.h"
#include "lib/engine/generate_io.h"
#include "lib/engine/runtime.h"
#include "lib/model/model_config.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx::cmd {

// --dtype as given, else the device's default: fp16 on cuda (a half model end to end, as
// FasterTransformer runs one), fp32 on cpu (the reference).
DType model_dtype(const std::string& device, const std::string& dtype);

// --weight-only-precision int8|int4 (TensorRT-LLM's --weight_only_precision; int8 is --int8-mode 1),
// --int4-group-size, --int4-zero-points.
struct WeightOnlyFlags {
  std::string precision;  // "", "int8" or "int4"
  int64_t int4_group_size = 128;
  bool int4_zero_points = false;
  CLI::Option* group_size_option = nullptr;  // to tell a given --int4-group-size from the default
};
void add_weight_only_flags(CLI::App* sub, WeightOnlyFlags& f);
// Into the runtime options: int8 sets int8_mode 1 (UsageError when --int8-mode says otherwise), int4
// the INT4 fields; --int4-group-size or --int4-zero-points without int4 is a UsageError.
void apply_weight_only_flags(const WeightOnlyFlags& f, RuntimeOptions& o);

struct DecodingFlags {
  std::string model_dir, tokenizer_dir, gemm_config, device = "cpu", dtype;  // dtype "": model_dtype's default
  int threads = 0;
  int int8_mode = 0;
  bool per_token = false, per_channel = false;  // --int8-mode 2's TensorRT-LLM modes
  bool int8_lm_head = false;                     // --int8-mode 1: the lm_head in int8 too
  WeightOnlyFlags weight_only;
  bool int8_kv_cache = false;
  bool fp8 = false, fp8_kv_cache = false;
  int64_t max_new_tokens = 0;
  int64_t top_k = 0;
  double top_p = 0.0, temperature = 1.0, repetition_penalty = 1.0, presence_penalty = 0.0, len_penalty = 0.0;
  double frequency_penalty = 0.0;
  double top_p_decay = 1.0, top_p_min = 1e-6;  // FT's factual nucleus (SamplingConfig's defaults)
  int64_t top_p_reset_ids = -1;
  int64_t min_length = 0, beam_width = 1;
  double diversity_rate = 0.0;
  uint64_t seed = 0;
  bool seed_given = false;  // --seed on the command line (0 is a seed too)
  int64_t start_id = -1, end_id = -1;
  std::string stop_words, bad_words;
  bool log_probs = false, cum_log_probs = false;
  bool context_log_probs = false;  // generate's --return-context-log-probs: also allows --max-new-tokens 0
  bool echo_prompt = false;        // generate's --echo-prompt
  int64_t session_len = 0, memory_len = 0;
  // The paged KV cache: its memory (lib/engine/kv_cache/kv_cache_budget.h), tokens per block, and
  // whether prompts reuse the blocks of earlier ones with the same start.
  std::string kv_cache_memory = "auto";
  int64_t tokens_per_block = 64;
  bool no_prefix_cache = false;
  ParallelFlags parallel;
};

// Declares the flags on `sub`. max_new_tokens_required: generate requires it, chat has a default.
void add_decoding_flags(CLI::App* sub, DecodingFlags& f, bool max_new_tokens_required);
// --int8-mode, --per-token and --per-channel, shared with eval-lambada.
void add_int8_mode_flag(CLI::App* sub, int& int8_mode, bool& per_token, bool& per_channel, bool& int8_lm_head);
// --int8-kv-cache, shared with eval-lambada.
void add_int8_kv_cache_flag(CLI::App* sub, bool& int8_kv_cache);
// --fp8 and --fp8-kv-cache, shared with eval-lambada.
void add_fp8_flags(CLI::App* sub, bool& fp8, bool& fp8_kv_cache);

// Range checks that need no model (usage errors naming the flag).
void check_decoding_flags(const DecodingFlags& f);

// --seed with greedy flags (--top-k 0, --top-p 0, --beam-width 1) would be silently ignored: a
// UsageError when no request can sample otherwise (chat, --input-ids), a warning when a JSON line
// may set its own top_k or top_p (generate --prompts).
void check_seed_flag(const DecodingFlags& f, bool requests_may_sample);

// The flags' values as the defaults of every request, checked with FT's rules (usage errors naming
// the flag); warns about an end_id outside the vocabulary (naming config.ini or --end-id) and about
// FT's session limits (a learned position table bounds --session-len, which is lowered to it).
RequestDefaults request_defaults(DecodingFlags& f, const ModelConfig& cfg, const Tokenizer* tok);

// The runtime the flags ask for (--gemm-config "-" is read from standard input).
RuntimeOptions runtime_options(const DecodingFlags& f);

// The engine's options from the flags (--memory-len, the KV cache's); `prompts` may be null.
EngineOptions engine_options(const DecodingFlags& f, const PromptTables* prompts);

}  // namespace ftx::cmd
