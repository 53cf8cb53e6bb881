#pragma once
// A conversion = a ModelConfig + one TensorJob per output tensor + the side files. Source adapters
// (Megatron, NeMo, HF) build a ConversionPlan; write_conversion is the one writer for all of them.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "formats/tensor.h"
#include "lib/convert/tensor_job.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_config.h"

namespace ftx {

// A file written as given, beside the weights (SmoothQuant's int8 weights and scales): listed in
// manifest.json with its own dtype.
struct SideTensor {
  FtWeightFile file;
  DType dtype = DType::kFloat32;
  std::vector<uint8_t> bytes;
};

struct ConversionPlan {
  ModelConfig cfg;
  std::vector<TensorJob> jobs;
  // Converter-specific keys FT's converter writes in the config section, after to_ini()'s.
  std::vector<std::pair<std::string, std::string>> extra_ini;
  std::vector<std::pair<std::string, std::string>> text_files;  // output name -> content (args.txt)
  std::vector<std::pair<std::string, Storage>> copy_files;      // output name -> bytes (tokenizer)
  std::vector<SideTensor> side_tensors;                         // written as-is, in the manifest
  // Printed as "ftx: warning: <text>" once the output exists (e.g. config.json keys ftx does not know).
  std::vector<std::string> warnings;
  std::string source_format;                                    // "megatron", "nemo", "hf"
  std::string source_path;
  // The checkpoint's own name(s) for what becomes FT's tensor `ft_name` (the q, k and v projections
  // of a fused QKV; alternative spellings), so that a missing tensor is named as the user's files
  // name it. Unset, or nothing returned: the error names FT's tensor.
  std::function<std::vector<std::string>(const std::string& ft_name)> source_names;
};

struct ConvertOptions {
  std::string in_path;
  std::string out_dir;             // OUT; files go to OUT/<tp>-gpu/
  int64_t tp = 1;                  // inference tensor parallel size
  // Mixture of experts: 1, each expert's FFN sliced over the tp ranks (FT's layout); tp, whole
  // experts in contiguous blocks per rank (convert-hf --moe-ep-size, config.ini moe_ep_size).
  int64_t moe_ep_size = 1;
  DType dtype = DType::kFloat32;   // fp32, fp16 or bf16
  int processes = 4;
  std::string vocab_path, merges_path;
  bool force = false;
  bool quiet = false;
  // Megatron, for checkpoints without `args` (v0).
  int64_t head_num = 0;
  int64_t trained_tp = 0;
  // HF: model type override (gpt2, gpt_bigcode, santacoder, starcoder, gptj, gpt_neox, bloom, opt, xglm,
  // llama, mistral, qwen2).
  std::string model;
  // config.ini start_id / end_id instead of the ones read from the tokenizer (-1: keep those).
  int64_t start_id = -1, end_id = -1;
};

// Writes OUT/<tp>-gpu/ atomically: every tensor file, config.ini, manifest.json and side files.
// start_id/end_id come from the options when given; an id outside the vocabulary is written (FT
// runs such folders: generation never stops on that end_id) with a warning on stderr.
// Checks the plan against ft_weight_files(cfg, tp) first: a missing or unexpected tensor, or a
// shape that disagrees with the config, is an Error and no output folder appears.
void write_conversion(ConversionPlan& plan, const ConvertOptions& opt);

// Source adapters.
ConversionPlan plan_megatron(const ConvertOptions& opt);
ConversionPlan plan_nemo(const ConvertOptions& opt);
ConversionPlan plan_hf(const ConvertOptions& opt);

// Helpers shared by adapters.
std::string read_text_file(const std::string& path);   // Error when missing
bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
// id of "<|endoftext|>" in a GPT-2 vocab.json, or -1.
int64_t endoftext_id(const std::string& vocab_json_text);
// --vocab-path / --merges-path copied as vocab.json / merges.txt, as FT's Megatron converter does;
// start_id and end_id become the vocabulary's <|endoftext|> when it has one.
void add_gpt2_tokenizer_files(ConversionPlan& plan, const ConvertOptions& opt);

}  // namespace ftx
