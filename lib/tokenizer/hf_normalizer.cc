#include "lib/tokenizer/hf_normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "lib/tokenizer/byte_level_bpe.h"
#include "lib/tokenizer/utf8.h"

namespace ftx {
namespace {

const icu::Normalizer2* instance(const std::string& type, const std::string& path) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (type == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  if (type == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  if (type == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  if (type == "NFKD") n = icu::Normalizer2::getNFKDInstance(status);
  if (n == nullptr || U_FAILURE(status))
    throw Error(path, "normalizer " + type + ": ICU cannot provide it (" + u_errorName(status) + ")");
  return n;
}

// Normalizes valid UTF-8 (ICU's UTF-8 entry point; no conversion to UTF-16 by us).
void normalize_valid(const icu::Normalizer2* n, std::string_view text, std::string* out) {
  UErrorCode status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(out);
  n->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, status);
  if (U_FAILURE(status)) throw Error("<text>", std::string("Unicode normalization failed: ") + u_errorName(status));
}

}  // namespace

HfNormalizer::HfNormalizer(const nlohmann::json& spec, const std::string& path) {
  if (!spec.is_null()) add(spec, path);
}

void HfNormalizer::add(const nlohmann::json& spec, const std::string& path) {
  if (!spec.is_object()) throw Error(path, "normalizer is not a JSON object: " + spec.dump());
  std::string type = spec.contains("type") && spec["type"].is_string() ? spec["type"].get<std::string>() : "(no type)";
  if (type == "Sequence") {
    if (!spec.contains("normalizers") || !spec["normalizers"].is_array())
      throw Error(path, "normalizer Sequence has no \"normalizers\" list");
    for (const auto& sub : spec["normalizers"]) add(sub, path);
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    steps_.push_back(Step{instance(type, path), "", ""});
  } else if (type == "Prepend") {
    auto prepend = spec.find("prepend");
    if (prepend == spec.end() || !prepend->is_string())
      throw Error(path, "normalizer Prepend has no \"prepend\" string");
    steps_.push_back(Step{nullptr, "", prepend->get<std::string>()});
  } else if (type == "Replace") {
    auto pattern = spec.find("pattern");
    auto content = spec.find("content");
    if (pattern == spec.end() || !pattern->is_object() || !pattern->contains("String") ||
        !(*pattern)["String"].is_string() || (*pattern)["String"].get<std::string>().empty() ||
        content == spec.end() || !content->is_string())
      throw Error(path, "normalizer Replace with pattern " + (pattern == spec.end() ? std::string("(none)") : pattern->dump()) +
                            " is not supported; ftx knows {\"String\": \"...\"} patterns with a \"content\" string");
    steps_.push_back(Step{nullptr, (*pattern)["String"].get<std::string>(), content->get<std::string>()});
  } else {
    throw Error(path, "normalizer " + quote_for_message(type) + " is not supported; ftx knows NFC, NFD, NFKC, NFKD, "
                      "Prepend, Replace (of a string), Sequence of those, and null");
  }
}

std::string HfNormalizer::normalize(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    if (step.form == nullptr && step.from.empty()) {  // Prepend
      if (!current.empty()) current.insert(0, step.to);
      continue;
    }
    if (step.form == nullptr) {  // Replace
      std::string out;
      out.reserve(current.size());
      for (size_t pos = 0;;) {
        size_t hit = current.find(step.from, pos);
        out.append(current, pos, hit == std::string::npos ? std::string::npos : hit - pos);
        if (hit == std::string::npos) break;
        out += step.to;
        pos = hit + step.from.size();
      }
      current.swap(out);
      continue;
    }
    const auto* n = static_cast<const icu::Normalizer2*>(step.form);
    if (std::all_of(current.begin(), current.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
      continue;  // ASCII is unchanged by all four forms
    std::string out;
    out.reserve(current.size());
    const auto* bytes = reinterpret_cast<const unsigned char*>(current.data());
    size_t run = 0;  // start of the current run of valid UTF-8
    for (size_t pos = 0; pos < current.size();) {
      char32_t c;
      size_t len = utf8::decode(bytes + pos, current.size() - pos, &c);
      if (c == utf8::kInvalid) {
        normalize_valid(n, std::string_view(current).substr(run, pos - run), &out);
        out.push_back(current[pos]);
        run = pos + len;
      }
      pos += len;
    }
    normalize_valid(n, std::string_view(current).substr(run), &out);
    current.swap(out);
  }
  return current;
}

}  // namespace ftx
