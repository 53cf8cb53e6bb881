// safetensors reader against files written from the spec by make_format_fixtures.py (tensor bytes
// from torch; expected sums computed by torch in float64).
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "formats/error.h"
#include "formats/hf_index.h"
#include "unit/format_fixtures.h"

using namespace ftx;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Storage bytes_of(const std::string& s, const std::string& origin = "mem.safetensors") {
  auto owned = std::make_shared<std::string>(s);
  Storage st;
  st.data = reinterpret_cast<const uint8_t*>(owned->data());
  st.nbytes = owned->size();
  st.keep_alive = owned;
  st.origin = origin;
  return st;
}

std::string with_header(const std::string& json, const std::string& data) {
  std::string s(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s + json + data;
}

void expect_tensors(const std::vector<NamedTensor>& got, const nlohmann::json& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(got[i].name);
    EXPECT_EQ(got[i].name, want[i]["name"].get<std::string>());
    EXPECT_STREQ(safetensors_dtype_name(got[i].tensor.dtype), want[i]["dtype"].get<std::string>().c_str());
    EXPECT_EQ(got[i].tensor.shape, want[i]["shape"].get<std::vector<int64_t>>());
    const double s = want[i]["sum"].get<double>();
    EXPECT_NEAR(compute_stats(got[i].tensor).sum, s, 1e-9 * (1 + std::fabs(s)));
  }
}

}  // namespace

TEST(Safetensors, MixedDtypesInDataOrderWithMetadata) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  auto expected = ftx_test::read_json(dir + "/safetensors/expected.json");
  SafetensorsMetadata meta;
  auto tensors = read_safetensors(dir + "/safetensors/mixed.safetensors", &meta);
  expect_tensors(tensors, expected["mixed.safetensors"]["tensors"]);
  EXPECT_EQ(meta, (SafetensorsMetadata{{"format", "pt"}, {"note", "fixture"}}));
  // Zero-copy views into the one mapped file.
  for (const auto& t : tensors) {
    ASSERT_TRUE(t.tensor.storage.file);
    EXPECT_EQ(t.tensor.storage.data, t.tensor.storage.file->data() + t.tensor.storage.file_offset);
    EXPECT_EQ(t.tensor.storage.file.get(), tensors[0].tensor.storage.file.get());
  }
}

TEST(Safetensors, ShardedIndexLoadsEveryShard) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  auto expected = ftx_test::read_json(dir + "/safetensors/expected.json");
  auto tensors = read_safetensors_sharded(dir + "/safetensors/sharded/model.safetensors.index.json");
  expect_tensors(tensors, expected["sharded"]["tensors"]);
  HfIndex idx = read_hf_index(dir + "/safetensors/sharded/model.safetensors.index.json");
  EXPECT_TRUE(idx.has_total_size);
  EXPECT_EQ(idx.total_size, expected["sharded"]["total_size"].get<uint64_t>());
  EXPECT_EQ(idx.files.size(), 2u);
  HfWeightFiles w = find_hf_weight_files(dir + "/safetensors/sharded");
  EXPECT_EQ(w.format, "safetensors");
  EXPECT_EQ(w.files, idx.files);
}

TEST(Safetensors, ShardedIndexNamingAMissingTensorIsAnError) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  const std::string idx = dir + "/safetensors/sharded_missing/model.safetensors.index.json";
  EXPECT_NE(error_of([&] { read_safetensors_sharded(idx); })
                .find("tensor 'c.weight' is in model-00002-of-00002.safetensors, but that shard has no such tensor"),
            std::string::npos);
}

TEST(Safetensors, PytorchBinIndexListsShards) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  HfWeightFiles w = find_hf_weight_files(dir + "/safetensors/hf_bin");
  EXPECT_EQ(w.format, "torch");
  ASSERT_EQ(w.files.size(), 2u);
  EXPECT_EQ(w.files[0], dir + "/safetensors/hf_bin/pytorch_model-00001-of-00002.bin");
  HfIndex idx = read_hf_index(w.index_path);
  ASSERT_EQ(idx.weight_map.size(), 2u);
  EXPECT_EQ(idx.weight_map[1].first, "b.weight");
  EXPECT_NE(error_of([&] { find_hf_weight_files(dir + "/npy"); }).find("no HuggingFace weights found"),
            std::string::npos);
}

TEST(Safetensors, IndexRejectsPathsOutsideItsFolder) {
  EXPECT_NE(error_of([] { parse_hf_index(R"({"weight_map": {"a": "../x.safetensors"}})", "m/i.json"); })
                .find("not a file in the index's folder"), std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_index(R"({"metadata": {}})", "m/i.json"); }).find("weight_map"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_index("{", "m/i.json"); }).find("m/i.json: invalid JSON"), std::string::npos);
}

TEST(Safetensors, BrokenFilesNameTheProblem) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  const std::string d = dir + "/safetensors/";
  EXPECT_NE(error_of([&] { read_safetensors(d + "bad_offsets.safetensors"); })
                .find("bad_offsets.safetensors: tensor 'x' data_offsets [0, 48] out of range (data section has 24 bytes)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_safetensors(d + "bad_span.safetensors"); })
                .find("tensor 'x' data_offsets [0, 20] out of range: F32 [2, 3] needs 24 bytes, the offsets span 20"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_safetensors(d + "bad_order.safetensors"); }).find("data_offsets [8, 4] out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_safetensors(d + "bad_header_len.safetensors"); })
                .find("safetensors header length 1048576 is larger than the file (16 bytes)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_safetensors(d + "lfs.safetensors"); })
                .find("lfs.safetensors: is a git-lfs pointer file, not the real data of 548105171 bytes"),
            std::string::npos);
}

TEST(Safetensors, HeaderChecks) {
  auto err = [](const std::string& json, const std::string& data = "") {
    return error_of([&] { read_safetensors(bytes_of(with_header(json, data))); });
  };
  EXPECT_NE(err(R"({"x": {"dtype": "Q8", "shape": [1], "data_offsets": [0, 1]}})", "a").find("unknown safetensors dtype 'Q8'"),
            std::string::npos);
  EXPECT_NE(err(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "abcd").find("invalid dimension"),
            std::string::npos);
  EXPECT_NE(err(R"({"x": {"dtype": "F32", "shape": [1]}})").find("data_offsets"), std::string::npos);
  EXPECT_NE(err(R"({"__metadata__": {"a": 1}})").find("__metadata__ entry 'a' is not a string"), std::string::npos);
  EXPECT_NE(err(R"([1, 2])").find("not a JSON object"), std::string::npos);
  EXPECT_NE(err(R"({"x": )").find("invalid safetensors JSON header"), std::string::npos);
  EXPECT_NE(err(std::string(100, '[') + std::string(100, ']')).find("invalid safetensors JSON header"), std::string::npos);
  EXPECT_NE(err(R"({"x": {"dtype": "F32", "shape": [4294967296, 4294967296, 0], "data_offsets": [0, 0]}})")
                .find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { read_safetensors(bytes_of("abc")); }).find("too short"), std::string::npos);
  // A valid header padded with spaces, every spec dtype, an empty tensor, a scalar.
  std::string json = "{";
  uint64_t off = 0;
  const char* names[] = {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64", "F8_E4M3", "F8_E5M2"};
  for (const char* n : names) {
    const uint64_t es = dtype_size(safetensors_dtype(n));
    json += std::string("\"t_") + n + "\": {\"dtype\": \"" + n + "\", \"shape\": [2], \"data_offsets\": [" +
            std::to_string(off) + ", " + std::to_string(off + 2 * es) + "]},";
    off += 2 * es;
  }
  json += "\"scalar\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [" + std::to_string(off) + ", " +
          std::to_string(off + 4) + "]},";
  json += "\"empty\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [0, 0]}}   ";
  auto tensors = read_safetensors(bytes_of(with_header(json, std::string(off + 4, '\x01'))));
  EXPECT_EQ(tensors.size(), 17u);
  EXPECT_TRUE(is_safetensors(reinterpret_cast<const uint8_t*>(with_header(json, "").data()), with_header(json, "").size()));
}
