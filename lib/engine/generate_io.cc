#include "lib/engine/generate_io.h"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/error.h"

namespace ftx {

namespace {

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// Text that may be invalid UTF-8 (a BPE split mid-character) as a JSON string: bad bytes become U+FFFD.
nlohmann::json text_value(const std::string& s) {
  return nlohmann::json::parse(nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string decode_text(const Tokenizer& tok, std::vector<int32_t> ids, int32_t end_id) {
  while (!ids.empty() && ids.back() == end_id) ids.pop_back();
  std::vector<int32_t> known;
  for (int32_t id : ids)
    if (id >= 0 && id < tok.vocab_size()) known.push_back(id);  // model vocab may be padded past the tokenizer's
  return tok.decode(known);
}

}  // namespace

std::vector<std::vector<int32_t>> read_start_ids_csv(const std::string& path) {
  auto lines = read_lines(path);
  if (!lines.empty() && trim(lines.back()).empty()) lines.pop_back();
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int32_t> ids;
    std::stringstream ss(lines[i]);
    std::string field;
    while (std::getline(ss, field, ',')) {
      field = trim(field);
      if (field.empty()) continue;
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(field.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
        throw Error(path, "line " + std::to_string(i + 1) + ": '" + field + "' is not a token id");
      ids.push_back(static_cast<int32_t>(v));
    }
    prompts.push_back(std::move(ids));
  }
  if (prompts.empty()) throw Error(path, "no prompts");
  return prompts;
}

std::vector<std::string> read_text_prompts(const std::string& path) {
  auto lines = read_lines(path);
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  bool jsonl = false;
  for (const auto& l : lines)
    if (!trim(l).empty()) {
      jsonl = trim(l)[0] == '{';
      break;
    }
  std::vector<std::string> prompts;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!jsonl) {
      prompts.push_back(lines[i]);
      continue;
    }
    if (trim(lines[i]).empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(lines[i]);
    } catch (const std::exception& e) {
      throw Error(path, "line " + std::to_string(i + 1) + ": not JSON: " + e.what());
    }
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      throw Error(path, "line " + std::to_string(i + 1) + ": expected an object with a string \"text\"");
    prompts.push_back(j["text"].get<std::string>());
  }
  if (prompts.empty()) throw Error(path, "no prompts");
  return prompts;
}

std::vector<std::string> split_csv_record(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, at_start = true;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quoted) {
      if (c == '"' && i + 1 < s.size() && s[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') quoted = false;
      else cur += c;
    } else if (c == '"' && at_start) {
      quoted = true;
      at_start = false;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
      at_start = true;
    } else {
      cur += c;
      at_start = false;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::vector<int32_t>> parse_word_list(const std::string& csv, const Tokenizer& tok) {
  std::vector<std::vector<int32_t>> words;
  for (const auto& w : split_csv_record(csv)) {
    if (w.empty()) continue;
    auto ids = tok.encode(w);
    if (!ids.empty()) words.push_back(std::move(ids));
  }
  return words;
}

void check_prompts(const std::vector<std::vector<int32_t>>& prompts, const std::string& origin,
                   int64_t vocab, int64_t max_new_tokens, int64_t max_pos_seq_len) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string where = "prompt " + std::to_string(i + 1);
    if (prompts[i].empty()) throw Error(origin, where + ": empty prompt");
    for (int32_t id : prompts[i])
      if (id < 0 || id >= vocab)
        throw Error(origin, where + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(vocab) + ")");
    const int64_t total = static_cast<int64_t>(prompts[i].size()) + max_new_tokens;
    if (max_pos_seq_len > 0 && total > max_pos_seq_len)
      throw Error(origin, where + ": " + std::to_string(prompts[i].size()) + " prompt tokens + " +
                              std::to_string(max_new_tokens) + " new tokens = " + std::to_string(total) +
                              " exceeds the model's max_pos_seq_len " + std::to_string(max_pos_seq_len));
  }
}

std::string result_json(int64_t index, const GenerationOutput& out, const ResultFormat& fmt) {
  nlohmann::ordered_json j;
  j["index"] = index;
  j["input_length"] = out.input_length;
  const auto& beams = out.result.beams;
  static const BeamResult empty;
  const BeamResult& best = beams.empty() ? empty : beams[0];
  j["output_ids"] = best.output_ids;
  j["sequence_length"] = out.input_length + static_cast<int64_t>(best.output_ids.size());
  j["finish_reason"] = finish_reason_name(best.finish_reason);
  if (fmt.tokenizer) j["text"] = text_value(decode_text(*fmt.tokenizer, best.output_ids, fmt.end_id));
  if (fmt.cum_log_probs) j["cum_log_prob"] = best.cum_log_prob;
  if (fmt.log_probs) j["output_log_probs"] = best.output_log_probs;
  if (fmt.beam_width > 1) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& b : beams) {
      nlohmann::ordered_json e;
      e["output_ids"] = b.output_ids;
      e["sequence_length"] = out.input_length + static_cast<int64_t>(b.output_ids.size());
      e["finish_reason"] = finish_reason_name(b.finish_reason);
      if (fmt.tokenizer) e["text"] = text_value(decode_text(*fmt.tokenizer, b.output_ids, fmt.end_id));
      e["cum_log_prob"] = b.cum_log_prob;
      if (fmt.log_probs) e["output_log_probs"] = b.output_log_probs;
      arr.push_back(std::move(e));
    }
    j["beams"] = std::move(arr);
  }
  if (fmt.context_embedding) j["context_embedding"] = out.context_embedding;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string stream_json(const StreamEvent& ev, const Tokenizer* tokenizer) {
  nlohmann::ordered_json j;
  j["index"] = ev.index;
  j["step"] = ev.step;
  j["token"] = ev.token;
  if (tokenizer && ev.token >= 0 && ev.token < tokenizer->vocab_size())
    j["text"] = text_value(tokenizer->decode({ev.token}));
  if (!ev.best.empty()) j["output_ids"] = ev.best;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ftx
