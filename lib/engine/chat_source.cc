#include "lib/engine/chat_source.h"

#include "formats/error.h"

namespace ftx {

ChatSource::ChatSource(const std::string& input, const Tokenizer& tokenizer, RequestDefaults defaults,
                       int64_t vocab_size, std::function<void()> prompt,
                       std::function<void(const std::string&)> notice)
    : file_(std::make_unique<LineReader>(input)), name_(file_->name()), tok_(tokenizer), defaults_(std::move(defaults)),
      vocab_(vocab_size), prompt_(std::move(prompt)), notice_(std::move(notice)), session_("chat-1"), sessions_(1) {
  read_line_ = [this](std::string& line) { return file_->next(line); };
}

ChatSource::ChatSource(ReadLine read_line, std::string input_name, const Tokenizer& tokenizer, RequestDefaults defaults,
                       int64_t vocab_size, std::function<void(const std::string&)> notice)
    : read_line_(std::move(read_line)), name_(std::move(input_name)), tok_(tokenizer), defaults_(std::move(defaults)),
      vocab_(vocab_size), notice_(std::move(notice)), session_("chat-1"), sessions_(1) {}

bool ChatSource::read_next() {
  std::string line;
  for (;;) {
    if (prompt_) prompt_();
    if (!read_line_(line)) {
      finished_ = true;
      return false;
    }
    const std::string where = name_ + ": line " + std::to_string(++line_no_);
    if (line.rfind("//", 0) == 0) {
      line.erase(0, 1);  // a literal leading "/"
    } else if (!line.empty() && line[0] == '/') {
      const std::string cmd = line.substr(0, line.find_first_of(" \t"));
      if (cmd == "/quit") {
        finished_ = true;
        return false;
      }
      if (cmd == "/reset") {
        // The old session ends (its cache is freed) before the next round of the new one.
        next_ = Request();
        next_.index = -1;
        next_.session = session_;
        next_.session_end = true;
        session_ = "chat-" + std::to_string(++sessions_);
        return true;
      }
      notice_(where + ": unknown command '" + cmd + "' (/reset starts over, /quit ends; // sends a line starting with /)");
      continue;
    }
    Request r;
    r.decode.input_ids = tok_.encode(line);
    if (r.decode.input_ids.empty()) continue;  // an empty line adds nothing
    for (int32_t id : r.decode.input_ids)
      if (id < 0 || id >= vocab_)
        throw Error(where, "token id " + std::to_string(id) + " is outside the model's vocabulary [0, " +
                               std::to_string(vocab_) + ")");
    r.decode.max_new_tokens = defaults_.max_new_tokens;
    r.decode.sampling = defaults_.sampling;
    r.output = defaults_.output;
    r.output.end_id = defaults_.sampling.end_id;
    r.session = session_;
    r.index = rounds_;
    next_ = std::move(r);
    read_at_ = std::chrono::steady_clock::now();
    return true;
  }
}

const Request* ChatSource::peek() {
  if (have_) return &next_;
  if (in_flight_ || finished_) return nullptr;
  have_ = read_next();
  return have_ ? &next_ : nullptr;
}

Request ChatSource::take() {
  if (!peek()) throw Error(name_, "internal: take() with no line");
  have_ = false;
  if (!next_.is_control()) {
    in_flight_ = true;
    ++rounds_;
  }
  return std::move(next_);
}

bool ChatSource::finished() {
  if (!have_ && !in_flight_ && !finished_) peek();
  return finished_ && !have_;
}

}  // namespace ftx
