// GPT-2 byte-level BPE against outside references: the 300 cases encoded by the npm gpt-3-encoder
// (data/gpt2/tokenizer_cases.jsonl), the upstream Encoder.test.js vectors and the Python `regex`
// white-space cases from data/gpt2/SOURCE.md, and ids for invalid UTF-8 computed by
// scripts/fixtures/gpt2_bpe_reference.py (encoder.py with surrogateescape).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "formats/error.h"
#include "lib/tokenizer/gpt2_bpe.h"
#include "lib/tokenizer/gpt2_pretokenizer.h"
#include "lib/tokenizer/jsonl_tokenize.h"
#include "lib/tokenizer/piece_cache.h"
#include "lib/tokenizer/tokenizer.h"

#include "unit/tokenizer_test_util.h"

namespace fs = std::filesystem;
using ftx::Gpt2BpeTokenizer;
using Ids = std::vector<int32_t>;

using ftx_test::source_dir;
using ftx_test::gpt2_dir;
using ftx_test::error_of;

namespace {



// Loaded once for all tests (loading takes ~0.1 s).
const Gpt2BpeTokenizer& gpt2() {
  static const Gpt2BpeTokenizer tok(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt");
  return tok;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::string hex_to_bytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("ftx_gpt2_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& content) const { std::ofstream(path_ / name) << content; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};


}  // namespace

TEST(Gpt2Bpe, DataIsThere) {
  ASSERT_TRUE(fs::exists(gpt2_dir() + "/tokenizer_cases.jsonl")) << "set FTX_SOURCE_DIR to the ftx checkout";
}

TEST(Gpt2Bpe, VocabularyFacts) {
  EXPECT_EQ(gpt2().vocab_size(), 50257);
  EXPECT_EQ(gpt2().bos_id(), 50256);
  EXPECT_EQ(gpt2().eos_id(), 50256);
  EXPECT_EQ(gpt2().id_to_token(50256), "<|endoftext|>");
  EXPECT_EQ(gpt2().id_to_token(220), "\xC4\xA0");  // "Ġ": the space byte in bytes_to_unicode
  EXPECT_EQ(gpt2().kind(), "gpt2-bpe");
}

// All 300 cases of tokenizer_cases.jsonl (200 LAMBADA texts, 100 hard cases), ids from the npm
// encoder: encode must give exactly those ids, and decoding them must give the text back.
TEST(Gpt2Bpe, ReferenceCases) {
  auto cases = read_jsonl(gpt2_dir() + "/tokenizer_cases.jsonl");
  ASSERT_EQ(cases.size(), 300u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string text = cases[i]["text"];
    Ids expected = cases[i]["ids"].get<Ids>();
    Ids got = gpt2().encode(text);
    if (got != expected && failures++ < 5)
      ADD_FAILURE() << "case " << i + 1 << " " << nlohmann::json(text).dump() << ": got "
                    << nlohmann::json(got).dump() << ", expected " << nlohmann::json(expected).dump();
    EXPECT_EQ(gpt2().decode(expected), text) << "case " << i + 1;
  }
  EXPECT_EQ(failures, 0);
}

// GPT-3-Encoder's Encoder.test.js (upstream commit 9df47fc), listed in data/gpt2/SOURCE.md.
TEST(Gpt2Bpe, UpstreamVectors) {
  const std::vector<std::pair<std::string, Ids>> vectors = {
      {"", {}},
      {" ", {220}},
      {"\t", {197}},
      {"This is some text", {1212, 318, 617, 2420}},
      {"indivisible", {521, 452, 12843}},
      {"hello \xF0\x9F\x91\x8B world \xF0\x9F\x8C\x8D", {31373, 50169, 233, 995, 12520, 234, 235}},
      {"toString constructor hasOwnProperty valueOf", {1462, 10100, 23772, 468, 23858, 21746, 1988, 5189}},
  };
  for (const auto& [text, ids] : vectors) {
    EXPECT_EQ(gpt2().encode(text), ids) << text;
    EXPECT_EQ(gpt2().decode(ids), text);
  }
}

// Python `regex` classes, where JavaScript differs (data/gpt2/SOURCE.md): U+0085 is \s, U+FEFF is not.
TEST(Gpt2Bpe, PythonRegexWhiteSpace) {
  EXPECT_EQ(gpt2().encode("x \xC2\x85y"), (Ids{87, 220, 126, 227, 88}));
  EXPECT_EQ(gpt2().encode("x \xEF\xBB\xBFy"), (Ids{87, 27332, 119, 123, 88}));
}

TEST(Gpt2Bpe, EndOfTextInTextIsOrdinaryText) {
  Ids ids = gpt2().encode("<|endoftext|>");
  EXPECT_GT(ids.size(), 1u);
  for (int32_t id : ids) EXPECT_NE(id, 50256);
  EXPECT_EQ(gpt2().decode(ids), "<|endoftext|>");
  EXPECT_EQ(gpt2().decode({50256}), "<|endoftext|>");
}

// Pieces as Python's re.findall with GPT-2's pattern gives them (checked with python3-regex).
TEST(Gpt2PreTokenizer, Pieces) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(ftx::Gpt2PreTokenizer::split("a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(ftx::Gpt2PreTokenizer::split("a \nb"), (V{"a", " ", "\n", "b"}));
  EXPECT_EQ(ftx::Gpt2PreTokenizer::split("a\t\tb  "), (V{"a", "\t", "\t", "b", "  "}));
  EXPECT_EQ(ftx::Gpt2PreTokenizer::split("don't 'S ''s 're"), (V{"don", "'t", " '", "S", " ''", "s", " '", "re"}));
  EXPECT_EQ(ftx::Gpt2PreTokenizer::split("x1 23 ab!? "), (V{"x", "1", " 23", " ab", "!?", " "}));
  EXPECT_EQ(ftx::Gpt2PreTokenizer::split("a\x1C b"), (V{"a", "\x1C", " b"}));  // U+001C is not \s
  EXPECT_EQ(ftx::Gpt2PreTokenizer::split(" \xC2\x85y"), (V{" ", "\xC2\x85", "y"}));
  EXPECT_EQ(ftx::Gpt2PreTokenizer::split("\xE3\x80\x80\xE3\x80\x80x"), (V{"\xE3\x80\x80", "\xE3\x80\x80", "x"}));
}

// Invalid UTF-8: each bad byte is its own "other" code point; ids from the Python reference
// (`gpt2_bpe_reference.py bytes`, i.e. encoder.py over bytes.decode('utf-8', 'surrogateescape')).
TEST(Gpt2Bpe, InvalidUtf8MatchesReference) {
  const std::vector<std::pair<std::string, Ids>> cases = {
      {"ff", {187}},
      {"80", {222}},
      {"61ff62", {64, 187, 65}},
      {"68656c6c6f20ff776f726c64", {31373, 220, 187, 6894}},
      {"c3", {127}},
      {"e282", {158, 224}},
      {"e28241", {158, 224, 32}},
      {"eda080", {169, 254, 222}},     // encoded surrogate
      {"c0af", {124, 107}},            // overlong
      {"f4908080", {176, 238, 222, 222}},  // above U+10FFFF
      {"20ff", {220, 187}},
      {"2020ff", {220, 220, 187}},
      {"f09f918b", {41840, 233}},
      {"f09f91", {41840}},             // truncated emoji
      {"66c3a9c3", {69, 2634, 127}},
      {"0a0aff0a", {198, 198, 187, 198}},
      {"27ff73", {6, 187, 82}},
  };
  for (const auto& [hex, ids] : cases) {
    std::string bytes = hex_to_bytes(hex);
    EXPECT_EQ(gpt2().encode(bytes), ids) << hex;
    EXPECT_EQ(gpt2().decode(ids), bytes) << hex;
  }
}

// Any bytes at all encode, and decode gives them back.
TEST(Gpt2Bpe, RandomBytesRoundTrip) {
  std::mt19937 rng(7);
  for (int k = 0; k < 3000; ++k) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = static_cast<char>(k % 2 ? rng() % 256 : "a \n'\xC3\xA9\xE2\x80\x99\x85\xFF"[rng() % 12]);
    Ids ids = gpt2().encode(bytes);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 50257);
    ASSERT_EQ(gpt2().decode(ids), bytes) << "case " << k;
  }
}

// A huge single piece stays fast (the BPE is O(n log n)) and round-trips.
TEST(Gpt2Bpe, LongPiece) {
  std::string word(200000, 'a'), punct(100000, '!');
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(gpt2().decode(gpt2().encode(word)), word);
  EXPECT_EQ(gpt2().decode(gpt2().encode(punct + word + " " + punct)), punct + word + " " + punct);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
}

// The whole LAMBADA file: 430,230 tokens in total (data/gpt2/SOURCE.md, npm and Python agree) and every text
// round-trips. The time is printed; the bound is loose because the machine is shared.
TEST(Gpt2Bpe, LambadaTotal) {
  auto texts = read_jsonl(source_dir() + "/data/lambada/lambada_test.jsonl");
  ASSERT_EQ(texts.size(), 5153u);
  Gpt2BpeTokenizer fresh(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt");  // empty cache
  auto t0 = std::chrono::steady_clock::now();
  size_t total = 0;
  std::vector<Ids> all;
  for (const auto& t : texts) all.push_back(fresh.encode(t["text"].get<std::string>())), total += all.back().size();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("LAMBADA: %zu tokens encoded in %.3f s\n", total, s);
  EXPECT_EQ(total, 430230u);
  EXPECT_LT(s, 20.0);  // about 0.15 s of CPU normally; generous for sanitizer builds and a busy machine
  for (size_t i = 0; i < texts.size(); ++i) ASSERT_EQ(fresh.decode(all[i]), texts[i]["text"].get<std::string>());
}

TEST(Gpt2Bpe, DecodeRejectsUnknownIds) {
  EXPECT_NE(error_of([] { gpt2().decode({50257}); }).find("token id 50257"), std::string::npos);
  EXPECT_NE(error_of([] { gpt2().decode({1, -3}); }).find("token id -3"), std::string::npos);
  EXPECT_NE(error_of([] { gpt2().id_to_token(99999); }).find("99999"), std::string::npos);
}

TEST(LoadTokenizer, FindsGpt2Files) {
  auto tok = ftx::load_tokenizer(gpt2_dir());
  EXPECT_EQ(tok->kind(), "gpt2-bpe");
  EXPECT_EQ(tok->encode("This is some text"), (Ids{1212, 318, 617, 2420}));
}

// Converters and NeMo archives write prefixed names, e.g. "<hash>_vocab.json", "gpt2-merges.txt".
TEST(LoadTokenizer, FindsPrefixedNames) {
  TempDir d;
  fs::copy_file(gpt2_dir() + "/vocab.json", d.path() / "a1b2_gpt2-vocab.json");
  fs::copy_file(gpt2_dir() + "/merges.txt", d.path() / "gpt2-merges.txt");
  d.write("tokenizer_config.json", "{}");
  auto tok = ftx::load_tokenizer(d.path().string());
  EXPECT_EQ(tok->encode("indivisible"), (Ids{521, 452, 12843}));
}

TEST(LoadTokenizer, Errors) {
  EXPECT_NE(error_of([] { ftx::load_tokenizer("/nonexistent/tok"); }).find("/nonexistent/tok: no such tokenizer folder"),
            std::string::npos);
  TempDir empty;
  std::string msg = error_of([&] { ftx::load_tokenizer(empty.path().string()); });
  EXPECT_NE(msg.find(empty.path().string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("vocab.json + merges.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tokenizer.model"), std::string::npos) << msg;

  TempDir only_vocab;
  only_vocab.write("vocab.json", "{}");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(only_vocab.path().string()); }).find("no merges.txt"), std::string::npos);

  TempDir two;
  two.write("a_vocab.json", "{}");
  two.write("b_vocab.json", "{}");
  two.write("merges.txt", "");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(two.path().string()); }).find("a_vocab.json, b_vocab.json"),
            std::string::npos);
}

TEST(Gpt2Bpe, BadFilesAreErrors) {
  TempDir d;
  d.write("vocab.json", "[1, 2");
  d.write("merges.txt", "#version: 0.2\n");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(d.path().string()); }).find("not valid JSON"), std::string::npos);

  d.write("vocab.json", R"({"a": 0, "b": 0})");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(d.path().string()); }).find("id 0 is given to both"), std::string::npos);

  d.write("vocab.json", R"({"a": 0})");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(d.path().string()); }).find("has no token for byte 0"), std::string::npos);

  // A complete byte alphabet, then bad merges lines.
  fs::copy_file(gpt2_dir() + "/vocab.json", d.path() / "vocab.json", fs::copy_options::overwrite_existing);
  d.write("merges.txt", "#version: 0.2\nĠ t\nĠt  h\n");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(d.path().string()); }).find("line 3: expected two tokens"),
            std::string::npos);
  d.write("merges.txt", "#version: 0.2\nĠ t\nq QQQQQQQ\n");
  EXPECT_NE(error_of([&] { ftx::load_tokenizer(d.path().string()); }).find("line 3: merge"), std::string::npos);
}

// The JSON-lines driver behind `ftx tokenize`.
TEST(JsonlTokenize, EncodeAndDecode) {
  std::istringstream in("{\"text\": \"This is some text\"}\n{\"text\": \"\"}\n");
  std::ostringstream out;
  auto stats = ftx::tokenize_jsonl(gpt2(), ftx::JsonlDirection::kEncode, in, "in.jsonl", out);
  EXPECT_EQ(out.str(), "{\"ids\": [1212, 318, 617, 2420]}\n{\"ids\": []}\n");
  EXPECT_EQ(stats.lines, 2u);
  EXPECT_EQ(stats.tokens, 4u);

  // Non-ASCII stays raw; a split character (id 12520 alone: a space and the first two bytes of an
  // emoji) becomes U+FFFD rather than an exception.
  std::istringstream in2("{\"ids\": [31373, 50169, 233]}\n{\"ids\": [12520]}\n");
  std::ostringstream out2;
  ftx::tokenize_jsonl(gpt2(), ftx::JsonlDirection::kDecode, in2, "ids.jsonl", out2);
  EXPECT_EQ(out2.str(), "{\"text\": \"hello \xF0\x9F\x91\x8B\"}\n{\"text\": \" \xEF\xBF\xBD\"}\n");
}

TEST(JsonlTokenize, ErrorsNameTheLine) {
  auto run = [](const std::string& input, ftx::JsonlDirection dir) {
    return error_of([&] {
      std::istringstream in(input);
      std::ostringstream out;
      ftx::tokenize_jsonl(gpt2(), dir, in, "in.jsonl", out);
    });
  };
  using D = ftx::JsonlDirection;
  EXPECT_NE(run("{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"c\n", D::kEncode).find("in.jsonl: line 3: not valid JSON"),
            std::string::npos);
  EXPECT_NE(run("{\"text\": 5}\n", D::kEncode).find("line 1: \"text\" is number"), std::string::npos);
  EXPECT_NE(run("{\"ids\": [1]}\n", D::kEncode).find("line 1: expected an object like {\"text\""), std::string::npos);
  EXPECT_NE(run("\n", D::kEncode).find("line 1: not valid JSON"), std::string::npos);
  EXPECT_NE(run("{\"ids\": [1, 2]}\n{\"ids\": [1, 60000]}\n", D::kDecode).find("line 2: "), std::string::npos);
  EXPECT_NE(run("{\"ids\": [1, 60000]}\n", D::kDecode).find("token id 60000"), std::string::npos);
  EXPECT_NE(run("{\"ids\": [1.5]}\n", D::kDecode).find("id 1.5 is not a token id"), std::string::npos);
  EXPECT_NE(run("{\"ids\": [99999999999]}\n", D::kDecode).find("id 99999999999 is not a token id"), std::string::npos);
}

// The cache empties itself when half full and never answers with another piece's ids.
TEST(PieceCache, SmallTableStaysCorrect) {
  ftx::PieceCache cache(4);  // 16 slots: emptied every 8 pieces
  for (int k = 0; k < 1000; ++k) {
    std::string key = "piece" + std::to_string(k);
    cache.insert(key, Ids{k, k + 1});
    EXPECT_LE(cache.size(), 8u);
    for (int j = std::max(0, k - 20); j <= k; ++j) {
      Ids out{-7};
      if (cache.lookup("piece" + std::to_string(j), &out)) EXPECT_EQ(out, (Ids{-7, j, j + 1}));
    }
    Ids out;
    ASSERT_TRUE(cache.lookup(key, &out));
  }
  Ids out;
  EXPECT_FALSE(cache.lookup("", &out));
  cache.insert("", Ids{});
  EXPECT_TRUE(cache.lookup("", &out));
  EXPECT_TRUE(out.empty());
}

// encode() is const and may be called from several threads at once (the cache is locked).
TEST(Gpt2Bpe, ConcurrentEncode) {
  auto cases = read_jsonl(gpt2_dir() + "/tokenizer_cases.jsonl");
  Gpt2BpeTokenizer tok(gpt2_dir() + "/vocab.json", gpt2_dir() + "/merges.txt");
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep)
        for (size_t i = t; i < cases.size(); i += (t % 2) + 1)
          if (tok.encode(cases[i]["text"].get<std::string>()) != cases[i]["ids"].get<Ids>()) ++failures[t];
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}
