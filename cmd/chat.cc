// ftx chat: an interactive session over the model: each line of input is a round appended to the
// session (its KV cache kept between rounds), the continuation streams out as it is generated.
// On a terminal or in a pipe; under mpirun rank 0 owns the terminal. See man/ftx-chat.1.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "cmd/decoding_flags.h"
#include "cmd/line_editor.h"
#include "cmd/subcommand.h"
#include "formats/error.h"
#include "formats/ft_dir.h"
#include "lib/engine/chat_source.h"
#include "lib/engine/model_run.h"
#include "lib/tokenizer/incremental_text.h"
#include "lib/tokenizer/model_tokenizer.h"
#include "lib/tokenizer/tokenizer_config.h"
#include "lib/model/model_dir.h"

namespace {

struct ChatFlags {
  ftx::cmd::DecodingFlags d;
  std::string input = "-";
  bool quiet = false;
};

int run_chat(ChatFlags& f) {
  ftx::cmd::DecodingFlags& d = f.d;
  ftx::cmd::check_decoding_flags(d);
  ftx::cmd::check_seed_flag(d, false);
  const auto cfg = ftx::read_model_config(d.model_dir);
  auto tokenizer = ftx::find_model_tokenizer(d.model_dir, d.tokenizer_dir);
  if (!tokenizer) throw ftx::Error(d.model_dir, "chat needs a tokenizer: none found in the model folder; pass --tokenizer DIR");
  const ftx::RequestDefaults defaults = ftx::cmd::request_defaults(d, cfg, tokenizer.get());

  ftx::ModelRun run(ftx::cmd::runtime_options(d));
  const bool leader = run.comm().rank() == 0;
  // ftx has no template engine: say so before the first line rather than answer unlike the model card.
  if (const std::string tmpl = ftx::find_chat_template(tokenizer->folder()); leader && !tmpl.empty())
    std::fprintf(stderr,
                 "ftx chat: note: %s has a chat template, which ftx chat does not apply: each line goes to the model "
                 "as raw text to continue (write the model's prompt format yourself; see ftx-chat(1))\n",
                 tmpl.c_str());
  run.load("another rank failed to load the model (see its error)");
  run.start_engine(ftx::cmd::engine_options(d, nullptr));
  ftx::SchedulerOptions so;
  so.batch_size = 1;  // one session: its cache stays in the one slot between rounds
  so.session_len = d.session_len;
  so.memory_len = d.memory_len;
  // On a terminal: line editing and history, and Ctrl-C stops the answer in progress (not the chat);
  // a line that cannot run (too long, or the context is full) is refused and the chat goes on, so
  // the user can shorten it or /reset. In a pipe every round is one line (an answer's own line
  // breaks are written as \n), and a line that cannot run ends the chat with its error.
  const bool terminal = f.input == "-" && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  so.refuse_alone = terminal;
  ftx::Scheduler& scheduler = run.start_scheduler(so);

  std::unique_ptr<ftx::cmd::InterruptKey> interrupt;
  std::unique_ptr<ftx::cmd::LineEditor> editor;
  std::unique_ptr<ftx::ChatSource> source;
  auto notice = [](const std::string& msg) { std::fprintf(stderr, "ftx: error: %s\n", msg.c_str()); };
  if (leader && terminal) {
    interrupt = std::make_unique<ftx::cmd::InterruptKey>();
    editor = std::make_unique<ftx::cmd::LineEditor>("> ", *interrupt);
    source = std::make_unique<ftx::ChatSource>([&](std::string& line) { return editor->read(line); }, "<terminal>",
                                               *tokenizer, defaults, cfg.vocab_size, notice);
  } else if (leader) {
    source = std::make_unique<ftx::ChatSource>(f.input, *tokenizer, defaults, cfg.vocab_size, nullptr, notice);
  }
  auto write = [terminal](const std::string& text) {
    if (terminal) {
      std::fputs(text.c_str(), stdout);
    } else {
      for (char c : text) {
        if (c == '\n') std::fputs("\\n", stdout);
        else if (c == '\r') std::fputs("\\r", stdout);
        else if (c == '\\') std::fputs("\\\\", stdout);
        else std::fputc(c, stdout);
      }
    }
    std::fflush(stdout);
  };

  // Each round streams its text as tokens arrive (beam search: its best beam at the end).
  ftx::IncrementalText text(*tokenizer, defaults.sampling.end_id);
  std::chrono::steady_clock::time_point first_token;
  int64_t streamed = 0;
  auto on_token = [&](const ftx::StreamEvent& ev) {
    if (streamed++ == 0) first_token = std::chrono::steady_clock::now();
    if (interrupt && interrupt->take()) scheduler.finish_running();  // Ctrl-C: this answer ends here
    if (!ev.best.empty()) return;
    write(text.add(ev.token));
  };
  auto on_result = [&](ftx::GenerationOutput&& out) {
    if (!out.error.empty()) {  // refused before it ran: the conversation is as it was
      notice(out.error + "; shorten the line, or /reset to start a new conversation");
      text.reset();
      streamed = 0;
      source->round_done();
      return;
    }
    const auto done = std::chrono::steady_clock::now();
    const auto& best = out.result.beams.front();
    if (out.result.beams.size() > 1)
      for (int32_t t : best.output_ids) write(text.add(t));
    write(text.flush());
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (!f.quiet) {
      const double ttft = std::chrono::duration<double>(first_token - source->read_at()).count();
      const double total = std::chrono::duration<double>(done - source->read_at()).count();
      const size_t n = best.output_ids.size();
      std::fprintf(stderr,
                   "[round %lld: %zu tokens, %.1f tokens/s, first token %.1f ms; context %lld tokens, %lld new%s]\n",
                   static_cast<long long>(out.round), n, total > 0 ? static_cast<double>(n) / total : 0.0, ttft * 1e3,
                   static_cast<long long>(out.context_length), static_cast<long long>(out.input_length),
                   best.finish_reason == ftx::FinishReason::kNone ? "; stopped" : "");
    }
    if (const std::string e = ftx::result_error(out); !e.empty()) notice(e + "; /reset starts a new conversation");
    text.reset();
    streamed = 0;
    source->round_done();
  };
  scheduler.run(source.get(), on_result, on_token);
  return 0;
}

ftx::cmd::Action setup_chat(CLI::App* sub) {
  auto f = std::make_shared<ChatFlags>();
  f->d.max_new_tokens = 64;
  ftx::cmd::add_decoding_flags(sub, f->d, false);
  sub->add_option("--input", f->input, "Lines to send, one round each (default -: standard input)");
  sub->add_flag("-q,--quiet", f->quiet, "No per-round statistics on standard error");
  return [f] { return run_chat(*f); };
}

FTX_SUBCOMMAND("chat", "Interactive session: each line continues the conversation, its KV cache kept (FT's interactive generation)",
               setup_chat);

}  // namespace
