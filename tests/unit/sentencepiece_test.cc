// SentencePieceTokenizer on a small model trained here with libsentencepiece_train. The ids are
// compared with spm_encode/spm_decode (an independent producer) in tests/e2e/tokenize.cmake; these
// tests check the wrapper: file finding, special ids, byte fallback, round trips and errors.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/sentencepiece_tokenizer.h"
#include "lib/tokenizer/tokenizer.h"

#include "unit/tokenizer_test_util.h"

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

using ftx_test::lambada_texts;
using ftx_test::error_of;

namespace {


// One BPE model with byte fallback (as NeMo GPT-Next uses), trained once on 1000 LAMBADA texts,
// with no normalization so that every text round-trips exactly. (The e2e test covers the default
// NFKC normalizer against spm_encode.)
class SentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("ftx_spm_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    texts_ = lambada_texts();
    ASSERT_EQ(texts_.size(), 5153u) << "set FTX_SOURCE_DIR to the ftx checkout";
    {
      std::ofstream corpus(dir_ / "corpus.txt");
      for (size_t i = 0; i < 1000; ++i) corpus << texts_[i] << "\n";
    }
    auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (dir_ / "corpus.txt").string() + " --model_prefix=" + (dir_ / "tokenizer").string() +
        " --vocab_size=600 --model_type=bpe --byte_fallback=true --character_coverage=0.9995 --num_threads=1"
        " --normalization_rule_name=identity --remove_extra_whitespaces=false --minloglevel=2");
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static inline fs::path dir_;
  static inline std::vector<std::string> texts_;
};


}  // namespace

TEST_F(SentencePieceTest, FoundInFolderOrAsFile) {
  auto tok = ftx::load_tokenizer(dir_.string());
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 600);
  EXPECT_EQ(tok->source(), (dir_ / "tokenizer.model").string());
  auto direct = ftx::load_tokenizer((dir_ / "tokenizer.model").string());
  EXPECT_EQ(direct->encode("hello world."), tok->encode("hello world."));
}

TEST_F(SentencePieceTest, SpecialIds) {
  ftx::SentencePieceTokenizer tok((dir_ / "tokenizer.model").string());
  // spm_train's defaults: <unk>=0, <s>=1, </s>=2, no pad.
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.id_to_token(1), "<s>");
  EXPECT_EQ(tok.id_to_token(2), "</s>");
}

// The wrapper gives the library's own ids (int -> int32_t, string_view plumbing), and held-out
// texts (newlines, curly quotes, ellipses) round-trip exactly.
TEST_F(SentencePieceTest, MatchesLibraryAndRoundTrips) {
  ftx::SentencePieceTokenizer tok((dir_ / "tokenizer.model").string());
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load((dir_ / "tokenizer.model").string()).ok());
  for (size_t i = 4000; i < 4200; ++i) {
    const std::string& text = texts_[i];
    Ids ids = tok.encode(text);
    std::vector<int> lib_ids;
    ASSERT_TRUE(sp.Encode(text, &lib_ids).ok());
    EXPECT_EQ(ids, Ids(lib_ids.begin(), lib_ids.end()));
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 600);
    EXPECT_EQ(tok.decode(ids), text) << "text " << i;
  }
}

// Characters outside the model become their UTF-8 bytes (<0xF0>...) and decode back.
TEST_F(SentencePieceTest, ByteFallback) {
  ftx::SentencePieceTokenizer tok((dir_ / "tokenizer.model").string());
  Ids ids = tok.encode("\xF0\x9F\x98\x80 \xE6\x9D\xB1");  // an emoji and a CJK character
  EXPECT_GE(ids.size(), 7u);
  EXPECT_EQ(tok.id_to_token(ids[1]), "<0xF0>");
  EXPECT_EQ(tok.decode(ids), "\xF0\x9F\x98\x80 \xE6\x9D\xB1");
}

TEST_F(SentencePieceTest, Errors) {
  ftx::SentencePieceTokenizer tok((dir_ / "tokenizer.model").string());
  EXPECT_NE(error_of([&] { tok.decode({5, 600}); }).find("token id 600"), std::string::npos);
  EXPECT_NE(error_of([&] { tok.decode({-1}); }).find("token id -1"), std::string::npos);
  EXPECT_NE(error_of([&] { tok.id_to_token(1000); }).find("token id 1000"), std::string::npos);

  fs::path bad = dir_ / "bad";
  fs::create_directories(bad);
  std::ofstream(bad / "tokenizer.model") << "this is not a protobuf";
  std::string msg = error_of([&] { ftx::load_tokenizer(bad.string()); });
  EXPECT_NE(msg.find((bad / "tokenizer.model").string() + ": not a SentencePiece model"), std::string::npos) << msg;

  fs::path two = dir_ / "two";
  fs::create_directories(two);
  fs::copy_file(dir_ / "tokenizer.model", two / "a.model");
  fs::copy_file(dir_ / "tokenizer.model", two / "b.model");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(two.string()); }).find("a.model, b.model"), std::string::npos);
}
