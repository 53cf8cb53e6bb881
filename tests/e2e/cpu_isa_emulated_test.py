#!/usr/bin/python3
"""ftx on a CPU that has AVX2, FMA and F16C but no AVX-512 at all (issue 40), emulated by qemu-user.

qemu-x86_64 -cpu EPYC-Milan runs the x86-64 binaries on a software CPU whose CPUID is an AMD Zen 3's:
ftx, OpenBLAS and oneDNN then find no AVX-512 and choose their AVX2 paths themselves, as on a user's
machine, with no FTX_CPU_ISA cap involved. Checked there:
  - `ftx --version` reports the avx2 level, not capped;
  - the kernel tests that failed on a real Zen 3 (rows independent of the rows beside them for
    fp32, fp16, bf16 and int8 in a bf16 model; the INT8 KV attention equal to fp32 attention over
    the dequantised values) and the W8A8 int8 product;
  - `ftx generate` on the engine fixtures: fp32 greedy equal to the float64 reference, --dtype
    bf16 and fp16 (which failed: "oneDNN: no bf16 matmul") equal to the float64 emulation's greedy
    tokens, weight-only INT8 equal to its emulation, and a batch equal to its prompts one by one.
Slow (every instruction emulated): only the tests named here, on the smallest fixtures.

Usage: cpu_isa_emulated_test.py QEMU CPU_HALF_GEMM_TEST KV_CACHE_INT8_TEST W8A8_GEMM_TEST
Exit 77 (skipped) when qemu cannot run ftx here. Environment: FTX_BIN, FTX_FIXTURES.
"""
import json
import os
import subprocess
import sys
import tempfile

from e2e_util import check, finish

QEMU, HALF_GEMM, KV_INT8, W8A8 = sys.argv[1:5]
CPU = ["-cpu", "EPYC-Milan"]
FTX = os.environ["FTX_BIN"]
FIX = os.path.join(os.environ["FTX_FIXTURES"], "engine")
# Without the cap variables of the capped runs: the emulated CPU alone decides.
ENV = {k: v for k, v in os.environ.items() if k not in ("FTX_CPU_ISA", "OPENBLAS_CORETYPE")}


def emulated(args, timeout=900):
    return subprocess.run([QEMU, *CPU, *args], capture_output=True, text=True, env=ENV, timeout=timeout)


def main():
    r = emulated([FTX, "--version"], timeout=120)
    if r.returncode != 0 or "cpu kernels:" not in r.stdout:
        print(f"skipped: qemu could not run ftx here (exit {r.returncode}): {r.stderr.strip()[-300:]}")
        sys.exit(77)
    level = r.stdout.split("cpu kernels:")[1].strip()
    check(level == "avx2", f"the emulated Zen 3 runs the avx2 level, not capped; ftx says {level!r}")

    gtests = [(HALF_GEMM, "*RowResults*:Int8Bf16*:*PanelWidth*"), (KV_INT8, "KvInt8.Attention*"), (W8A8, "*")]
    for binary, filt in gtests:
        r = emulated([binary, f"--gtest_filter={filt}"])
        tail = [l for l in r.stdout.splitlines() if "FAILED" in l or "Failure" in l or "PASSED" in l]
        check(r.returncode == 0, f"{os.path.basename(binary)} {filt} on the emulated CPU: " + " | ".join(tail[-8:]))
        print(os.path.basename(binary), filt, "->", tail[-1] if tail else r.stdout[-200:])

    with tempfile.TemporaryDirectory() as tmp:
        for model in ("gpt2", "gptj"):
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
            for extra, name, want in cases:
                got = generate(extra, name)
                if got is not None:
                    check(got == want, f"{model} {name} on the emulated CPU: {got} != reference {want}")
            one = generate(["--dtype", "bf16", "--batch-size", "1"], "bf16-one")
            batch = generate(["--dtype", "bf16"], "bf16-again")
            if one is not None and batch is not None:
                check(one == batch, f"{model} bf16: prompts one by one {one} != one batch {batch}")
    finish("cpu_isa_emulated_avx2")


if __name__ == "__main__":
    main()
