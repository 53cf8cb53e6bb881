#include "cmd/run_control.h"

#include <csignal>
#include <cstdio>

#include "formats/error.h"

namespace ftx::cmd {

namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void note_signal(int sig) { g_signal = sig; }

}  // namespace

StopOnSignal::StopOnSignal() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = note_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_RESETHAND;  // the second signal takes the default action
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

StopOnSignal::~StopOnSignal() {
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
}

bool StopOnSignal::requested() const { return g_signal != 0; }

int StopOnSignal::report(const ResultJournal* journal) const {
  const int sig = g_signal ? static_cast<int>(g_signal) : SIGTERM;
  if (journal && !journal->direct() && journal->records() == 0)  // the journal removes an empty .partial
    std::fprintf(stderr, "ftx: stopped by signal %d before the first result: nothing was written (no %s is kept); "
                         "run again to start\n",
                 sig, journal->partial_path().c_str());
  else if (journal && !journal->direct())
    std::fprintf(stderr, "ftx: stopped by signal %d: %lld results are in %s; run again with --resume to continue\n", sig,
                 static_cast<long long>(journal->records()), journal->partial_path().c_str());
  else if (journal)
    std::fprintf(stderr, "ftx: stopped by signal %d after %lld results\n", sig, static_cast<long long>(journal->records()));
  return 128 + sig;
}

void check_flags_as_request(const DecodeRequest& probe, int64_t vocab_size) {
  try {
    check_decode_request(probe, vocab_size);
  } catch (const Error& e) {
    // Messages name the fields ("top_p 5 outside [0, 1]", "min_length 10 is more than
    // max_new_tokens 4"); each flag is the field's name with dashes.
    static const char* kFields[] = {"max_new_tokens", "top_k", "top_p", "temperature", "repetition_penalty",
                                    "presence_penalty", "frequency_penalty", "len_penalty", "min_length",
                                    "beam_width", "beam_search_diversity_rate", "end_id", "top_p_decay",
                                    "top_p_min", "top_p_reset_ids"};
    std::string msg = e.what();
    for (const char* field : kFields) {
      const std::string f = field;
      for (size_t p = 0; (p = msg.find(f, p)) != std::string::npos;) {
        const bool word_start = p == 0 || msg[p - 1] == ' ' || msg[p - 1] == '(';
        const bool word_end = p + f.size() == msg.size() || msg[p + f.size()] == ' ';
        if (!word_start || !word_end) {
          p += f.size();
          continue;
        }
        std::string flag = "--" + f;
        for (char& c : flag)
          if (c == '_') c = '-';
        msg.replace(p, f.size(), flag);
        p += flag.size();
      }
    }
    throw UsageError(msg);
  }
}

std::optional<int> run_to_journal(Scheduler& scheduler, RequestSource* source, OrderedResults* ordered,
                                  const StreamCallback& on_token, const StopOnSignal& stop, ResultJournal* journal,
                                  bool leader, const std::string& fix) {
  Scheduler::Status status;
  try {
    status = scheduler.run(
        source, [&](GenerationOutput&& out) { ordered->add(std::move(out)); }, on_token,
        [&] { return stop.requested(); });
  } catch (const Error& e) {
    // A bad request part way through a file: the results before it are kept and resumable.
    if (!leader || journal->direct() || journal->records() == 0) throw;
    throw Error(std::string(e.what()) + "; the " + std::to_string(journal->records()) + " results before it are in " +
                journal->partial_path() + ": " + fix + "run again with --resume");
  }
  if (status == Scheduler::Status::kStopped) return stop.report(leader ? journal : nullptr);
  if (!leader) return 0;
  journal->finish();
  return std::nullopt;
}

int report_failed_results(int64_t failed, const std::string& first_failure, const std::string& output) {
  if (failed == 0) return 0;
  // Every result is written (the failed ones with "error"); the job as a whole did not succeed.
  std::fprintf(stderr, "ftx: error: %s%s\n", first_failure.c_str(),
               failed > 1 ? ("; " + std::to_string(failed) + " results of this run have such an \"error\" (see " +
                             output_display_name(output) + ")")
                                .c_str()
                          : "");
  return 1;
}

}  // namespace ftx::cmd
