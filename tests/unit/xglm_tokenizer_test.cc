// XglmTokenizer on a small SentencePiece BPE model trained here and saved under XGLM's file name,
// sentencepiece.bpe.model. The expected ids are libsentencepiece's own, moved as HF XGLMTokenizer
// defines it (fairseq_offset 1; <s> 0, <pad> 1, </s> 2, <unk> 3; 7 <madeupwordN> at the end).
// The e2e test (tests/e2e/tokenize/hf_tokenizer.cmake) does the same through `ftx tokenize` against
// python3-sentencepiece.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/tokenizer/xglm_tokenizer.h"

#include "unit/tokenizer_test_util.h"

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

using ftx_test::lambada_texts;
using ftx_test::error_of;

namespace {


class XglmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("ftx_xglm_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    texts_ = lambada_texts();
    ASSERT_EQ(texts_.size(), 5153u) << "set FTX_SOURCE_DIR to the ftx checkout";
    {
      std::ofstream corpus(dir_ / "corpus.txt");
      for (size_t i = 0; i < 1000; ++i) corpus << texts_[i] << "\n";
    }
    // spm_train's defaults give <unk>=0 <s>=1 </s>=2, as fairseq's models have.
    auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (dir_ / "corpus.txt").string() + " --model_prefix=" + (dir_ / "sentencepiece.bpe").string() +
        " --vocab_size=500 --model_type=bpe --character_coverage=0.9995 --num_threads=1 --minloglevel=2");
    ASSERT_TRUE(status.ok()) << status.ToString();
    model_ = (dir_ / "sentencepiece.bpe.model").string();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static inline fs::path dir_;
  static inline std::string model_;
  static inline std::vector<std::string> texts_;
};


}  // namespace

TEST_F(XglmTest, LoadedByFileName) {
  auto tok = ftx::load_tokenizer(dir_.string());
  EXPECT_EQ(tok->kind(), "xglm-sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 508);  // 500 pieces + offset 1 + 7 made-up words
  EXPECT_EQ(ftx::load_tokenizer(model_)->kind(), "xglm-sentencepiece");
  // The same file under another name is plain SentencePiece.
  fs::path other = dir_ / "plain";
  fs::create_directories(other);
  fs::copy_file(model_, other / "tokenizer.model", fs::copy_options::overwrite_existing);
  EXPECT_EQ(ftx::load_tokenizer(other.string())->kind(), "sentencepiece");
  // sentencepiece.bpe.model wins over tokenizer.json (HF writes a Unigram one next to it).
  std::ofstream(dir_ / "tokenizer.json") << R"({"model": {"type": "Unigram"}})";
  EXPECT_EQ(ftx::load_tokenizer(dir_.string())->kind(), "xglm-sentencepiece");
  fs::remove(dir_ / "tokenizer.json");
}

TEST_F(XglmTest, FairseqIdOrder) {
  ftx::XglmTokenizer tok(model_);
  EXPECT_EQ(tok.id_to_token(0), "<s>");
  EXPECT_EQ(tok.id_to_token(1), "<pad>");
  EXPECT_EQ(tok.id_to_token(2), "</s>");
  EXPECT_EQ(tok.id_to_token(3), "<unk>");
  EXPECT_EQ(tok.id_to_token(501), "<madeupword0>");
  EXPECT_EQ(tok.id_to_token(507), "<madeupword6>");
  EXPECT_EQ(tok.bos_id(), 0);
  EXPECT_EQ(tok.eos_id(), 2);
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(model_).ok());
  for (int p = 3; p < 500; ++p) ASSERT_EQ(tok.id_to_token(p + 1), sp.IdToPiece(p)) << p;
}

// Ids are the library's, moved: 0 (unknown) -> 3, p -> p + 1; decoding gives the library's text.
TEST_F(XglmTest, MatchesLibraryWithOffset) {
  ftx::XglmTokenizer tok(model_);
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(model_).ok());
  std::vector<std::string> texts(texts_.begin() + 4000, texts_.begin() + 4200);
  texts.push_back("unknown: \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x98\x80");  // characters the model never saw
  int unknown = 0;
  for (const std::string& text : texts) {
    std::vector<int> lib;
    ASSERT_TRUE(sp.Encode(text, &lib).ok());
    Ids expected;
    for (int p : lib) expected.push_back(p == 0 ? 3 : p + 1), unknown += p == 0;
    Ids ids = tok.encode(text);
    ASSERT_EQ(ids, expected) << text;
    std::string lib_text;
    ASSERT_TRUE(sp.Decode(lib, &lib_text).ok());
    EXPECT_EQ(tok.decode(ids), lib_text);
  }
  EXPECT_GT(unknown, 0);
}

TEST_F(XglmTest, SpecialIdsDecodeToNothing) {
  ftx::XglmTokenizer tok(model_);
  Ids ids = tok.encode("hello world.");
  Ids framed = {2};
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.insert(framed.end(), {0, 1, 501, 507, 2});
  EXPECT_EQ(tok.decode(framed), tok.decode(ids));
  EXPECT_NE(error_of([&] { tok.decode({508}); }).find("token id 508"), std::string::npos);
  EXPECT_NE(error_of([&] { tok.decode({-1}); }).find("token id -1"), std::string::npos);
  EXPECT_NE(error_of([&] { tok.id_to_token(508); }).find("token id 508"), std::string::npos);
}
