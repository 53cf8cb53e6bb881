#pragma once
// Outputs being written under a temporary name (`.<name>.tmp-<pid>`, OutputDir and AtomicOutput)
// must not outlive the process that writes them, however it ends:
//  * SIGINT, SIGTERM, SIGHUP: while any is pending, a handler removes every pending temporary
//    (async-signal-safe system calls only), says on stderr which signal stopped what, and ends
//    the process with that signal (exit status 128 + N, as before);
//  * SIGXFSZ (a file size limit, `ulimit -f`): ignored while any is pending, so the write that
//    crosses the limit fails with EFBIG and is reported as an error naming the file;
//  * SIGKILL or a crash: nothing can run; the next run that writes the same output finds the
//    temporaries of processes that no longer exist, removes them and says so
//    (sweep_stale_temporaries).
#include <string>

namespace ftx {

// Registers `tmp_path` (a file or a folder of files) for removal on a fatal signal; `final_path`
// names the output in the message ("" for a scratch folder: removed silently). An empty tmp_path
// registers an output whose writing has not begun (a long calibration first): a signal then says
// it was not written. An output registered twice is named once. Returns a handle for
// unregister_pending_output().
// `created_dir` (optional): a folder made for the output, removed too when it is then empty.
int register_pending_output(const std::string& tmp_path, const std::string& final_path,
                            const std::string& created_dir = "");
void unregister_pending_output(int handle);

// In `parent`, temporaries of `base` (".<base>.tmp-<pid>" and ".<base>.old-<pid>") left by
// processes that are gone are removed, each with a note on stderr; one whose process still runs is
// an Error naming it (two runs would write the same output). Its own pid's are removed silently.
void sweep_stale_temporaries(const std::string& parent, const std::string& base);

// " (the file size limit, `ulimit -f`, is reached)" for EFBIG, "" otherwise: appended to a failed
// write's message.
std::string write_error_hint(int err);

}  // namespace ftx
