#include "cmd/line_editor.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#ifdef FTX_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace ftx::cmd {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void note_interrupt(int) { g_interrupted = 1; }

}  // namespace

namespace {

void install(bool restart) {
  struct sigaction sa {};
  sa.sa_handler = note_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigaction(SIGINT, &sa, nullptr);
}

}  // namespace

InterruptKey::InterruptKey() {
  g_interrupted = 0;
  install(true);  // while an answer streams, writes to the terminal are not cut short
}

InterruptKey::~InterruptKey() { std::signal(SIGINT, SIG_DFL); }

bool InterruptKey::take() {
  const bool was = g_interrupted != 0;
  g_interrupted = 0;
  return was;
}

LineEditor::LineEditor(std::string prompt, InterruptKey& key) : prompt_(std::move(prompt)), key_(key) {}

bool LineEditor::read(std::string& line) {
  for (;;) {
    key_.take();  // a Ctrl-C that stopped the last answer does not drop this line
#ifdef FTX_HAVE_LIBEDIT
    install(false);  // Ctrl-C makes the terminal read return, so the typed line can be dropped
    char* text = ::readline(prompt_.c_str());
    install(true);
    if (!text) {
      if (key_.take()) {  // Ctrl-C: the line typed so far is dropped
        std::fputs("\n", stdout);
        continue;
      }
      std::fputs("\n", stdout);  // Ctrl-D: the chat ends on a fresh line
      return false;
    }
    line = text;
    std::free(text);
    if (!line.empty()) ::add_history(line.c_str());
    return true;
#else
    std::fputs(prompt_.c_str(), stdout);
    std::fflush(stdout);
    install(false);
    const bool ok = static_cast<bool>(std::getline(std::cin, line));
    install(true);
    if (ok) return true;
    if (key_.take()) {
      std::cin.clear();
      std::fputs("\n", stdout);
      continue;
    }
    std::fputs("\n", stdout);
    return false;
#endif
  }
}

}  // namespace ftx::cmd
