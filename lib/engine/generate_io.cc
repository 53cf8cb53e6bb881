#include "lib/engine/generate_io.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "formats/error.h"
#include "formats/output_file.h"
#include "lib/engine/sliding_window.h"
#include "lib/util/closest_match.h"

namespace ftx {

namespace {

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

std::vector<int32_t> parse_csv_ids(const std::string& line, const std::string& where) {
  std::vector<int32_t> ids;
  std::stringstream ss(line);
  std::string field;
  while (std::getline(ss, field, ',')) {
    field = trim(field);
    // FT's readers take an id from every field (std::stoi, int()): an empty one between ids is a
    // lost id, not padding. A line's only field may be empty (no ids), and a trailing comma gives no field.
    if (field.empty() && ss.eof() && ids.empty()) continue;
    if (field.empty())
      throw Error(where + ": field " + std::to_string(ids.size() + 1) + " is empty (two commas with no id between)");
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(field.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
      throw Error(where + ": '" + field + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// Typed reads of a JSON field, with errors naming the field and the value found.
int64_t json_int(const nlohmann::json& v, const std::string& key, const std::string& where) {
  if (!v.is_number_integer()) throw Error(where + ": \"" + key + "\" must be an integer, not " + v.dump());
  return v.get<int64_t>();
}
double json_number(const nlohmann::json& v, const std::string& key, const std::string& where) {
  if (!v.is_number()) throw Error(where + ": \"" + key + "\" must be a number, not " + v.dump());
  return v.get<double>();
}
int32_t json_id(const nlohmann::json& v, const std::string& key, const std::string& where) {
  const int64_t id = json_int(v, key, where);
  if (id < INT32_MIN || id > INT32_MAX) throw Error(where + ": \"" + key + "\" " + v.dump() + " is not a token id");
  return static_cast<int32_t>(id);
}
bool json_bool(const nlohmann::json& v, const std::string& key, const std::string& where) {
  if (!v.is_boolean()) throw Error(where + ": \"" + key + "\" must be true or false, not " + v.dump());
  return v.get<bool>();
}

// A word list: a CSV string (as the --stop-words flag), a list of strings (each tokenized alone) or
// a list of id lists.
std::vector<std::vector<int32_t>> json_words(const nlohmann::json& v, const std::string& key, const std::string& where,
                                             const Tokenizer* tok) {
  auto need_tok = [&] {
    if (!tok) throw Error(where + ": \"" + key + "\" as text needs a tokenizer (pass --tokenizer DIR) or give id lists");
  };
  if (v.is_string()) {
    need_tok();
    return parse_word_list(v.get<std::string>(), *tok);
  }
  if (!v.is_array()) throw Error(where + ": \"" + key + "\" must be a string or a list, not " + v.dump());
  std::vector<std::vector<int32_t>> words;
  for (const auto& w : v) {
    if (w.is_string()) {
      need_tok();
      auto ids = tok->encode(w.get<std::string>());
      if (!ids.empty()) words.push_back(std::move(ids));
    } else if (w.is_array()) {
      std::vector<int32_t> ids;
      for (const auto& id : w) {
        if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX)
          throw Error(where + ": \"" + key + "\": " + id.dump() + " is not a token id");
        ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
      if (!ids.empty()) words.push_back(std::move(ids));
    } else {
      throw Error(where + ": \"" + key + "\": each word must be a string or a list of ids, not " + w.dump());
    }
  }
  return words;
}

void hash_add(uint64_t& h, const void* p, size_t n) { h = fingerprint64(p, n, h); }
template <typename T>
void hash_value(uint64_t& h, const T& v) {
  hash_add(h, &v, sizeof v);
}
void hash_ids(uint64_t& h, const std::vector<int32_t>& ids) {
  hash_value(h, static_cast<uint64_t>(ids.size()));
  if (!ids.empty()) hash_add(h, ids.data(), ids.size() * sizeof(int32_t));
}
void hash_words(uint64_t& h, const std::vector<std::vector<int32_t>>& words) {
  hash_value(h, static_cast<uint64_t>(words.size()));
  for (const auto& w : words) hash_ids(h, w);
}

}  // namespace

const std::vector<std::string>& request_fields() {
  static const std::vector<std::string> fields = {
      "text", "ids", "max_new_tokens", "top_k", "top_p", "temperature", "repetition_penalty", "presence_penalty",
      "min_length", "seed", "stop_words", "bad_words", "end_id", "return_log_probs", "beam_width", "len_penalty",
      "beam_search_diversity_rate", "session", "session_end", "task", "virtual_tokens", "return_context_log_probs",
      "echo_prompt", "id", "frequency_penalty", "top_p_decay", "top_p_min", "top_p_reset_ids", "start_id",
      "is_return_context_embeddings", "request_prompt_type", "request_prompt_embedding", "request_prompt_lengths"};
  return fields;
}

PromptReader::PromptReader(const std::string& path, PromptFormat format, const Tokenizer* tokenizer,
                           RequestDefaults defaults, PromptLimits limits)
    : in_(path.empty() ? nullptr : std::make_unique<LineReader>(path)), name_(in_ ? in_->name() : "--prompt"),
      format_(format), format_known_(format == PromptFormat::kStartIdsCsv), tok_(tokenizer),
      defaults_(std::move(defaults)), limits_(limits) {}

Request PromptReader::parse_json(const std::string& line, const std::string& where, PromptChoice& prompt) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const std::exception& e) {
    throw Error(where + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(where + ": expected a JSON object");
  Request r;
  r.decode.max_new_tokens = defaults_.max_new_tokens;
  r.decode.sampling = defaults_.sampling;
  r.output = defaults_.output;
  SamplingConfig& s = r.decode.sampling;
  const auto& known = request_fields();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      const std::string near = closest_match(k, known);
      throw Error(where + ": unknown field \"" + k + "\"" + (near.empty() ? "" : " (did you mean \"" + near + "\"?)"));
    }
  }
  if (j.contains("text") == j.contains("ids")) throw Error(where + ": give exactly one of \"text\" and \"ids\"");
  if (j.contains("text")) {
    if (!j["text"].is_string()) throw Error(where + ": \"text\" must be a string");
    if (!tok_) throw Error(where + ": \"text\" needs a tokenizer: none found in the model folder; pass --tokenizer DIR");
    r.output.prompt = j["text"].get<std::string>();
    r.decode.input_ids = tok_->encode(r.output.prompt);
  } else {
    if (!j["ids"].is_array()) throw Error(where + ": \"ids\" must be a list of token ids");
    for (const auto& id : j["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX)
        throw Error(where + ": " + id.dump() + " is not a token id");
      r.decode.input_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = it.value();
    if (k == "max_new_tokens") r.decode.max_new_tokens = json_int(v, k, where);
    else if (k == "top_k") s.top_k = json_int(v, k, where);
    else if (k == "top_p") s.top_p = json_number(v, k, where);
    else if (k == "temperature") s.temperature = json_number(v, k, where);
    else if (k == "repetition_penalty") s.repetition_penalty = json_number(v, k, where);
    else if (k == "presence_penalty") s.presence_penalty = json_number(v, k, where);
    else if (k == "frequency_penalty") s.frequency_penalty = json_number(v, k, where);
    else if (k == "top_p_decay") s.top_p_decay = json_number(v, k, where);
    else if (k == "top_p_min") s.top_p_min = json_number(v, k, where);
    else if (k == "top_p_reset_ids") s.top_p_reset_id = json_id(v, k, where);
    else if (k == "start_id") prompt.start_id = json_id(v, k, where);
    else if (k == "is_return_context_embeddings") r.output.context_embedding = json_bool(v, k, where);
    else if (k == "min_length") s.min_length = json_int(v, k, where);
    else if (k == "seed") {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        throw Error(where + ": \"seed\" must be a non-negative integer, not " + v.dump());
      s.seed = v.get<uint64_t>();
    } else if (k == "stop_words") s.stop_words = json_words(v, k, where, tok_);
    else if (k == "bad_words") s.bad_words = json_words(v, k, where, tok_);
    else if (k == "end_id") s.end_id = json_id(v, k, where);
    else if (k == "return_log_probs") {
      s.return_log_probs = r.output.log_probs = r.output.cum_log_probs = json_bool(v, k, where);
    } else if (k == "beam_width") s.beam_width = json_int(v, k, where);
    else if (k == "len_penalty") s.len_penalty = json_number(v, k, where);
    else if (k == "beam_search_diversity_rate") s.beam_search_diversity_rate = json_number(v, k, where);
    else if (k == "session") {
      if (v.is_string()) r.session = v.get<std::string>();
      else if (v.is_number_integer()) r.session = std::to_string(v.get<int64_t>());
      else throw Error(where + ": \"session\" must be a string or an integer, not " + v.dump());
      if (r.session.empty()) throw Error(where + ": \"session\" is empty");
    } else if (k == "session_end") r.session_end = json_bool(v, k, where);
    else if (k == "task") {
      prompt.has_task = true;
      if (v.is_string()) prompt.task = v.get<std::string>();
      else if (v.is_number_integer() && v.get<int64_t>() >= 0) prompt.task = std::to_string(v.get<int64_t>());
      else if (!v.is_null()) throw Error(where + ": \"task\" must be a task name, an id or null, not " + v.dump());
    } else if (k == "virtual_tokens") prompt.virtual_tokens = json_int(v, k, where);
    else if (k == "return_context_log_probs") r.output.context_log_probs = json_bool(v, k, where);
    else if (k == "echo_prompt") r.output.echo = json_bool(v, k, where);
    else if (k == "id") {
      if (v.is_object() || v.is_array()) throw Error(where + ": \"id\" must be a string, a number, a boolean or null, not " + v.dump());
      r.output.id = v.dump();
    }
  }
  if (r.session_end && r.session.empty()) throw Error(where + ": \"session_end\" without a \"session\"");
  prompt.soft = read_soft_prompt(j, limits_.hidden, where);
  return r;
}

namespace {

// Whether a prompt file's first non-blank line opens a JSON array of requests ("[", "[{", '["',
// "[]"), not a text prompt that happens to start with a bracket ("[INST] ...").
bool opens_json_array(const std::string& first) {
  const std::string t = trim(first);
  if (t.empty() || t[0] != '[') return false;
  const std::string rest = trim(t.substr(1));
  return rest.empty() || rest[0] == '{' || rest[0] == '"' || rest[0] == ']';
}

}  // namespace

// The whole file is one JSON array (held in memory: such files are written by hand or by a
// script, not streamed); each element becomes what one JSON line would be.
bool PromptReader::read_json_array(std::string text) {
  for (std::string line; in_->next(line);) text += "\n" + line;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error(name_, std::string("starts like a JSON array of prompts but is not valid JSON: ") + e.what());
  }
  if (!j.is_array()) throw Error(name_, "expected one JSON array of prompts");
  for (auto& item : j) array_items_.push_back(item.dump());
  return true;
}

bool PromptReader::read_next() {
  std::string line;
  for (;;) {
    std::string where;
    bool last = false;
    const bool flag = flag_next_ < flag_prompts_.size();  // a --prompt text
    if (flag) {
      where = "--prompt " + std::to_string(flag_next_ + 1) + " (prompt " + std::to_string(next_index_ + 1) + ")";
      line = std::move(flag_prompts_[flag_next_++]);
    } else if (!in_) {
      return false;
    } else if (json_array_) {
      if (array_next_ == array_items_.size()) return false;
      where = name_ + ": element " + std::to_string(array_next_ + 1) + " (prompt " + std::to_string(next_index_ + 1) + ")";
      line = std::move(array_items_[array_next_++]);
      if (line[0] == '"') {  // a text prompt
        nlohmann::json text = nlohmann::json::object();
        text["text"] = nlohmann::json::parse(line);
        line = text.dump();
      } else if (line[0] != '{') {
        throw Error(where + ": expected a request object or a text string, not " + line);
      }
    } else {
      if (!in_->next(line)) return false;
      where = name_ + ": line " + std::to_string(in_->line_number()) + " (prompt " + std::to_string(next_index_ + 1) + ")";
      std::string after;
      last = !in_->peek(after);
    }
    if (!flag && !format_known_) {
      if (trim(line).empty()) {
        if (last) return false;
        continue;
      }
      format_known_ = true;
      json_lines_ = trim(line)[0] == '{';
      if (format_ == PromptFormat::kText && opens_json_array(line)) {
        json_array_ = json_lines_ = read_json_array(line);
        continue;
      }
    }
    Request r;
    PromptChoice choice;
    if (!flag && format_ == PromptFormat::kText && json_lines_) {
      if (trim(line).empty()) continue;  // blank lines between JSON lines
      r = parse_json(line, where, choice);
    } else {
      if (!flag && line.empty() && last) return false;  // a final empty line
      r.decode.max_new_tokens = defaults_.max_new_tokens;
      r.decode.sampling = defaults_.sampling;
      r.output = defaults_.output;
      if (!flag && format_ == PromptFormat::kStartIdsCsv) {
        r.decode.input_ids = parse_csv_ids(line, where);
      } else {
        if (!tok_)
          throw Error(flag ? where : name_, "text prompts need a tokenizer: none found in the model folder; pass --tokenizer DIR");
        r.decode.input_ids = tok_->encode(line);
        r.output.prompt = line;
      }
    }
    // echo_prompt: an ids prompt's text is its detokenized ids (before any virtual tokens join it).
    if (!r.output.echo) r.output.prompt.clear();
    else if (r.output.prompt.empty() && tok_) r.output.prompt = decode_text(*tok_, r.decode.input_ids, -1);
    else if (r.output.prompt.empty() && !r.decode.input_ids.empty())
      throw Error(where + ": echo_prompt needs a tokenizer to give an ids prompt's text: none found in the model folder; "
                  "pass --tokenizer DIR");
    if (choice.soft.rows > 0) {
      if ((choice.has_task && !choice.task.empty()) || choice.virtual_tokens != 0)
        throw Error(where + ": \"" + (choice.virtual_tokens ? "virtual_tokens" : "task") +
                    "\" cannot be combined with a soft prompt (\"request_prompt_type\" 1)");
      choice.has_task = prompts_ != nullptr;  // no task, not the default one
      choice.task.clear();
    }
    apply_prompt(r, choice, where);
    // FT semantics: a request with no input starts from start_id (only when one is given).
    const int32_t start_id = choice.start_id ? *choice.start_id : defaults_.start_id;
    if (choice.start_id && (start_id < 0 || start_id >= limits_.vocab_size))
      throw Error(where + ": \"start_id\" " + std::to_string(start_id) + " is outside the vocabulary [0, " +
                  std::to_string(limits_.vocab_size) + ")");
    if (r.decode.input_ids.empty() && start_id >= 0) r.decode.input_ids.push_back(start_id);
    if (choice.soft.rows > 0) {
      if (next_soft_id_ < 0) next_soft_id_ = soft_prompt_first_id(limits_.vocab_size, prompts_);
      attach_soft_prompt(r, std::move(choice.soft), &next_soft_id_, where);
    }
    if (r.decode.input_ids.empty())
      throw Error(where + ": empty prompt" +
                  (start_id < 0 ? " (a \"start_id\" field, or --start-id ID, starts empty prompts from ID)" : ""));
    check_prompt_request(r, limits_, where);
    const int32_t end_id = r.decode.sampling.end_id;
    if (end_id >= limits_.vocab_size && warned_end_ids_.insert(end_id).second)
      std::fprintf(stderr, "ftx: warning: %s: end_id %d is outside the vocabulary [0, %lld): generation will not stop on it\n",
                   where.c_str(), end_id, static_cast<long long>(limits_.vocab_size));
    r.output.end_id = end_id;
    r.index = next_index_++;
    r.fingerprint = request_fingerprint(r);
    next_ = std::move(r);
    return true;
  }
}

void check_prompt_request(const Request& r, const PromptLimits& limits, const std::string& where) {
  for (int32_t id : r.decode.input_ids)
    if (id < 0 || (id >= limits.vocab_size && id >= r.decode.virtual_id_end))
      throw Error(where + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(limits.vocab_size) + ")");
  const int64_t total = static_cast<int64_t>(r.decode.input_ids.size()) + r.decode.max_new_tokens;
  if (limits.max_positions > 0 && total > limits.max_positions)
    throw Error(where + ": " + std::to_string(r.decode.input_ids.size()) + " prompt tokens + " +
                std::to_string(r.decode.max_new_tokens) + " new tokens = " + std::to_string(total) +
                " exceeds the model's max_pos_seq_len " + std::to_string(limits.max_positions));
  if (r.session.empty()) {
    // Positions 0 .. the last new token's but one (the last is never fed); a session's round
    // starts after its context, which the scheduler checks.
    const int64_t n = static_cast<int64_t>(r.decode.input_ids.size());
    const int64_t last = n - 1 + std::max<int64_t>(r.decode.max_new_tokens - 1, 0);
    const int64_t beyond = first_position_beyond_window(limits.sliding_window, limits.memory_len, 0, last);
    if (beyond >= 0)
      throw Error(where + ": " + std::to_string(n) + " prompt tokens + " + std::to_string(r.decode.max_new_tokens) +
                  " new tokens run through position " + std::to_string(last) + "; " +
                  beyond_window_message(beyond, limits.sliding_window));
    if (rope_beyond_original(limits.rope_scaling, last + 1))
      throw Error(where + ": " + std::to_string(n) + " prompt tokens + " + std::to_string(r.decode.max_new_tokens) +
                  " new tokens run through position " + std::to_string(last) + "; " +
                  rope_beyond_original_message(limits.rope_scaling, last + 1));
  }
  try {
    check_decode_request(r.decode, limits.vocab_size);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  if (r.output.context_log_probs) {
    // Scoring runs every prompt token through the lm_head as it is (engine.h's ContextScores).
    if (!r.session.empty())
      throw Error(where + ": \"return_context_log_probs\" cannot be combined with a \"session\" (a round's "
                  "context is held in the KV cache, not scored again)");
    for (int32_t id : r.decode.input_ids)
      if (id >= limits.vocab_size)
        throw Error(where + ": \"return_context_log_probs\": the prompt holds p-tuning virtual token " +
                    std::to_string(id) + ", which has no log probability (ids from " +
                    std::to_string(limits.vocab_size) + " are the task's table)");
  }
}

void PromptReader::apply_prompt(Request& r, const PromptChoice& c, const std::string& where) const {
  if (!prompts_) {
    if (c.has_task || c.virtual_tokens)
      throw Error(where + ": \"" + (c.has_task ? "task" : "virtual_tokens") +
                  "\" needs prompt tables: the model folder's config.ini has no tasks (ftx prompt-convert "
                  "--model-dir adds them) and no --prompt-table was given");
    return;
  }
  const int64_t task = c.has_task ? (c.task.empty() ? -1 : prompts_->task(c.task, where)) : default_task_;
  if (c.virtual_tokens != 0) {
    auto v = prompts_->virtual_ids(task, c.virtual_tokens, where);
    r.decode.input_ids.insert(r.decode.input_ids.begin(), v.begin(), v.end());
  }
  prompts_->map_ids(r.decode.input_ids, task, where);
  r.decode.virtual_id_end = prompts_->end_engine_id();
}

const Request* PromptReader::peek() {
  if (!have_ && !at_end_) {
    have_ = read_next();
    at_end_ = !have_;
  }
  return have_ ? &next_ : nullptr;
}

Request PromptReader::take() {
  if (!peek()) throw Error(name_, "internal: take() past the end of the prompts");
  have_ = false;
  return std::move(next_);
}

void skip_resumed(RequestSource& source, const ResultJournal& journal, const std::string& input_name,
                  Scheduler* scheduler) {
  struct Context {
    std::vector<int32_t> tokens;
    int64_t rounds = 0;
  };
  std::unordered_map<std::string, Context> sessions;
  std::unique_ptr<LineReader> lines;
  if (scheduler && journal.resumed() > 0) lines = std::make_unique<LineReader>(journal.partial_path());
  std::string line;
  for (int64_t i = 0; i < journal.resumed(); ++i) {
    const Request* r = source.peek();
    if (!r)
      throw Error(input_name, "has " + std::to_string(i) + " prompts, but " + journal.partial_path() + " holds " +
                                  std::to_string(journal.resumed()) + " results: the input changed; --force starts over");
    if (r->fingerprint != journal.fingerprint(i))
      throw Error(input_name, "prompt " + std::to_string(i + 1) + " (or its parameters) differs from the one whose "
                              "result " + journal.partial_path() + " holds: the input changed; --force starts over");
    const Request kept = source.take();
    if (!lines) continue;
    if (!lines->next(line)) throw Error(journal.partial_path(), "shorter than its index");
    if (kept.session.empty()) continue;
    if (kept.session_end) {
      sessions.erase(kept.session);
      continue;
    }
    Context& c = sessions[kept.session];
    c.tokens.insert(c.tokens.end(), kept.decode.input_ids.begin(), kept.decode.input_ids.end());
    try {
      const auto out = nlohmann::json::parse(line).at("output_ids").get<std::vector<int32_t>>();
      c.tokens.insert(c.tokens.end(), out.begin(), out.end());
    } catch (const std::exception& e) {
      throw Error(journal.partial_path(), "line " + std::to_string(i + 1) + ": no output_ids (" + e.what() + ")");
    }
    ++c.rounds;
  }
  for (auto& kv : sessions) scheduler->restore_session(kv.first, std::move(kv.second.tokens), kv.second.rounds);
}

std::string model_identity(const std::string& model_dir) {
  uint64_t h = fingerprint64(nullptr, 0);
  for (const char* name : {"config.ini", "manifest.json"}) {
    std::ifstream in(model_dir + "/" + name, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    hash_value(h, static_cast<uint64_t>(text.size()));
    hash_add(h, text.data(), text.size());
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string result_text(const Tokenizer& tok, const std::vector<int32_t>& ids, int32_t end_id) {
  return text_value(decode_text(tok, ids, end_id)).get<std::string>();
}

uint64_t request_fingerprint(const Request& r) {
  uint64_t h = fingerprint64(nullptr, 0);
  const SamplingConfig& s = r.decode.sampling;
  hash_value(h, r.index);
  hash_ids(h, r.decode.input_ids);
  hash_value(h, r.decode.max_new_tokens);
  for (double v : {s.top_p, s.top_p_decay, s.top_p_min, s.temperature, s.repetition_penalty, s.presence_penalty,
                   s.len_penalty, s.beam_search_diversity_rate})
    hash_value(h, v);
  for (int64_t v : {s.top_k, s.min_length, s.beam_width, static_cast<int64_t>(s.top_p_reset_id),
                    static_cast<int64_t>(s.end_id), static_cast<int64_t>(s.return_log_probs)})
    hash_value(h, v);
  hash_value(h, s.seed);
  hash_words(h, s.stop_words);
  hash_words(h, s.bad_words);
  hash_value(h, static_cast<uint8_t>(r.output.log_probs));
  hash_value(h, static_cast<uint8_t>(r.output.cum_log_probs));
  hash_value(h, static_cast<uint64_t>(r.session.size()));
  hash_add(h, r.session.data(), r.session.size());
  hash_value(h, static_cast<uint8_t>(r.session_end));
  // Fields a request did not have before issue 49 are hashed only when set, so earlier runs resume.
  if (r.output.context_log_probs) hash_value(h, static_cast<uint8_t>(0x49));
  if (r.output.echo) hash_value(h, static_cast<uint8_t>(0x4a));
  if (r.output.context_embedding) hash_value(h, static_cast<uint8_t>(0x4b));
  if (s.frequency_penalty != 0.0) hash_value(h, s.frequency_penalty);
  if (!r.output.id.empty()) {
    hash_value(h, static_cast<uint64_t>(r.output.id.size()));
    hash_add(h, r.output.id.data(), r.output.id.size());
  }
  if (r.soft_prompt.rows > 0) hash_add(h, r.soft_prompt.values.data(), r.soft_prompt.values.size() * sizeof(float));
  return h;
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

std::string result_error(const GenerationOutput& out) {
  if (!out.error.empty()) return out.error;
  for (const BeamResult& b : out.result.beams)
    if (b.finish_reason == FinishReason::kNonFiniteLogits)
      return "request " + std::to_string(out.index + 1) +
             (out.session.empty() ? "" : " (session \"" + out.session + "\", round " + std::to_string(out.round) + ")") +
             ": the logits of step " + std::to_string(b.output_ids.size()) +
             " are not finite (NaN or +Inf): the model's activations overflowed (weights too large for the "
             "arithmetic, or fp16's range); no token was drawn there";
  return "";
}

std::string result_json(const GenerationOutput& out, const ResultFormat& fmt) {
  nlohmann::ordered_json j;
  j["index"] = out.index;
  if (!out.output.id.empty()) j["id"] = nlohmann::ordered_json::parse(out.output.id);
  if (!out.session.empty()) {
    j["session"] = out.session;
    j["round"] = out.round;
    j["context_length"] = out.context_length;
  }
  j["input_length"] = out.input_length;
  const auto& beams = out.result.beams;
  static const BeamResult empty;
  const BeamResult& best = beams.empty() ? empty : beams[0];
  const int32_t end_id = out.output.end_id;
  j["output_ids"] = best.output_ids;
  // A session round counts its whole session, as FT's output_seq_len does.
  j["sequence_length"] = out.context_length + out.input_length + static_cast<int64_t>(best.output_ids.size());
  j["finish_reason"] = finish_reason_name(best.finish_reason);
  if (fmt.tokenizer) j["text"] = result_text(*fmt.tokenizer, best.output_ids, end_id);
  if (out.output.cum_log_probs) j["cum_log_prob"] = best.cum_log_prob;
  if (out.output.log_probs) j["output_log_probs"] = best.output_log_probs;
  if (beams.size() > 1) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& b : beams) {
      nlohmann::ordered_json e;
      e["output_ids"] = b.output_ids;
      e["sequence_length"] = out.context_length + out.input_length + static_cast<int64_t>(b.output_ids.size());
      e["finish_reason"] = finish_reason_name(b.finish_reason);
      if (fmt.tokenizer) e["text"] = result_text(*fmt.tokenizer, b.output_ids, end_id);
      e["cum_log_prob"] = b.cum_log_prob;
      if (out.output.log_probs) e["output_log_probs"] = b.output_log_probs;
      arr.push_back(std::move(e));
    }
    j["beams"] = std::move(arr);
  }
  if (out.output.context_log_probs) j["context_log_probs"] = out.context_log_probs;
  if (out.output.echo) {
    // Megatron Core's result fields: the prompt, the detokenized output and the output token ids.
    j["input_prompt"] = text_value(out.output.prompt);
    j["generated_text"] = fmt.tokenizer ? text_value(decode_text(*fmt.tokenizer, best.output_ids, end_id)) : nlohmann::json();
    j["generated_tokens"] = best.output_ids;
  }
  if (out.output.context_embedding) j["context_embedding"] = out.context_embedding;
  if (const std::string e = result_error(out); !e.empty()) j["error"] = e;
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
