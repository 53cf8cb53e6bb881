// ModelConfig <-> config.ini and ft_weight_files (the file list the converters write and the engine
// loads), plus TensorJob's QKV reorder and MQA split on hand-made tensors.
#include <gtest/gtest.h>

#include <map>

#include "formats/error.h"
#include "lib/convert/tensor_job.h"
#include "lib/model/ft_weight_layout.h"
#include "lib/model/model_config.h"

namespace ftx {
namespace {

ModelConfig small() {
  ModelConfig c;
  c.head_num = 4;
  c.size_per_head = 8;
  c.kv_head_num = 4;
  c.inter_size = 128;
  c.num_layer = 2;
  c.vocab_size = 100;
  c.max_pos_seq_len = 16;
  c.start_id = c.end_id = 99;
  c.layernorm_eps = 1e-5;
  c.activation = Activation::kGelu;
  return c;
}

// A 1-D fp32 view of `data` (which must outlive it).
TensorView float_view(std::vector<float>& data) {
  TensorView t;
  t.dtype = DType::kFloat32;
  t.shape = {static_cast<int64_t>(data.size())};
  t.storage.data = reinterpret_cast<const uint8_t*>(data.data());
  t.storage.nbytes = data.size() * 4;
  return t;
}

TEST(ModelConfig, IniRoundTripKeepsEveryField) {
  ModelConfig c = small();
  c.ft_variant = FtVariant::kGptBigCode;
  c.attention = AttentionKind::kMultiQuery;
  c.kv_head_num = 1;
  c.tied_embeddings = false;
  c.weight_data_type = DType::kBFloat16;
  c.tensor_para_size = 2;
  IniFile ini = IniFile::parse(c.to_ini().to_string(), "mem");
  ModelConfig d = ModelConfig::from_ini(ini);
  EXPECT_EQ(d.ft_variant, c.ft_variant);
  EXPECT_EQ(d.head_num, 4);
  EXPECT_EQ(d.kv_head_num, 1);
  EXPECT_EQ(d.attention, AttentionKind::kMultiQuery);
  EXPECT_EQ(d.activation, Activation::kGelu);  // ftx key keeps erf-GELU apart from FT's Gelu
  EXPECT_DOUBLE_EQ(d.layernorm_eps, 1e-5);
  EXPECT_FALSE(d.tied_embeddings);
  EXPECT_EQ(d.weight_data_type, DType::kBFloat16);
  EXPECT_EQ(d.tensor_para_size, 2);
  EXPECT_EQ(ini.get("gpt", "n_embd"), "32");
  EXPECT_EQ(ini.get("gpt", "storage_dtype"), "bfloat16");
  EXPECT_EQ(ini.get("gpt", "weight_data_type"), "bf16");
}

TEST(ModelConfig, FtOnlyIniUsesFtDefaults) {
  IniFile ini = IniFile::parse(
      "[gpt]\nmodel_name=gpt\nhead_num=4\nsize_per_head=8\ninter_size=128\nnum_layer=2\nvocab_size=100\n"
      "start_id=1\nend_id=2\nmax_pos_seq_len=16\nweight_data_type=fp16\n",
      "cfg.ini");
  ModelConfig c = ModelConfig::from_ini(ini);
  EXPECT_DOUBLE_EQ(c.layernorm_eps, 1e-6);
  EXPECT_EQ(c.activation, Activation::kGeluTanh);  // FT's Gelu is the tanh approximation
  EXPECT_EQ(c.weight_data_type, DType::kFloat16);
  EXPECT_EQ(c.tensor_para_size, 1);
  EXPECT_TRUE(c.tied_embeddings);
}

TEST(ModelConfig, MissingKeyNamesKeyAndFile) {
  IniFile ini = IniFile::parse("[gpt]\nmodel_name=gpt\nhead_num=4\n", "x/config.ini");
  try {
    ModelConfig::from_ini(ini);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size_per_head"), std::string::npos) << e.what();
  }
}

TEST(FtWeightFiles, GptTp2) {
  auto files = ft_weight_files(small(), 2);
  std::map<std::string, FtWeightFile> by;
  for (auto& f : files) by[f.file_name()] = f;
  EXPECT_EQ(by.at("model.layers.1.attention.query_key_value.weight.1.bin").shape, (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(by.at("model.layers.0.attention.dense.weight.0.bin").shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(by.at("model.layers.0.mlp.dense_h_to_4h.bias.1.bin").shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(by.at("model.wte.bin").shape, (std::vector<int64_t>{100, 32}));
  EXPECT_TRUE(by.at("model.lm_head.weight.bin").optional);
  EXPECT_EQ(by.count("model.layers.0.mlp.dense_h_to_4h.gate.weight.0.bin"), 0u);
  // wpe, wte, lm_head, final LN w/b + per layer (4 LN + 2 replicated biases + 6 split x 2 ranks)
  EXPECT_EQ(files.size(), 5u + 2u * 18u);
}

TEST(FtWeightFiles, MultiQueryGatedNoBiasAndErrors) {
  ModelConfig c = small();
  c.attention = AttentionKind::kMultiQuery;
  c.kv_head_num = 1;
  c.activation = Activation::kSwiGlu;
  c.has_bias = false;
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  EXPECT_EQ(by.at("model.layers.0.attention.query_key_value.weight.0.bin").shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(by.count("model.layers.0.mlp.dense_h_to_4h.gate.weight.1.bin"), 1u);
  EXPECT_EQ(by.count("model.layers.0.attention.dense.bias.bin"), 0u);
  EXPECT_THROW(ft_weight_files(small(), 3), Error);
}

// hidden_size apart from head_num × size_per_head (Qwen3, Gemma): the residual's files are H wide,
// Q and attention.dense's input Q = heads × head_dim; config.ini says hidden_size only then.
TEST(FtWeightFiles, HiddenApartFromHeadsTimesHeadDim) {
  ModelConfig c = small();  // 4 heads × 8: Q 32 wide
  c.hidden_size = 24;
  c.kv_head_num = 2;
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  EXPECT_EQ(by.at("model.layers.0.attention.query_key_value.weight.1.bin").shape, (std::vector<int64_t>{24, 16 + 2 * 8}));
  EXPECT_EQ(by.at("model.layers.0.attention.dense.weight.0.bin").shape, (std::vector<int64_t>{16, 24}));
  EXPECT_EQ(by.at("model.layers.0.attention.dense.bias.bin").shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(by.at("model.layers.0.mlp.dense_h_to_4h.weight.0.bin").shape, (std::vector<int64_t>{24, 64}));
  EXPECT_EQ(by.at("model.wte.bin").shape, (std::vector<int64_t>{100, 24}));
  EXPECT_EQ(c.to_ini().get("gpt", "hidden_size"), "24");
  EXPECT_EQ(c.to_ini().get("gpt", "n_embd"), "24");
  EXPECT_EQ(ModelConfig::from_ini(IniFile::parse(c.to_ini().to_string(), "x/2-gpu/config.ini")).hidden(), 24);
  EXPECT_FALSE(small().to_ini().has("gpt", "hidden_size"));
}

// Qwen3's per-head q/k norm gammas: one [head_dim] file each per layer, whole on every rank.
TEST(FtWeightFiles, I46_QkNormGammasReplicated) {
  ModelConfig c = small();  // 4 heads x 8
  c.qk_norm = true;
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  for (const char* n : {"model.layers.0.attention.q_layernorm.weight.bin", "model.layers.1.attention.k_layernorm.weight.bin"})
    EXPECT_EQ(by.at(n).shape, (std::vector<int64_t>{8})) << n;
  for (auto& f : ft_weight_files(small(), 2))
    EXPECT_EQ(f.file_name().find("attention.q_layernorm"), std::string::npos) << f.file_name();
}

// Gemma's sandwich norms: the attention's and the FFN's output norms, [H] each, replicated, with
// bias files only for LayerNorm; post_attention_layernorm stays the FFN's input norm.
TEST(FtWeightFiles, I46_SandwichNormFiles) {
  ModelConfig c = small();
  c.sandwich_norm = true;
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  for (const char* n : {"model.layers.1.attention.post_layernorm.weight.bin", "model.layers.1.attention.post_layernorm.bias.bin",
                        "model.layers.1.mlp.post_layernorm.weight.bin", "model.layers.1.mlp.post_layernorm.bias.bin",
                        "model.layers.1.post_attention_layernorm.weight.bin"})
    EXPECT_EQ(by.at(n).shape, (std::vector<int64_t>{c.hidden()})) << n;
  c.normalization = Normalization::kRmsNorm;
  by.clear();
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  EXPECT_EQ(by.count("model.layers.0.mlp.post_layernorm.weight.bin"), 1u);
  EXPECT_EQ(by.count("model.layers.0.mlp.post_layernorm.bias.bin"), 0u);
  for (auto& f : ft_weight_files(small(), 2))
    EXPECT_EQ(f.file_name().find("post_layernorm"), std::string::npos) << f.file_name();
  c.norm = NormPlacement::kPost;  // a post-norm block has no place for them
  EXPECT_THROW(ft_weight_files(c, 1), Error);
}

TEST(FtWeightFiles, GptJAndNeoX) {
  ModelConfig j = small();
  j.ft_variant = FtVariant::kGptJ;
  j.position = PositionEmbedding::kRotary;
  j.rotary_dim = 4;
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(j, 1)) by[f.file_name()] = f;
  EXPECT_EQ(by.count("model.lm_head.bias.bin"), 1u);
  EXPECT_EQ(by.count("model.layers.0.post_attention_layernorm.weight.bin"), 0u);
  ModelConfig n = j;
  n.ft_variant = FtVariant::kGptNeoX;
  n.parallel_residual = true;
  by.clear();
  for (auto& f : ft_weight_files(n, 1)) by[f.file_name()] = f;
  EXPECT_EQ(by.count("model.layers.0.mlp.attention.bias.sum.bin"), 1u);
  EXPECT_EQ(by.count("model.layers.0.attention.dense.bias.bin"), 0u);
}

// A 1 x 12 "QKV bias" per shard: 2 heads, d=2, in Megatron v2 order [n_l, 3, d].
TEST(TensorJob, QkvReorderMergeAndSplit) {
  // value = 100*qkv + 10*head + e, laid out [head, qkv, e]
  std::vector<float> s0, s1;
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 3; ++j)
      for (int e = 0; e < 2; ++e) {
        s0.push_back(100 * j + 10 * h + e);
        s1.push_back(100 * j + 10 * (h + 2) + e);
      }
  TensorJob job;
  job.name = "qkv";
  job.shards = {float_view(s0), float_view(s1)};
  job.merge_axis = 1;
  job.segments = 3;
  job.qkv = QkvOrder::kHeadQkv;
  job.qkv_heads = 2;
  job.head_dim = 2;
  job.split = OutSplit::kColumn;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<float>> outs;  // JobOutput::data is valid only inside emit: copy it
  run_tensor_job(job, 4, DType::kFloat32, [&](const JobOutput& o) {
    shapes.push_back(o.shape);
    outs.emplace_back(reinterpret_cast<const float*>(o.data), reinterpret_cast<const float*>(o.data + o.nbytes));
  });
  ASSERT_EQ(outs.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const float* f = outs[r].data();
    ASSERT_EQ(shapes[r], (std::vector<int64_t>{6}));
    for (int j = 0; j < 3; ++j)
      for (int e = 0; e < 2; ++e) EXPECT_EQ(f[j * 2 + e], 100 * j + 10 * r + e) << "rank " << r;
  }
}

// Megatron Core's grouped QKV: 4 query heads in 2 groups, d = 1, two training shards of one group
// each, rows [group][q0, q1, K, V]; inference TP 2 gets [Q (2 heads) | K (1) | V (1)] per rank.
TEST(TensorJob, GroupedQkvReorderMergeAndSplit) {
  // Query head h = 10 + h, K of group g = 100 + g, V of group g = 200 + g.
  std::vector<float> s0 = {10, 11, 100, 200}, s1 = {12, 13, 101, 201};
  TensorJob job;
  job.name = "qkv";
  job.shards = {float_view(s0), float_view(s1)};
  job.merge_axis = 1;
  job.segments = 3;
  job.seg_weights = {2, 1, 1};
  job.qkv = QkvOrder::kGroupQkv;
  job.qkv_heads = 2;
  job.qkv_groups = 1;
  job.head_dim = 1;
  job.split = OutSplit::kColumn;
  std::vector<std::vector<float>> outs;
  for (int64_t tp : {1, 2}) {
    outs.clear();
    run_tensor_job(job, tp, DType::kFloat32, [&](const JobOutput& o) {
      outs.emplace_back(reinterpret_cast<const float*>(o.data), reinterpret_cast<const float*>(o.data + o.nbytes));
    });
    if (tp == 1) {
      ASSERT_EQ(outs.size(), 1u);
      EXPECT_EQ(outs[0], (std::vector<float>{10, 11, 12, 13, 100, 101, 200, 201}));
    } else {
      ASSERT_EQ(outs.size(), 2u);
      EXPECT_EQ(outs[0], (std::vector<float>{10, 11, 100, 200}));
      EXPECT_EQ(outs[1], (std::vector<float>{12, 13, 101, 201}));
    }
  }
  // A shard whose size is not groups x (heads/groups + 2) x d is an error naming the layout.
  std::vector<float> bad = {1, 2, 3};
  job.shards = {float_view(bad), float_view(bad)};
  try {
    run_tensor_job(job, 1, DType::kFloat32, [](const JobOutput&) {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("query groups"), std::string::npos) << e.what();
  }
}

// A QKV weight [out, in] transposed to FT's [in, out] with its output features reordered, for each
// shard order, against the definition. With the source already in the output dtype the reorder is
// done inside the transpose; with layernorm1p's `add` (a cast pass first) after it: both must agree
// with the definition, on head sizes that do and do not fill the transpose's 8 x 8 / 4 x 4 blocks.
TEST(TensorJob, TransposedQkvWeightMatchesDefinition) {
  for (QkvOrder order : {QkvOrder::kHeadQkv, QkvOrder::kHeadDimQkv, QkvOrder::kGroupQkv})
    for (int64_t hd : {8, 5})
      for (float add : {0.f, 1.f}) {
        const int64_t n = 4, g = 2, q = n / g, C = 13;  // heads, groups (kGroupQkv), input features
        const int64_t R = order == QkvOrder::kGroupQkv ? g * (q + 2) * hd : 3 * n * hd;
        std::vector<float> src(static_cast<size_t>(R * C));
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c) src[r * C + c] = static_cast<float>(r * 100 + c);
        // Source row of output feature o (FT order: all Q, then K, then V).
        auto row_of = [&](int64_t o) -> int64_t {
          if (order == QkvOrder::kGroupQkv) {
            const int64_t nq = n * hd, nk = g * hd;
            if (o < nq) return (o / (q * hd)) * (q + 2) * hd + o % (q * hd);
            const bool v = o >= nq + nk;
            const int64_t k = o - nq - (v ? nk : 0);
            return (k / hd) * (q + 2) * hd + (q + (v ? 1 : 0)) * hd + k % hd;
          }
          const int64_t j = o / (n * hd), h = (o / hd) % n, e = o % hd;
          return order == QkvOrder::kHeadQkv ? (h * 3 + j) * hd + e : (h * hd + e) * 3 + j;
        };
        TensorJob job;
        job.name = "qkv";
        TensorView v = float_view(src);
        v.shape = {R, C};
        job.shards = {v};
        job.transpose = true;
        job.add = add;
        job.qkv = order;
        job.qkv_heads = n;
        job.qkv_groups = order == QkvOrder::kGroupQkv ? g : 0;
        job.head_dim = hd;
        job.split = OutSplit::kReplicated;
        std::vector<float> out;
        run_tensor_job(job, 1, DType::kFloat32, [&](const JobOutput& o) {
          ASSERT_EQ(o.shape, (std::vector<int64_t>{C, R}));
          out.assign(reinterpret_cast<const float*>(o.data), reinterpret_cast<const float*>(o.data + o.nbytes));
        });
        ASSERT_EQ(out.size(), src.size());
        for (int64_t c = 0; c < C; ++c)
          for (int64_t o = 0; o < R; ++o)
            ASSERT_EQ(out[c * R + o], src[row_of(o) * C + c] + add)
                << "order " << static_cast<int>(order) << " hd " << hd << " add " << add << " at " << c << "," << o;
      }
}

TEST(FtWeightFiles, GroupedQueryAttentionAndRmsNorm) {
  ModelConfig c = small();
  c.kv_head_num = 2;
  c.normalization = Normalization::kRmsNorm;
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  // [H, (4/2 + 2/2 + 2/2) x 8] per rank.
  EXPECT_EQ(by.at("model.layers.0.attention.query_key_value.weight.1.bin").shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(by.count("model.layers.0.input_layernorm.bias.bin"), 0u);
  EXPECT_EQ(by.count("model.final_layernorm.bias.bin"), 0u);
  EXPECT_EQ(by.count("model.layers.1.post_attention_layernorm.weight.bin"), 1u);
  EXPECT_THROW(ft_weight_files(c, 4), Error);  // 2 K/V heads over 4 ranks
  ModelConfig back = ModelConfig::from_ini(c.to_ini());
  EXPECT_EQ(back.kv_head_num, 2);
  EXPECT_EQ(back.normalization, Normalization::kRmsNorm);
}

// Only fp32, fp16 and bf16 files are written: any other output type is refused by name.
TEST(TensorJob, RefusesOtherOutputTypes) {
  std::vector<float> data = {1.0f, 2.0f};
  TensorJob job;
  job.name = "model.wte";
  job.shards.resize(1);
  job.shards[0].dtype = DType::kFloat32;
  job.shards[0].shape = {2};
  job.shards[0].storage.data = reinterpret_cast<const uint8_t*>(data.data());
  job.shards[0].storage.nbytes = 8;
  try {
    run_tensor_job(job, 1, DType::kInt8, [](const JobOutput&) { FAIL() << "emitted"; });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.wte: unsupported output data type int8"), std::string::npos) << e.what();
  }
}

// Issue 51: a mixture of experts (Mixtral's) on the dense model `small` is: layer 1's FFN 4 experts.
ModelConfig moe() {
  ModelConfig c = small();
  c.activation = Activation::kSwiGlu;
  c.normalization = Normalization::kRmsNorm;
  c.has_bias = false;
  c.expert_num = 4;
  c.moe_layers = {1};
  c.moe_top_k = 2;
  return c;
}

std::string load_error(const std::string& text) {
  try {
    ModelConfig::from_ini(IniFile::parse(text, "out/1-gpu/config.ini"));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// FT's GPT-MoE [structure] section (moe_layers a Python list, as its converter writes it) and ftx's
// moe_top_k and moe_router, written only for a mixture of experts and read back.
TEST(ModelConfig, I51_MoeKeysRoundTrip) {
  const IniFile ini = moe().to_ini();
  EXPECT_EQ(ini.get("structure", "gpt_with_moe"), "1");
  EXPECT_EQ(ini.get("structure", "expert_num"), "4");
  EXPECT_EQ(ini.get("structure", "moe_layers"), "[1]");
  EXPECT_EQ(ini.get("gpt", "moe_top_k"), "2");
  EXPECT_EQ(ini.get("gpt", "moe_router"), "softmax_topk_renorm");
  const ModelConfig d = ModelConfig::from_ini(IniFile::parse(ini.to_string(), "mem"));
  EXPECT_EQ(d.expert_num, 4);
  EXPECT_EQ(d.moe_layers, (std::vector<int64_t>{1}));
  EXPECT_EQ(d.moe_top_k, 2);
  EXPECT_EQ(d.moe_routing, MoeRouting::kSoftmaxTopKRenorm);
  EXPECT_FALSE(d.is_moe_layer(0));
  EXPECT_TRUE(d.is_moe_layer(1));
  EXPECT_EQ(d.to_ini().to_string(), ini.to_string());
  EXPECT_FALSE(small().to_ini().has_section("structure"));
  EXPECT_FALSE(small().to_ini().has("gpt", "moe_top_k"));
  ModelConfig plain = moe();
  plain.moe_routing = MoeRouting::kSoftmaxTopK;
  plain.moe_layers = {0, 1};
  const ModelConfig e = ModelConfig::from_ini(IniFile::parse(plain.to_ini().to_string(), "mem"));
  EXPECT_EQ(e.moe_routing, MoeRouting::kSoftmaxTopK);
  EXPECT_EQ(e.moe_layers, (std::vector<int64_t>{0, 1}));
}

// Each MoE key that is wrong or missing is named with its value; FT's run-time moe_k is not guessed.
TEST(ModelConfig, I51_MoeKeysRefusedByName) {
  const std::string text = moe().to_ini().to_string();
  auto with = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return std::string(text).replace(at, from.size(), to);
  };
  const std::pair<std::string, std::string> cases[] = {
      {with("moe_top_k = 2\n", ""), "[gpt] has no moe_top_k"},
      {with("moe_top_k = 2", "moe_top_k = 5"), "[gpt] moe_top_k = 5: must be in [1, 4]"},
      {with("moe_layers = [1]", "moe_layers = [1, 2]"), "[structure] moe_layers = [1, 2]: layer 2 is not below num_layer 2"},
      {with("moe_layers = [1]", "moe_layers = [1, 0]"), "[structure] moe_layers = [1, 0]: layers must be listed once"},
      {with("moe_layers = [1]", "moe_layers = [x]"), "[structure] moe_layers = [x]: 'x' is not a layer index"},
      {with("expert_num = 4", "expert_num = 0"), "[structure] expert_num = 0: must be in [1, 65536]"},
      {with("moe_router = softmax_topk_renorm", "moe_router = sigmoid"), "[gpt] moe_router = sigmoid: not a router"},
      {with("gpt_with_moe = 1", "gpt_with_moe = 0"), "moe_top_k = 2 without [structure] gpt_with_moe = 1"},
  };
  for (const auto& [ini, want] : cases) {
    const std::string got = load_error(ini);
    EXPECT_NE(got.find("out/1-gpu/config.ini"), std::string::npos) << got;
    EXPECT_NE(got.find(want), std::string::npos) << "want '" << want << "', got '" << got << "'";
  }
  ModelConfig biased = moe();  // gated: FT's layout has no file for an expert's gate bias
  biased.has_bias = true;
  EXPECT_THROW(biased.validate(1, "x"), Error);
  biased.activation = Activation::kGelu;  // Megatron-DeepSpeed's experts: FT's bias files
  EXPECT_NO_THROW(biased.validate(1, "x"));
  // No layout has bias files for a shared expert, or for whole experts per rank.
  auto refusal = [](const ModelConfig& m, int64_t tp) -> std::string {
    try {
      m.validate(tp, "x");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  ModelConfig shared = biased;
  shared.moe_shared_inter_size = 64;
  EXPECT_NE(refusal(shared, 1).find("has_bias with a shared expert (moe_shared_expert_inter_size = 64)"),
            std::string::npos)
      << refusal(shared, 1);
  ModelConfig whole = biased;
  whole.moe_ep_size = 2;
  EXPECT_NE(refusal(whole, 2).find("has_bias with moe_ep_size = 2"), std::string::npos) << refusal(whole, 2);
}

// A layer of experts has FT's GPT-MoE files in place of the dense FFN's: the router whole, the
// experts stacked on axis 0, each sliced over the ranks as the dense FFN is.
TEST(FtWeightFiles, I51_MoeLayerFiles) {
  const ModelConfig c = moe();  // H 32, I 128, E 4
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  EXPECT_EQ(by.at("model.layers.1.mlp.moe.gate.wg.weight.bin").shape, (std::vector<int64_t>{32, 4}));
  for (int r = 0; r < 2; ++r) {
    const std::string R = "." + std::to_string(r) + ".bin";
    EXPECT_EQ(by.at("model.layers.1.mlp.moe.experts.dense_h_to_4h.weight" + R).shape, (std::vector<int64_t>{4, 32, 64}));
    EXPECT_EQ(by.at("model.layers.1.mlp.moe.experts.dense_h_to_4h.gate.weight" + R).shape,
              (std::vector<int64_t>{4, 32, 64}));
    EXPECT_EQ(by.at("model.layers.1.mlp.moe.experts.dense_4h_to_h.weight" + R).shape, (std::vector<int64_t>{4, 64, 32}));
    EXPECT_EQ(by.count("model.layers.1.mlp.dense_h_to_4h.weight" + R), 0u);
    EXPECT_EQ(by.count("model.layers.0.mlp.dense_h_to_4h.weight" + R), 1u);  // layer 0 stays dense
  }
  EXPECT_EQ(by.count("model.layers.0.mlp.moe.gate.wg.weight.bin"), 0u);
}

// Qwen2-MoE's layer of experts: the experts of their own width (moe_inter_size, inter_size staying
// the dense layers'), and ftx's shared expert files: its FFN sliced as a dense one, its sigmoid gate
// [H, 1] whole on every rank; the two widths written to config.ini only when they say something.
TEST(FtWeightFiles, I51_QwenSharedExpertFiles) {
  ModelConfig c = moe();  // H 32, I 128, E 4
  c.moe_inter_size = 48;
  c.moe_shared_inter_size = 96;
  c.moe_routing = MoeRouting::kSoftmaxTopK;
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  const std::string p = "model.layers.1.mlp.moe.";
  EXPECT_EQ(by.at(p + "shared_expert_gate.weight.bin").shape, (std::vector<int64_t>{32, 1}));
  for (int r = 0; r < 2; ++r) {
    const std::string R = "." + std::to_string(r) + ".bin";
    EXPECT_EQ(by.at(p + "experts.dense_h_to_4h.weight" + R).shape, (std::vector<int64_t>{4, 32, 24}));
    EXPECT_EQ(by.at(p + "experts.dense_4h_to_h.weight" + R).shape, (std::vector<int64_t>{4, 24, 32}));
    EXPECT_EQ(by.at(p + "shared_expert.dense_h_to_4h.weight" + R).shape, (std::vector<int64_t>{32, 48}));
    EXPECT_EQ(by.at(p + "shared_expert.dense_h_to_4h.gate.weight" + R).shape, (std::vector<int64_t>{32, 48}));
    EXPECT_EQ(by.at(p + "shared_expert.dense_4h_to_h.weight" + R).shape, (std::vector<int64_t>{48, 32}));
    EXPECT_EQ(by.at("model.layers.0.mlp.dense_h_to_4h.weight" + R).shape, (std::vector<int64_t>{32, 64}));
  }
  EXPECT_EQ(by.count("model.layers.0.mlp.moe.shared_expert_gate.weight.bin"), 0u);
  EXPECT_EQ(by.count("model.layers.1.mlp.moe.shared_expert.dense_h_to_4h.weight.0.bin"), 1u);
  for (auto& f : ft_weight_files(moe(), 1)) EXPECT_EQ(f.name.find("shared_expert"), std::string::npos) << f.name;

  const IniFile ini = c.to_ini();
  EXPECT_EQ(ini.get("gpt", "moe_inter_size"), "48");
  EXPECT_EQ(ini.get("gpt", "moe_shared_expert_inter_size"), "96");
  const ModelConfig d = ModelConfig::from_ini(IniFile::parse(ini.to_string(), "mem"));
  EXPECT_EQ(d.moe_inter_size, 48);
  EXPECT_EQ(d.expert_inter(), 48);
  EXPECT_EQ(d.moe_shared_inter_size, 96);
  EXPECT_EQ(d.inter_size, 128);
  EXPECT_EQ(d.to_ini().to_string(), ini.to_string());
  EXPECT_FALSE(moe().to_ini().has("gpt", "moe_inter_size"));
  EXPECT_FALSE(moe().to_ini().has("gpt", "moe_shared_expert_inter_size"));
  EXPECT_EQ(moe().expert_inter(), 128);

  // Refused by name: a width no rank count divides, and the keys without experts.
  ModelConfig odd = c;
  odd.moe_shared_inter_size = 95;
  EXPECT_THROW(odd.validate(2, "x"), Error);
  odd = c;
  odd.moe_inter_size = 47;
  EXPECT_THROW(odd.validate(2, "x"), Error);
  EXPECT_NO_THROW(c.validate(2, "x"));
  std::string text = ini.to_string();
  text.replace(text.find("gpt_with_moe = 1"), 16, "gpt_with_moe = 0");
  const std::string got = load_error(text);
  EXPECT_NE(got.find("without [structure] gpt_with_moe = 1"), std::string::npos) << got;
}

// Expert parallelism (moe_ep_size = T, convert-hf --moe-ep-size): each rank's expert files hold its
// E/T experts whole; config.ini says so, and a moe_ep_size that is not the ranks' count, or does not
// divide the experts, is refused by name.
TEST(FtWeightFiles, I51_WholeExpertsPerRank) {
  ModelConfig c = moe();  // H 32, I 128, E 4
  c.moe_ep_size = 2;
  std::map<std::string, FtWeightFile> by;
  for (auto& f : ft_weight_files(c, 2)) by[f.file_name()] = f;
  EXPECT_EQ(by.at("model.layers.1.mlp.moe.gate.wg.weight.bin").shape, (std::vector<int64_t>{32, 4}));
  for (int r = 0; r < 2; ++r) {
    const std::string R = "." + std::to_string(r) + ".bin";
    EXPECT_EQ(by.at("model.layers.1.mlp.moe.experts.dense_h_to_4h.weight" + R).shape, (std::vector<int64_t>{2, 32, 128}));
    EXPECT_EQ(by.at("model.layers.1.mlp.moe.experts.dense_h_to_4h.gate.weight" + R).shape,
              (std::vector<int64_t>{2, 32, 128}));
    EXPECT_EQ(by.at("model.layers.1.mlp.moe.experts.dense_4h_to_h.weight" + R).shape, (std::vector<int64_t>{2, 128, 32}));
    EXPECT_EQ(by.at("model.layers.0.mlp.dense_h_to_4h.weight" + R).shape, (std::vector<int64_t>{32, 64}));  // dense: sliced
  }
  const IniFile ini = c.to_ini();
  EXPECT_EQ(ini.get("gpt", "moe_ep_size"), "2");
  EXPECT_EQ(ModelConfig::from_ini(IniFile::parse(ini.to_string(), "mem")).moe_ep_size, 2);
  EXPECT_FALSE(moe().to_ini().has("gpt", "moe_ep_size"));
  auto refusal = [&](const ModelConfig& m, int64_t tp) -> std::string {
    try {
      m.validate(tp, "x");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal(c, 4).find("moe_ep_size = 2 with expert_num = 4 at tensor parallel size 4"), std::string::npos)
      << refusal(c, 4);
  ModelConfig three = c;  // 3 experts over 2 ranks
  three.expert_num = 3;
  EXPECT_NE(refusal(three, 2).find("moe_ep_size = 2 with expert_num = 3"), std::string::npos) << refusal(three, 2);
  const std::string text = c.to_ini().to_string();
  const std::string bad = std::string(text).replace(text.find("moe_ep_size = 2"), 15, "moe_ep_size = 9");
  EXPECT_NE(load_error(bad).find("[gpt] moe_ep_size = 9: must be in [1, 4]"), std::string::npos) << load_error(bad);
}

// whole_experts: expert e lands whole (transposed, unsplit) in rank e / (E/T)'s file, in order.
TEST(TensorJob, I51_WholeExpertsInBlocksPerRank) {
  std::vector<std::vector<float>> w(4);
  std::vector<TensorView> views;
  for (int e = 0; e < 4; ++e) {
    for (int o = 0; o < 4; ++o)
      for (int i = 0; i < 2; ++i) w[e].push_back(100 * e + 10 * o + i);
    views.push_back(float_view(w[e]));
    views.back().shape = {4, 2};
  }
  for (OutSplit split : {OutSplit::kColumn, OutSplit::kRow}) {
    TensorJob job;
    job.name = "experts";
    job.shards = views;
    job.transpose = true;  // [in 2, out 4]
    job.split = split;
    job.stack_experts = true;
    job.whole_experts = true;
    std::map<int64_t, std::pair<std::vector<int64_t>, std::vector<float>>> got;
    run_tensor_job(job, 2, DType::kFloat32, [&](const JobOutput& o) {
      got[o.rank] = {o.shape, {reinterpret_cast<const float*>(o.data), reinterpret_cast<const float*>(o.data + o.nbytes)}};
    });
    ASSERT_EQ(got.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      const auto& [shape, v] = got[r];
      ASSERT_EQ(shape, (std::vector<int64_t>{2, 2, 4}));
      for (int k = 0; k < 2; ++k)
        for (int i = 0; i < 2; ++i)
          for (int o = 0; o < 4; ++o) EXPECT_EQ(v[(k * 2 + i) * 4 + o], 100 * (2 * r + k) + 10 * o + i);
    }
    try {
      run_tensor_job(job, 3, DType::kFloat32, [](const JobOutput&) {});
      ADD_FAILURE() << "4 experts over 3 ranks were not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("4 experts do not divide into whole experts over 3 ranks"), std::string::npos)
          << e.what();
    }
  }
}

// stack_experts: each expert transposed and split alone, the ranks' pieces stacked [E, ...].
TEST(TensorJob, I51_StackedExpertsSplitEachExpert) {
  // Expert e's nn.Linear weight [out 4, in 2]: w[o][i] = 100e + 10o + i.
  std::vector<std::vector<float>> w(3);
  std::vector<TensorView> views;
  for (int e = 0; e < 3; ++e) {
    for (int o = 0; o < 4; ++o)
      for (int i = 0; i < 2; ++i) w[e].push_back(100 * e + 10 * o + i);
    views.push_back(float_view(w[e]));
    views.back().shape = {4, 2};
  }
  for (OutSplit split : {OutSplit::kColumn, OutSplit::kRow}) {
    TensorJob job;
    job.name = "experts";
    job.shards = views;
    job.transpose = true;  // [in 2, out 4]
    job.split = split;
    job.stack_experts = true;
    std::map<int64_t, std::pair<std::vector<int64_t>, std::vector<float>>> got;
    run_tensor_job(job, 2, DType::kFloat32, [&](const JobOutput& o) {
      got[o.rank] = {o.shape, {reinterpret_cast<const float*>(o.data), reinterpret_cast<const float*>(o.data + o.nbytes)}};
    });
    ASSERT_EQ(got.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      const auto& [shape, v] = got[r];
      if (split == OutSplit::kColumn) {  // [E, in 2, out 2]: out columns 2r, 2r + 1
        ASSERT_EQ(shape, (std::vector<int64_t>{3, 2, 2}));
        for (int e = 0; e < 3; ++e)
          for (int i = 0; i < 2; ++i)
            for (int o = 0; o < 2; ++o) EXPECT_EQ(v[(e * 2 + i) * 2 + o], 100 * e + 10 * (2 * r + o) + i);
      } else {  // [E, in 1, out 4]: in row r
        ASSERT_EQ(shape, (std::vector<int64_t>{3, 1, 4}));
        for (int e = 0; e < 3; ++e)
          for (int o = 0; o < 4; ++o) EXPECT_EQ(v[e * 4 + o], 100 * e + 10 * o + r);
      }
    }
  }
}


// expert_shards: each expert's training TP shards merged before the split, the same files as from
// the experts whole (Megatron Core's column- and row-parallel experts).
TEST(TensorJob, I51_StackedExpertsMergeTrainingShards) {
  // Expert e's nn.Linear weight [out 4, in 2]: w[o][i] = 100e + 10o + i; training TP 2 splits
  // fc1-like (outputs: rows) or fc2-like (inputs: columns).
  std::vector<std::vector<float>> w(3), part(12);
  std::vector<TensorView> whole, by_out, by_in;
  for (int e = 0; e < 3; ++e) {
    for (int o = 0; o < 4; ++o)
      for (int i = 0; i < 2; ++i) w[e].push_back(100 * e + 10 * o + i);
    whole.push_back(float_view(w[e]));
    whole.back().shape = {4, 2};
    for (int t = 0; t < 2; ++t) {
      std::vector<float>& rows = part[e * 4 + t];  // outputs 2t, 2t + 1
      std::vector<float>& cols = part[e * 4 + 2 + t];  // input t
      for (int o = 0; o < 4; ++o)
        for (int i = 0; i < 2; ++i) {
          if (o / 2 == t) rows.push_back(w[e][o * 2 + i]);
          if (i == t) cols.push_back(w[e][o * 2 + i]);
        }
    }
  }
  for (int e = 0; e < 3; ++e)
    for (int t = 0; t < 2; ++t) {
      by_out.push_back(float_view(part[e * 4 + t]));
      by_out.back().shape = {2, 2};
      by_in.push_back(float_view(part[e * 4 + 2 + t]));
      by_in.back().shape = {4, 1};
    }
  auto files = [](const TensorJob& job) {
    std::map<int64_t, std::pair<std::vector<int64_t>, std::vector<float>>> got;
    run_tensor_job(job, 2, DType::kFloat32, [&](const JobOutput& o) {
      got[o.rank] = {o.shape, {reinterpret_cast<const float*>(o.data), reinterpret_cast<const float*>(o.data + o.nbytes)}};
    });
    return got;
  };
  for (bool column : {true, false}) {
    TensorJob ref;
    ref.name = "experts";
    ref.shards = whole;
    ref.transpose = true;
    ref.split = column ? OutSplit::kColumn : OutSplit::kRow;
    ref.stack_experts = true;
    TensorJob merged = ref;
    merged.shards = column ? by_out : by_in;
    merged.expert_shards = 2;
    merged.merge_axis = column ? 1 : 0;  // after the transpose: outputs are the last axis
    const auto a = files(ref), b = files(merged);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a, b) << (column ? "column" : "row");
  }
}

}  // namespace
}  // namespace ftx
