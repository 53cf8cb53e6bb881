#pragma once
// The prompt-learning flags of `ftx generate` and `ftx eval-lambada`: --task and --prompt-table.
#include <memory>
#include <string>

#include "cmd/subcommand.h"
#include "formats/error.h"
#include "lib/engine/prompt_tables.h"
#include "lib/model/model_config.h"

namespace ftx::cmd {

struct PromptFlags {
  std::string task;   // default task of every request: a name or an id
  std::string table;  // TensorRT-LLM .npy instead of the folder's tables
};

inline void add_prompt_flags(CLI::App* sub, PromptFlags& f) {
  sub->add_option("--task", f.task, "p-tuning task (name or id) of every request that names none");
  sub->add_option("--prompt-table", f.table,
                  "TensorRT-LLM p-tuning table (.npy [tasks, max_len, hidden], ftx prompt-convert -o) instead of "
                  "the model folder's");
}

// The run's prompt tables (nullptr: none) and the default task index (-1: none). --task without
// tables is a UsageError.
// Prefix prompts: the tables of TP rank `rank` of `tp`.
inline std::unique_ptr<PromptTables> load_prompt_tables(const PromptFlags& f, const std::string& model_dir,
                                                        const ModelConfig& cfg, int64_t* default_task, int rank = 0,
                                                        int tp = 1) {
  auto t = f.table.empty() ? PromptTables::from_model_dir(model_dir, cfg, rank, tp) : PromptTables::from_npy(f.table, cfg);
  *default_task = -1;
  if (!f.task.empty()) {
    if (!t)
      throw UsageError("--task " + f.task + ": " + model_dir +
                       "/config.ini has no prompt tasks (ftx prompt-convert --model-dir adds them; or give --prompt-table)");
    try {
      *default_task = t->task(f.task, "--task");
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  return t;
}

}  // namespace ftx::cmd
