// PyTorch Distributed Checkpoint reader on megatron-core's own torch_dist output (the committed
// fixture tests/fixtures/mcore/classic/megatron/tp2pp1/dist, written with TP 2) and on damaged
// copies of it. Runs under ASan/UBSan with the other parsers (label `parser`).
#include "formats/dcp_checkpoint.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "formats/error.h"

namespace ftx {
namespace {

namespace fs = std::filesystem;

std::string fixture_iter() {
  const char* src = std::getenv("FTX_SOURCE_DIR");
  std::string root = src && *src ? src : FTX_TEST_SOURCE_DIR;
  return root + "/tests/fixtures/mcore/classic/megatron/tp2pp1/dist/iter_0000010";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A private copy of the fixture folder.
struct Copy {
  fs::path dir;
  Copy() {
    char tmpl[] = "/tmp/ftx-dcp-XXXXXX";
    dir = ::mkdtemp(tmpl);
    for (const auto& e : fs::directory_iterator(fixture_iter())) fs::copy(e.path(), dir / e.path().filename());
  }
  ~Copy() { fs::remove_all(dir); }
  std::string distcp() const {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".distcp") return e.path().string();
    return "";
  }
};

TEST(DcpCheckpoint, ReadsMegatronCoreTorchDist) {
  DcpCheckpoint ck = DcpCheckpoint::open_dir(fixture_iter());
  ASSERT_TRUE(ck.has("decoder.layers.self_attention.linear_qkv.weight"));
  const DcpTensorInfo& qkv = ck.info("decoder.layers.self_attention.linear_qkv.weight");
  EXPECT_EQ(qkv.dtype, DType::kFloat32);
  // [layers, 3 x hidden, hidden]: global, whatever the training TP.
  EXPECT_EQ(qkv.shape, (std::vector<int64_t>{2, 96, 32}));
  const auto chunks = ck.chunks("decoder.layers.self_attention.linear_qkv.weight");
  ASSERT_EQ(chunks.size(), 4u);  // 2 layers x 2 TP ranks
  int64_t rows = 0;
  for (const auto& c : chunks) {
    EXPECT_EQ(c.view.shape, (std::vector<int64_t>{1, 48, 32}));
    ASSERT_TRUE(c.view.storage.file);  // a view into the mapped .distcp, not a copy
    const uint8_t* begin = c.view.storage.file->data();
    EXPECT_GE(c.view.data(), begin);
    EXPECT_LE(c.view.data() + c.view.nbytes(), begin + c.view.storage.file->size());
    rows += c.offsets[1] == 0 ? 1 : 0;
  }
  EXPECT_EQ(rows, 2);  // each layer has a chunk at output row 0
  const auto wte = ck.chunks("embedding.word_embeddings.weight");
  ASSERT_EQ(wte.size(), 2u);  // vocab-parallel
  EXPECT_EQ(ck.info("embedding.word_embeddings.weight").shape, (std::vector<int64_t>{64, 32}));
}

TEST(DcpCheckpoint, TruncatedMetadataIsAnError) {
  Copy c;
  const auto meta = c.dir / ".metadata";
  fs::resize_file(meta, fs::file_size(meta) / 2);
  const std::string e = error_of([&] { DcpCheckpoint::open_dir(c.dir.string()); });
  EXPECT_NE(e.find(".metadata: corrupt pickle"), std::string::npos) << e;
}

TEST(DcpCheckpoint, MissingAndTruncatedChunkFiles) {
  {
    Copy c;
    const std::string f = c.distcp();
    fs::remove(f);
    DcpCheckpoint ck = DcpCheckpoint::open_dir(c.dir.string());
    std::string e;
    for (const auto& kv : ck.tensors())
      if (e.empty()) e = error_of([&] { ck.chunks(kv.first); });
    EXPECT_NE(e.find(fs::path(f).filename().string()), std::string::npos) << e;
    EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
  }
  {
    Copy c;
    const std::string f = c.distcp();
    fs::resize_file(f, fs::file_size(f) / 3);
    DcpCheckpoint ck = DcpCheckpoint::open_dir(c.dir.string());
    std::string e;
    for (const auto& kv : ck.tensors())
      if (e.empty()) e = error_of([&] { ck.chunks(kv.first); });
    EXPECT_NE(e.find("truncated?"), std::string::npos) << e;
  }
}

TEST(DcpCheckpoint, GarbageMetadataIsRefused) {
  Copy c;
  std::ofstream(c.dir / ".metadata", std::ios::binary | std::ios::trunc) << "\x80\x02" "cos\nsystem\n.";
  const std::string e = error_of([&] { DcpCheckpoint::open_dir(c.dir.string()); });
  EXPECT_NE(e.find("refusing to load global 'os.system'"), std::string::npos) << e;
}

}  // namespace
}  // namespace ftx
