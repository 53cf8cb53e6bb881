// FT's GPT-MoE in config.ini and the layout (docs/ft-layout.md#mixture-of-experts): the [structure] section as
// FT's megatron_gpt_moe_ckpt_convert.py writes it (configparser's text of gpt_with_moe = 1,
// expert_num = 4, moe_layers = [1, 3]), the round trip through to_ini, its errors, the files
// ft_weight_files() expects of a MoE layer. (The stacked experts' jobs: convert_layout_test's
// I51_StackedExpertsSplitEachExpert.)
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_config.h"

namespace ftx {
namespace {

const char* kBase =
    "[gpt]\nmodel_name = gpt\nhead_num = 2\nsize_per_head = 4\ninter_size = 16\nnum_layer = 4\n"
    "max_pos_seq_len = 16\nvocab_size = 50\nstart_id = 0\nend_id = 49\nweight_data_type = fp32\n";

ModelConfig parse(const std::string& extra) { return ModelConfig::from_ini(IniFile::parse(kBase + extra, "cfg")); }

// FT's [structure] text as its converter writes it, with ftx's moe_top_k and moe_router in [gpt]
// (FT takes the top-k at run time); the section comes back as FT's text.
TEST(MoeConfig, ReadsFtStructureSectionAndRoundTrips) {
  const ModelConfig c = parse("moe_top_k = 1\nmoe_router = softmax_topk\n\n[structure]\ngpt_with_moe = 1\n"
                              "expert_num = 4\nmoe_layers = [1, 3]\n\n");
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.expert_num, 4);
  EXPECT_EQ(c.moe_layers, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.moe_top_k, 1);
  EXPECT_EQ(c.moe_routing, MoeRouting::kSoftmaxTopK);
  EXPECT_TRUE(c.is_moe_layer(3));
  EXPECT_FALSE(c.is_moe_layer(2));
  const IniFile out = c.to_ini();
  EXPECT_EQ(out.get("structure", "moe_layers"), "[1, 3]");
  EXPECT_EQ(out.get("structure", "gpt_with_moe"), "1");
  EXPECT_EQ(out.get("structure", "expert_num"), "4");
  EXPECT_FALSE(out.has("structure", "moe_k"));  // one key for the top-k: [gpt] moe_top_k
  const ModelConfig back = ModelConfig::from_ini(IniFile::parse(out.to_string(), "again"));
  EXPECT_EQ(back.moe_layers, c.moe_layers);
  EXPECT_EQ(back.expert_num, 4);
  EXPECT_EQ(back.moe_top_k, 1);
  EXPECT_EQ(back.moe_routing, MoeRouting::kSoftmaxTopK);
}

TEST(MoeConfig, NoStructureOrGptWithMoeZeroIsDense) {
  EXPECT_FALSE(parse("").is_moe());
  EXPECT_FALSE(parse("[structure]\ngpt_with_moe = 0\nexpert_num = 0\nmoe_layers = []\n").is_moe());
  EXPECT_FALSE(parse("").to_ini().has_section("structure"));
}

TEST(MoeConfig, ErrorsNameTheKey) {
  for (const char* bad : {"moe_top_k = 2\n[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1, x]\n",
                          "moe_top_k = 2\n[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1, 7]\n",
                          "moe_top_k = 2\n[structure]\ngpt_with_moe = 1\nexpert_num = 0\nmoe_layers = [1]\n",
                          "moe_top_k = 5\n[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1]\n",
                          // FT's own folder: its top-k is a run-time flag, not guessed
                          "[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1]\n"}) {
    try {
      parse(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("[structure]") != std::string::npos || m.find("moe_top_k") != std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

// Megatron-DeepSpeed's experts (a GPT FFN, has_bias): FT's expert bias files beside the weights.
TEST(MoeConfig, WeightFilesOfMoeLayers) {
  const ModelConfig c = parse("moe_top_k = 2\n[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1, 3]\n");
  std::map<std::string, std::vector<int64_t>> f;
  for (const FtWeightFile& w : ft_weight_files(c, 2)) f[w.file_name()] = w.shape;
  const int64_t H = 8, E = 4, I = 16;
  EXPECT_EQ(f.at("model.layers.1.mlp.moe.gate.wg.weight.bin"), (std::vector<int64_t>{H, E}));
  EXPECT_EQ(f.at("model.layers.1.mlp.moe.experts.dense_h_to_4h.weight.1.bin"), (std::vector<int64_t>{E, H, I / 2}));
  EXPECT_EQ(f.at("model.layers.1.mlp.moe.experts.dense_h_to_4h.bias.0.bin"), (std::vector<int64_t>{E, I / 2}));
  EXPECT_EQ(f.at("model.layers.3.mlp.moe.experts.dense_4h_to_h.weight.1.bin"), (std::vector<int64_t>{E, I / 2, H}));
  EXPECT_EQ(f.at("model.layers.3.mlp.moe.experts.dense_4h_to_h.bias.bin"), (std::vector<int64_t>{E, H}));
  EXPECT_EQ(f.count("model.layers.1.mlp.dense_h_to_4h.weight.0.bin"), 0u);
  EXPECT_EQ(f.count("model.layers.1.mlp.dense_4h_to_h.bias.bin"), 0u);
  EXPECT_EQ(f.count("model.layers.2.mlp.dense_h_to_4h.weight.0.bin"), 1u);
}

}  // namespace
}  // namespace ftx
