#include "formats/pending_outputs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>

#include "formats/error.h"

namespace ftx {

namespace {

// Fixed storage: the handler may not allocate. More outputs than this at once are not a real job.
constexpr int kSlots = 32;
struct Slot {
  std::atomic<bool> used{false};
  char tmp[PATH_MAX];
  char final_path[PATH_MAX];
  char created_dir[PATH_MAX];
};
Slot g_slots[kSlots];
std::mutex g_mu;
int g_registered = 0;
struct sigaction g_old[4];
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old_xfsz;

void say(const char* s) {
  ssize_t r = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)r;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT (Ctrl-C)";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

// Removes `path`: a file, or a folder of files and folders (depth-limited), with system calls only.
void remove_tree(const char* path, int depth) {
  if (::unlink(path) == 0 || errno == ENOENT) return;
  if (depth > 4) return;
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  alignas(8) char buf[4096];
  char child[PATH_MAX];
  for (int pass = 0; pass < 4; ++pass) {  // writers may still add files: go round again
    ::lseek(fd, 0, SEEK_SET);
    for (;;) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        struct Entry {
          uint64_t ino;
          int64_t off;
          unsigned short reclen;
          unsigned char type;
          char name[1];
        };
        const auto* e = reinterpret_cast<const Entry*>(buf + off);
        off += e->reclen;
        if (std::strcmp(e->name, ".") == 0 || std::strcmp(e->name, "..") == 0) continue;
        const size_t a = std::strlen(path), b = std::strlen(e->name);
        if (a + 1 + b + 1 > sizeof child) continue;
        std::memcpy(child, path, a);
        child[a] = '/';
        std::memcpy(child + a + 1, e->name, b + 1);
        if (::unlinkat(fd, e->name, 0) != 0 && errno == EISDIR) remove_tree(child, depth + 1);
      }
    }
    if (::rmdir(path) == 0 || errno == ENOENT) break;
  }
  ::close(fd);
}

extern "C" void on_fatal_signal(int sig) {
  for (auto& s : g_slots) {
    if (!s.used.load()) continue;
    if (s.tmp[0]) remove_tree(s.tmp, 0);
    if (s.created_dir[0]) ::rmdir(s.created_dir);  // only when empty
    if (!s.final_path[0]) continue;  // a scratch folder: nothing to say
    bool said = false;  // the same output registered twice (before and while it is written): one line
    for (auto* o = g_slots; o != &s; ++o) said |= o->used.load() && std::strcmp(o->final_path, s.final_path) == 0;
    if (said) continue;
    say("ftx: error: stopped by ");
    say(signal_name(sig));
    say(": ");
    say(s.final_path);
    say(s.tmp[0] ? " was not written (its unfinished temporary is removed)\n" : " was not written\n");
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

bool process_running(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

int register_pending_output(const std::string& tmp_path, const std::string& final_path, const std::string& created_dir) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    if (s.used.load()) continue;
    std::snprintf(s.tmp, sizeof s.tmp, "%s", tmp_path.c_str());
    std::snprintf(s.final_path, sizeof s.final_path, "%s", final_path.c_str());
    std::snprintf(s.created_dir, sizeof s.created_dir, "%s", created_dir.c_str());
    s.used.store(true);
    if (g_registered++ == 0) {
      struct sigaction sa {};
      sa.sa_handler = on_fatal_signal;
      sigemptyset(&sa.sa_mask);
      for (int sig : kSignals) sigaddset(&sa.sa_mask, sig);
      for (size_t k = 0; k < sizeof kSignals / sizeof kSignals[0]; ++k) ::sigaction(kSignals[k], &sa, &g_old[k]);
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      ::sigaction(SIGXFSZ, &ignore, &g_old_xfsz);
    }
    return i;
  }
  return -1;  // past the slots: still removed by its owner, not by the handler
}

void unregister_pending_output(int handle) {
  if (handle < 0 || handle >= kSlots) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_slots[handle].used.exchange(false)) return;
  if (--g_registered == 0) {
    for (size_t k = 0; k < sizeof kSignals / sizeof kSignals[0]; ++k) ::sigaction(kSignals[k], &g_old[k], nullptr);
    ::sigaction(SIGXFSZ, &g_old_xfsz, nullptr);
  }
}

void sweep_stale_temporaries(const std::string& parent, const std::string& base) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::string rest;
    for (const char* kind : {".tmp-", ".old-"}) {
      const std::string prefix = "." + base + kind;
      if (name.rfind(prefix, 0) == 0) rest = name.substr(prefix.size());
    }
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos || rest.size() > 9) continue;
    const long pid = std::strtol(rest.c_str(), nullptr, 10);
    const std::string path = it->path().string();
    if (pid != ::getpid() && process_running(pid))
      throw Error(path, "process " + rest + " is writing this output now; wait for it, or stop it (a second run "
                        "would write the same output)");
    // A run stopped between moving the old output aside and moving the new one in: put it back.
    const std::string final_path = parent + "/" + base;
    if (name.find(".old-") != std::string::npos && !fs::exists(fs::symlink_status(final_path, ec)) &&
        ::rename(path.c_str(), final_path.c_str()) == 0) {
      std::fprintf(stderr, "ftx: note: restored %s from %s, where an interrupted run (pid %s) had moved it\n",
                   final_path.c_str(), path.c_str(), rest.c_str());
      continue;
    }
    std::error_code rm;
    fs::remove_all(path, rm);
    if (rm) {
      std::fprintf(stderr, "ftx: warning: %s: left by an interrupted run (pid %s) and cannot be removed: %s\n",
                   path.c_str(), rest.c_str(), rm.message().c_str());
    } else if (pid != ::getpid()) {
      std::fprintf(stderr, "ftx: note: removed %s, left by an interrupted run (pid %s)\n", path.c_str(), rest.c_str());
    }
  }
}

std::string write_error_hint(int err) {
  return err == EFBIG ? " (the file size limit, `ulimit -f`, is reached)" : "";
}

}  // namespace ftx
