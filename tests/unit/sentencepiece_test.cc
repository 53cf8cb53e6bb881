// SentencePieceTokenizer on a small model trained here with libsentencepiece_train. The ids are
// compared with spm_encode/spm_decode (an independent producer) in tests/e2e/tokenize/tokenize.cmake; these
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
#include "lib/tokenizer/incremental_text.h"
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

namespace {

Ids library_ids(const fs::path& model, const std::string& text) {
  sentencepiece::SentencePieceProcessor sp;
  EXPECT_TRUE(sp.Load(model.string()).ok());
  std::vector<int> ids;
  EXPECT_TRUE(sp.Encode(text, &ids).ok());
  return Ids(ids.begin(), ids.end());
}

Ids cat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// A copy of the model in its own folder, with `config` as its tokenizer_config.json.
fs::path with_config(const fs::path& dir, const std::string& name, const std::string& config) {
  fs::path d = dir / name;
  fs::create_directories(d);
  fs::copy_file(dir / "tokenizer.model", d / "tokenizer.model", fs::copy_options::overwrite_existing);
  std::ofstream(d / "tokenizer_config.json") << config;
  return d;
}

}  // namespace

// K2: in a HF folder, <s>, </s> and <unk> typed in the text are their ids (transformers'
// LlamaTokenizer); with no "legacy" key (legacy, transformers' default) each text between them is
// encoded as the library encodes it on its own, dummy "▁" prefix and all. The bare model (NeMo's)
// keeps them as text.
TEST_F(SentencePieceTest, K2_SpecialTokensInTextAreTheirIds) {
  const fs::path model = dir_ / "tokenizer.model";
  ftx::SentencePieceTokenizer bare(model.string());
  EXPECT_EQ(bare.encode("<s>hello world</s>"), library_ids(model, "<s>hello world</s>"));
  ftx::SentencePieceTokenizer tok(
      (with_config(dir_, "hf", R"({"tokenizer_class": "LlamaTokenizer"})") / "tokenizer.model").string());
  EXPECT_EQ(tok.encode("<s>hello world</s>"), cat({{1}, library_ids(model, "hello world"), {2}}));
  EXPECT_EQ(tok.encode("a <unk> b"), cat({library_ids(model, "a "), {0}, library_ids(model, " b")}));
  EXPECT_EQ(tok.encode("<s><s></s>"), (Ids{1, 1, 2}));
  EXPECT_EQ(tok.encode("</s> world"), cat({{2}, library_ids(model, " world")}));
  for (const std::string plain : {"hello world", "<s", "s>", "< s>", ""})
    EXPECT_EQ(tok.encode(plain), library_ids(model, plain)) << plain;
}

// K2 with "legacy": false: one "▁" in front of the whole text, none after a special token, and a
// text that starts with a space keeps just that space's "▁".
TEST_F(SentencePieceTest, K2_NonLegacyNoPrefixAfterSpecialTokens) {
  const fs::path model = dir_ / "tokenizer.model";
  ftx::SentencePieceTokenizer tok((with_config(dir_, "nonlegacy", R"({"legacy": false})") / "tokenizer.model").string());
  EXPECT_EQ(tok.encode("hello world"), library_ids(model, "hello world"));  // no special token: the library's
  EXPECT_EQ(tok.encode("<s>"), (Ids{1}));
  // " world" after </s> is "▁world", which is what the library makes of "world" (its dummy prefix).
  EXPECT_EQ(tok.encode("</s> world"), cat({{2}, library_ids(model, "world")}));
  EXPECT_EQ(tok.encode(" <s>"), cat({library_ids(model, " "), {1}}));  // "▁" + " ": two "▁"
  Ids ids = tok.encode("<s>hello");
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_NE(tok.id_to_token(ids[1]).rfind("\xE2\x96\x81", 0), 0u) << tok.id_to_token(ids[1]);  // no "▁"
  EXPECT_EQ(tok.decode(Ids(ids.begin() + 1, ids.end())), "hello");
}

// K2: tokenizer_config.json's added_tokens_decoder adds tokens (also past the model's pieces) with
// their lstrip / rstrip, as transformers applies them.
TEST_F(SentencePieceTest, K2_AddedTokensFromTokenizerConfig) {
  const fs::path model = dir_ / "tokenizer.model";
  const fs::path d = with_config(dir_, "added", R"({"added_tokens_decoder": {
      "600": {"content": "<extra>", "lstrip": false, "rstrip": true, "normalized": false, "special": true},
      "601": {"content": "<l>", "lstrip": true, "rstrip": false, "normalized": false, "special": false}}})");
  ftx::SentencePieceTokenizer tok((d / "tokenizer.model").string());
  EXPECT_EQ(tok.vocab_size(), 602);
  EXPECT_EQ(tok.encode("a<extra>   b"), cat({library_ids(model, "a"), {600}, library_ids(model, "b")}));
  EXPECT_EQ(tok.encode("a \t <l>b"), cat({library_ids(model, "a"), {601}, library_ids(model, "b")}));
  EXPECT_EQ(tok.id_to_token(600), "<extra>");
  EXPECT_EQ(tok.decode(cat({library_ids(model, "a"), {600}})), "a<extra>");
  EXPECT_NE(error_of([&] { tok.decode({602}); }).find("token id 602"), std::string::npos);

  const fs::path bad = with_config(dir_, "bad", R"({"added_tokens_decoder": {"x1": {"content": "<y>"}}})");
  std::string msg = error_of([&] { ftx::SentencePieceTokenizer t((bad / "tokenizer.model").string()); });
  EXPECT_NE(msg.find("tokenizer_config.json: added_tokens_decoder[\"x1\"]"), std::string::npos) << msg;
}

// Streaming (ftx chat): characters the model has no piece for arrive as byte pieces, and the
// library decodes an unfinished character as U+FFFD; the streamed text is still the whole text.
TEST_F(SentencePieceTest, StreamedTextWithByteFallbackIsTheWholeText) {
  auto tok = ftx::load_tokenizer(dir_.string());
  for (const std::string text : {"caf\xC3\xA9 \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E and \xF0\x9F\x98\x80 then more",
                                 "\xF0\x9F\x98\x80\xF0\x9F\x98\x81", "end \xE6\x97\xA5"}) {
    const Ids ids = tok->encode(text);
    ASSERT_EQ(tok->decode(ids), text);
    ftx::IncrementalText stream(*tok, -1);
    std::string shown;
    size_t pieces = 0;
    for (int32_t id : ids) {
      const std::string part = stream.add(id);
      EXPECT_EQ(part.find("\xEF\xBF\xBD"), std::string::npos) << "a character shown before its last byte";
      pieces += part.empty() ? 0 : 1;
      shown += part;
    }
    EXPECT_EQ(shown, text) << "everything was shown before the end";
    EXPECT_EQ(stream.flush(), "");
    EXPECT_GT(pieces, 1u);
  }
}
