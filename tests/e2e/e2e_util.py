"""What the e2e scripts share: the failures they collect, and running ftx alone or under mpirun.

A script calls check() for every assertion (a failure is printed and collected, so one run shows
them all) and finish() at the end, which exits 1 when anything failed.
Environment: FTX_BIN (the ftx binary).
"""
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)
    return cond


def finish(what):
    if failures:
        print(f"{what}: {len(failures)} failure(s)")
        sys.exit(1)
    print(f"{what}: all checks passed")


def mpirun(n):
    """The launcher prefix for n ranks of one OpenMP thread each (oversubscribed: CI has 2 cores)."""
    return [shutil.which("mpirun") or "mpirun", "-np", str(n), "--oversubscribe", "--allow-run-as-root",
            "-x", "OMP_NUM_THREADS=1"]


def run_ftx(args, mpi=0, stdin=None, timeout=None):
    """`ftx ARGS` (under `mpirun -np MPI` when mpi > 0), text output captured."""
    cmd = (mpirun(mpi) if mpi else []) + [os.environ["FTX_BIN"], *args]
    env = dict(os.environ, OMP_NUM_THREADS="1" if mpi else os.environ.get("OMP_NUM_THREADS", "2"))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, input=stdin, timeout=timeout)


def ftx(*args, cwd=None, input=None, timeout=120, env=None):
    """`ftx ARGS` run as a user types it (no mpirun, the caller's environment), text output captured."""
    return subprocess.run([os.environ["FTX_BIN"], *args], capture_output=True, text=True, cwd=cwd, input=input,
                          timeout=timeout, env=env)


def write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)
    return path


def listing(folder):
    """Every path under folder (hidden ones included), for 'nothing left behind' checks."""
    out = []
    for root, dirs, files in os.walk(folder):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(root, n), folder))
    return sorted(out)


def extracted(archive, folder):
    """A .nemo (tar) extracted into folder."""
    with tarfile.open(archive) as tf:
        tf.extractall(folder)
    return folder


def error_lines(r):
    """The `ftx: error:` lines of a run's stderr."""
    return [ln for ln in r.stderr.splitlines() if ln.startswith("ftx: error:")]


def check_killed_and_resumed(base, out, ref, kill_after_bytes, total):
    """`BASE --output OUT` killed (SIGKILL) once OUT.partial holds kill_after_bytes, then run again with
    --resume: checks that part of the `total` results were kept and that the resumed file equals REF
    (an uninterrupted run's)."""
    p = subprocess.Popen(base + ["--output", out], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(out + ".partial") and os.path.getsize(out + ".partial") > kill_after_bytes:
            p.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    p.communicate()
    kept = sum(1 for _ in open(out + ".partial")) if os.path.exists(out + ".partial") else 0
    check(0 < kept < total, f"killed part way: {kept} kept")
    r = subprocess.run(base + ["--output", out, "--resume"], capture_output=True, text=True, timeout=600)
    check(r.returncode == 0 and open(out, "rb").read() == open(ref, "rb").read(),
          f"resumed file differs from the uninterrupted run: {r.stderr.strip()}")


def one_line_error(name, r, code, *needles):
    """Exit `code`, and stderr is exactly one line, "ftx: error: ...", containing every needle."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    ok = (r.returncode == code and len(lines) == 1 and lines[0].startswith("ftx: error:")
          and all(n in lines[0] for n in needles))
    check(ok, f"{name}: exit {r.returncode} (wanted {code}), stderr {lines!r}, wanted {needles!r}")
    return ok


def wait_for(pred, what, context=lambda: "", timeout=30):
    """Polls pred() every 50 ms until it is true (True) or `timeout` s pass (a failure naming `what`
    and context(), False): the terminal tests' way of waiting for a screen."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.05)
    check(False, f"timed out waiting for {what}; {context()}")
    return False


class TmuxChat:
    """`ftx chat ARGS` on a terminal: a private tmux server (other users of the default socket cannot
    end it) running the chat in a 200x50 window, its stderr in a file and its exit status in another
    once it ends. Use as a context manager; needs tmux (the caller skips without it)."""

    def __init__(self, tmp, ftx_args, name):
        self.tm = ["tmux", "-L", f"{name}{os.getpid()}"]
        self.done = os.path.join(tmp, f"{name}.status")
        self.err = os.path.join(tmp, f"{name}.stderr")
        script = os.path.join(tmp, f"{name}.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/bash\n{os.environ['FTX_BIN']} chat {' '.join(ftx_args)} 2>{self.err}\n"
                    f"echo $? > {self.done}\nsleep 30\n")
        os.chmod(script, 0o755)
        subprocess.run(self.tm + ["new-session", "-d", "-s", "c", "-x", "200", "-y", "50", script], check=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        subprocess.run(self.tm + ["kill-server"], capture_output=True)

    def pane(self, lines=200):
        return subprocess.run(self.tm + ["capture-pane", "-p", "-t", "c", "-S", f"-{lines}"], capture_output=True,
                              text=True).stdout

    def stderr_lines(self, prefix=""):
        if not os.path.exists(self.err):
            return []
        return [ln for ln in open(self.err).read().splitlines() if ln.startswith(prefix)]

    def keys(self, *k, literal=False):
        subprocess.run(self.tm + ["send-keys", "-t", "c"] + (["-l"] if literal else []) + list(k), check=True)

    def wait_for(self, pred, what, timeout=30):
        return wait_for(pred, "tty: " + what,
                        lambda: f"pane:\n{self.pane()[-800:]}\nstderr: {self.stderr_lines()[-6:]}", timeout)

    def exit_status(self):
        return open(self.done).read().strip() if os.path.exists(self.done) else None
