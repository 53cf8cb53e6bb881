// compressed-tensors checkpoints (lib/convert/quantized/compressed_tensors.h) against the producer:
// tests/fixtures/compressed_tensors holds tiny Llama checkpoints quantised and saved by llm-compressor
// (save_compressed=True) and, per quantised module, compressed-tensors' own decompression in float64
// and the weight transformers loads in the model's dtype. Every quantised module read as an INT4
// matrix (or, 8-bit, an INT8 one with column scales) must dequantise to exactly the producer's
// weight; every option ftx does not implement is refused by its key and value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>

#include "formats/error.h"
#include "formats/safetensors.h"
#include "lib/convert/quantized/compressed_tensors.h"

namespace ftx {
namespace {

using json = nlohmann::json;

std::string fixtures() {
  const char* src = std::getenv("FTX_SOURCE_DIR");
  return std::string(src && *src ? src : FTX_TEST_SOURCE_DIR) + "/tests/fixtures/compressed_tensors";
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

json manifest() { return read_json(fixtures() + "/manifest.json"); }

json quantization_config(const std::string& fixture) {
  return read_json(fixtures() + "/" + fixture + "/model/config.json").at("quantization_config");
}

struct Tensors {
  std::map<std::string, TensorView> by_name;
  hf::TensorLookup lookup() const {
    return [this](const std::string& n) -> const TensorView* {
      auto it = by_name.find(n);
      return it == by_name.end() ? nullptr : &it->second;
    };
  }
};

Tensors load(const std::string& path) {
  Tensors t;
  for (auto& nt : read_safetensors(path)) t.by_name[nt.name] = nt.tensor;
  return t;
}

std::string error_of(const json& qc) {
  try {
    hf::compressed_tensors_reader(qc, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

DType dtype_of(const std::string& name) {
  return name == "bfloat16" ? DType::kBFloat16 : name == "float16" ? DType::kFloat16 : DType::kFloat32;
}

// The exact decompression is (q - zp) · s computed without rounding (scales widened to float64 by
// the producer, exactly as ftx widens them to fp32), so the INT4 matrix must match it bit for bit.
// transformers decompresses in the model's dtype: (q - zp) · s rounded once to bf16, fp16 or fp32
// (one rounding: the exact product of a 4-bit integer and a bf16/fp16 scale fits in fp32, and torch
// rounds an fp32 product once), so ftx's exact value rounded to that dtype must equal it too.
TEST(CompressedTensors, I50_Int4ModulesEqualTheProducersWeights) {
  const json m = manifest();
  int checked = 0;
  for (const auto& f : m.at("fixtures")) {
    const std::string name = f.at("name");
    const json& w = f.at("weights").at("group_0");
    if (w.at("num_bits") != 4) continue;
    SCOPED_TRACE(name);
    const std::string dir = fixtures() + "/" + name;
    auto reader = hf::compressed_tensors_reader(quantization_config(name), dir + "/model/config.json");
    EXPECT_EQ(reader->method(), "compressed-tensors");
    EXPECT_EQ(reader->group_size(), w.at("strategy") == "group" ? w.at("group_size").get<int64_t>() : 0);
    const Tensors ckpt = load(dir + "/model/model.safetensors");
    const Tensors ref = load(dir + "/reference.safetensors");
    const DType dt = dtype_of(f.at("dtype"));
    // lm_head is in the config's ignore list and stored as a float weight.
    EXPECT_TRUE(reader->tensors("lm_head", ckpt.lookup()).empty());
    for (const auto& mod : f.at("modules")) {
      const std::string module = mod;
      SCOPED_TRACE(module);
      const auto names = reader->tensors(module, ckpt.lookup());
      EXPECT_NE(std::find(names.begin(), names.end(), module + ".weight_packed"), names.end());
      EXPECT_NE(std::find(names.begin(), names.end(), module + ".weight_scale"), names.end());
      EXPECT_EQ(std::find(names.begin(), names.end(), module + ".weight_zero_point") != names.end(),
                w.at("symmetric") == false);
      const ops::Int4Matrix q = reader->int4(module, ckpt.lookup());
      EXPECT_EQ(q.symmetric(), w.at("symmetric") == true);
      const std::vector<double> got = ops::dequantize_int4(q);
      const TensorView& exact = ref.by_name.at(module + ".weight");
      const TensorView& loaded = ref.by_name.at(module + ".loaded");
      ASSERT_EQ(exact.shape, std::vector<int64_t>({q.cols, q.rows}));  // torch's [out, in]
      int64_t differ = 0, differ_loaded = 0;
      for (int64_t o = 0; o < q.cols; ++o)
        for (int64_t k = 0; k < q.rows; ++k) {
          const double x = got[static_cast<size_t>(k * q.cols + o)];
          const int64_t i = o * q.rows + k;
          differ += x != load_as_double(exact.dtype, exact.data() + i * dtype_size(exact.dtype));
          differ_loaded += round_to_dtype(x, dt) != load_as_double(loaded.dtype, loaded.data() + i * dtype_size(loaded.dtype));
        }
      EXPECT_EQ(differ, 0) << "elements unlike compressed-tensors' float64 decompression";
      EXPECT_EQ(differ_loaded, 0) << "elements unlike transformers' weight";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 * 14);  // five int4 fixtures of 14 quantised Linears
}

// llm-compressor's W8A16 (int8, channel or tensor, symmetric) saved pack-quantized with 8-bit fields:
// each module read as INT8 values with one scale per output column, q · s, must equal the producer's
// float64 decompression exactly, and rounded to the model's dtype transformers' weight.
TEST(CompressedTensors, I50_Int8ModulesEqualTheProducersWeights) {
  const json m = manifest();
  int checked = 0, fixtures_read = 0;
  for (const auto& f : m.at("fixtures")) {
    const std::string name = f.at("name");
    const json& w = f.at("weights").at("group_0");
    if (w.at("num_bits") != 8 || w.at("type") != "int" || f.value("refused", false)) continue;
    SCOPED_TRACE(name);
    ++fixtures_read;
    const std::string dir = fixtures() + "/" + name;
    auto reader = hf::compressed_tensors_reader(quantization_config(name), dir + "/model/config.json");
    EXPECT_EQ(reader->weight_bits(), 8);
    const Tensors ckpt = load(dir + "/model/model.safetensors");
    const Tensors ref = load(dir + "/reference.safetensors");
    const DType dt = dtype_of(f.at("dtype"));
    for (const auto& mod : f.at("modules")) {
      const std::string module = mod;
      SCOPED_TRACE(module);
      const ops::Int8Columns q = reader->int8(module, ckpt.lookup());
      const TensorView& exact = ref.by_name.at(module + ".weight");
      const TensorView& loaded = ref.by_name.at(module + ".loaded");
      ASSERT_EQ(exact.shape, std::vector<int64_t>({q.cols, q.rows}));  // torch's [out, in]
      int64_t differ = 0, differ_loaded = 0, extremes = 0;
      for (int64_t o = 0; o < q.cols; ++o)
        for (int64_t k = 0; k < q.rows; ++k) {
          const int v = q.values[static_cast<size_t>(k * q.cols + o)];
          extremes += v == 127 || v == -127 || v == -128;
          const double x = static_cast<double>(v) * static_cast<double>(q.scales[static_cast<size_t>(o)]);
          const int64_t i = o * q.rows + k;
          differ += x != load_as_double(exact.dtype, exact.data() + i * dtype_size(exact.dtype));
          differ_loaded += round_to_dtype(x, dt) != load_as_double(loaded.dtype, loaded.data() + i * dtype_size(loaded.dtype));
        }
      EXPECT_EQ(differ, 0) << "elements unlike compressed-tensors' float64 decompression";
      EXPECT_EQ(differ_loaded, 0) << "elements unlike transformers' weight";
      EXPECT_GT(extremes, 0) << "min-max scales put some value at the int8 range's end";
      ++checked;
    }
    // An 8-bit scheme is never read as INT4.
    EXPECT_THROW(reader->int4("model.layers.0.self_attn.q_proj", ckpt.lookup()), Error);
  }
  EXPECT_EQ(fixtures_read, 2);
  EXPECT_EQ(checked, 2 * 14);
}

// The producer's checkpoints of schemes ftx's INT8 and FP8 GEMMs cannot hold exactly, refused by the
// key and value that decide it (the config.json llm-compressor saved).
TEST(CompressedTensors, I50_ProducersInt8AndFp8SchemesRefusedByName) {
  const std::map<std::string, std::string> expected = {
      {"w8a16_group", "quantization_config.config_groups.group_0.weights.strategy group: group-wise int8"},
      {"w8a16_channel_asym", "quantization_config.config_groups.group_0.weights.symmetric false: int8 zero points"},
      {"fp8_static", "quantization_config.config_groups.group_0.weights.type float: static per-tensor FP8"},
      {"fp8_dynamic", "quantization_config.config_groups.group_0.input_activations.dynamic true: dynamic"},
  };
  int seen = 0;
  const json m = manifest();
  for (const auto& f : m.at("fixtures")) {
    if (!f.value("refused", false)) continue;
    const std::string name = f.at("name");
    ASSERT_TRUE(expected.count(name)) << name;
    const std::string e = error_of(quantization_config(name));
    EXPECT_NE(e.find(expected.at(name)), std::string::npos) << name << ": " << e;
    ++seen;
  }
  EXPECT_EQ(seen, 4);
}

// compressed-tensors before 0.13 stored weight_g_idx for actorder "group" (llm-compressor 0.14 no
// longer writes it): input column k uses group g_idx[k]'s scale and zero point, W[o][k] =
// (q[o][k] - zp[o][g]) · s[o][g] (compressed-tensors' dequantize with g_idx). The stored values q
// come from the producer's exact decompression of the symmetric fixture (q = W / s[k / 32], exact).
TEST(CompressedTensors, I50_ActOrderGroupIndexIsHonoured) {
  const std::string dir = fixtures() + "/w4a16_group_sym";
  json qc = quantization_config("w4a16_group_sym");
  qc["config_groups"]["group_0"]["weights"]["actorder"] = "group";
  auto reader = hf::compressed_tensors_reader(qc, "config.json");
  Tensors ckpt = load(dir + "/model/model.safetensors");
  const Tensors ref = load(dir + "/reference.safetensors");
  const std::string module = "model.layers.1.mlp.down_proj";  // 128 inputs: 4 groups of 32
  const int64_t in = 128, gs = 32;
  EXPECT_EQ(error_of(qc), "");  // the config itself is accepted
  try {
    reader->int4(module, ckpt.lookup());
    ADD_FAILURE() << "actorder group without weight_g_idx was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(module + ".weight_g_idx is missing"), std::string::npos) << e.what();
  }
  // Each group keeps 32 columns, spread over the whole input (not contiguous runs).
  auto idx = std::make_shared<std::vector<int32_t>>(in);
  for (int64_t k = 0; k < in; ++k) (*idx)[static_cast<size_t>(k)] = static_cast<int32_t>((k * 5 + 3) % in / gs);
  TensorView g;
  g.dtype = DType::kInt32;
  g.shape = {in};
  g.storage.data = reinterpret_cast<const uint8_t*>(idx->data());
  g.storage.nbytes = idx->size() * 4;
  g.storage.keep_alive = idx;
  g.storage.origin = "g_idx";
  ckpt.by_name[module + ".weight_g_idx"] = g;
  const ops::Int4Matrix q = reader->int4(module, ckpt.lookup());
  ASSERT_EQ(q.group_index.size(), static_cast<size_t>(in));
  const std::vector<double> got = ops::dequantize_int4(q);
  const TensorView& exact = ref.by_name.at(module + ".weight");
  const TensorView& scale = ckpt.by_name.at(module + ".weight_scale");  // [out, 4] bf16
  int64_t differ = 0;
  for (int64_t o = 0; o < q.cols; ++o)
    for (int64_t k = 0; k < in; ++k) {
      auto s = [&](int64_t grp) { return load_as_double(scale.dtype, scale.data() + (o * 4 + grp) * 2); };
      const double w = load_as_double(DType::kFloat64, exact.data() + (o * in + k) * 8);
      const double qv = w / s(k / gs);
      ASSERT_EQ(qv, std::round(qv));
      differ += got[static_cast<size_t>(k * q.cols + o)] != qv * s((*idx)[static_cast<size_t>(k)]);
    }
  EXPECT_EQ(differ, 0);
  // compressed-tensors initialises g_idx to -1: any -1 means column order.
  std::fill(idx->begin(), idx->end(), -1);
  EXPECT_TRUE(reader->int4(module, ckpt.lookup()).group_index.empty());
}

// compressed-tensors quantises a matrix with fewer inputs than group_size as one group (and refuses
// inputs that are not whole groups otherwise): the group-64 fixture read as if its group size were
// 256 (one group over q_proj's 64 inputs, the same numbers) and 48 (64 inputs: not whole groups).
TEST(CompressedTensors, I50_FewerInputsThanTheGroupSizeAreOneGroup) {
  const std::string dir = fixtures() + "/w4a16_group64_fp32";
  const Tensors ckpt = load(dir + "/model/model.safetensors");
  const Tensors ref = load(dir + "/reference.safetensors");
  const std::string module = "model.layers.0.self_attn.q_proj";
  json qc = quantization_config("w4a16_group64_fp32");
  qc["config_groups"]["group_0"]["weights"]["group_size"] = 256;
  const ops::Int4Matrix q = hf::compressed_tensors_reader(qc, "config.json")->int4(module, ckpt.lookup());
  EXPECT_EQ(q.groups, 1);
  EXPECT_EQ(q.group_size, 256);
  const std::vector<double> got = ops::dequantize_int4(q);
  const TensorView& exact = ref.by_name.at(module + ".weight");
  int64_t differ = 0;
  for (int64_t o = 0; o < 64; ++o)
    for (int64_t k = 0; k < 64; ++k)
      differ += got[static_cast<size_t>(k * 64 + o)] != load_as_double(DType::kFloat64, exact.data() + (o * 64 + k) * 8);
  EXPECT_EQ(differ, 0);
  qc["config_groups"]["group_0"]["weights"]["group_size"] = 48;
  try {
    hf::compressed_tensors_reader(qc, "config.json")->int4(module, ckpt.lookup());
    ADD_FAILURE() << "64 inputs in groups of 48 were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of group_size 48"), std::string::npos) << e.what();
  }
}

// A module the config ignores (here by compressed-tensors' "re:" regex, matched from the name's
// start) must not be stored quantised.
TEST(CompressedTensors, I50_IgnoredModuleStoredQuantisedIsAnError) {
  json qc = quantization_config("w4a16_group_sym");
  qc["ignore"] = {"lm_head", "re:.*layers\\.0\\..*q_proj"};
  auto reader = hf::compressed_tensors_reader(qc, "config.json");
  const Tensors ckpt = load(fixtures() + "/w4a16_group_sym/model/model.safetensors");
  EXPECT_FALSE(reader->tensors("model.layers.1.self_attn.q_proj", ckpt.lookup()).empty());
  try {
    reader->tensors("model.layers.0.self_attn.q_proj", ckpt.lookup());
    ADD_FAILURE() << "an ignored module was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ignore lists re:.*layers\\.0\\..*q_proj"), std::string::npos) << e.what();
  }
}

// Every option ftx does not implement, refused by its key and value (edits of the real config).
TEST(CompressedTensors, I50_RefusedOptionsNameKeyAndValue) {
  // The producer's int8 (W8A16) checkpoint as saved (pack-quantized with 8-bit values) is read.
  EXPECT_EQ(error_of(quantization_config("w8a16_channel")), "");
  const json base = quantization_config("w4a16_group_asym");
  EXPECT_EQ(error_of(base), "");
  struct Case {
    std::string pointer;  // json pointer of the edit
    json value;
    std::string expected;  // key and value in the message
  };
  const json fp8_act = {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true},
                        {"symmetric", true}};
  const json int8_act = {{"num_bits", 8}, {"type", "int"}, {"strategy", "tensor"}, {"dynamic", false},
                         {"symmetric", true}};
  const std::vector<Case> cases = {
      {"/config_groups/group_0/input_activations", int8_act, "config_groups.group_0.input_activations {"},
      {"/config_groups/group_0/input_activations", fp8_act, "\"type\":\"float\""},
      {"/config_groups/group_0/output_activations", int8_act, "config_groups.group_0.output_activations {"},
      {"/kv_cache_scheme", int8_act, "kv_cache_scheme {"},
      {"/format", "float-quantized", "quantization_config.format float-quantized"},
      {"/format", "int-quantized", "quantization_config.format int-quantized"},
      {"/format", "naive-quantized", "quantization_config.format naive-quantized"},
      {"/format", "nvfp4-pack-quantized", "quantization_config.format nvfp4-pack-quantized"},
      {"/config_groups/group_0/format", "float-quantized", "config_groups.group_0.format float-quantized"},
      {"/config_groups/group_0/weights/num_bits", 16, "config_groups.group_0.weights.num_bits 16"},
      {"/config_groups/group_0/weights/num_bits", 2, "config_groups.group_0.weights.num_bits 2"},
      // int8 in groups, or with zero points: ftx's INT8 GEMM has one scale per column, no zero point.
      {"/config_groups/group_0/weights/num_bits", 8, "config_groups.group_0.weights.strategy group"},
      {"/config_groups/group_1", {{"targets", {"re:.*down_proj"}}, {"weights", {{"num_bits", 8}, {"strategy", "channel"}}}},
       "config_groups.group_1.weights.num_bits 8: differs from config_groups.group_0's 4"},
      // FP8 (float-quantized): each scheme by the key ftx's FP8 GEMM cannot hold.
      {"/config_groups/group_0/weights/type", "float", "config_groups.group_0.weights.type float: FP8 weight-only"},
      {"/config_groups/group_0/weights/type", "float", "config_groups.group_0.weights.type float"},
      {"/config_groups/group_0/weights/strategy", "block", "config_groups.group_0.weights.strategy block"},
      {"/config_groups/group_0/weights/strategy", "tensor_group", "config_groups.group_0.weights.strategy tensor_group"},
      {"/config_groups/group_0/weights/strategy", "tensor", "config_groups.group_0.weights.symmetric false"},
      {"/config_groups/group_0/weights/dynamic", true, "config_groups.group_0.weights.dynamic true"},
      {"/config_groups/group_0/weights/dynamic", "local", "config_groups.group_0.weights.dynamic local"},
      {"/config_groups/group_0/weights/block_structure", json::array({128, 128}),
       "config_groups.group_0.weights.block_structure [128,128]"},
      {"/config_groups/group_0/weights/actorder", "sideways", "config_groups.group_0.weights.actorder sideways"},
      {"/config_groups/group_0/weights/group_size", 0, "config_groups.group_0.weights.group_size 0"},
      {"/config_groups/group_0/weights/global_scale", 1.5, "config_groups.group_0.weights.global_scale 1.5"},
      {"/config_groups/group_0/weights", nullptr, "config_groups.group_0.weights null"},
      {"/config_groups/group_0", json::array({"Linear"}), "config_groups.group_0 [\"Linear\"]"},
      {"/config_groups/group_1", {{"targets", {"re:.*down_proj"}}, {"weights", {{"num_bits", 4}, {"group_size", 64},
                                                                               {"strategy", "group"}}}},
       "config_groups.group_1.weights.group_size 64"},
      {"/quantization_status", "frozen", "quantization_config.quantization_status frozen"},
      {"/sparsity_config", {{"format", "sparse-24-bitmask"}}, "sparsity_config {\"format\":\"sparse-24-bitmask\"}"},
      {"/transform_config", {{"config_groups", json::object({{"u", 1}})}}, "transform_config {"},
      {"/quant_method", "gptq", "quantization_config.quant_method gptq"},
      {"/some_future_option", true, "quantization_config.some_future_option true"},
      {"/config_groups/group_0/weights/symmetric", "yes", "quantization_config: "},  // a JSON type error
  };
  for (const auto& c : cases) {
    json qc = base;
    qc[json::json_pointer(c.pointer)] = c.value;
    const std::string e = error_of(qc);
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.pointer << " = " << c.value.dump() << ": " << e;
    EXPECT_EQ(e.rfind("config.json: ", 0), 0u) << e;
  }
  // What the producer writes for "nothing" is accepted: null, {} and the informational keys.
  json qc = base;
  qc["sparsity_config"] = nullptr;
  qc["transform_config"] = json::object();
  qc["global_compression_ratio"] = 3.7;
  qc["version"] = "0.12.2";
  qc["config_groups"]["group_0"]["weights"]["observer"] = "mse";
  qc["config_groups"]["group_0"]["weights"]["actorder"] = "weight";
  EXPECT_EQ(error_of(qc), "");
}

}  // namespace
}  // namespace ftx
