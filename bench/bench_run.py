"""One measured ftx run for the benchmarks: its summary line (the last line on standard error), peak
RSS, and CPU time (user + system), which a machine shared with other jobs inflates less than wall
time (set OMP_WAIT_POLICY=passive so that waiting threads sleep rather than spin)."""
import os
import subprocess
import sys
import time


def run_ftx(cmd, env=None):
    """(summary line, peak RSS bytes, CPU seconds, wall seconds); exits naming the command on failure."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **(env or {})))
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.time() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd[:2])} failed: {err.strip()}")
    return err.strip().splitlines()[-1], usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, wall
