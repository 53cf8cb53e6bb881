#include "lib/engine/prompt_tables.h"

#include <sys/stat.h>

#include <climits>
#include <cstring>

#include "formats/error.h"
#include "formats/mapped_file.h"
#include "formats/npy.h"

namespace ftx {

namespace {

std::string task_list(const std::vector<PromptTask>& tasks) {
  std::string s;
  for (size_t i = 0; i < tasks.size(); ++i) s += (i ? ", " : "") + std::to_string(i) + " " + tasks[i].name;
  return s.empty() ? "none" : s;
}

}  // namespace

std::unique_ptr<PromptTables> PromptTables::from_model_dir(const std::string& dir, const ModelConfig& cfg, int rank,
                                                           int tp) {
  if (!cfg.prompt.any()) return nullptr;
  const std::string ini = dir + "/config.ini";
  FTX_CHECK(cfg.prompt.type == PromptLearningType::kPTuning || cfg.prompt.type == PromptLearningType::kPrefixPrompt,
            ini,
            "prompt_learning_type = " + std::to_string(static_cast<int>(cfg.prompt.type)) +
                ": only p-tuning (3) and prefix prompts (2) are supported at run time");
  FTX_CHECK(cfg.prompt.start_id >= 0 && cfg.prompt.start_id < INT32_MAX / 2, ini,
            "prompt_learning_start_id = " + std::to_string(cfg.prompt.start_id) + " is out of range");
  auto t = std::make_unique<PromptTables>();
  t->start_id_ = cfg.prompt.start_id;
  t->hidden_ = cfg.hidden();
  t->dtype_ = cfg.weight_data_type;
  t->tasks_ = cfg.prompt.tasks;
  const size_t el = dtype_size(t->dtype_);
  if (cfg.prompt.type == PromptLearningType::kPrefixPrompt) {
    t->prefix_ = true;
    const int64_t per_token = 2 * cfg.num_layer * (cfg.head_num / tp) * cfg.size_per_head;
    for (const auto& task : t->tasks_) {
      const std::string path = dir + "/model.prefix_prompt." + task.name + ".weight." + std::to_string(rank) + ".bin";
      auto mf = MappedFile::open(path);
      const uint64_t want = static_cast<uint64_t>(task.length * per_token) * el;
      FTX_CHECK(mf->size() == want, path,
                std::to_string(mf->size()) + " bytes, expected " + std::to_string(want) + " ([" +
                    std::to_string(cfg.num_layer) + ", 2, " + std::to_string(cfg.head_num / tp) + ", " +
                    std::to_string(task.length) + ", " + std::to_string(cfg.size_per_head) + "] " + dtype_name(t->dtype_) + ")");
      t->offset_.push_back(static_cast<int64_t>(t->rows_.size() / el));
      t->rows_total_ += task.length;
      t->rows_.insert(t->rows_.end(), mf->data(), mf->data() + want);
    }
    return t;
  }
  for (const auto& task : t->tasks_) {
    const std::string path = dir + "/model.prompt_table." + task.name + ".weight.bin";
    auto mf = MappedFile::open(path);
    const uint64_t want = static_cast<uint64_t>(task.length * t->hidden_) * el;
    FTX_CHECK(mf->size() == want, path,
              std::to_string(mf->size()) + " bytes, expected " + std::to_string(want) + " ([" +
                  std::to_string(task.length) + ", " + std::to_string(t->hidden_) + "] " + dtype_name(t->dtype_) + ")");
    t->offset_.push_back(t->rows_total_);
    t->rows_total_ += task.length;
    t->rows_.insert(t->rows_.end(), mf->data(), mf->data() + want);
  }
  FTX_CHECK(t->end_engine_id() < INT32_MAX, ini, "prompt tables too large for 32-bit token ids");
  return t;
}

std::unique_ptr<PromptTables> PromptTables::from_npy(const std::string& path, const ModelConfig& cfg) {
  const TensorView v = read_npy(path);
  FTX_CHECK(v.shape.size() == 3 && v.shape[0] > 0 && v.shape[1] > 0, path,
            "shape " + shape_to_string(v.shape) + " is not TensorRT-LLM's [tasks, max_len, hidden]");
  FTX_CHECK(v.dtype == DType::kFloat32 || v.dtype == DType::kFloat16, path,
            std::string("dtype ") + dtype_name(v.dtype) + " is not float32 or float16");
  FTX_CHECK(v.shape[2] == cfg.hidden(), path,
            "prompt table hidden size " + std::to_string(v.shape[2]) + " differs from the model's " +
                std::to_string(cfg.hidden()));
  auto t = std::make_unique<PromptTables>();
  t->start_id_ = cfg.prompt.any() ? cfg.prompt.start_id : cfg.vocab_size;
  t->hidden_ = cfg.hidden();
  t->dtype_ = v.dtype;
  for (int64_t k = 0; k < v.shape[0]; ++k) {
    t->tasks_.push_back({std::to_string(k), v.shape[1]});
    t->offset_.push_back(k * v.shape[1]);
  }
  t->rows_total_ = v.shape[0] * v.shape[1];
  v.copy_contiguous(t->rows_);
  FTX_CHECK(t->end_engine_id() < INT32_MAX, path, "prompt table too large for 32-bit token ids");
  return t;
}

int64_t PromptTables::task(const std::string& name_or_id, const std::string& where) const {
  PromptLearning p;
  p.tasks = tasks_;
  const int64_t k = p.find(name_or_id);
  if (k < 0) throw Error(where + ": unknown task '" + name_or_id + "' (tasks: " + task_list(tasks_) + ")");
  return k;
}

void PromptTables::map_ids(std::vector<int32_t>& ids, int64_t task, const std::string& where) const {
  if (prefix_) {
    for (int32_t id : ids)
      if (id >= start_id_)
        throw Error(where + ": token id " + std::to_string(id) + " >= prompt_learning_start_id " +
                    std::to_string(start_id_) + ": the model's tasks are prefix prompts, which take no virtual tokens");
    if (task >= 0) ids.insert(ids.begin(), static_cast<int32_t>(start_id_ + task));
    return;
  }
  for (int32_t& id : ids) {
    if (id < start_id_) continue;
    const int64_t row = id - start_id_;
    if (task < 0)
      throw Error(where + ": token id " + std::to_string(id) + " is a virtual token (>= prompt_learning_start_id " +
                  std::to_string(start_id_) + ") but the request names no task (--task, or \"task\" per request)");
    const PromptTask& t = tasks_[static_cast<size_t>(task)];
    if (row >= t.length)
      throw Error(where + ": virtual token id " + std::to_string(id) + " is row " + std::to_string(row) + " of task '" +
                  t.name + "', which has " + std::to_string(t.length) + " rows (ids " + std::to_string(start_id_) +
                  ".." + std::to_string(start_id_ + t.length - 1) + ")");
    id = static_cast<int32_t>(start_id_ + offset_[static_cast<size_t>(task)] + row);
  }
}

std::vector<int32_t> PromptTables::virtual_ids(int64_t task, int64_t n, const std::string& where) const {
  if (task < 0) throw Error(where + ": \"virtual_tokens\" needs a task (--task, or \"task\" per request)");
  if (prefix_) throw Error(where + ": \"virtual_tokens\": the model's tasks are prefix prompts, which take none");
  const PromptTask& t = tasks_[static_cast<size_t>(task)];
  if (n < 0 || n > t.length)
    throw Error(where + ": \"virtual_tokens\" " + std::to_string(n) + " outside [0, " + std::to_string(t.length) +
                "] (task '" + t.name + "')");
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(start_id_ + i));
  return ids;
}

}  // namespace ftx
