// FT's GPT-MoE in config.ini and the layout (docs/ft-layout.md#gpt-moe): the [structure] section as
// FT's megatron_gpt_moe_ckpt_convert.py writes it (configparser's text of gpt_with_moe = 1,
// expert_num = 4, moe_layers = [1, 3]), the round trip through to_ini, its errors, the files
// ft_weight_files() expects of a MoE layer, and the stacked-expert tensor jobs' bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/convert/derived_tensor.h"
#include "lib/convert/tensor_job.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_config.h"

namespace ftx {
namespace {

const char* kBase =
    "[gpt]\nmodel_name = gpt\nhead_num = 2\nsize_per_head = 4\ninter_size = 16\nnum_layer = 4\n"
    "max_pos_seq_len = 16\nvocab_size = 50\nstart_id = 0\nend_id = 49\nweight_data_type = fp32\n";

ModelConfig parse(const std::string& extra) { return ModelConfig::from_ini(IniFile::parse(kBase + extra, "cfg")); }

TEST(MoeConfig, ReadsFtStructureSectionAndRoundTrips) {
  const ModelConfig c = parse("\n[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1, 3]\n\n");
  EXPECT_TRUE(c.moe.any());
  EXPECT_EQ(c.moe.expert_num, 4);
  EXPECT_EQ(c.moe.layers, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.moe.k, 0);
  EXPECT_TRUE(c.moe.is_moe_layer(3));
  EXPECT_FALSE(c.moe.is_moe_layer(2));
  ModelConfig k2 = c;
  k2.moe.k = 2;
  const IniFile out = k2.to_ini();
  EXPECT_EQ(out.get("structure", "moe_layers"), "[1, 3]");
  EXPECT_EQ(out.get("structure", "gpt_with_moe"), "1");
  const ModelConfig back = ModelConfig::from_ini(IniFile::parse(out.to_string(), "again"));
  EXPECT_EQ(back.moe.layers, k2.moe.layers);
  EXPECT_EQ(back.moe.expert_num, 4);
  EXPECT_EQ(back.moe.k, 2);
}

TEST(MoeConfig, NoStructureOrEmptyListIsDense) {
  EXPECT_FALSE(parse("").moe.any());
  EXPECT_FALSE(parse("[structure]\ngpt_with_moe = 0\nexpert_num = 0\nmoe_layers = []\n").moe.any());
  EXPECT_FALSE(parse("").to_ini().has_section("structure"));
}

TEST(MoeConfig, ErrorsNameTheKey) {
  for (const char* bad : {"[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1, x]\n",
                          "[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1, 7]\n",
                          "[structure]\ngpt_with_moe = 1\nexpert_num = 0\nmoe_layers = [1]\n",
                          "[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1]\nmoe_k = 5\n"}) {
    try {
      parse(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("[structure]"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
}

TEST(MoeConfig, WeightFilesOfMoeLayers) {
  const ModelConfig c = parse("[structure]\ngpt_with_moe = 1\nexpert_num = 4\nmoe_layers = [1, 3]\n");
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

// Experts [I, H] (nn.Linear) stacked and transposed to [E, H, I], or [H, I] to [E, I, H] split on
// axis 1: element by element against the index formula numpy's split gives.
TEST(MoeConfig, StackedExpertJobsMatchNumpySplit) {
  const int64_t E = 3, I = 4, H = 2, T = 2;
  std::vector<std::vector<float>> data(E);
  std::vector<TensorView> experts;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t i = 0; i < I * H; ++i) data[e].push_back(static_cast<float>(100 * e + i));
    experts.push_back(owned_tensor(data[e], {I, H}, "expert"));
  }
  TensorJob fc1;
  fc1.name = "fc1";
  fc1.shards = experts;
  fc1.stack = true;
  fc1.merge_axis = 0;
  fc1.transpose = true;
  fc1.split = OutSplit::kColumn;
  int calls = 0;
  run_tensor_job(fc1, T, DType::kFloat32, [&](const JobOutput& o) {
    ++calls;
    ASSERT_EQ(o.shape, (std::vector<int64_t>{E, H, I / T}));
    const float* p = reinterpret_cast<const float*>(o.data);
    for (int64_t e = 0; e < E; ++e)  // out[e, h, j] = W_e[rank * I/T + j, h]
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < I / T; ++j)
          EXPECT_EQ(p[(e * H + h) * (I / T) + j], data[e][(o.rank * (I / T) + j) * H + h]);
  });
  EXPECT_EQ(calls, T);
  // [H', I'] = [I, H] read as dense_4h_to_h: transposed [E, H, I] split on axis 1 (rows of each expert).
  TensorJob fc2 = fc1;
  fc2.split = OutSplit::kAxis1;
  run_tensor_job(fc2, T, DType::kFloat32, [&](const JobOutput& o) {
    ASSERT_EQ(o.shape, (std::vector<int64_t>{E, H / T, I}));
    const float* p = reinterpret_cast<const float*>(o.data);
    for (int64_t e = 0; e < E; ++e)  // out[e, r, i] = W_e[i, rank * H/T + r]
      for (int64_t r = 0; r < H / T; ++r)
        for (int64_t i = 0; i < I; ++i)
          EXPECT_EQ(p[(e * (H / T) + r) * I + i], data[e][i * H + o.rank * (H / T) + r]);
  });
}

}  // namespace
}  // namespace ftx
