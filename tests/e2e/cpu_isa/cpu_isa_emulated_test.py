#!/usr/bin/python3
"""ftx on CPUs that lack the instructions of the levels above one (issue 40), emulated by qemu-user.

qemu-x86_64 -cpu MODEL runs the x86-64 binaries on a software CPU whose CPUID is that model's:
ftx, OpenBLAS and oneDNN then choose their paths themselves, as on a user's machine, with no
FTX_CPU_ISA cap involved.
  avx2:     -cpu EPYC-Milan, an AMD Zen 3: AVX2, FMA and F16C, no AVX-512 at all;
  baseline: -cpu Nehalem, an Intel Core i7 of 2008: SSE4.2, no AVX.
Checked there:
  - `ftx --version` reports the level, not capped;
  - kernel tests (the ones that failed on a real Zen 3: rows independent of the rows beside them
    for fp32, fp16, bf16 and int8 in a bf16 model, the INT8 KV attention equal to fp32 attention over
    the dequantised values; the W8A8 int8 product; at baseline also the activations, norms,
    roundings, the FP8 GEMM and the engine's ops; at both the op suite's CPU instances,
    backend_ops_test), each binary also checking that its kernels,
    OpenBLAS and oneDNN ran at the level (FTX_TEST_ISA, tests/unit/cpu_isa_reached.cc), with no test
    skipped;
  - `ftx generate` on the engine fixtures: fp32 greedy equal to the float64 reference, --dtype
    bf16 and fp16 (which failed on Zen 3: "oneDNN: no bf16 matmul") equal to the float64
    emulation's greedy tokens, weight-only INT8 equal to its emulation, and a batch equal to its
    prompts one by one.
Slow (every instruction emulated): only the tests named here, on the smallest fixtures.

Usage: cpu_isa_emulated_test.py LEVEL QEMU NAME=GTEST_BINARY...
Exit 77 (skipped) when qemu is missing or cannot run ftx here (scripts/test fails on that skip).
Environment: FTX_BIN, FTX_FIXTURES.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, finish  # noqa: E402

# level -> (qemu CPU model, gtest binary -> filter, engine fixtures for `ftx generate`)
LEVELS = {
    "avx2": ("EPYC-Milan",
             {"cpu_half_gemm_test": "*RowResults*:Int8Bf16*:*PanelWidth*", "kv_cache_int8_test": "KvInt8.Attention*",
              "w8a8_gemm_test": "*", "backend_ops_test": "-*/cuda"},
             ("gpt2", "gptj")),
    "baseline": ("Nehalem",
                 {"cpu_half_gemm_test": "*RowResults*:Int8Bf16*:*PanelWidth*", "kv_cache_int8_test": "KvInt8.Attention*",
                  "w8a8_gemm_test": "*", "cpu_activation_test": "*", "cpu_rms_norm_test": "*",
                  "half_rounding_test": "*", "cpu_fp8_gemm_test": "*", "engine_ops_test": "*",
                  "backend_ops_test": "-*/cuda"},
                 ("gpt2", "gptj")),
}

LEVEL, QEMU = sys.argv[1:3]
BINARIES = dict(a.split("=", 1) for a in sys.argv[3:])
MODEL, GTESTS, MODELS = LEVELS[LEVEL]
FTX = os.environ["FTX_BIN"]
FIX = os.path.join(os.environ["FTX_FIXTURES"], "engine")
# Without the cap variables of the capped runs: the emulated CPU alone decides.
ENV = {k: v for k, v in os.environ.items() if k not in ("FTX_CPU_ISA", "OPENBLAS_CORETYPE")}


def emulated(args, timeout=900, env=ENV):
    return subprocess.run([QEMU, "-cpu", MODEL, *args], capture_output=True, text=True, env=env, timeout=timeout)


def skip(why):
    print(f"skipped: {why}")
    sys.exit(77)


def main():
    if not os.access(QEMU, os.X_OK):
        skip(f"no qemu-x86_64 ({QEMU!r}); scripts/setup installs qemu-user")
    r = emulated([FTX, "--version"], timeout=120)
    if r.returncode != 0 or "cpu kernels:" not in r.stdout:
        skip(f"qemu could not run ftx here (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    level = r.stdout.split("cpu kernels:")[1].strip()
    check(level == LEVEL, f"the emulated {MODEL} runs the {LEVEL} level, not capped; ftx says {level!r}")

    for name, filt in GTESTS.items():
        r = emulated([BINARIES[name], f"--gtest_filter={filt}"], env=dict(ENV, FTX_TEST_ISA=LEVEL))
        lines = r.stdout.splitlines()
        tail = [l for l in lines if "FAILED" in l or "Failure" in l or "PASSED" in l or "SKIPPED" in l]
        check(r.returncode == 0, f"{name} {filt} on the emulated {MODEL}: " + " | ".join(tail[-8:]) + r.stderr[-500:])
        check(not any(l.startswith("[  SKIPPED ]") for l in lines), f"{name} {filt} skipped tests: {tail}")
        print(name, filt, "->", tail[-1] if tail else r.stdout[-200:])

    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            exp = json.load(open(os.path.join(FIX, model, "expected.json")))
            folder = os.path.join(FIX, model, "1-gpu")
            csv = os.path.join(FIX, model, "start_ids.csv")

            def generate(extra, name):
                out = os.path.join(tmp, f"{model}-{name}.jsonl")
                r = emulated([FTX, "generate", "-m", folder, "--input-ids", csv, "--max-new-tokens", "6",
                              "--output", out, "--force", "--quiet", *extra])
                if not check(r.returncode == 0, f"{model} {name}: exit {r.returncode}: {r.stderr.strip()[-300:]}"):
                    return None
                return [json.loads(l)["output_ids"] for l in open(out)]

            cases = [([], "fp32", exp["greedy"]),
                     (["--dtype", "bf16"], "bf16", exp["half_weights"]["bf16"]["greedy"]),
                     (["--dtype", "fp16"], "fp16", exp["half_weights"]["fp16"]["greedy"]),
                     (["--int8-mode", "1"], "int8", exp["int8_weight_only"]["tp1"]["greedy"])]
            got = {}
            for extra, name, want in cases:
                got[name] = generate(extra, name)
                if got[name] is not None:
                    check(got[name] == want, f"{model} {name} on the emulated {MODEL}: {got[name]} != reference {want}")
            one = generate(["--dtype", "bf16", "--batch-size", "1"], "bf16-one")
            if one is not None and got["bf16"] is not None:
                check(one == got["bf16"], f"{model} bf16: prompts one by one {one} != one batch {got['bf16']}")
    finish(f"cpu_isa_emulated_{LEVEL}")


if __name__ == "__main__":
    main()
