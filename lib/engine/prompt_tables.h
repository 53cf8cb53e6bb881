#pragma once
// Prompt learning at run time (p-tuning, prompt_learning_type 3): every task's
// table of virtual-token embeddings, held once for the run. A request names a task; an input id
// v >= start_id of that request is a virtual token, embedded as row v - start_id of the task's table
// at its real position (FT's start_id_embedding_position_lookups).
//
// The engine sees no tasks: the request reader rewrites a virtual id of task t to the "engine id"
// start_id + offset(t) + (v - start_id), a row of all tables stacked, so a token carries its own
// table row through the scheduler, the ranks and sessions unchanged.
//
// Prefix prompts (prompt_learning_type 2, FT's model.prefix_prompt.<task>.weight.<rank>.bin,
// [num_layer, 2, heads/TP, length, head_dim]): a request of task t starts with the marker id
// start_id + t, which the engine replaces by the task's K/V prefix in the row's cache (ahead of
// the prompt, whose positions still start at 0). Requests may not carry virtual ids then.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "lib/model/model_config.h"

namespace ftx {

class PromptTables {
 public:
  // The folder's model.prompt_table.<task>.weight.bin files, as config.ini lists them (type 3).
  // nullptr when config.ini has no tasks. Error for prompt_learning_type 1 or 2 (not supported at
  // run time), or a missing/short table file.
  // Prefix prompts: this TP rank's files (rank of tp).
  static std::unique_ptr<PromptTables> from_model_dir(const std::string& dir, const ModelConfig& cfg, int rank = 0,
                                                      int tp = 1);
  // TensorRT-LLM's table (prompt-convert -o): float32 [tasks, max_len, hidden]; task K is "K" and
  // every task has max_len rows (TRT's task_vocab_size). Virtual ids start at the folder's
  // prompt_learning_start_id when config.ini has one, else at vocab_size (TRT's rule).
  static std::unique_ptr<PromptTables> from_npy(const std::string& path, const ModelConfig& cfg);

  bool prefix() const { return prefix_; }
  int64_t start_id() const { return start_id_; }
  int64_t hidden() const { return hidden_; }
  const std::vector<PromptTask>& tasks() const { return tasks_; }
  // Task index by name or decimal id; Error naming `where` and the known tasks when there is none.
  int64_t task(const std::string& name_or_id, const std::string& where) const;
  // Rewrites the FT ids of one request of task `task` (-1: none) to engine ids. Error naming
  // `where` for a virtual id without a task or beyond the task's table.
  void map_ids(std::vector<int32_t>& ids, int64_t task, const std::string& where) const;
  // The FT ids of the first n virtual tokens of a task: start_id .. start_id + n - 1 (Error naming
  // `where` when n exceeds the task's length).
  std::vector<int32_t> virtual_ids(int64_t task, int64_t n, const std::string& where) const;
  // One past the largest engine id: ids in [start_id, end_engine_id()) are virtual (prefix: markers).
  int64_t end_engine_id() const { return start_id_ + (prefix_ ? static_cast<int64_t>(tasks_.size()) : rows_total_); }

  // p-tuning: every table stacked, [rows_total, hidden]. Prefix: each task's [num_layer, 2,
  // heads/TP, length, head_dim] of this rank, one after another (element offset prefix_offset(t)).
  // In `dtype()`.
  const std::vector<uint8_t>& rows() const { return rows_; }
  int64_t rows_total() const { return rows_total_; }
  DType dtype() const { return dtype_; }
  int64_t prefix_offset(int64_t task) const { return offset_[static_cast<size_t>(task)]; }

 private:
  bool prefix_ = false;
  int64_t start_id_ = 0, hidden_ = 0, rows_total_ = 0;
  std::vector<PromptTask> tasks_;
  std::vector<int64_t> offset_;
  std::vector<uint8_t> rows_;
  DType dtype_ = DType::kFloat32;
};

// The first engine id of soft prompts (FT's request_prompt_type 1, requests.h's SoftPrompt): past
// the vocabulary and past every prompt table's engine ids (tables: null when there are none).
inline int64_t soft_prompt_first_id(int64_t vocab_size, const PromptTables* tables) {
  return tables && tables->end_engine_id() > vocab_size ? tables->end_engine_id() : vocab_size;
}

}  // namespace ftx
