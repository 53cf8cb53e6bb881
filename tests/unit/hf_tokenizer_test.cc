// HfBpeTokenizer (HuggingFace tokenizer.json, byte-level BPE) on tokenizer.json files built here
// from GPT-2's vocab.json + merges.txt. With GPT-2's layout it must give the npm gpt-3-encoder's
// ids (data/gpt2/tokenizer_cases.jsonl); BLOOM's Split pieces, added tokens and normalization are
// checked against values computed with Python `regex` (V1) and the tokenizers rules by
// scripts/fixtures/hf_tokenizer_reference.py, which tests/e2e/tokenize/hf_tokenizer.cmake also compares with
// ftx on all LAMBADA texts. Also: load_tokenizer's precedence, special ids, and the errors for
// parts ftx does not support.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/hf_bpe_tokenizer.h"
#include "lib/tokenizer/hf_pretokenizer.h"
#include "lib/tokenizer/tokenizer.h"

#include "unit/tokenizer_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using Ids = std::vector<int32_t>;

using ftx_test::source_dir;
using ftx_test::gpt2_dir;
using ftx_test::error_of;

namespace {


std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

const json& gpt2_vocab() {
  static const json v = [] {
    std::ifstream in(gpt2_dir() + "/vocab.json");
    return json::parse(in);
  }();
  return v;
}

const std::vector<std::pair<std::string, std::string>>& gpt2_merges() {
  static const auto m = [] {
    std::vector<std::pair<std::string, std::string>> out;
    std::ifstream in(gpt2_dir() + "/merges.txt");
    std::string line;
    std::getline(in, line);  // #version
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      size_t sp = line.find(' ');
      out.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    }
    return out;
  }();
  return m;
}

json added(int id, const std::string& content, bool special, bool normalized) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", normalized}, {"special", special}};
}

json byte_level(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

// GPT-2 as a tokenizers file: its own vocabulary and merges ("a b" strings, or [a, b] pairs).
json gpt2_style(bool merge_pairs) {
  json merges = json::array();
  for (const auto& [a, b] : gpt2_merges()) merges.push_back(merge_pairs ? json::array({a, b}) : json(a + " " + b));
  return {{"version", "1.0"},
          {"added_tokens", json::array({added(50256, "<|endoftext|>", true, false)})},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level(false, true)},
          {"post_processor", byte_level(false, true)},
          {"decoder", byte_level(false, true)},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"vocab", gpt2_vocab()}, {"merges", merges}}}};
}

const char* kBloomPattern = " ?[^(\\s|[.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C])]+";

json bloom_pre_tokenizer() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           json::array({{{"type", "Split"}, {"pattern", {{"Regex", kBloomPattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                        byte_level(false, false)})}};
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("ftx_hf_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ / name) << content;
    return (path_ / name).string();
  }
  std::string write_json(const json& doc, const std::string& name = "tokenizer.json") const { return write(name, doc.dump()); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};


std::string error_loading(json doc) {
  TempDir d;
  std::string path = d.write_json(doc);
  return error_of([&] { ftx::HfBpeTokenizer tok(path); });
}

}  // namespace

// GPT-2's layout in a tokenizer.json gives exactly encoder.py's ids (the npm encoder's), for both
// spellings of merges, and decodes back.
TEST(HfBpe, Gpt2LayoutMatchesReferenceCases) {
  auto cases = read_jsonl(gpt2_dir() + "/tokenizer_cases.jsonl");
  ASSERT_EQ(cases.size(), 300u) << "set FTX_SOURCE_DIR to the ftx checkout";
  for (bool pairs : {false, true}) {
    TempDir d;
    ftx::HfBpeTokenizer tok(d.write_json(gpt2_style(pairs)));
    EXPECT_EQ(tok.vocab_size(), 50257);
    EXPECT_EQ(tok.kind(), "hf-bpe");
    int failures = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      std::string text = cases[i]["text"];
      Ids expected = cases[i]["ids"].get<Ids>();
      if (text.find("<|endoftext|>") != std::string::npos) {  // the special id here; encoder.py's text
        EXPECT_EQ(tok.decode(tok.encode(text)), text);
        continue;
      }
      if (tok.encode(text) != expected && failures++ < 3) ADD_FAILURE() << "case " << i + 1 << " pairs=" << pairs;
      EXPECT_EQ(tok.decode(expected), text);
    }
    EXPECT_EQ(failures, 0);
  }
}

// tokenizers cuts added tokens out of the text first, special or not: unlike encoder.py.
TEST(HfBpe, AddedTokensAreMatchedInText) {
  json doc = gpt2_style(false);
  doc["added_tokens"].push_back(added(50257, "<|padding|>", true, false));
  for (int k = 24; k >= 2; --k) doc["added_tokens"].push_back(added(50258 + 24 - k, std::string(k, ' '), false, true));
  doc["normalizer"] = {{"type", "NFC"}};
  TempDir d;
  ftx::HfBpeTokenizer tok(d.write_json(doc));
  EXPECT_EQ(tok.vocab_size(), 50281);
  // Values from hf_tokenizer_reference.py (the neox fixture has this layout).
  EXPECT_EQ(tok.encode("<|endoftext|>"), (Ids{50256}));
  EXPECT_EQ(tok.encode("a<|endoftext|>b"), (Ids{64, 50256, 65}));
  EXPECT_EQ(tok.encode("<|endoftext|"), (Ids{27, 91, 437, 1659, 5239, 91}));
  EXPECT_EQ(tok.encode("<|padding|> x"), (Ids{50257, 2124}));
  EXPECT_EQ(tok.encode("x" + std::string(30, ' ') + "y"), (Ids{87, 50258, 50276, 88}));  // 24 + 6, longest first
  EXPECT_EQ(tok.encode("a  b   c    d"), (Ids{64, 50280, 65, 50279, 66, 50278, 67}));
  EXPECT_EQ(tok.encode("  leading"), (Ids{50280, 12294}));
  EXPECT_EQ(tok.encode("\t  \n  x"), (Ids{197, 50280, 198, 50280, 87}));
  // NFC: a decomposed é is the precomposed one's token.
  EXPECT_EQ(tok.encode("e\xCC\x81"), tok.encode("\xC3\xA9"));
  EXPECT_EQ(tok.encode("e\xCC\x81"), (Ids{2634}));
  // Added tokens decode to their content, whatever alphabet it is in.
  EXPECT_EQ(tok.decode({64, 50280, 65, 50256}), "a  b<|endoftext|>");
  EXPECT_EQ(tok.id_to_token(50258), std::string(24, ' '));
  // No tokenizer_config.json: <|endoftext|> is both.
  EXPECT_EQ(tok.bos_id(), 50256);
  EXPECT_EQ(tok.eos_id(), 50256);
}

// BLOOM's Split pattern, piece by piece, as Python `regex` V1 finds it ("Isolated": the text
// between matches is a piece too); `(`, `|` and `)` are in the class's excluded set.
TEST(HfPreTokenizer, BloomPieces) {
  ftx::HfPreTokenizer pre(bloom_pre_tokenizer(), "t.json");
  auto split = [&](const std::string& s) {
    std::vector<std::string> out;
    pre.split(s, &out);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello, world. (a|b) x  y \n z!?"),
            (V{"Hello", ",", " world", ". (", "a", "|", "b", ")", " x", " ", " y", " \n", " z", "!?"}));
  EXPECT_EQ(split("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(split(" a"), (V{" a"}));
  EXPECT_EQ(split("  a"), (V{" ", " a"}));
  EXPECT_EQ(split("x\xE2\x80\xA6y\xE3\x80\x82z"), (V{"x", "\xE2\x80\xA6", "y", "\xE3\x80\x82", "z"}));
  EXPECT_EQ(split("a\t\tb  "), (V{"a", "\t\t", "b", "  "}));
  EXPECT_EQ(split("(x)|y"), (V{"(", "x", ")|", "y"}));
  EXPECT_EQ(split("ab.,!?cd"), (V{"ab", ".,!?", "cd"}));
  EXPECT_EQ(split(" . a"), (V{" .", " a"}));
  EXPECT_EQ(split("end. "), (V{"end", ". "}));
  EXPECT_EQ(split("\xE3\x80\x80x \xC2\x85y"), (V{"\xE3\x80\x80", "x", " \xC2\x85", "y"}));  // U+3000, U+0085 are \s
  EXPECT_EQ(split("\xC3\xA9,\xC2\xA0" "b"), (V{"\xC3\xA9", ",\xC2\xA0", "b"}));
  EXPECT_EQ(split("a\xFF b"), (V{"a\xFF", " b"}));  // a byte that is not UTF-8 is in the class
  EXPECT_EQ(split(""), V{});
}

// BLOOM's layout: specials at 0..3 (in model.vocab too), GPT-2's tokens moved up by 4.
TEST(HfBpe, BloomLayout) {
  json doc = gpt2_style(true);
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"<pad>", 3}};
  for (auto& [t, id] : gpt2_vocab().items()) vocab[t] = id.get<int>() + 4;
  doc["model"]["vocab"] = vocab;
  doc["model"]["unk_token"] = "<unk>";
  doc["added_tokens"] = json::array({added(0, "<unk>", true, false), added(1, "<s>", true, false),
                                     added(2, "</s>", true, false), added(3, "<pad>", true, false)});
  doc["pre_tokenizer"] = bloom_pre_tokenizer();
  TempDir d;
  ftx::HfBpeTokenizer tok(d.write_json(doc));
  // Values from hf_tokenizer_reference.py (the bloom fixture has this layout).
  EXPECT_EQ(tok.encode("<s>hello</s>"), (Ids{1, 31377, 2}));
  EXPECT_EQ(tok.encode("<unk><pad>"), (Ids{0, 3}));
  EXPECT_EQ(tok.encode(" <s> "), (Ids{224, 1, 224}));
  EXPECT_EQ(tok.encode("word(s) | pipe"), (Ids{4779, 11, 86, 12, 934, 12660}));
  EXPECT_EQ(tok.encode("a\xE2\x80\xA6" "b\xE3\x80\x82" "c"), (Ids{68, 1403, 69, 16768, 70}));
  EXPECT_EQ(tok.decode(tok.encode("Hello, world. (a|b) x  y \n z!?")), "Hello, world. (a|b) x  y \n z!?");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.id_to_token(4), "!");
}

// GPT-2's pattern spelled out in a Split, then ByteLevel without its regex, is the same as
// ByteLevel with it; add_prefix_space puts a space before each piece that lacks one.
TEST(HfBpe, SplitWithGpt2PatternAndPrefixSpace) {
  json doc = gpt2_style(false);
  doc["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    byte_level(false, false)})}};
  TempDir d;
  ftx::HfBpeTokenizer split(d.write_json(doc, "a.json"));
  ftx::HfBpeTokenizer plain(d.write_json(gpt2_style(false), "b.json"));
  for (const char* text : {"This is some text", "don't  stop\n\n 123 !!", "hello \xF0\x9F\x91\x8B world"})
    EXPECT_EQ(split.encode(text), plain.encode(text)) << text;

  json prefix = gpt2_style(false);
  prefix["pre_tokenizer"] = byte_level(true, true);
  ftx::HfBpeTokenizer tok(d.write_json(prefix, "c.json"));
  EXPECT_EQ(tok.encode("hello"), (Ids{23748}));  // " hello"
  EXPECT_EQ(tok.encode(" hello"), (Ids{23748}));
  EXPECT_EQ(tok.encode("a<|endoftext|>b"), (Ids{257, 50256, 275}));  // " a", eot, " b"
  EXPECT_EQ(tok.encode(""), Ids{});
}

TEST(HfBpe, IgnoreMergesAndMissingBytes) {
  // ignore_merges: a piece that is a token is taken whole, even if the merges would not form it.
  json doc = gpt2_style(false);
  doc["model"]["merges"] = json::array();
  doc["model"]["ignore_merges"] = true;
  TempDir d;
  ftx::HfBpeTokenizer whole(d.write_json(doc, "a.json"));
  EXPECT_EQ(whole.encode("hello world"), (Ids{31373, 995}));
  EXPECT_EQ(whole.encode("helloworldx").size(), 11u);  // not a token: bytes, no merges

  // A vocabulary without the token of byte 0xFF: it is the unk id, or an error without one.
  json v = gpt2_style(false);
  v["model"]["vocab"].erase("\xC3\xBF");  // "ÿ" spells 0xFF
  v["model"]["merges"] = json::array();
  v["model"]["vocab"]["<unk>"] = 60000;
  ftx::HfBpeTokenizer no_unk(d.write_json(v, "b.json"));
  std::string msg = error_of([&] { no_unk.encode("a\xFF"); });
  EXPECT_NE(msg.find("byte 0xFF"), std::string::npos) << msg;
  v["model"]["unk_token"] = "<unk>";
  ftx::HfBpeTokenizer with_unk(d.write_json(v, "c.json"));
  EXPECT_EQ(with_unk.encode("a\xFF" "b"), (Ids{64, 60000, 65}));
}

TEST(HfBpe, SpecialIdsFromTokenizerConfig) {
  json doc = gpt2_style(false);
  doc["added_tokens"].push_back(added(50257, "<|padding|>", true, false));
  TempDir d;
  std::string path = d.write_json(doc);
  d.write("tokenizer_config.json", R"({"bos_token": {"content": "<|padding|>"}, "eos_token": "<|endoftext|>"})");
  ftx::HfBpeTokenizer tok(path);
  EXPECT_EQ(tok.bos_id(), 50257);
  EXPECT_EQ(tok.eos_id(), 50256);
}

// vocab.json + merges.txt win over tokenizer.json; tokenizer.json alone, or named directly, loads.
TEST(HfBpe, LoadTokenizerPrecedence) {
  TempDir d;
  d.write_json(gpt2_style(false));
  auto hf = ftx::load_tokenizer(d.str());
  EXPECT_EQ(hf->kind(), "hf-bpe");
  EXPECT_EQ(hf->encode("<|endoftext|>"), (Ids{50256}));
  EXPECT_EQ(ftx::load_tokenizer(d.str() + "/tokenizer.json")->kind(), "hf-bpe");
  fs::copy_file(gpt2_dir() + "/vocab.json", d.str() + "/vocab.json");
  fs::copy_file(gpt2_dir() + "/merges.txt", d.str() + "/merges.txt");
  auto gpt2 = ftx::load_tokenizer(d.str());
  EXPECT_EQ(gpt2->kind(), "gpt2-bpe");
  EXPECT_NE(gpt2->encode("<|endoftext|>"), (Ids{50256}));
}

TEST(HfBpe, UnsupportedPartsAreNamed) {
  auto expect_error = [](json doc, const std::string& needle) {
    std::string msg = error_loading(std::move(doc));
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  json d = gpt2_style(false);
  d["normalizer"] = {{"type", "Lowercase"}};
  expect_error(d, "normalizer \"Lowercase\" is not supported");
  d = gpt2_style(false);
  d["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "Strip"}}})}};
  expect_error(d, "normalizer \"Strip\"");
  d = gpt2_style(false);
  d["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_error(d, "pre_tokenizer Metaspace has no \"replacement\"");
  d["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};  // SentencePiece-style, ByteLevel decoder
  expect_error(d, "no ByteLevel step");
  d["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(d, "pre_tokenizer \"Whitespace\" is not supported");
  d["pre_tokenizer"] = nullptr;
  expect_error(d, "has no pre_tokenizer");
  d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_error(d, "Split pattern \"\\\\w+\" is not supported");
  d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "[^a-z]+"}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_error(d, "ranges");
  d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", ""}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_error(d, "Split pattern {\"String\":\"\"} is not supported");
  d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}, {"invert", false}};
  expect_error(d, "Split behavior \"Sideways\" is not supported");
  d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", kBloomPattern}}}, {"behavior", "Removed"}, {"invert", false}};
  expect_error(d, "with behavior \"Removed\" is not supported");
  d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", kBloomPattern}}}, {"behavior", "Isolated"}, {"invert", true}};
  expect_error(d, "with behavior \"Isolated\" and invert: true is not supported");
  d["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", kBloomPattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  expect_error(d, "no ByteLevel step");
  d = gpt2_style(false);
  d["model"]["type"] = "WordPiece";
  expect_error(d, "model type \"WordPiece\" is not supported");
  d = gpt2_style(false);
  d["model"]["dropout"] = 0.1;
  expect_error(d, "dropout 0.1");
  d = gpt2_style(false);
  d["model"]["continuing_subword_prefix"] = "##";
  expect_error(d, "continuing_subword_prefix \"##\"");
  d = gpt2_style(false);
  d["model"]["merges"][5] = "a b c";
  expect_error(d, "model.merges[5] is \"a b c\"");
  d["model"]["merges"][5] = "q QQQQQQQ";
  expect_error(d, "model.merges[5] makes \"qQQQQQQQ\", which is not in model.vocab");
  d = gpt2_style(false);
  d["decoder"] = {{"type", "Metaspace"}};
  expect_error(d, "decoder \"Metaspace\" is not supported");
  d = gpt2_style(false);
  d["added_tokens"][0]["lstrip"] = "yes";
  expect_error(d, "added_tokens[0] \"<|endoftext|>\" has lstrip: \"yes\", expected true or false");
  d = gpt2_style(false);
  d["added_tokens"].push_back(added(50256, "<|other|>", true, false));
  expect_error(d, "id 50256 is given to both added tokens");
  d = gpt2_style(false);
  d["model"]["unk_token"] = "<nope>";
  expect_error(d, "unk_token \"<nope>\" is not in model.vocab");
  expect_error(json::array(), "expected a JSON object");
  TempDir t;
  t.write("tokenizer.json", "{\"model\": ");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(t.str()); }).find("not valid JSON"), std::string::npos);
}

namespace {

// A SentencePiece-style tokenizer.json as transformers' LlamaConverter writes it (Llama 2,
// Mistral), small enough to work out by hand: <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF>
// (ids 3..258), then "▁" 259, "a" 260, "b" 261, "▁a" 262, "ab" 263, "▁ab" 264, "▁▁" 265; merges by
// rank: "▁ a", "a b", "▁a b", "▁ ▁". `legacy`: the Prepend/Replace normalizer and no pre-tokenizer;
// otherwise a Metaspace pre-tokenizer with prepend_scheme "first" and no split.
constexpr const char* kMeta = "\xE2\x96\x81";  // "▁"

json llama_style(bool legacy) {
  const std::string m = kMeta;
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const std::string& piece : {m, std::string("a"), std::string("b"), m + "a", std::string("ab"), m + "ab", m + m})
    vocab[piece] = id++;
  json merges = json::array({m + " a", "a b", m + "a b", m + " " + m});
  json replace_space = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", m}};
  json doc = {
      {"version", "1.0"},
      {"added_tokens", json::array({added(0, "<unk>", true, false), added(1, "<s>", true, false), added(2, "</s>", true, false)})},
      {"normalizer", legacy ? json{{"type", "Sequence"}, {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", m}}, replace_space})}}
                            : json(nullptr)},
      {"pre_tokenizer", legacy ? json(nullptr)
                               : json{{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "first"}, {"split", false}}},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", true}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}}};
  return doc;
}

}  // namespace

// K3: Llama 2's / Mistral's tokenizer.json is read (tokenizers' rules worked out by hand): "▁" in
// front of the text's start only (Metaspace "first"), none after a special token, none added to a
// text that starts with a space; the legacy normalizer puts one in front of every piece between
// special tokens; characters with no token become <0xNN> byte tokens; decoding undoes all of it.
TEST(HfBpe, K3_SentencePieceStyleTokenizerJson) {
  TempDir d;
  ftx::HfBpeTokenizer tok(d.write_json(llama_style(false)));
  EXPECT_EQ(tok.kind(), "hf-sentencepiece-bpe");
  EXPECT_EQ(tok.encode("ab"), (Ids{264}));
  EXPECT_EQ(tok.encode("a b"), (Ids{262, 259, 261}));    // "▁a▁b": ▁a, then ▁ b (no "▁b")
  EXPECT_EQ(tok.encode(" ab"), (Ids{264}));              // starts with "▁" already: none added
  EXPECT_EQ(tok.encode("   "), (Ids{265, 259}));          // 3 spaces, 3 "▁" (the slow tokenizer has 4)
  EXPECT_EQ(tok.encode("<s>ab"), (Ids{1, 263}));         // no "▁" after a special token
  EXPECT_EQ(tok.encode("<s> ab</s>"), (Ids{1, 264, 2}));
  EXPECT_EQ(tok.encode("\xD0\xB6"), (Ids{259, 3 + 0xD0, 3 + 0xB6}));  // "ж": byte fallback
  EXPECT_EQ(tok.encode(""), Ids{});
  EXPECT_EQ(tok.decode({262, 259, 261}), "a b");  // one leading space stripped
  EXPECT_EQ(tok.decode({1, 264, 2}), "<s> ab</s>");
  EXPECT_EQ(tok.decode({259, 3 + 0xD0, 3 + 0xB6}), "\xD0\xB6");
  EXPECT_EQ(tok.decode({3 + 0xD0, 260}), "\xEF\xBF\xBD" "a");  // a lone lead byte: U+FFFD
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);

  TempDir l;
  ftx::HfBpeTokenizer legacy(l.write_json(llama_style(true)));
  EXPECT_EQ(legacy.encode("<s>ab"), (Ids{1, 264}));  // Prepend acts on each piece
  EXPECT_EQ(legacy.encode(" ab"), (Ids{259, 264}));  // "▁▁ab": ▁ a (rank 0), then ▁a b (rank 2)
}

// K3: with both files, tokenizer.json (AutoTokenizer's) is used; one of a kind ftx does not read
// leaves tokenizer.model; tokenizer.model named directly is still SentencePiece.
TEST(HfBpe, K3_TokenizerJsonBeforeTokenizerModel) {
  TempDir d;
  d.write_json(llama_style(false));
  std::ofstream(fs::path(d.str()) / "tokenizer.model") << "not read";
  auto tok = ftx::load_tokenizer(d.str());
  EXPECT_EQ(tok->kind(), "hf-sentencepiece-bpe");
  EXPECT_EQ(tok->source(), d.str() + "/tokenizer.json");

  json unigram = llama_style(false);
  unigram["model"]["type"] = "Unigram";
  d.write_json(unigram);
  // The fallback reads tokenizer.model, which here is not a model: its error shows it was tried.
  std::string msg = error_of([&] { ftx::load_tokenizer(d.str()); });
  EXPECT_NE(msg.find("tokenizer.model: not a SentencePiece model"), std::string::npos) << msg;
  fs::remove(fs::path(d.str()) / "tokenizer.model");
  msg = error_of([&] { ftx::load_tokenizer(d.str()); });
  EXPECT_NE(msg.find("model type \"Unigram\" is not supported"), std::string::npos) << msg;
}
