#include "cmd/ft_spellings.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "formats/error.h"
#include "lib/util/closest_match.h"

namespace ftx::cmd {

namespace {

enum class Action {
  kAccept,  // the same flag under FT's name: rewritten to `target`
  kDrop,    // an FT flag ftx does not need: dropped (with its value), with `note`
  kHint,    // no such ftx flag: a UsageError pointing at `target` (or saying `note`)
};

struct Spelling {
  const char* commands;  // space-separated subcommand names
  const char* names;     // space-separated spellings
  Action action;
  const char* target;    // the ftx flag ("" for none)
  bool takes_value;      // kDrop: the next word is its value
  const char* note;
};

constexpr const char* kConverters = "convert-hf convert-megatron convert-mesh-jax convert-nemo";
constexpr const char* kDecoders = "generate chat eval-lambada";

// FT's converters and example scripts, TensorRT-LLM's converters.
const Spelling kSpellings[] = {
    {kConverters, "-saved_dir --saved_dir -saved-dir --output-dir --output_dir", Action::kAccept, "-o", true, ""},
    {kConverters, "-in_file --in_file -in-file --input-dir --input_dir --ckpt-dir --ckpt_dir", Action::kAccept, "-i", true, ""},
    {kConverters, "-i_g -infer_gpu_num --infer_gpu_num -infer-gpu-num -tp --tensor-para-size --tensor_para_size "
                  "-tensor_para_size --n-inference-gpus",
     Action::kAccept, "-g", true, ""},
    {kConverters, "-weight_data_type --weight_data_type -dt --data-type --data_type --storage_type", Action::kAccept,
     "-t", true, ""},
    {kConverters, "-processes --jobs -j", Action::kAccept, "-p", true, ""},
    {kConverters, "--vocab_path -vocab_path", Action::kAccept, "--vocab-path", true, ""},
    {kConverters, "--merges_path -merges_path", Action::kAccept, "--merges-path", true, ""},
    {"convert-megatron", "-head_num --head_num -h_n", Action::kAccept, "--head-num", true, ""},
    {"convert-megatron", "-trained_tensor_parallel_size --trained_tensor_parallel_size -t_g", Action::kAccept,
     "--trained-tensor-parallel-size", true, ""},
    {"convert-hf", "-trained_gpu_num --trained_gpu_num -t_g", Action::kDrop, "", true,
     "ftx reads the HuggingFace weights whole; the training GPU count is not needed"},
    {"convert-megatron convert-nemo", "-load_checkpoints_to_cpu --load_checkpoints_to_cpu --load-checkpoints-to-cpu -cpu",
     Action::kDrop, "", true, "ftx always reads checkpoints on the CPU"},
    {"convert-nemo", "-fused_qkv --fused_qkv --fused-qkv", Action::kDrop, "", true,
     "ftx writes FT's fused QKV layout"},
    {"convert-nemo", "-p_i --prompt_in_file -prompt_in_file", Action::kAccept, "--prompt-in-file", true, ""},
    {"convert-nemo", "-p_o --prompt-saved-dir --prompt_saved_dir", Action::kHint, "", false,
     "ftx writes the prompt tables into the model folder with --prompt-in-file (see ftx-prompt-convert(1))"},
    {"convert-hf", "-sq", Action::kAccept, "--smoothquant", true, ""},
    {"convert-hf", "-kv", Action::kAccept, "--calibrate-kv-cache", false, ""},
    {"convert-hf", "--load-model-on-cpu --convert-model-on-cpu --load_model_on_cpu", Action::kDrop, "", false,
     "ftx converts on the CPU"},
    {"convert-hf", "-m_n -model_name --model_name", Action::kHint, "", false,
     "ftx takes the model's name from its config.json"},
    {"convert-hf", "-act_scale", Action::kHint, "--smoothquant", false, ""},
    // FT's example scripts (multi_gpu_gpt_example.py, lambada_task_example.py) and Triton's names.
    {kDecoders, "--output_len --request_output_len --output-len", Action::kHint, "--max-new-tokens", false, ""},
    {kDecoders, "--ckpt_path --ckpt-path --checkpoint-path --checkpoint_path --model_dir", Action::kHint, "--model", false, ""},
    {"generate eval-lambada", "--max_batch_size --max-batch-size", Action::kHint, "--batch-size", false, ""},
    {"generate", "--sample_input_file --input_file", Action::kHint, "--prompts", false, ""},
    {"chat", "--sample_input_file --input_file", Action::kHint, "--input", false, ""},
    {"generate eval-lambada", "--sample_output_file --output-path --output_path", Action::kHint, "--output", false, ""},
    {kDecoders, "--inference_data_type --data_type --weights_data_type --data-type", Action::kHint, "--dtype", false, ""},
    {kDecoders, "--vocab_file --merges_file --tokenizer_path", Action::kHint, "--tokenizer", false, ""},
    {"generate chat", "--banned_words", Action::kHint, "--bad-words", false, ""},
    {"generate chat", "--random_seed --enable_random_seed", Action::kHint, "--seed", false, ""},
    {"eval-lambada", "--lambada-path --lambada_path", Action::kHint, "--data", false, ""},
    {kDecoders, "--lib_path --lib-path", Action::kHint, "", false, "ftx needs no library path"},
    {kDecoders, "--time", Action::kHint, "", false, "ftx prints its timings on standard error unless --quiet"},
    {kDecoders, "--layer_num --head_num --size_per_head --vocab_size --inter_size", Action::kHint, "", false,
     "ftx reads the model's sizes from MODEL/config.ini"},
    {kDecoders, "-i_g --infer_gpu_num --infer-gpu-num", Action::kHint, "--tensor-para-size", false,
     "(or just run under mpirun -np N)"},
    // TensorRT-LLM's convert_checkpoint.py / quantize.py / trtllm-build and vLLM's names: each is
    // mapped to the ftx flag that does the same, or answered with why there is none; never left to
    // the nearest spelling, which named unrelated flags (--block-size -> --batch-size).
    {kConverters, "--tp_size --tp-size", Action::kAccept, "-g", true, ""},
    {kConverters, "--pp_size --pp-size", Action::kHint, "", false,
     "ftx writes no pipeline split: any folder runs pipeline-parallel at load (ftx generate --pipeline-para-size)"},
    {"convert-hf", "--model_dir --model-dir", Action::kAccept, "-i", true, ""},
    {"convert-nemo", "--nemo_ckpt_path --nemo-ckpt-path --nemo_file --nemo-file", Action::kAccept, "-i", true, ""},
    {"convert-megatron", "--load --megatron_ckpt --megatron-ckpt", Action::kAccept, "-i", true, ""},
    {kConverters, "--dtype", Action::kAccept, "-t", true, ""},
    {kConverters, "--use_weight_only --use-weight-only --weight_only_precision --weight-only-precision",
     Action::kHint, "", false,
     "weight-only INT8 and INT4 are applied when the model is loaded (ftx generate --int8-mode 1, "
     "--weight-only-precision int4): the converted folder stays floating point (a GPTQ, AWQ or "
     "compressed-tensors checkpoint converts to INT4 files as it is)"},
    {kDecoders, "--use_weight_only --use-weight-only", Action::kHint, "--int8-mode 1", false,
     "(or --weight-only-precision int4; weights quantised at load)"},
    {kDecoders, "--weight_only_precision", Action::kAccept, "--weight-only-precision", true, ""},
    {kDecoders, "--group_size --group-size --per_group", Action::kHint, "--int4-group-size", false,
     "(with --weight-only-precision int4)"},
    {"generate chat", "--paged_kv_cache --paged-kv-cache --use_paged_context_fmha --enable_prefix_caching "
                      "--enable-prefix-caching --enable_kv_cache_reuse",
     Action::kHint, "", false,
     "ftx's KV cache is always paged, with prefix sharing on (--tokens-per-block sets the block size, "
     "--kv-cache-memory its memory, --no-prefix-cache turns the sharing off)"},
    {"generate chat", "--block-size --block_size", Action::kHint, "--tokens-per-block", false, ""},
    {"generate chat", "--kv_cache_free_gpu_mem_fraction --kv-cache-free-gpu-mem-fraction --gpu-memory-utilization "
                      "--gpu_memory_utilization",
     Action::kHint, "--kv-cache-memory", false,
     "(a fraction in (0, 1] of the memory free after the weights, or a size such as 2G)"},
    {"generate chat", "--max_tokens_in_paged_kv_cache --max-tokens-in-paged-kv-cache", Action::kHint,
     "--kv-cache-memory", false,
     "(it takes bytes or a fraction, not tokens: a token takes 2 x layers x kv heads x head size x the cache "
     "dtype's bytes)"},
    {kDecoders, "--enable_fp8 --enable-fp8 --use_fp8 --use-fp8 --quantization", Action::kHint, "--fp8", false,
     "(FP8 GEMMs from a folder made by ftx smoothquant --fp8)"},
    {kDecoders, "--kv_cache_dtype --kv-cache-dtype", Action::kHint, "--fp8-kv-cache or --int8-kv-cache", false, ""},
    {"smoothquant", "--use_fp8 --use-fp8 --enable_fp8 --enable-fp8 --fp8_kv_cache --fp8-kv-cache --kv_cache_dtype "
                    "--kv-cache-dtype",
     Action::kHint, "--fp8", false, "(it writes the FP8 weights and the FP8 KV-cache scales together)"},
    {"smoothquant", "--qformat", Action::kHint, "--fp8 (qformat fp8) or --alpha (int8_sq)", false, ""},
};

bool listed(const char* list, const std::string& word) {
  const std::string l = std::string(" ") + list + " ";
  return l.find(" " + word + " ") != std::string::npos;
}

const Spelling* find_spelling(const std::string& command, const std::string& name) {
  for (const auto& s : kSpellings)
    if (listed(s.commands, command) && listed(s.names, name)) return &s;
  return nullptr;
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return *end == '\0';
}

std::vector<std::string> long_names(const CLI::App& sub) {
  std::vector<std::string> out;
  for (const CLI::Option* o : sub.get_options())
    for (const auto& n : o->get_lnames()) out.push_back("--" + n);
  return out;
}

bool known(const CLI::App& sub, const std::string& name) {
  return name == "--help" || name == "-h" || sub.get_option_no_throw(name) != nullptr;
}

// The ftx flag an unknown `name` most likely means: FT's underscores as dashes, else the closest.
std::string nearest_flag(const CLI::App& sub, const std::string& name) {
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  if (dashed.rfind("--", 0) != 0) dashed = "-" + dashed;  // -top_k -> --top-k
  if (known(sub, dashed)) return dashed;
  return closest_match(dashed, long_names(sub));
}

[[noreturn]] void unknown_flag(const CLI::App& sub, const std::string& name, const std::string& meant,
                               const std::string& note) {
  std::string msg = sub.get_name() + ": " + name + " is not an ftx flag";
  if (!meant.empty()) msg += "; did you mean " + meant + "?";
  if (!note.empty()) msg += (meant.empty() ? "; " : " ") + note;
  throw UsageError(msg + " (ftx " + sub.get_name() + " --help lists the flags)");
}

// gpt_gemm batch_size beam_width max_input_len head_number size_per_head inter_size vocab_size
// data_type [tensor_para_size] [is_append] (FT's gpt_gemm). With fewer than the eight it
// needs, the flags the given ones stand for and the names of the missing ones.
[[noreturn]] void gpt_gemm_positional(const std::vector<std::string>& args) {
  static const char* kFlags[] = {"--batch-size", "--beam-width", "--max-input-len", "--head-num", "--size-per-head",
                                 "--inter-size", "--vocab-size", "--data-type", "--tensor-para-size", nullptr};
  std::string flags;
  for (size_t i = 0; i < args.size() && i < 9; ++i) {
    std::string v = args[i];
    if (i == 7) v = v == "0" ? "fp32" : v == "1" ? "fp16" : v == "2" ? "bf16" : v;
    flags += std::string(i ? " " : "") + kFlags[i] + " " + v;
  }
  if (args.size() >= 8)
    throw UsageError("gemm-tune takes flags, not gpt_gemm's positional arguments; the same request is: ftx gemm-tune " +
                     flags);
  std::string missing;
  for (size_t i = args.size(); i < 8; ++i) missing += std::string(" ") + kFlags[i];
  throw UsageError("gemm-tune takes flags, not positional arguments; in gpt_gemm's order they would be " + flags +
                   ", and" + missing + " are missing (with -m MODEL the model's sizes are read from its config.ini)");
}

// gemm-tune's bare numbers that are no flag's value (gpt_gemm's habit).
std::vector<std::string> stray_numbers(const CLI::App& sub, const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const CLI::Option* o = args[i].rfind("-", 0) == 0 && !is_number(args[i]) ? sub.get_option_no_throw(args[i]) : nullptr;
    if (o && o->get_type_size() != 0) {
      ++i;  // its value
      continue;
    }
    if (is_number(args[i])) out.push_back(args[i]);
  }
  return out;
}

}  // namespace

std::vector<std::string> translate_ft_spellings(const CLI::App& sub, std::vector<std::string> args) {
  const std::string command = sub.get_name();
  if (command == "gemm-tune" && args.size() >= 8 &&
      std::all_of(args.begin(), args.begin() + 8, [](const std::string& a) { return is_number(a); }))
    gpt_gemm_positional(args);
  if (command == "gemm-tune")
    if (const auto stray = stray_numbers(sub, args); !stray.empty()) gpt_gemm_positional(stray);
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {  // everything after it is positional
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (a.size() < 3 || a[0] != '-' || is_number(a)) {
      out.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const bool single_dash = a[1] != '-';
    if (known(sub, name) || (single_dash && name.size() > 2 && known(sub, name.substr(0, 2)) && !find_spelling(command, name) &&
                             name.find('_') == std::string::npos)) {
      out.push_back(a);  // an ftx flag, or a short flag with its value attached (-g2)
      continue;
    }
    const Spelling* s = find_spelling(command, name);
    if (s && s->action == Action::kAccept) {
      out.push_back(s->target);
      if (eq != std::string::npos) out.push_back(a.substr(eq + 1));
      continue;
    }
    if (s && s->action == Action::kDrop) {
      std::fprintf(stderr, "ftx: note: %s ignored: %s\n", name.c_str(), s->note);
      if (s->takes_value && eq == std::string::npos && i + 1 < args.size()) ++i;
      continue;
    }
    if (s) unknown_flag(sub, name, s->target, s->note);
    if (single_dash && name.find('_') == std::string::npos) {
      out.push_back(a);  // left to CLI11 (its own error names it)
      continue;
    }
    unknown_flag(sub, name, nearest_flag(sub, name), "");
  }
  return out;
}

std::vector<std::string> subcommands_meant(const std::string& word, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names)
    if (n.rfind(word + "-", 0) == 0) out.push_back(n);  // "convert" -> convert-hf, convert-megatron, ...
  if (!out.empty()) return out;
  const std::string near = closest_match(word, names);
  if (!near.empty()) out.push_back(near);
  return out;
}

}  // namespace ftx::cmd
