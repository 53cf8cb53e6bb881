#include "lib/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "formats/error.h"
#include "lib/tokenizer/gpt2_bpe.h"
#include "lib/tokenizer/hf_bpe_tokenizer.h"
#include "lib/tokenizer/sentencepiece_tokenizer.h"
#include "lib/tokenizer/xglm_tokenizer.h"

namespace ftx {
namespace {

namespace fs = std::filesystem;

// XGLM's file name (HF XGLMTokenizer's vocab_file): SentencePiece with fairseq's id order.
constexpr const char* kXglmModel = "sentencepiece.bpe.model";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The file named `exact` if present, else the one file whose name matches `pattern`; "" if none.
// Several matches and no exact name is ambiguous: better an error than a guess.
std::string pick(const std::string& dir, const std::vector<std::string>& names, const std::string& exact,
                 const std::function<bool(const std::string&)>& pattern, const std::string& pattern_text) {
  std::vector<std::string> matches;
  for (const auto& name : names) {
    if (name == exact) return (fs::path(dir) / name).string();
    if (pattern(name)) matches.push_back(name);
  }
  if (matches.empty()) return "";
  if (matches.size() > 1) {
    std::string list;
    for (const auto& m : matches) list += (list.empty() ? "" : ", ") + m;
    throw Error(dir, "several files match " + pattern_text + " (" + list + ") and none is named " + exact +
                         "; keep one");
  }
  return (fs::path(dir) / matches[0]).string();
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& dir) {
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  if (fs::is_regular_file(st)) {
    const std::string name = fs::path(dir).filename().string();
    if (name == kXglmModel) return std::make_unique<XglmTokenizer>(dir);
    if (ends_with(name, ".model")) return std::make_unique<SentencePieceTokenizer>(dir);
    if (ends_with(name, ".json")) return std::make_unique<HfBpeTokenizer>(dir);
  }
  if (!fs::exists(st)) throw Error(dir, "no such tokenizer folder");
  if (!fs::is_directory(st))
    throw Error(dir, "expected a folder with tokenizer files, a SentencePiece .model file or a tokenizer.json file");

  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) names.push_back(it->path().filename().string());
  if (ec) throw Error(dir, "cannot list folder: " + ec.message());
  std::sort(names.begin(), names.end());

  std::string vocab = pick(
      dir, names, "vocab.json",
      [](const std::string& n) { return n.find("vocab") != std::string::npos && ends_with(n, ".json"); },
      "*vocab*.json");
  std::string merges = pick(
      dir, names, "merges.txt",
      [](const std::string& n) { return n.find("merge") != std::string::npos && ends_with(n, ".txt"); },
      "*merge*.txt");
  if (!vocab.empty() && !merges.empty()) return std::make_unique<Gpt2BpeTokenizer>(vocab, merges);

  auto has = [&](const char* name) { return std::binary_search(names.begin(), names.end(), std::string(name)); };
  if (has(kXglmModel)) return std::make_unique<XglmTokenizer>((fs::path(dir) / kXglmModel).string());
  const std::string spm = (fs::path(dir) / "tokenizer.model").string();
  if (has("tokenizer.json")) {
    // transformers' AutoTokenizer takes tokenizer.json (the fast tokenizer), whose ids differ from
    // tokenizer.model's on spaces and added tokens; a kind ftx does not read (Unigram, ...) leaves
    // tokenizer.model, said on stderr since its ids may not be the fast tokenizer's.
    try {
      return std::make_unique<HfBpeTokenizer>((fs::path(dir) / "tokenizer.json").string());
    } catch (const Error& e) {
      if (!has("tokenizer.model")) throw;
      std::fprintf(stderr,
                   "ftx: warning: %s; reading %s instead, whose ids can differ from transformers' fast tokenizer's\n",
                   e.what(), spm.c_str());
    }
  }
  if (has("tokenizer.model")) return std::make_unique<SentencePieceTokenizer>(spm);

  std::string model = pick(
      dir, names, "tokenizer.model", [](const std::string& n) { return ends_with(n, ".model"); }, "*.model");
  if (!model.empty()) return std::make_unique<SentencePieceTokenizer>(model);

  if (!vocab.empty()) throw Error(dir, "has " + vocab + " but no merges.txt (or *merge*.txt) for GPT-2 BPE");
  if (!merges.empty()) throw Error(dir, "has " + merges + " but no vocab.json (or *vocab*.json) for GPT-2 BPE");
  throw Error(dir,
              "no tokenizer files: looked for vocab.json + merges.txt (or *vocab*.json + *merge*.txt), "
              "sentencepiece.bpe.model, tokenizer.model, tokenizer.json and *.model");
}

}  // namespace ftx
