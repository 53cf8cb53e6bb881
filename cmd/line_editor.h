#pragma once
// What `ftx chat` needs from a terminal: lines typed with editing and history (libedit's readline
// interface, so arrow keys move the cursor and recall earlier lines instead of reaching the model
// as escape codes), and Ctrl-C as "stop", not "quit".
#include <string>

namespace ftx::cmd {

// While alive, SIGINT (Ctrl-C) only sets a flag: take() reads and clears it. The chat polls it
// while an answer streams (stop the answer) and the line editor while a line is typed (drop the
// line). SIGTERM keeps its default action.
class InterruptKey {
 public:
  InterruptKey();
  ~InterruptKey();
  InterruptKey(const InterruptKey&) = delete;
  InterruptKey& operator=(const InterruptKey&) = delete;
  bool take();
};

// Reads lines from the terminal on standard input, showing `prompt`. Each non-empty line joins the
// session's history (up/down recall it). Built without libedit, lines are read plainly.
class LineEditor {
 public:
  LineEditor(std::string prompt, InterruptKey& key);
  // The next line (without its newline); false at the end of the input (Ctrl-D on an empty line).
  // Ctrl-C while typing drops the line and prompts again.
  bool read(std::string& line);

 private:
  std::string prompt_;
  InterruptKey& key_;
};

}  // namespace ftx::cmd
