// Loads checkpoints written by real PyTorch (scripts/fixtures/make_torch_fixtures.py) and compares
// every tensor with what torch.load saw: names, dtypes, shapes, strides and offsets exactly, float64
// sum/abs_sum/min/max within 1e-9 relative. Bad inputs must give an ftx::Error naming the file and
// the problem, never a crash, and must never run anything.
//
// Fixtures: $FTX_FIXTURES/torch, made on first use (and again whenever the script is newer than them)
// by $FTX_TORCH_PYTHON running the script; an exclusive flock on $FTX_FIXTURES/torch.lock keeps
// parallel ctest processes from racing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "formats/error.h"
#include "formats/torch_checkpoint.h"
#include "formats/value.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace ftx {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// The fixture directory, generated once per build tree.
const std::string& fixture_dir() {
  static const std::string dir = [] {
    const std::string root = env_or("FTX_FIXTURES", (fs::temp_directory_path() / "ftx-fixtures").string());
    const std::string source = env_or("FTX_SOURCE_DIR", fs::path(__FILE__).parent_path().parent_path().parent_path().string());
    const std::string python = env_or("FTX_TORCH_PYTHON", "/usr/bin/python3");
    const std::string dir = root + "/torch";
    fs::create_directories(root);
    int lock = ::open((root + "/torch.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock >= 0) flock(lock, LOCK_EX);
    const std::string script = source + "/scripts/fixtures/make_torch_fixtures.py";
    const std::string stamp = dir + "/complete";
    // (Re)made when missing or older than the script that makes them.
    if (!fs::exists(stamp) || fs::last_write_time(stamp) < fs::last_write_time(script)) {
      const std::string cmd = "'" + python + "' '" + script + "' '" + dir + "'";
      int rc = std::system(cmd.c_str());
      if (rc != 0) ADD_FAILURE() << "fixture script failed (" << rc << "): " << cmd;
    }
    if (lock >= 0) ::close(lock);
    return dir;
  }();
  return dir;
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return json::parse(f);
}

// Follows a dotted path through dicts (keys without dots).
ValuePtr lookup(ValuePtr v, const std::string& dotted) {
  size_t start = 0;
  while (v) {
    size_t dot = dotted.find('.', start);
    v = v->get(dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

void expect_scalar(const ValuePtr& v, const json& want, const std::string& name) {
  ASSERT_TRUE(v) << name << " missing";
  if (want.is_null()) {
    EXPECT_EQ(v->kind, Value::Kind::kNone) << name;
  } else if (want.is_boolean()) {
    ASSERT_EQ(v->kind, Value::Kind::kBool) << name;
    EXPECT_EQ(v->b, want.get<bool>()) << name;
  } else if (want.is_number_integer()) {
    ASSERT_EQ(v->kind, Value::Kind::kInt) << name << " " << v->repr();
    EXPECT_EQ(v->i, want.get<int64_t>()) << name;
  } else if (want.is_number_float()) {
    ASSERT_EQ(v->kind, Value::Kind::kFloat) << name << " " << v->repr();
    EXPECT_EQ(v->f, want.get<double>()) << name;
  } else if (want.is_string()) {
    ASSERT_EQ(v->kind, Value::Kind::kString) << name;
    EXPECT_EQ(v->str, want.get<std::string>()) << name;
  } else if (want.contains("dtype")) {
    ASSERT_EQ(v->kind, Value::Kind::kDType) << name;
    EXPECT_EQ(v->str, want["dtype"].get<std::string>()) << name;
  } else if (want.contains("object")) {
    ASSERT_EQ(v->kind, Value::Kind::kObject) << name;
    EXPECT_EQ(v->str, want["object"].get<std::string>()) << name;
  } else {
    ADD_FAILURE() << "unexpected expectation for " << name << ": " << want.dump();
  }
}

// |got - want| <= 1e-9 * (|want| or the abs_sum for sums that cancel) : float64 summation order
// differs between torch (pairwise) and compute_stats (sequential).
void expect_close(double got, double want, double scale, const std::string& what) {
  const double tol = 1e-9 * std::max({std::fabs(want), scale, 1e-300});
  EXPECT_LE(std::fabs(got - want), tol) << what << ": got " << got << ", torch says " << want;
}

class GoodFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(GoodFixture, MatchesTorch) {
  const std::string base = fixture_dir() + "/good/" + GetParam();
  const json want = read_json(base + ".json");
  ValuePtr root = load_torch_checkpoint(base + ".pt");
  ASSERT_TRUE(root);
  std::vector<NamedTensor> tensors;
  std::vector<NamedValue> others;
  flatten_value(root, "", tensors, others);

  const auto& wt = want["tensors"];
  ASSERT_EQ(tensors.size(), wt.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const NamedTensor& t = tensors[k];
    const json& w = wt[k];
    const std::string name = w["name"].get<std::string>();
    SCOPED_TRACE(name);
    EXPECT_EQ(t.name, name);
    EXPECT_EQ(dtype_name(t.tensor.dtype), w["dtype"].get<std::string>());
    EXPECT_EQ(t.tensor.shape, w["shape"].get<std::vector<int64_t>>());
    std::vector<int64_t> tmp;
    EXPECT_EQ(t.tensor.effective_strides(tmp), w["stride"].get<std::vector<int64_t>>());
    EXPECT_EQ(t.tensor.offset, w["storage_offset"].get<int64_t>());
    ASSERT_NO_THROW(t.tensor.validate(t.name));
    const TensorStats s = compute_stats(t.tensor);
    const double abs_sum = w["abs_sum"].get<double>();
    if (dtype_is_float(t.tensor.dtype)) {
      expect_close(s.sum, w["sum"].get<double>(), abs_sum, "sum");
      expect_close(s.abs_sum, abs_sum, 0, "abs_sum");
    } else {  // integers and bools: exact in float64 for these sizes
      EXPECT_EQ(s.sum, w["sum"].get<double>());
      EXPECT_EQ(s.abs_sum, abs_sum);
    }
    if (w.contains("min")) {
      EXPECT_EQ(s.min, w["min"].get<double>());
      EXPECT_EQ(s.max, w["max"].get<double>());
    }
    // Zero copy: every tensor's bytes lie inside the mapped file.
    ASSERT_TRUE(t.tensor.storage.file);
    EXPECT_EQ(t.tensor.storage.file->data() + t.tensor.storage.file_offset, t.tensor.storage.data);
    EXPECT_NE(t.tensor.storage.origin.find(GetParam() + ".pt:"), std::string::npos) << t.tensor.storage.origin;
  }
  for (const auto& item : want["scalars"].items()) expect_scalar(lookup(root, item.key()), item.value(), item.key());
}

INSTANTIATE_TEST_SUITE_P(Torch, GoodFixture,
                         ::testing::Values("zip_all_dtypes", "zip_megatron", "zip_megatron_proto4", "zip_views",
                                           "zip64_views", "legacy_all_dtypes", "legacy_megatron",
                                           "legacy_megatron_proto4", "legacy_views", "legacy_storage_view"));

class ViewsFixture : public ::testing::TestWithParam<std::string> {};

// Tied weights and views share one storage: the same bytes, not copies.
TEST_P(ViewsFixture, SharedStoragesAreTheSameBytes) {
  ValuePtr root = load_torch_checkpoint(fixture_dir() + "/good/" + GetParam() + ".pt");
  auto tensor = [&](const std::string& key) -> const TensorView& {
    ValuePtr v = root->get(key);
    EXPECT_TRUE(v && v->kind == Value::Kind::kTensor) << key;
    return v->tensor;
  };
  const TensorView& wte = tensor("wte");
  EXPECT_EQ(tensor("tied").storage.data, wte.storage.data);
  EXPECT_EQ(root->get("tied"), root->get("wte"));  // the same object, via the memo
  EXPECT_EQ(tensor("lm_head.weight").storage.data, wte.storage.data);
  EXPECT_EQ(tensor("offset_view").storage.data, wte.storage.data);
  EXPECT_EQ(tensor("offset_view").offset, 12);
  EXPECT_EQ(tensor("transposed").storage.data, tensor("base").storage.data);
  EXPECT_FALSE(tensor("transposed").is_contiguous());
  EXPECT_EQ(tensor("expanded").strides, (std::vector<int64_t>{0, 1}));
}

INSTANTIATE_TEST_SUITE_P(Torch, ViewsFixture, ::testing::Values("zip_views", "zip64_views", "legacy_views"));

TEST(TorchCheckpoint, MegatronArgsAreAPlainDict) {
  ValuePtr root = load_torch_checkpoint(fixture_dir() + "/good/zip_megatron.pt");
  ValuePtr args = root->get("args");
  ASSERT_TRUE(args && args->is_dict());
  ASSERT_TRUE(args->get("data_path"));
  EXPECT_EQ(args->get("data_path")->repr(), "['a', 'b']");
  // The encoder's state_dict _metadata (a BUILD on the OrderedDict) is dropped, not merged in.
  ValuePtr encoder = lookup(root, "model.language_model.encoder");
  ASSERT_TRUE(encoder && encoder->is_dict());
  EXPECT_FALSE(encoder->get("_metadata"));
  EXPECT_TRUE(encoder->get("layers.0.self_attention.query_key_value.weight"));
}

TEST(TorchCheckpoint, BadInputsAreErrorsThatNameTheFileAndTheProblem) {
  const std::string dir = fixture_dir() + "/bad/";
  const json manifest = read_json(dir + "manifest.json");
  ASSERT_GE(manifest.size(), 15u);
  for (const auto& entry : manifest) {
    const std::string path = dir + entry["file"].get<std::string>();
    SCOPED_TRACE(path);
    try {
      load_torch_checkpoint(path);
      ADD_FAILURE() << "loaded without an error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
      for (const auto& part : entry["contains"]) EXPECT_NE(msg.find(part.get<std::string>()), std::string::npos) << msg;
    }
  }
  // The os.system payload would have created this file.
  EXPECT_FALSE(fs::exists(dir + "PWNED"));
}

TEST(TorchCheckpoint, MissingFile) {
  try {
    load_torch_checkpoint(fixture_dir() + "/no-such-file.pt");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-file.pt: cannot open: No such file or directory"), std::string::npos)
        << e.what();
  }
}

TEST(TorchCheckpoint, Detection) {
  auto bytes = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  auto is = [&](const std::string& path) {
    std::string b = bytes(path);
    return is_torch_checkpoint(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  };
  EXPECT_TRUE(is(fixture_dir() + "/good/zip_views.pt"));
  EXPECT_TRUE(is(fixture_dir() + "/good/legacy_views.pt"));
  EXPECT_TRUE(is(fixture_dir() + "/good/legacy_megatron_proto4.pt"));
  EXPECT_FALSE(is(fixture_dir() + "/bad/not_checkpoint.pt"));
  EXPECT_FALSE(is(fixture_dir() + "/bad/empty.pt"));
}

// Loads `b` from memory; returns true when it loaded. Anything but an ftx::Error fails the test.
bool load_bytes(const std::string& b, const std::string& origin) {
  Storage s;
  auto owned = std::make_shared<std::string>(b);
  s.data = reinterpret_cast<const uint8_t*>(owned->data());
  s.nbytes = owned->size();
  s.keep_alive = owned;
  s.origin = origin;
  try {
    ValuePtr v = load_torch_checkpoint(s);
    std::vector<NamedTensor> tensors;
    std::vector<NamedValue> others;
    flatten_value(v, "", tensors, others);
    for (const auto& t : tensors) compute_stats(t.tensor);  // touches every byte a view claims
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(origin), std::string::npos) << e.what();
    return false;
  }
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class DamagedFixture : public ::testing::TestWithParam<std::string> {};

// Every proper prefix of a checkpoint is an error; so is no single-byte change... except where the
// byte does not matter (padding, CRCs, unused fields): those may load, but nothing may crash.
TEST_P(DamagedFixture, PrefixesAndByteFlipsNeverCrash) {
  const std::string b = file_bytes(fixture_dir() + "/good/" + GetParam() + ".pt");
  ASSERT_GT(b.size(), 100u);
  EXPECT_TRUE(load_bytes(b, "whole"));
  for (size_t n = 0; n < b.size(); ++n) EXPECT_FALSE(load_bytes(b.substr(0, n), "prefix")) << "prefix of " << n << " bytes loaded";
  for (size_t k = 0; k < b.size(); ++k) {
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      std::string c = b;
      c[k] = static_cast<char>(c[k] ^ x);
      load_bytes(c, "flipped");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, DamagedFixture, ::testing::Values("zip_views", "zip64_views", "legacy_views"));

}  // namespace
}  // namespace ftx
