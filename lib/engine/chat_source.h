#pragma once
// The requests of `ftx chat`: one session, a round per line of input. Each line's text is
// tokenized and appended to the session (the scheduler keeps its KV cache between rounds, so a
// round costs only its new tokens). Lines starting with "/" are commands: /reset ends the session
// (freeing its cache) and starts a new one, /quit ends the chat; "//" at the start of a line is a
// literal "/". An unknown command or a line that tokenizes to nothing is reported through
// `notice` and skipped.
//
// The source is interactive: peek() returns nothing while a round is running (the next line may
// depend on its answer) and blocks reading the next line only when none is; round_done() says the
// round handed out last has finished.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "formats/input_file.h"
#include "lib/engine/generate_io.h"
#include "lib/engine/scheduler.h"
#include "lib/tokenizer/tokenizer.h"

namespace ftx {

class ChatSource : public RequestSource {
 public:
  // One line of input into `line` (without its newline); false at the end of the input.
  using ReadLine = std::function<bool(std::string& line)>;

  // input: a path or "-" (standard input). prompt(): called before a line is read (shows "> " on a
  // terminal). notice(text): a one-line message about a skipped line.
  ChatSource(const std::string& input, const Tokenizer& tokenizer, RequestDefaults defaults, int64_t vocab_size,
             std::function<void()> prompt, std::function<void(const std::string&)> notice);
  // Lines from `read_line` (a terminal's line editor), named `input_name` in messages.
  ChatSource(ReadLine read_line, std::string input_name, const Tokenizer& tokenizer, RequestDefaults defaults,
             int64_t vocab_size, std::function<void(const std::string&)> notice);
  const Request* peek() override;
  Request take() override;
  bool finished() override;
  void round_done() { in_flight_ = false; }
  const std::string& session() const { return session_; }
  // When the line of the round handed out last was read (its time to first token starts there).
  std::chrono::steady_clock::time_point read_at() const { return read_at_; }
  int64_t rounds() const { return rounds_; }

 private:
  bool read_next();

  std::unique_ptr<LineReader> file_;  // the path's lines (or read_line_ instead)
  ReadLine read_line_;
  std::string name_;
  int64_t line_no_ = 0;
  const Tokenizer& tok_;
  RequestDefaults defaults_;
  int64_t vocab_;
  std::function<void()> prompt_;
  std::function<void(const std::string&)> notice_;
  std::string session_;
  int64_t sessions_ = 0, rounds_ = 0;
  bool in_flight_ = false, finished_ = false, have_ = false;
  Request next_;
  std::chrono::steady_clock::time_point read_at_;
};

}  // namespace ftx
