#include "lib/tokenizer/jsonl_tokenize.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "formats/error.h"

namespace ftx {
namespace {

using nlohmann::json;

std::string where(uint64_t line_no) {
  return "line " + std::to_string(line_no);
}

// The member `key` of the object on this line, or an Error saying what the line should look like.
const json& member(const json& line, const char* key, const std::string& input_name, uint64_t line_no,
                   const char* expected) {
  if (!line.is_object() || !line.contains(key))
    throw Error(input_name, where(line_no) + ": expected an object like " + expected);
  return line.at(key);
}

std::string encode_line(const Tokenizer& tok, const json& line, const std::string& input_name,
                        uint64_t line_no, JsonlTokenizeStats* stats) {
  const json& text = member(line, "text", input_name, line_no, R"({"text": "..."})");
  if (!text.is_string())
    throw Error(input_name, where(line_no) + ": \"text\" is " + text.type_name() + ", expected a string");
  const std::string& s = text.get_ref<const std::string&>();
  std::vector<int32_t> ids = tok.encode(s);
  stats->bytes += s.size();
  stats->tokens += ids.size();
  // Written by hand: ids are plain integers, and this is the hot path for large files.
  std::string outline = "{\"ids\": [";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) outline += ", ";
    outline += std::to_string(ids[i]);
  }
  outline += "]}";
  return outline;
}

std::string decode_line(const Tokenizer& tok, const json& line, const std::string& input_name,
                        uint64_t line_no, JsonlTokenizeStats* stats) {
  const json& ids_json = member(line, "ids", input_name, line_no, R"({"ids": [1, 2, 3]})");
  if (!ids_json.is_array())
    throw Error(input_name, where(line_no) + ": \"ids\" is " + ids_json.type_name() + ", expected an array");
  std::vector<int32_t> ids;
  ids.reserve(ids_json.size());
  for (const json& id : ids_json) {
    bool ok = id.is_number_integer() && id.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
              id.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!ok) throw Error(input_name, where(line_no) + ": id " + id.dump() + " is not a token id");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  std::string text;
  try {
    text = tok.decode(ids);
  } catch (const Error& e) {
    throw Error(input_name, where(line_no) + ": " + e.what());
  }
  stats->tokens += ids.size();
  stats->bytes += text.size();
  // Non-ASCII stays as UTF-8; bytes that are not UTF-8 become U+FFFD instead of an exception.
  return "{\"text\": " + json(std::move(text)).dump(-1, ' ', false, json::error_handler_t::replace) + "}";
}

}  // namespace

JsonlTokenizeStats tokenize_jsonl(const Tokenizer& tokenizer, JsonlDirection direction, std::istream& in,
                                  const std::string& input_name, std::ostream& out) {
  JsonlTokenizeStats stats;
  std::string line;
  while (std::getline(in, line)) {
    ++stats.lines;
    json parsed;
    try {
      parsed = json::parse(line);
    } catch (const json::parse_error& e) {
      // Plain text is the likely mistake: say what a line must be, and how to make such lines.
      const bool plain = line.find_first_not_of(" \t\r") != std::string::npos && line[line.find_first_not_of(" \t\r")] != '{';
      if (plain)
        throw Error(input_name, where(stats.lines) + ": not a JSON line; ftx tokenize reads one JSON object a line, " +
                                    (direction == JsonlDirection::kEncode ? std::string(R"({"text": "..."})")
                                                                          : std::string(R"({"ids": [...]})")) +
                                    " (plain text lines become such lines with: jq -R '{text: .}')");
      throw Error(input_name, where(stats.lines) + ": not valid JSON (" + e.what() + ")");
    }
    std::string result = direction == JsonlDirection::kEncode
                             ? encode_line(tokenizer, parsed, input_name, stats.lines, &stats)
                             : decode_line(tokenizer, parsed, input_name, stats.lines, &stats);
    out << result << '\n';
    if (!out) throw Error("cannot write output after input line " + std::to_string(stats.lines));
  }
  if (in.bad()) throw Error(input_name, "read error after line " + std::to_string(stats.lines));
  return stats;
}

}  // namespace ftx
