"""What the CPU benchmarks share: memory-bandwidth floors, the CPU's instruction sets, and running
`ftx generate` with its own timing summary parsed."""
import json
import os
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def c_read_bandwidth(build, threads, mib=256, passes=30):
    """(best, median) bytes/s of `threads` threads each summing its own MiB buffer with wide loads
    and four accumulators (bench/src/read_bandwidth.cc): the floor the decode steps are held to."""
    subprocess.run(["cmake", "--build", build, "--target", "bench_read_bandwidth"], check=True,
                   stdout=subprocess.DEVNULL)
    r = subprocess.run([os.path.join(build, "bench_read_bandwidth"), str(threads), str(mib), str(passes)],
                       check=True, capture_output=True, text=True)
    j = json.loads(r.stdout)
    return j["best_bytes_per_s"], j["median_bytes_per_s"]


def numpy_read_bandwidth(threads):
    """Bytes/s that `threads` threads read summing their own 256 MiB each with numpy (its reductions
    release the GIL), best of 5: what bench/int8-cpu used first. numpy's sum is a pairwise reduction
    bound by its own adds, so it reads at about half the C loop's rate and flatters every
    '× floor' figure; kept to compare with the earlier results."""
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor
    parts = [np.ones(1 << 26, dtype=np.float32) for _ in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(np.sum, parts))
        best = 0.0
        for _ in range(5):
            t = time.perf_counter()
            list(pool.map(np.sum, parts))
            best = max(best, sum(p.nbytes for p in parts) / (time.perf_counter() - t))
    return best


def fma_peak(build, threads):
    """fp32 FLOP/s of an FMA loop on `threads` threads at the level ftx's kernels run (bench/src/prefill_gemm.cc:
    512-bit registers at avx512, 256-bit at avx2, FTX_CPU_ISA capping it), 0 below AVX2."""
    subprocess.run(["cmake", "--build", build, "--target", "bench_prefill_gemm"], check=True,
                   stdout=subprocess.DEVNULL)
    r = subprocess.run([os.path.join(build, "bench_prefill_gemm"), str(threads), "768", "64", "1", "peak"],
                       check=True, capture_output=True, text=True)
    m = re.search(r"([0-9.]+) GFLOP/s on %d threads" % threads, r.stdout)
    return float(m.group(1)) * 1e9 if m else 0.0


def cpu_flags():
    """The SIMD extensions of this CPU that the engines may use, from /proc/cpuinfo."""
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    return [x for x in ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                        "amx_bf16", "amx_int8") if x in flags]


def cpu_model():
    with open("/proc/cpuinfo") as f:
        return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown")


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_ftx_generate(ftx, model, csv, threads, flags, new_tokens):
    """One `ftx generate` on the prompts of `csv` (one comma-separated id row per prompt, all in one
    batch), greedy, `new_tokens` each (end_id banned by --min-length). Returns a dict with
    decode_ms (per step, prefill excluded), prefill_ms, rss (bytes), onednn (the implementations
    oneDNN ran, with its ISA) and ids (each row's new tokens); or an error line."""
    out = csv + ".out.jsonl"
    cmd = ["/usr/bin/time", "-f", "RSS %M", ftx, "generate", "-m", model, "--input-ids", csv, "--max-new-tokens",
           str(new_tokens), "--min-length", str(new_tokens), "--output", out, "--threads", str(threads),
           "--batch-size", str(sum(1 for _ in open(csv))), "--force", *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, ONEDNN_VERBOSE="1"))
    if r.returncode != 0:
        lines = [l for l in r.stderr.strip().splitlines() if not l.startswith(("Command exited", "RSS "))]
        return (lines or ["failed"])[-1]
    m = re.search(r"in ([0-9.]+) s.*?prefill ([0-9.]+) ms.*?(\d+) steps", r.stderr)
    total, prefill, steps = float(m.group(1)), float(m.group(2)) / 1e3, int(m.group(3))
    rss = int(re.search(r"RSS (\d+)", r.stderr).group(1)) * 1024
    # onednn_verbose,exec,cpu,matmul,<impl>,... : brgemm implementations name their ISA
    # (brg:avx512_core_bf16, ..._amx); "info,cpu,isa:" gives the most oneDNN dispatches to here.
    impls = sorted({l.split(",")[4] for l in r.stdout.splitlines() if l.startswith("onednn_verbose,exec,")})
    isa = [l.split("isa:", 1)[1].strip() for l in r.stdout.splitlines() if ",info,cpu,isa:" in l]
    if impls and isa:
        impls.append(f"(oneDNN ISA: {isa[0]})")
    rows = [json.loads(l) for l in open(out)]
    ids = [row.get("output_ids", row.get("ids")) for row in rows]
    return dict(decode_ms=(total - prefill) / max(steps - 1, 1) * 1e3, prefill_ms=prefill * 1e3, rss=rss, onednn=impls,
                ids=ids)
