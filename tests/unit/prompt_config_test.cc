// Prompt-learning keys of config.ini (docs/ft-layout.md#prompt-tables): parsing ([task_K] and
// FT's C++ example's [<model_name>_task_K]), defaults, errors, the round trip through to_ini, the
// files ft_weight_files() expects for them, and the request-id rewrite of PromptTables.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/engine/prompt_tables.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_config.h"

namespace ftx {
namespace {

const char* kBase =
    "[gpt]\nmodel_name = mygpt\nhead_num = 2\nsize_per_head = 4\ninter_size = 32\nnum_layer = 2\n"
    "max_pos_seq_len = 16\nvocab_size = 50\nstart_id = 0\nend_id = 49\nweight_data_type = fp32\n";

ModelConfig parse(const std::string& extra) { return ModelConfig::from_ini(IniFile::parse(kBase + extra, "cfg")); }

TEST(PromptConfig, DefaultsToNoTasksAndStartIdEndIdPlusOne) {
  const ModelConfig c = parse("");
  EXPECT_FALSE(c.prompt.any());
  EXPECT_EQ(c.prompt.type, PromptLearningType::kNone);
  EXPECT_EQ(c.prompt.start_id, 50);
}

TEST(PromptConfig, ReadsTaskSectionsBothSpellings) {
  const ModelConfig c = parse(
      "num_tasks = 2\nprompt_learning_type = 3\nprompt_learning_start_id = 60\n"
      "[task_0]\ntask_name = a\nprompt_length = 3\n[mygpt_task_1]\ntask_name = b\nprompt_length = 5\n");
  ASSERT_EQ(c.prompt.tasks.size(), 2u);
  EXPECT_EQ(c.prompt.tasks[0].name, "a");
  EXPECT_EQ(c.prompt.tasks[1].length, 5);
  EXPECT_EQ(c.prompt.start_id, 60);
  EXPECT_EQ(c.prompt.find("b"), 1);
  EXPECT_EQ(c.prompt.find("0"), 0);
  EXPECT_EQ(c.prompt.find("2"), -1);
  EXPECT_EQ(c.prompt.find("zz"), -1);
  // Round trip.
  const ModelConfig back = ModelConfig::from_ini(IniFile::parse(c.to_ini().to_string(), "again"));
  ASSERT_EQ(back.prompt.tasks.size(), 2u);
  EXPECT_EQ(back.prompt.tasks[1].name, "b");
  EXPECT_EQ(back.prompt.start_id, 60);
  EXPECT_EQ(back.prompt.type, PromptLearningType::kPTuning);
}

TEST(PromptConfig, Errors) {
  EXPECT_THROW(parse("num_tasks = 1\nprompt_learning_type = 3\n"), Error);  // no [task_0]
  EXPECT_THROW(parse("prompt_learning_type = 7\n"), Error);
  EXPECT_THROW(parse("num_tasks = 1\n[task_0]\ntask_name = x/y\nprompt_length = 2\n"), Error);
  EXPECT_THROW(parse("num_tasks = 1\n[task_0]\ntask_name = x\nprompt_length = 0\n"), Error);
  try {
    parse("num_tasks = 1\nprompt_learning_type = 3\n");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[task_0]"), std::string::npos) << e.what();
  }
}

TEST(PromptConfig, WeightFilesListTheTables) {
  ModelConfig c = parse("num_tasks = 1\nprompt_learning_type = 3\n[task_0]\ntask_name = a\nprompt_length = 3\n");
  bool found = false;
  for (const auto& f : ft_weight_files(c, 2))
    if (f.file_name() == "model.prompt_table.a.weight.bin") {
      found = true;
      EXPECT_EQ(f.shape, (std::vector<int64_t>{3, 8}));
    }
  EXPECT_TRUE(found);
  c.prompt.type = PromptLearningType::kPrefixPrompt;
  int per_rank = 0;
  for (const auto& f : ft_weight_files(c, 2))
    if (f.name == "model.prefix_prompt.a.weight") {
      ++per_rank;
      EXPECT_EQ(f.shape, (std::vector<int64_t>{2, 2, 1, 3, 4}));
    }
  EXPECT_EQ(per_rank, 2);
}

TEST(PromptTables, MapsVirtualIdsPerTask) {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/ftx-prompt-cfg-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const ModelConfig c = parse(
      "num_tasks = 2\nprompt_learning_type = 3\n[task_0]\ntask_name = a\nprompt_length = 3\n"
      "[task_1]\ntask_name = b\nprompt_length = 2\n");
  for (auto [name, rows] : {std::pair<const char*, int>{"a", 3}, {"b", 2}}) {
    std::vector<float> v(static_cast<size_t>(rows * 8), 1.0f);
    std::ofstream(dir + "/model.prompt_table." + name + ".weight.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  }
  auto t = PromptTables::from_model_dir(dir, c);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->end_engine_id(), 50 + 5);
  std::vector<int32_t> ids = {50, 7, 51};
  t->map_ids(ids, 1, "req");  // task b: rows 0 and 1 are engine rows 3 and 4
  EXPECT_EQ(ids, (std::vector<int32_t>{53, 7, 54}));
  std::vector<int32_t> beyond = {52};
  EXPECT_THROW(t->map_ids(beyond, 1, "req"), Error);  // b has 2 rows
  std::vector<int32_t> none = {50};
  EXPECT_THROW(t->map_ids(none, -1, "req"), Error);
  EXPECT_EQ(t->virtual_ids(0, 2, "req"), (std::vector<int32_t>{50, 51}));
  EXPECT_THROW(t->virtual_ids(1, 3, "req"), Error);
  EXPECT_THROW(t->task("c", "req"), Error);
  EXPECT_EQ(t->task("1", "req"), 1);
  // A short table file.
  std::filesystem::resize_file(dir + "/model.prompt_table.b.weight.bin", 10);
  EXPECT_THROW(PromptTables::from_model_dir(dir, c), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ftx
