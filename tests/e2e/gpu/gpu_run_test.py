#!/usr/bin/env python3
"""The GPU plan on this machine, without a GPU: the device-tool calls of scripts/gpu-calls run
scripts/gpu-run from a bundle of stub test binaries (gtest's output, one that fails, one that
crashes, one that hangs) with a fake $OUT, stub nvidia-smi / compute-sanitizer / ldconfig, a fake
CUDA folder and a carried fixture tarball. Checks that no stage loses its logs:

  call1   (its command, with the deadline cut to seconds): the failing test's failure lines and the
          crashed test's name are on stdout and again in the final report; the hang is stopped by its
          per-binary limit, cut to the deadline plus grace; no binary starts after the deadline
          (NOT STARTED, INCOMPLETE, exit 1); every stage that ran left its tarball with the logs;
          NCCL found in a wheel-like folder is exported as FTX_NCCL_LIBRARY; the carried fixtures
          are unpacked, none is made
  TERM    a TERM while the hang runs: gpu-run stops it and the process it started (none left
          running), packs the stage with the hang's partial log, prints the report, exits 143
  call2   the sanitizer and bench stages over passing stubs, on a machine whose xz fails (the
          bundle unpacked by Python): exit 0, one tarball each
  rerun   `only BINARY FILTER`: the filter reaches the binary, its own tarball

Usage: gpu_run_test.py [SOURCE_DIR]
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# A gtest binary's output. The plan file says, per binary and filter pattern, whether it passes,
# fails, crashes or hangs; the first matching line wins, else it passes.
STUB = r"""#!/bin/bash
me=$(basename "$0")
filter='*'; xml=''; list=0
for a in "$@"; do
  case $a in
    --gtest_filter=*) filter=${a#--gtest_filter=} ;;
    --gtest_output=xml:*) xml=${a#--gtest_output=xml:} ;;
    --gtest_list_tests) list=1 ;;
  esac
done
if [ $list = 1 ]; then
  printf 'Models/CudaEngine.\n  GreedyMatchesCpu/gpt2  # GetParam() = "gpt2"\n  GreedyMatchesCpu/bloom  # GetParam() = "bloom"\n'
  exit 0
fi
action=pass
while IFS=$'\t' read -r b f a; do
  [ "$b" = "$me" ] || continue
  case $filter in $f) action=$a; break ;; esac
done < "__PLAN__"
echo "args: $*"
echo "env: FTX_REQUIRE_GPU=$FTX_REQUIRE_GPU FTX_NCCL_LIBRARY=${FTX_NCCL_LIBRARY:-} FTX_FIXTURES=$FTX_FIXTURES"
echo "[==========] Running 2 tests from 1 test suite."
echo "[ RUN      ] Stub.First"
echo "[       OK ] Stub.First (0 ms)"
echo "[ RUN      ] Stub.$me/param"
[ -n "$xml" ] && echo '<testsuites/>' > "$xml"
case $action in
  pass)
    echo "[       OK ] Stub.$me/param (0 ms)"
    echo "[  PASSED  ] 2 tests."
    exit 0 ;;
  fail)
    echo "/src/tests/unit/stub.cc:42: Failure"
    echo "Expected equality of these values:"
    echo "  got"
    echo "    Which is: 3"
    echo "logits differ at element 7 (seed 99)"
    echo "[  FAILED  ] Stub.$me/param, where GetParam() = \"bloom\" (1 ms)"
    echo "[  PASSED  ] 1 test."
    echo "[  FAILED  ] 1 test, listed below:"
    echo "[  FAILED  ] Stub.$me/param, where GetParam() = \"bloom\""
    exit 1 ;;
  hang)  # a helper process of its own too: stopping the binary must stop it
    sleep 100000 &
    echo "$! $$" >> "__PIDS__"
    echo "waiting forever"
    exec sleep 100000 ;;
  crash)
    echo "about to crash"
    kill -SEGV $$ ;;
esac
"""

SANITIZER = r"""#!/bin/bash
[ "$1" = --version ] && { echo "Version stub"; exit 0; }
tool=$2
shift 6  # --tool T --error-exitcode 99 --target-processes application-only
echo "========= COMPUTE-SANITIZER ($tool)"
"$@"
rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit $rc
"""

BENCH = r"""import argparse, json
ap = argparse.ArgumentParser()
for o in ("--ftx", "--work", "--jsonl", "--models", "--batches", "--inputs", "--outputs"):
    ap.add_argument(o)
a = ap.parse_args()
print("stub bench", a.models, a.batches)
with open(a.jsonl, "w") as f:
    f.write(json.dumps({"model": a.models, "graph_tokens_equal_eager": True}) + "\n")
"""

# What scripts/gpu-bundle bundles: the GPU-labelled suites, the op suite and the NCCL loader's test,
# so a stage that names a binary the bundle lacks fails here too.
BINARIES = sorted(f[:-3] for f in os.listdir(os.path.join(SRC, "tests", "unit"))
                  if re.fullmatch(r"(cuda_\w+_test|\w+_gpu_test|backend_ops_test|gpu_skip_rule_test|nccl_library_test)\.cc", f))

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def write(path, text, mode=0o755):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def setup(tmp, plan, xz=True):
    """A repository copy with the carried tarballs, the stub tools; returns (repo, env, pids file).
    xz=False: the machine has no working xz (gpu-unpack falls back to Python's tarfile)."""
    repo, build, tools = (os.path.join(tmp, d) for d in ("repo", "build", "tools"))
    pids = os.path.join(tmp, "pids")
    open(pids, "w").close()
    write(os.path.join(tmp, "plan"), "".join("\t".join(p) + "\n" for p in plan), 0o644)
    bundle = os.path.join(build, "gpu-bundle")
    for b in BINARIES:
        write(os.path.join(bundle, "bin", b), STUB.replace("__PLAN__", os.path.join(tmp, "plan"))
              .replace("__PIDS__", pids))
    write(os.path.join(bundle, "bin", "ftx"), "#!/bin/bash\necho 'ftx (stub)'\n")
    os.makedirs(os.path.join(bundle, "lib"))
    shutil.copy(os.path.join(SRC, "scripts", "gpu-run"), os.path.join(bundle, "gpu-run"))
    write(os.path.join(bundle, "COMMIT"), "0123456789abcdef (stub)\n", 0o644)
    os.makedirs(repo)
    with tarfile.open(os.path.join(repo, "gpu-bundle.tar.xz"), "w:xz") as t:
        t.add(bundle, arcname="gpu-bundle")
    write(os.path.join(repo, "scripts", "gpu-unpack"), open(os.path.join(SRC, "scripts", "gpu-unpack")).read())
    fx = os.path.join(build, "fixtures")
    for what in ("engine", "prompt", "fp8-e4m3", "fp8"):
        write(os.path.join(fx, what, "DONE"), "stamp\n", 0o644)
    with tarfile.open(os.path.join(repo, "gpu-fixtures.tar.gz"), "w:gz") as t:
        for what in os.listdir(fx):
            t.add(os.path.join(fx, what), arcname=what)
    write(os.path.join(repo, "bench", "generate-gpu"), BENCH, 0o644)
    # Tools: no GPU here, and an ld.so.cache that knows no CUDA library, so gpu-run links the fake
    # CUDA folder's (NCCL included) into the bundle.
    write(os.path.join(tools, "nvidia-smi"), "#!/bin/bash\necho 'name, driver_version'\necho 'Stub GPU, 580.00'\n")
    write(os.path.join(tools, "nvcc"), "#!/bin/bash\necho 'Cuda compilation tools, release 13.0 (stub)'\n")
    write(os.path.join(tools, "ldconfig"), "#!/bin/bash\nexit 0\n")
    write(os.path.join(tools, "compute-sanitizer"), SANITIZER)
    if not xz:
        write(os.path.join(tools, "xz"), "#!/bin/bash\necho 'xz: stub that fails' >&2\nexit 1\n")
    cuda = os.path.join(tmp, "cuda")
    for lib in ("libcuda.so.1", "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2"):
        write(os.path.join(cuda, "lib64", lib), "", 0o644)
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    env = dict(os.environ, PATH=tools + ":" + os.environ["PATH"], OUT=out, CUDA_HOME=cuda,
               FTX_FIXTURES=os.path.join(tmp, "fixtures"))
    for v in ("FTX_NCCL_LIBRARY", "FTX_GPU_DEADLINE", "FTX_GPU_RUN_TIMEOUT", "FTX_GPU_GRACE"):
        env.pop(v, None)
    return repo, env, pids


def calls(name, *args):
    r = subprocess.run([os.path.join(SRC, "scripts", "gpu-calls"), "--json", name, *args], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout)


def command(call, **numbers):
    """The call's command with its deadline and limits cut to seconds (what the test can wait for)."""
    cmd = call["command"]
    check(cmd.startswith("scripts/gpu-unpack && gpu-bundle/gpu-run "), f"the call's command: {cmd}")
    for opt, v in numbers.items():
        flag = "--" + opt.replace("_", "-")
        check(re.search(flag + r" \d+", cmd) is not None, f"{flag} in {cmd}")
        cmd = re.sub(flag + r" \d+", f"{flag} {v}", cmd)
    return cmd


def members(path):
    with tarfile.open(path) as t:
        return {m.name: (t.extractfile(m).read().decode() if m.isfile() else None) for m in t.getmembers()}


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def stub_pids(pids):
    with open(pids) as f:
        return [int(x) for x in f.read().split()]


def test_call1():
    """call1 with a failing, a crashing and a hanging binary, and a deadline that passes during the hang."""
    c1 = calls("call1")
    check(c1["carry"] == ["gpu-bundle.tar.xz", "gpu-fixtures.tar.gz"], f"call1 carries {c1['carry']}")
    check(c1["timeout_s"] >= 330 + 30 + 30, f"call1's timeout_s {c1['timeout_s']} leaves no time to pack")
    with tempfile.TemporaryDirectory() as tmp:
        repo, env, pids = setup(tmp, [("backend_ops_test", "*/cuda*", "fail"),
                                      ("cuda_fp8_test", "*", "crash"),
                                      ("cuda_sampling_test", "*", "hang")])
        # The hang starts within the deadline: its limit is what is left of it plus the grace, after
        # which the deadline has passed and nothing else starts.
        cmd = command(c1, deadline=10, per_binary=600)
        r = subprocess.run(["bash", "-c", cmd + " --grace 2"], cwd=repo, env=env, capture_output=True, text=True,
                           timeout=300)
        so = r.stdout
        print(so[-3000:])
        check(r.returncode == 1, f"call1 exit {r.returncode}")
        check("fixtures: unpacked gpu-fixtures.tar.gz" in so, "the carried fixtures are unpacked")
        check("made in" not in so, "no fixture is made when they are carried")
        check(re.search(r"cuda_sampling +\d+s +TIMED OUT after \d+s", so) is not None, "the hang is stopped by its limit")
        report = so[so.index("== summary"):]
        for text in ("/src/tests/unit/stub.cc:42: Failure", "Which is: 3", "logits differ at element 7 (seed 99)",
                     "FAILED Stub.backend_ops_test/param", "RUNNING WHEN IT STOPPED: Stub.cuda_fp8_test/param",
                     "about to crash", "RUNNING WHEN IT STOPPED: Stub.cuda_sampling_test/param"):
            check(text in so[:so.index("== summary")], f"inline: {text!r}")
            check(text in report, f"in the final report: {text!r}")
        for label in ("half_activation", "engine-gpt2", "engine-bloom", "scheduler", "prompt", "half"):
            check(re.search(rf"\n  {re.escape(label)} +- +NOT STARTED: past the 10s deadline", so) is not None,
                  f"{label} not started after the deadline")
        check("INCOMPLETE" in so, "the run says it is incomplete")
        out = env["OUT"]
        check(sorted(os.listdir(out)) == ["check.tar.gz", "engine.tar.gz", "half.tar.gz", "ops.tar.gz"],
              f"tarballs {sorted(os.listdir(out))}")
        ops = members(os.path.join(out, "ops.tar.gz"))
        check("args: --gtest_output=xml:" in (ops.get("ops/ops.log") or ""), "ops.log in ops.tar.gz")
        check("waiting forever" in (ops.get("ops/cuda_sampling.log") or ""), "the hang's log in ops.tar.gz")
        check("Failure" in (ops.get("ops/FAILURES.txt") or ""), "the failure lines in ops.tar.gz")
        chk = members(os.path.join(out, "check.tar.gz"))
        nccl = chk.get("check/nccl_library.log") or ""
        check(f"FTX_NCCL_LIBRARY={os.path.realpath(env['CUDA_HOME'])}/lib64/libnccl.so.2" in nccl,
              f"FTX_NCCL_LIBRARY exported: {nccl}")
        check("FTX_REQUIRE_GPU=1" in nccl, "FTX_REQUIRE_GPU=1 exported")
        check("Stub GPU" in (chk.get("check/machine.txt") or ""), "the machine record")
        check(not any(alive(p) for p in stub_pids(pids)), "no stub left running")


def test_term():
    """A TERM while a binary hangs: stopped at once, logs packed, report printed, exit 143."""
    with tempfile.TemporaryDirectory() as tmp:
        repo, env, pids = setup(tmp, [("cuda_sampling_test", "*", "hang")])
        subprocess.run(["scripts/gpu-unpack"], cwd=repo, check=True)
        p = subprocess.Popen(["gpu-bundle/gpu-run", "--per-binary", "600", "check", "ops", "engine"], cwd=repo, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while not stub_pids(pids):  # the hang has started
            check(p.poll() is None, "gpu-run ended before the hang started")
            if p.poll() is not None:
                return
            time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        so, _ = p.communicate(timeout=120)
        print(so[-2000:])
        check(p.returncode == 143, f"exit {p.returncode} after TERM")
        check("STOPPED by a signal" in so, "the stop is reported")
        check("RUNNING WHEN IT STOPPED: Stub.cuda_sampling_test/param" in so[so.index("== summary"):],
              "the hanging test is named in the report")
        check("engine" not in os.listdir(env["OUT"]) and sorted(os.listdir(env["OUT"])) == ["check.tar.gz", "ops.tar.gz"],
              f"tarballs after TERM: {sorted(os.listdir(env['OUT']))}")
        ops = members(os.path.join(env["OUT"], "ops.tar.gz"))
        check("waiting forever" in (ops.get("ops/cuda_sampling.log") or ""), "the hang's partial log packed")
        for _ in range(50):
            if not any(alive(q) for q in stub_pids(pids)):
                break
            time.sleep(0.2)
        check(not any(alive(q) for q in stub_pids(pids)), "the hanging binary was stopped")


def test_call2_and_rerun():
    with tempfile.TemporaryDirectory() as tmp:
        repo, env, _ = setup(tmp, [], xz=False)
        c2 = calls("call2")
        r = subprocess.run(["bash", "-c", command(c2, deadline=600, per_binary=600)], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=300)
        print(r.stdout[-1500:])
        check(r.returncode == 0, f"call2 exit {r.returncode}")
        check("== gpu-run: all passed" in r.stdout, "call2 passes")
        tarballs = sorted(os.listdir(env["OUT"]))
        check(tarballs == ["bench-quick.tar.gz", "memcheck-quick.tar.gz"], f"call2 tarballs {tarballs}")
        mq = members(os.path.join(env["OUT"], "memcheck-quick.tar.gz"))
        check("ERROR SUMMARY: 0 errors" in (mq.get("memcheck-quick/memcheck-sampling.log") or ""), "memcheck over sampling")
        check("--gtest_filter=CudaFp8.Gemm*" in (mq.get("memcheck-quick/memcheck-fp8.log") or ""), "memcheck over FP8")
        bq = members(os.path.join(env["OUT"], "bench-quick.tar.gz"))
        check("graph_tokens_equal_eager" in (bq.get("bench-quick/bench-quick.jsonl") or ""), "the bench's lines")
    with tempfile.TemporaryDirectory() as tmp:
        repo, env, _ = setup(tmp, [])
        rerun = calls("rerun", "backend_ops_test", "*/BackendOps.Gemm*/cuda:BackendOpsCoverage.*")
        r = subprocess.run(["bash", "-c", command(rerun, deadline=600, per_binary=600)], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"rerun exit {r.returncode}: {r.stdout[-1500:]}")
        only = os.path.join(env["OUT"], "only-backend_ops_test.tar.gz")
        check(os.path.exists(only), f"rerun tarballs {os.listdir(env['OUT'])}")
        if os.path.exists(only):
            log = members(only).get("only-backend_ops_test/backend_ops_test.log") or ""
            check("--gtest_filter=*/BackendOps.Gemm*/cuda:BackendOpsCoverage.*" in log, f"the filter reaches it: {log}")
    # Bad arguments are refused before anything runs.
    with tempfile.TemporaryDirectory() as tmp:
        repo, env, _ = setup(tmp, [])
        subprocess.run(["scripts/gpu-unpack"], cwd=repo, check=True)
        for args in (["nosuchstage"], ["only", "no_such_test", "X.*"], ["--deadline", "soon", "check"],
                     ["check"] * 9):
            r = subprocess.run(["gpu-bundle/gpu-run", *args], cwd=repo, env=env, capture_output=True, text=True)
            check(r.returncode == 2 and not os.listdir(env["OUT"]), f"gpu-run {shlex.join(args)}: exit {r.returncode}")


def test_gpu_tree():
    """scripts/gpu-tree on a clone of the repository: --slim leaves what travels under the device
    tool's 64 MiB beside the carried tarballs, refuses a second time and over staged changes, and
    --restore gives back the index and the exclude file it found."""
    if not os.path.isdir(os.path.join(SRC, ".git")):
        print("gpu_tree: skipped (the source is not a git checkout)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "clone")
        subprocess.run(["git", "clone", "-q", SRC, repo], check=True)
        tool = os.path.join(SRC, "scripts", "gpu-tree")
        shutil.copy(tool, os.path.join(repo, "scripts", "gpu-tree"))
        git = lambda *a: subprocess.run(["git", *a], cwd=repo, capture_output=True, text=True)
        if git("status", "--porcelain").stdout:  # a working copy's script, not yet committed there
            git("add", "scripts/gpu-tree")
            git("-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-q", "-m", "gpu-tree")
        exclude = os.path.join(repo, ".git", "info", "exclude")
        before = open(exclude).read() if os.path.exists(exclude) else ""
        tracked = git("ls-files").stdout

        def run(arg):
            return subprocess.run([os.path.join(repo, "scripts", "gpu-tree"), arg], cwd=repo, capture_output=True,
                                  text=True)

        r = run("--slim")
        check(r.returncode == 0, f"gpu-tree --slim: exit {r.returncode} {r.stderr}")
        m = re.search(r"travels: ([0-9.]+) MiB", r.stdout)
        check(m is not None and float(m.group(1)) + 50 < 64, f"slim tree plus 50 MiB of tarballs under 64: {r.stdout}")
        check("data/lambada/lambada_test.jsonl" not in git("ls-files").stdout, "lambada untracked")
        check(os.path.exists(os.path.join(repo, "data", "lambada", "lambada_test.jsonl")), "its files stay on disk")
        check(git("ls-files", "--others", "--exclude-standard").stdout == "", "the untracked folders are ignored")
        check(run("--slim").returncode == 2, "a second --slim is refused")
        r = run("--restore")
        check(r.returncode == 0, f"gpu-tree --restore: exit {r.returncode} {r.stderr}")
        check(git("ls-files").stdout == tracked and git("status", "--porcelain").stdout == "",
              "--restore gives back the index")
        check((open(exclude).read() if os.path.exists(exclude) else "") == before, "--restore gives back the exclude file")
        with open(os.path.join(repo, "README.md"), "a") as f:
            f.write("x\n")
        git("add", "README.md")
        r = run("--slim")
        check(r.returncode == 2 and "staged changes" in r.stderr, f"--slim over staged changes: {r.returncode} {r.stderr}")


def main():
    test_call1()
    test_term()
    test_call2_and_rerun()
    test_gpu_tree()
    if failures:
        print(f"{len(failures)} checks failed:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("gpu_run_test: all checks passed")


if __name__ == "__main__":
    main()
