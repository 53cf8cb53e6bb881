// TarArchive against .nemo archives written by Python's tarfile (make_format_fixtures.py). Members
// are compared byte for byte with the files that went into the archive.
#include "formats/tar_archive.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <zlib.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

#include "formats/error.h"
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

std::string text(const Storage& s) { return std::string(reinterpret_cast<const char*>(s.data), s.nbytes); }

void expect_members_match_sources(const std::string& dir, const TarArchive& ar) {
  auto expected = ftx_test::read_json(dir + "/nemo/expected.json");
  for (auto it = expected["members"].begin(); it != expected["members"].end(); ++it) {
    SCOPED_TRACE(it.key());
    ASSERT_TRUE(ar.has(it.key()));
    ASSERT_TRUE(ar.has("./" + it.key()));  // look-ups normalise too
    Storage s = ar.member(it.key());
    EXPECT_EQ(s.nbytes, it.value().get<uint64_t>());
    EXPECT_EQ(text(s), ftx_test::read_all(dir + "/nemo/src/" + it.key()));
    EXPECT_EQ(s.origin, ar.path() + ":" + it.key());
  }
  for (const auto& f : expected["folders"]) {
    ASSERT_TRUE(ar.has(f.get<std::string>()));
    EXPECT_NE(error_of([&] { ar.member(f.get<std::string>()); }).find("is not a regular file"), std::string::npos);
  }
  for (const auto& e : ar.entries()) EXPECT_FALSE(e.name.empty() || e.name[0] == '.' || e.name[0] == '/');
}

}  // namespace

TEST(TarArchive, PlainTarMembersAreZeroCopyViews) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  auto ar = TarArchive::open(dir + "/nemo/model.nemo");
  EXPECT_FALSE(ar->compressed());
  expect_members_match_sources(dir, *ar);
  Storage s = ar->member("model_weights.ckpt");
  ASSERT_TRUE(s.file);
  EXPECT_EQ(s.data, s.file->data() + s.file_offset);
  EXPECT_EQ(s.file_offset % 512, 0u);
}

TEST(TarArchive, GzipTarIsStreamedIntoOwnedBuffers) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  auto ar = TarArchive::open(dir + "/nemo/model_gz.nemo");
  EXPECT_TRUE(ar->compressed());
  expect_members_match_sources(dir, *ar);
  EXPECT_FALSE(ar->member("model_config.yaml").file);
}

TEST(TarArchive, GzipFilterKeepsOnlyChosenMembers) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  std::vector<std::string> asked;
  auto ar = TarArchive::open(dir + "/nemo/model_gz.nemo", [&](const std::string& name, uint64_t) {
    asked.push_back(name);
    return name == "model_config.yaml";
  });
  EXPECT_EQ(asked.size(), 7u);  // regular files only
  EXPECT_TRUE(ar->loaded("model_config.yaml"));
  EXPECT_TRUE(ar->has("model_weights.ckpt"));
  EXPECT_FALSE(ar->loaded("model_weights.ckpt"));
  EXPECT_NE(error_of([&] { ar->member("model_weights.ckpt"); }).find("was skipped while reading the gzip stream"),
            std::string::npos);
  EXPECT_NE(text(ar->member("model_config.yaml")).find("num_layers: 2"), std::string::npos);
}

TEST(TarArchive, LongNamesInGnuPaxAndUstarArchives) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  auto expected = ftx_test::read_json(dir + "/nemo/expected.json");
  const std::string long_name = expected["long_name"];
  ASSERT_GT(long_name.size(), 100u);
  const std::string want = ftx_test::read_all(dir + "/nemo/src/" + expected["long_name_source"].get<std::string>());
  for (const char* f : {"model_gnu.nemo", "model_pax.nemo", "model_ustar.nemo"}) {
    SCOPED_TRACE(f);
    auto ar = TarArchive::open(dir + "/nemo/" + f);
    expect_members_match_sources(dir, *ar);
    EXPECT_EQ(text(ar->member(long_name)), want);
  }
}

TEST(TarArchive, FindIsANonRecursiveGlob) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  auto ar = TarArchive::open(dir + "/nemo/model_gnu.nemo");
  EXPECT_EQ(ar->find("*.model"), std::vector<std::string>{"778899_tokenizer.model"});
  EXPECT_EQ(ar->find("*vocab.json"), std::vector<std::string>{"a1b2c3_vocab.json"});
  EXPECT_EQ(ar->find("*merge*.txt"), std::vector<std::string>{"d4e5f6_merges.txt"});
  EXPECT_EQ(ar->find("mp_rank_*/model_weights.ckpt"),
            (std::vector<std::string>{"mp_rank_00/model_weights.ckpt", "mp_rank_01/model_weights.ckpt"}));
  EXPECT_EQ(ar->find("*.yaml"), std::vector<std::string>{"model_config.yaml"});
}

TEST(TarArchive, BrokenArchivesNameTheProblem) {
  FTX_REQUIRE_FORMAT_FIXTURES(dir);
  const std::string d = dir + "/nemo/";
  EXPECT_NE(error_of([&] { TarArchive::open(d + "truncated.nemo"); })
                .find("truncated.nemo: tar member 'model_weights.ckpt' runs past the end of the archive (needs 1149 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TarArchive::open(d + "truncated_gz.nemo"); }).find("truncated_gz.nemo: truncated gzip stream"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TarArchive::open(d + "bad_checksum.nemo"); })
                .find("bad_checksum.nemo: tar header at offset 6656 has a bad checksum"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TarArchive::open(d + "bad_size.nemo"); })
                .find("has an invalid size field '0000000009x'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TarArchive::open(d + "bad_size.nemo"); }).find("bad_size.nemo: tar header at offset 6656 for '"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TarArchive::open(d + "../npy/f32_big.npy"); }).find("has a bad checksum"), std::string::npos);
  EXPECT_NE(error_of([&] { TarArchive::open(d + "../npy/f32_big.npy"); }).find("not a tar archive?"), std::string::npos);
  EXPECT_NE(error_of([&] { TarArchive::open(d + "../npy/f32_2x3.npy"); }).find("f32_2x3.npy: not a tar archive (152 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { TarArchive::open(d + "missing.nemo"); }).find("missing.nemo: cannot open"), std::string::npos);
}

TEST(TarArchive, NormalisesNames) {
  EXPECT_EQ(TarArchive::normalise_name("./a//b/"), "a/b");
  EXPECT_EQ(TarArchive::normalise_name("././x"), "x");
  EXPECT_EQ(TarArchive::normalise_name("/abs/./y"), "abs/y");
  EXPECT_EQ(TarArchive::normalise_name("./"), "");
}

namespace {

// A ustar header for one regular file.
std::string ustar_header(const std::string& name, uint64_t size) {
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), name.size());
  std::memcpy(&h[100], "0000644", 7);
  snprintf(&h[124], 12, "%011llo", static_cast<unsigned long long>(size));
  h[156] = '0';
  std::memcpy(&h[257], "ustar\0" "00", 8);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  snprintf(&h[148], 8, "%06o", sum);
  return h;
}

Storage owned_storage(std::string bytes, const std::string& origin) {
  auto owned = std::make_shared<std::string>(std::move(bytes));
  Storage s;
  s.data = reinterpret_cast<const uint8_t*>(owned->data());
  s.nbytes = owned->size();
  s.keep_alive = owned;
  s.origin = origin;
  return s;
}

std::string gzip(const std::string& in) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  EXPECT_EQ(deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

// Weights in a tar.gz are not held in memory: a member of 64 MiB or more is inflated into an
// unlinked scratch file under $TMPDIR and mapped, so its pages can be released like a plain tar's.
TEST(TarArchive, LargeGzipMemberIsInflatedToAMappedScratchFile) {
  const uint64_t n = (uint64_t(64) << 20) + 12345;
  std::string data(n, '\0');
  for (uint64_t i = 0; i < n; ++i) data[i] = static_cast<char>((i * 31 + i / 4099) % 251);
  std::string tar = ustar_header("./model_weights.ckpt", n) + data + std::string((512 - n % 512) % 512, '\0') +
                    ustar_header("./model_config.yaml", 3) + "a:1" + std::string(509, '\0') +
                    std::string(1024, '\0');
  const Storage gz = owned_storage(gzip(tar), "big.nemo");
  auto ar = TarArchive::from_bytes(gz);
  ASSERT_TRUE(ar->compressed());
  Storage w = ar->member("model_weights.ckpt");
  ASSERT_TRUE(w.file) << "not mapped from a scratch file";
  ASSERT_EQ(w.nbytes, n);
  EXPECT_EQ(std::memcmp(w.data, data.data(), n), 0);
  EXPECT_EQ(w.origin, "big.nemo:model_weights.ckpt");
  EXPECT_FALSE(ar->member("model_config.yaml").file);  // small members stay in memory
  w.file->release(0, w.file->size());                  // dropping pages must not lose the data
  EXPECT_EQ(std::memcmp(w.data + n / 2, data.data() + n / 2, 4096), 0);

  // No room for the scratch file: an error naming the folder, not a crash.
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  setenv("TMPDIR", "/nonexistent-ftx-tmp", 1);
  const std::string err = error_of([&] { TarArchive::from_bytes(gz); });
  if (old) setenv("TMPDIR", saved.c_str(), 1); else unsetenv("TMPDIR");
  EXPECT_NE(err.find("/nonexistent-ftx-tmp: cannot create a scratch file to inflate big.nemo:model_weights.ckpt"),
            std::string::npos)
      << err;

  // A full disk while inflating (a 1 MiB file size limit: write() fails with EFBIG).
  struct rlimit saved_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  const auto saved_signal = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved_limit;
  small.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string full = error_of([&] { TarArchive::from_bytes(gz); });
  setrlimit(RLIMIT_FSIZE, &saved_limit);
  signal(SIGXFSZ, saved_signal);
  EXPECT_NE(full.find("cannot write the inflated big.nemo:model_weights.ckpt (" + std::to_string(n) +
                      " bytes; set TMPDIR to a folder with room): File too large"),
            std::string::npos)
      << full;
}

TEST(TarArchive, MemberRunningPastEndOfInMemoryArchive) {
  // One header claiming 1000 bytes, followed by only 10.
  const Storage s = owned_storage(ustar_header("./w.bin", 1000) + std::string(10, 'x'), "mem.tar");
  EXPECT_EQ(error_of([&] { TarArchive::from_bytes(s); }),
            "mem.tar: tar member 'w.bin' runs past the end of the archive (needs 1000 bytes at offset 512, "
            "archive has 522 bytes)");
}
