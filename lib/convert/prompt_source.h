#pragma once
// NeMo prompt-learning checkpoints and the
// two forms they are served in: TensorRT-LLM's .npy table and FT's model.prompt_table.<task>.weight.bin
// files with config.ini's [task_K] sections.
#include <cstdint>
#include <string>
#include <vector>

#include "formats/tensor.h"
#include "lib/convert/conversion.h"

namespace ftx {

struct PromptTable {
  std::string name;    // task name
  TensorView table;    // [virtual tokens, hidden], the checkpoint's dtype
  std::string source;  // checkpoint key, for messages
};

struct PromptArchive {
  std::string path;
  std::string layout;                      // "classic" (task_templates) or "peft" (p-tuning adapter)
  int64_t hidden = 0;
  std::vector<PromptTable> tables;         // in task_templates order; task id = index here
  std::vector<std::string> without_table;  // templates with no table in the checkpoint (skipped)
};

// Reads a .nemo (tar, tar.gz or extracted folder): model_config.yaml and model_weights.ckpt at the
// root or under mp_rank_00/ (or tp_rank_00_pp_rank_000/).
//  * `peft` in the config: one table from model.embedding.adapter_layer.ptuning_adapter.inference_table
//    (else the first key containing adapter_layer.ptuning_adapter), named after the first task
//    template, or "ptuning" when there is none.
//  * else, per task_templates entry in order: the checkpoint's prompt_table.<taskname>.prompt_embeddings.weight.
// Errors (naming the archive or member): no config or weights, neither task_templates nor peft, no
// table at all, a table that is not 2-D, tables of different hidden sizes, a truncated archive.
PromptArchive read_prompt_nemo(const std::string& path);

// TensorRT-LLM's nemo_prompt_convert.py output: float32 [tasks, max_len, hidden], zero-padded, as
// np.save writes it. `out` "-" is standard output; an existing file is replaced only with force.
void write_prompt_npy(const PromptArchive& a, const std::string& out, bool force);

// FT's form inside a model folder (OUT/N-gpu): model.prompt_table.<task>.weight.bin [len, H] in the
// folder's weight dtype, config.ini num_tasks, prompt_learning_start_id (start_id, or when < 0 the
// folder's current value, else FT's default end_id + 1), prompt_learning_type = 3, [task_K]
// task_name, prompt_length; manifest.json gains the files. The folder is rebuilt beside itself
// (unchanged files hard-linked) and swapped in only when complete: any error leaves it as it was.
// A folder that already has prompt tasks is an Error unless force (which replaces them).
// Error when the tables' hidden size differs from the model's (naming both).
void add_prompt_tables(const PromptArchive& a, const std::string& model_dir, int64_t start_id, bool force);

// convert-nemo --prompt-in-file: the tables as jobs of `plan` and the prompt keys in plan.cfg.
void plan_prompt_tables(const PromptArchive& a, ConversionPlan& plan, int64_t start_id);

// {"source", "layout", "hidden", "tasks": [{"id", "name", "virtual_tokens"}], "skipped": [names]}.
std::string prompt_summary_json(const PromptArchive& a);
// One line per task: "task <id>  <name>  <n> virtual tokens", then the skipped ones.
std::string prompt_summary_text(const PromptArchive& a);

}  // namespace ftx
