#include "lib/tokenizer/hf_pretokenizer.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <bitset>
#include <cctype>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/byte_level_bpe.h"
#include "lib/tokenizer/gpt2_pretokenizer.h"
#include "lib/tokenizer/regex_split.h"
#include "lib/tokenizer/split_behavior.h"
#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

// GPT-2's pattern as tokenizers writes it (ByteLevel's own, and Split steps that spell it out).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool is_white_space(char32_t c) {
  static const std::bitset<0x10000> bmp = [] {
    std::bitset<0x10000> b;
    for (UChar32 u = 0; u < 0x10000; ++u) b[u] = u_hasBinaryProperty(u, UCHAR_WHITE_SPACE);
    return b;
  }();
  if (c == utf8::kInvalid) return false;
  return c < 0x10000 ? bmp[c] : u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

std::string type_of(const nlohmann::json& spec) {
  auto it = spec.find("type");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string("(no type)");
}

bool flag(const nlohmann::json& spec, const char* name, bool default_value) {
  auto it = spec.find(name);
  if (it == spec.end() || it->is_null()) return default_value;
  return it->is_boolean() ? it->get<bool>() : default_value;
}

}  // namespace

// One way of splitting a piece into pieces.
struct HfPreTokenizer::Step {
  enum Kind { kGpt2Regex, kNegatedClass, kPrefixSpace, kRegex, kMetaspace, kLiteral } kind;
  // kMetaspace: the replacement for " ", when to put it in front ("always", "first", "never"), and
  // whether to cut before each one.
  std::string replacement;
  std::string prepend_scheme;
  bool metaspace_split = true;
  std::shared_ptr<const RegexSplit> regex;  // kRegex: any other pattern (Llama 3's, Qwen2's)
  // kLiteral: a {"String": ...} pattern (Gemma's " "). For it and kRegex: what becomes of the
  // matches, and whether the text between them is what the behavior takes as matches.
  std::string literal;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kNegatedClass: ` ?[^SET]+` (with optional_space) or `[^SET]+`.
  bool optional_space = false;
  bool excludes_white_space = false;
  std::vector<char32_t> excluded;  // sorted literals

  bool in_class(char32_t c) const {
    if (excludes_white_space && is_white_space(c)) return false;
    return !std::binary_search(excluded.begin(), excluded.end(), c);
  }

  void split(const std::string& piece, std::vector<std::string>* out, bool at_start) const {
    if (kind == kMetaspace) return split_metaspace(piece, out, at_start);
    if (kind == kPrefixSpace) {
      if (!piece.empty()) out->push_back(piece[0] != ' ' ? " " + piece : piece);
      return;
    }
    if (kind == kGpt2Regex) {
      for (std::string_view p : Gpt2PreTokenizer::split(piece)) out->emplace_back(p);
      return;
    }
    if (kind == kRegex && behavior == SplitBehavior::kIsolated && !invert) return regex->split(piece, out);
    if (kind == kRegex) return split_with_behavior(piece, regex->matches(piece), behavior, invert, out);
    if (kind == kLiteral) {
      // tokenizers matches the escaped string as a regex: leftmost, not overlapping.
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t at = piece.find(literal); at != std::string::npos; at = piece.find(literal, at + literal.size()))
        matches.emplace_back(at, at + literal.size());
      return split_with_behavior(piece, matches, behavior, invert, out);
    }
    // Decode once, then scan: at each position the regex either matches (an optional space that a
    // class character follows, then the longest run of class characters) or does not; the text
    // between matches is a piece of its own ("Isolated").
    std::vector<size_t> offsets;
    std::vector<char> member;  // 1: in the class
    std::vector<char> space;   // 1: U+0020
    const auto* bytes = reinterpret_cast<const unsigned char*>(piece.data());
    for (size_t pos = 0; pos < piece.size();) {
      char32_t c;
      size_t len = utf8::decode(bytes + pos, piece.size() - pos, &c);
      offsets.push_back(pos);
      member.push_back(in_class(c));
      space.push_back(c == U' ');
      pos += len;
    }
    const size_t n = offsets.size();
    offsets.push_back(piece.size());
    auto emit = [&](size_t begin, size_t end) {
      if (end > begin) out->push_back(piece.substr(offsets[begin], offsets[end] - offsets[begin]));
    };
    size_t gap = 0, i = 0;
    while (i < n) {
      size_t start, run;
      if (optional_space && space[i] && i + 1 < n && member[i + 1]) {
        start = i, run = i + 1;
      } else if (member[i]) {
        start = i, run = i;
      } else {
        ++i;
        continue;
      }
      while (run < n && member[run]) ++run;
      emit(gap, start);
      emit(start, run);
      gap = i = run;
    }
    emit(gap, n);
  }

  // tokenizers' Metaspace: replace, prepend (its "first" is the split at offset 0 of the text),
  // then split with MergedWithNext (each replacement starts a piece).
  void split_metaspace(const std::string& piece, std::vector<std::string>* out, bool at_start) const {
    if (piece.empty()) return;
    std::string text;
    for (size_t pos = 0;;) {
      size_t space = piece.find(' ', pos);
      text.append(piece, pos, space == std::string::npos ? std::string::npos : space - pos);
      if (space == std::string::npos) break;
      text += replacement;
      pos = space + 1;
    }
    const bool starts = text.compare(0, replacement.size(), replacement) == 0;
    if (!starts && (prepend_scheme == "always" || (prepend_scheme == "first" && at_start))) text.insert(0, replacement);
    if (!metaspace_split) {
      out->push_back(std::move(text));
      return;
    }
    size_t begin = 0;
    for (size_t at = text.find(replacement, 1); at != std::string::npos; at = text.find(replacement, at + 1)) {
      if (at > begin) out->push_back(text.substr(begin, at - begin));
      begin = at;
    }
    out->push_back(text.substr(begin));
  }
};

namespace {

// The Step for a Split pattern, or an Error saying what ftx can do instead.
std::unique_ptr<HfPreTokenizer::Step> parse_split_pattern(const std::string& pattern, const std::string& path) {
  auto step = std::make_unique<HfPreTokenizer::Step>();
  if (pattern == kGpt2Pattern) {
    step->kind = HfPreTokenizer::Step::kGpt2Regex;
    return step;
  }
  auto unsupported = [&](const std::string& why) {
    return Error(path, "pre_tokenizer Split pattern " + quote_for_message(pattern) + " is not supported (" + why +
                           "); ftx knows GPT-2's pattern, patterns of the form ' ?[^SET]+' such as BLOOM's, and regexes "
                           "built from what ICU and Oniguruma read alike, such as Llama 3's and Qwen2's");
  };
  step->kind = HfPreTokenizer::Step::kNegatedClass;
  std::string_view p = pattern;
  if (p.substr(0, 2) == " ?") step->optional_space = true, p.remove_prefix(2);
  if (p.substr(0, 2) != "[^" || p.size() < 4 || p.substr(p.size() - 2) != "]+") {
    // Any other pattern: a general regular expression (regex_split.h), built only from constructs
    // on which ICU and Oniguruma agree (`\w`, `\d`, `\b` and friends differ at the edges).
    const std::string why = regex_construct_not_agreed(pattern);
    if (!why.empty()) throw unsupported(why);
    step->kind = HfPreTokenizer::Step::kRegex;
    step->regex = std::make_shared<const RegexSplit>(pattern, path);
    return step;
  }
  p = p.substr(2, p.size() - 4);

  std::vector<char32_t> cps;
  const auto* bytes = reinterpret_cast<const unsigned char*>(p.data());
  for (size_t pos = 0; pos < p.size();) {
    char32_t c;
    pos += utf8::decode(bytes + pos, p.size() - pos, &c);
    if (c == utf8::kInvalid) throw unsupported("not valid UTF-8");
    cps.push_back(c);
  }
  int depth = 0;  // inside a nested [...]
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    if (c == U'\\') {
      if (++i == cps.size()) throw unsupported("ends with a backslash");
      char32_t e = cps[i];
      if (e == U's') {
        step->excludes_white_space = true;
      } else if (e == U'n' || e == U't' || e == U'r') {
        step->excluded.push_back(e == U'n' ? U'\n' : e == U't' ? U'\t' : U'\r');
      } else if (e < 0x80 && std::ispunct(static_cast<int>(e))) {
        step->excluded.push_back(e);
      } else {
        throw unsupported("escape \\" + std::string(1, static_cast<char>(e < 0x80 ? e : '?')));
      }
    } else if (c == U'[') {
      if (depth > 0) throw unsupported("classes nested twice");
      if (i + 1 < cps.size() && cps[i + 1] == U'^') throw unsupported("a negated nested class");
      depth = 1;
    } else if (c == U']') {
      if (depth == 0) throw unsupported("an unbalanced ']'");
      depth = 0;
    } else if (c == U'-' || (c == U'&' && i + 1 < cps.size() && cps[i + 1] == U'&')) {
      throw unsupported("ranges and set operations");
    } else {
      step->excluded.push_back(c);
    }
  }
  if (depth != 0) throw unsupported("an unclosed nested '['");
  std::sort(step->excluded.begin(), step->excluded.end());
  step->excluded.erase(std::unique(step->excluded.begin(), step->excluded.end()), step->excluded.end());
  return step;
}

}  // namespace

HfPreTokenizer::HfPreTokenizer(const nlohmann::json& spec, const std::string& path) {
  if (!spec.is_null()) add(spec, path);
}

HfPreTokenizer::~HfPreTokenizer() = default;
HfPreTokenizer::HfPreTokenizer(HfPreTokenizer&&) noexcept = default;

void HfPreTokenizer::add(const nlohmann::json& spec, const std::string& path) {
  if (!spec.is_object()) throw Error(path, "pre_tokenizer is not a JSON object: " + spec.dump());
  const std::string type = type_of(spec);
  if (have_byte_level_) throw Error(path, "pre_tokenizer " + type + " after ByteLevel is not supported");
  if (type == "Sequence") {
    auto list = spec.find("pretokenizers");
    if (list == spec.end() || !list->is_array()) throw Error(path, "pre_tokenizer Sequence has no \"pretokenizers\" list");
    for (const auto& sub : *list) add(sub, path);
  } else if (type == "ByteLevel") {
    // tokenizers' defaults for fields older files lack: add_prefix_space and use_regex true.
    if (flag(spec, "add_prefix_space", true)) {
      steps_.push_back(std::make_unique<Step>());
      steps_.back()->kind = Step::kPrefixSpace;
      add_prefix_space_ = true;
    }
    if (flag(spec, "use_regex", true)) {
      steps_.push_back(std::make_unique<Step>());
      steps_.back()->kind = Step::kGpt2Regex;
    }
    have_byte_level_ = true;
  } else if (type == "Split") {
    auto pattern = spec.find("pattern");
    const bool literal = pattern != spec.end() && pattern->is_object() && pattern->contains("String") &&
                         (*pattern)["String"].is_string() && !(*pattern)["String"].get<std::string>().empty();
    if (!literal && (pattern == spec.end() || !pattern->is_object() || !pattern->contains("Regex") ||
                     !(*pattern)["Regex"].is_string()))
      throw Error(path, "pre_tokenizer Split pattern " + (pattern == spec.end() ? std::string("(none)") : pattern->dump()) +
                            " is not supported; ftx knows {\"Regex\": ...} and non-empty {\"String\": ...} patterns");
    std::string behavior = spec.value("behavior", std::string("(none)"));
    SplitBehavior how;
    if (!parse_split_behavior(behavior, &how))
      throw Error(path, "pre_tokenizer Split behavior " + quote_for_message(behavior) + " is not supported; ftx knows "
                        "\"Isolated\", \"Removed\", \"MergedWithPrevious\", \"MergedWithNext\" and \"Contiguous\"");
    const bool invert = flag(spec, "invert", false);
    std::unique_ptr<Step> step;
    if (literal) {
      step = std::make_unique<Step>();
      step->kind = Step::kLiteral;
      step->literal = (*pattern)["String"].get<std::string>();
    } else {
      const std::string regex = (*pattern)["Regex"].get<std::string>();
      step = parse_split_pattern(regex, path);
      // Other behaviors (tiktoken-style files: Removed with invert: true) act on the matches of a
      // general regex; GPT-2's pattern is one, the ' ?[^SET]+' scanner keeps to Isolated.
      if ((how != SplitBehavior::kIsolated || invert) && step->kind == Step::kGpt2Regex) {
        step->kind = Step::kRegex;
        step->regex = std::make_shared<const RegexSplit>(regex, path);
      }
      if ((how != SplitBehavior::kIsolated || invert) && step->kind != Step::kRegex)
        throw Error(path, "pre_tokenizer Split pattern " + quote_for_message(regex) + " with behavior " +
                              quote_for_message(behavior) + (invert ? " and invert: true" : "") +
                              " is not supported; ftx reads a ' ?[^SET]+' pattern with \"Isolated\" only");
    }
    step->behavior = how;
    step->invert = invert;
    steps_.push_back(std::move(step));
  } else if (type == "Metaspace") {
    auto step = std::make_unique<Step>();
    step->kind = Step::kMetaspace;
    auto replacement = spec.find("replacement");
    if (replacement == spec.end() || !replacement->is_string() || replacement->get<std::string>().empty())
      throw Error(path, "pre_tokenizer Metaspace has no \"replacement\" string");
    step->replacement = replacement->get<std::string>();
    // tokenizers' defaults for fields older files lack: prepend_scheme "always", split true; it
    // refuses add_prefix_space: false itself.
    auto scheme = spec.find("prepend_scheme");
    step->prepend_scheme = scheme == spec.end() || scheme->is_null() ? std::string("always")
                           : scheme->is_string()                   ? scheme->get<std::string>()
                                                                   : scheme->dump();
    if (step->prepend_scheme != "always" && step->prepend_scheme != "first" && step->prepend_scheme != "never")
      throw Error(path, "pre_tokenizer Metaspace prepend_scheme " + quote_for_message(step->prepend_scheme) +
                            " is not supported; tokenizers knows \"always\", \"first\" and \"never\"");
    if (!flag(spec, "add_prefix_space", true))
      throw Error(path, "pre_tokenizer Metaspace with add_prefix_space: false is not supported (tokenizers refuses it)");
    step->metaspace_split = flag(spec, "split", true);
    steps_.push_back(std::move(step));
  } else {
    throw Error(path, "pre_tokenizer " + quote_for_message(type) +
                          " is not supported; ftx knows ByteLevel, Split, Metaspace and Sequence");
  }
}

void HfPreTokenizer::split(std::string_view text, std::vector<std::string>* pieces, bool at_start) const {
  std::vector<std::string> current{std::string(text)}, next;
  for (const auto& step : steps_) {
    next.clear();
    // Pieces cover the text in order, so only the first can begin at the text's start.
    for (size_t i = 0; i < current.size(); ++i) step->split(current[i], &next, at_start && i == 0);
    current.swap(next);
  }
  for (std::string& piece : current)
    if (!piece.empty()) pieces->push_back(std::move(piece));
}

}  // namespace ftx
