// .npy reader/writer and the .npz reader against files numpy itself wrote (scripts/fixtures/make_format_fixtures.py,
// make_mesh_jax_fixtures.py).
#include "formats/npy.h"
#include "formats/npz.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "formats/error.h"
#include "unit/format_fixtures.h"

using namespace ftx;

namespace {

Storage bytes_of(const std::string& s, const std::string& origin = "mem.npy") {
  auto owned = std::make_shared<std::string>(s);
  Storage st;
  st.data = reinterpret_cast<const uint8_t*>(owned->data());
  st.nbytes = owned->size();
  st.keep_alive = owned;
  st.origin = origin;
  return st;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "/npy_test_" + std::to_string(::getpid()) + "_" + name;
}

}  // namespace

TEST(Npy, ReadsEveryFixtureLikeNumpy) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  auto expected = ftx_test::read_json(dir + "/npy/expected.json");
  ASSERT_GE(expected.size(), 14u);
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    SCOPED_TRACE(it.key());
    const auto& e = it.value();
    TensorView t = read_npy(dir + "/npy/" + it.key());
    EXPECT_EQ(npy_descr(t.dtype), e["descr"].get<std::string>());
    EXPECT_EQ(t.shape, e["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(!t.is_contiguous(), e["fortran"].get<bool>());
    // Zero-copy: the view points into the mapped file.
    ASSERT_TRUE(t.storage.file);
    EXPECT_EQ(t.storage.data, t.storage.file->data() + t.storage.file_offset);
    EXPECT_EQ(t.storage.file_offset % 64, 0u);
    const double want = e["sum"].get<double>();
    EXPECT_NEAR(compute_stats(t).sum, want, 1e-9 * (1 + std::fabs(want)));
    std::vector<double> flat;
    t.for_each_element([&](const uint8_t* p) {
      if (flat.size() < 8) flat.push_back(load_as_double(t.dtype, p));
    });
    EXPECT_EQ(flat, e["flat"].get<std::vector<double>>());  // exact: every dtype converts exactly
  }
}

TEST(Npy, WriteIsByteIdenticalToNumpySave) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  auto expected = ftx_test::read_json(dir + "/npy/expected.json");
  int compared = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    if (!it.value()["numpy_save"].get<bool>()) continue;
    SCOPED_TRACE(it.key());
    const std::string src = dir + "/npy/" + it.key(), out = tmp_path(it.key());
    write_npy(out, read_npy(src));
    EXPECT_EQ(ftx_test::read_all(out), ftx_test::read_all(src));
    ::unlink(out.c_str());
    ++compared;
  }
  EXPECT_GE(compared, 10);
}

TEST(Npy, FortranOrderReadsAsStridesAndWritesCOrder) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  TensorView f = read_npy(dir + "/npy/f32_fortran.npy");
  EXPECT_EQ(f.strides, (std::vector<int64_t>{1, 3}));
  const std::string out = tmp_path("fortran_c.npy");
  write_npy(out, f);
  TensorView c = read_npy(out);
  EXPECT_TRUE(c.strides.empty());
  std::vector<uint8_t> a, b;
  f.copy_contiguous(a);
  c.copy_contiguous(b);
  EXPECT_EQ(a, b);
  ::unlink(out.c_str());
}

TEST(Npy, VersionsTwoAndThree) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  for (const char* name : {"f32_v2.npy", "f32_v3.npy"}) {
    const std::string raw = ftx_test::read_all(dir + "/npy/" + name);
    ASSERT_GE(raw.size(), 8u);
    EXPECT_EQ(raw[6], name[5] - '0');
    EXPECT_EQ(read_npy(dir + "/npy/" + name).shape, (std::vector<int64_t>{4, 5}));
  }
}

TEST(Npy, RoundTripOfEveryWritableDtype) {
  for (DType dt : {DType::kFloat64, DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kInt32, DType::kInt16,
                   DType::kInt8, DType::kUInt8, DType::kBool, DType::kUInt16, DType::kUInt32, DType::kUInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    TensorView t;
    t.dtype = dt;
    t.shape = {3, 2};
    auto buf = std::make_shared<std::vector<uint8_t>>(t.nbytes());
    for (size_t i = 0; i < buf->size(); ++i) (*buf)[i] = dt == DType::kBool ? (i & 1) : static_cast<uint8_t>(i * 37 + 1);
    t.storage.data = buf->data();
    t.storage.nbytes = buf->size();
    t.storage.keep_alive = buf;
    const std::string out = tmp_path("rt.npy");
    write_npy(out, t);
    TensorView r = read_npy(out);
    EXPECT_EQ(r.dtype, dt);
    EXPECT_EQ(r.shape, t.shape);
    EXPECT_EQ(std::memcmp(r.data(), buf->data(), buf->size()), 0);
    ::unlink(out.c_str());
  }
}

TEST(Npy, HeaderMatchesNumpyLayout) {
  const std::string h = npy_header(DType::kFloat32, {2, 3});
  EXPECT_EQ(h.size(), 128u);
  EXPECT_EQ(h.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(h.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(h.back(), '\n');
  EXPECT_NE(npy_header(DType::kFloat64, {}).find("'shape': (), }"), std::string::npos);
  EXPECT_NE(npy_header(DType::kInt8, {5}).find("'descr': '|i1', 'fortran_order': False, 'shape': (5,), }"),
            std::string::npos);
}

TEST(Npy, NoBfloat16OrFloat8) {
  TensorView t;
  t.dtype = DType::kBFloat16;
  t.shape = {1};
  uint16_t v = 0;
  t.storage.data = reinterpret_cast<const uint8_t*>(&v);
  t.storage.nbytes = 2;
  EXPECT_NE(error_of([&] { write_npy(tmp_path("bf16.npy"), t); }).find("no bfloat16"), std::string::npos);
  EXPECT_THROW(npy_descr(DType::kFloat8E4M3), Error);
}

TEST(Npy, BrokenFilesNameTheProblem) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  EXPECT_NE(error_of([&] { read_npy(dir + "/npy/bad_magic.npy"); }).find("bad_magic.npy: not a .npy file (bad magic"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_npy(dir + "/npy/truncated.npy"); })
                .find("truncated.npy: .npy payload truncated: float32 [2, 3] needs 24 bytes, only 19"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_npy(dir + "/npy/big_endian.npy"); }).find("big-endian .npy data ('>f4')"),
            std::string::npos);
}

TEST(Npy, HeaderVariantsAndErrors) {
  auto npy = [](const std::string& dict, const std::string& payload) {
    std::string h = dict + "\n";
    std::string s = std::string("\x93NUMPY\x01\x00", 8);
    s += static_cast<char>(h.size() & 0xff);
    s += static_cast<char>(h.size() >> 8);
    return s + h + payload;
  };
  // Python 2 style: double quotes, longs, other key order.
  TensorView t = read_npy(bytes_of(npy("{\"shape\": (2L, 1L), \"fortran_order\": False, \"descr\": \"<i2\"}",
                                       std::string("\x01\x00\x02\x00", 4))));
  EXPECT_EQ(t.dtype, DType::kInt16);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(load_as_double(t.dtype, t.data() + 2), 2.0);
  EXPECT_NE(error_of([&] { read_npy(bytes_of(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "xxxx"))); })
                .find("structured dtypes"), std::string::npos);
  EXPECT_NE(error_of([&] { read_npy(bytes_of(npy("{'descr': '<f4', 'shape': (1,)}", "xxxx"))); })
                .find("lacks one of"), std::string::npos);
  EXPECT_NE(error_of([&] { read_npy(bytes_of(npy("{'descr': '<U4', 'fortran_order': False, 'shape': (1,)}", "xxxx"))); })
                .find("unsupported .npy dtype '<U4'"), std::string::npos);
  EXPECT_NE(error_of([&] { read_npy(bytes_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 0)}", ""))); })
                .find("too large"), std::string::npos);
  std::string long_len = std::string("\x93NUMPY\x01\x00\xff\xff", 10) + "{}";
  EXPECT_NE(error_of([&] { read_npy(bytes_of(long_len)); }).find("runs past the end"), std::string::npos);
}

// .npz (formats/npz.h) on a file np.savez wrote: the mesh-transformer-jax fixture's first file
// (scripts/fixtures/make_mesh_jax_fixtures.py), whose arrays are jax's bfloat16 saved as '<V2'.
TEST(Npz, ReadsNpSavezInOrderWithBfloat16Voids) {
  const std::string path = std::string(FTX_TEST_SOURCE_DIR) + "/tests/fixtures/mesh_jax/step_7/shard_0/0.npz";
  const Storage bytes = file_storage(MappedFile::open(path));
  const std::vector<NamedTensor> a = read_npz(bytes, /*void2_is_bfloat16=*/true);
  ASSERT_EQ(a.size(), 8u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].name, "arr_" + std::to_string(i));
  EXPECT_EQ(a[0].tensor.dtype, DType::kBFloat16);
  EXPECT_EQ(a[0].tensor.shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(a[1].tensor.shape, (std::vector<int64_t>{8, 32}));
  // The embedding bias is k/1024 with |k| < 128: every value a multiple of 1/1024, none beyond 1/8.
  for (int64_t i = 0; i < 32; ++i) {
    const double v = load_as_double(DType::kBFloat16, a[0].tensor.data() + 2 * i);
    EXPECT_EQ(v * 1024, std::round(v * 1024));
    EXPECT_LT(std::fabs(v), 0.125);
  }
  EXPECT_NE(error_of([&] { read_npz(bytes); }).find(path + ":arr_0.npy: unsupported .npy dtype '<V2'"),
            std::string::npos);
}

TEST(Npz, DamagedArchivesNameTheFile) {
  const std::string path = std::string(FTX_TEST_SOURCE_DIR) + "/tests/fixtures/mesh_jax/step_7/shard_0/0.npz";
  auto file = MappedFile::open(path);
  const std::string whole(reinterpret_cast<const char*>(file->data()), file->size());
  EXPECT_NE(error_of([&] { read_npz(bytes_of(whole.substr(0, whole.size() / 2), "half.npz"), true); }).find("half.npz"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_npz(bytes_of("\x93NUMPY", "x.npz"), true); }).find("x.npz: not an .npz file"),
            std::string::npos);
}
