#!/usr/bin/python3
"""`ftx convert-megatron` on Megatron-DeepSpeed MoE GPT checkpoints (issue 51, FT's GPT-MoE layout).

Modes (one ctest entry each; fixtures by scripts/fixtures/make_moe_fixtures.py):
  compat   against scripts/reference/ft_moe_converter_ref.py (FT's megatron_gpt_moe_ckpt_convert.py
           transcribed): the same .bin files with identical bytes, every config.ini key of its [gpt]
           and [structure] sections in ftx's with an equal value, args.txt identical; for T in {1,2,4}
           x {fp32, fp16} on a TP-1 fp32 and a TP-2 fp16 (fp32 gate) checkpoint (so TP merge and split).
  folder   the converted folders: `ftx inspect --verify` accepts them; the engine's logits along the
           greedy paths of a float64 forward of the DeepSpeed checkpoint itself
           (tests/reference/deepspeed_moe_reference.py) within 1e-4 of the row's largest logit, at TP 1
           and under `mpirun -np 2` at TP 2 (tests/unit/convert_arch_test.cc's ArchEngine.LogitsMatchReference).
  latest   DeepSpeed's save folder read through its `latest` file as its tag folder.
  errors   what FT's script cannot read or ftx cannot represent: one `ftx: error:` line naming it,
           non-zero exit, no N-gpu/ folder left.
"""
import configparser
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import mpirun  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.path.join(os.environ["FTX_FIXTURES"], "moe")
SRC = os.environ["FTX_SOURCE_DIR"]
REF = os.path.join(SRC, "scripts", "reference", "ft_moe_converter_ref.py")
PY = sys.executable
ENGINE_TEST = os.environ.get("FTX_ARCH_ENGINE_TEST", "")
PROMPTS = [[5, 17, 3, 42, 8], [60, 1, 33, 9, 27, 11, 50]]
STEPS = 6
FAILS = []


def fail(msg):
    print("FAIL:", msg)
    FAILS.append(msg)


def fixtures():
    with open(os.path.join(FIX, "fixtures.json")) as f:
        return json.load(f)


def convert(src, out, T=1, dt="fp32"):
    return subprocess.run([FTX, "convert-megatron", "-i", src, "-o", out, "-g", str(T), "-t", dt, "--quiet"],
                          capture_output=True, text=True)


def read_ini(path):
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(path)
    return cp


def same_value(a, b):
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return a.lower() == b.lower()


def test_compat_ft_gpt_moe_byte_equal():
    for fx in fixtures():
        for T in (1, 2, 4):
            for dt in ("fp32", "fp16"):
                tag = f"{fx['name']} T={T} {dt}"
                with tempfile.TemporaryDirectory() as tmp:
                    a, b = os.path.join(tmp, "ftx"), os.path.join(tmp, "ref")
                    r = convert(fx["src"], a, T, dt)
                    if r.returncode != 0:
                        fail(f"{tag}: ftx failed: {r.stderr.strip()}")
                        continue
                    rr = subprocess.run([PY, REF, "-i", fx["src"], "-o", b, "-g", str(T), "-t", dt],
                                        capture_output=True, text=True)
                    if rr.returncode != 0:
                        fail(f"{tag}: reference failed: {rr.stderr.strip()[-500:]}")
                        continue
                    da, db = os.path.join(a, f"{T}-gpu"), os.path.join(b, f"{T}-gpu")
                    ba = {f for f in os.listdir(da) if f.endswith(".bin")}
                    bb = {f for f in os.listdir(db) if f.endswith(".bin")}
                    if ba != bb:
                        fail(f"{tag}: file sets differ: only ftx {sorted(ba - bb)[:5]}, only ref {sorted(bb - ba)[:5]}")
                    same = 0
                    for f in sorted(ba & bb):
                        if open(os.path.join(da, f), "rb").read() != open(os.path.join(db, f), "rb").read():
                            fail(f"{tag}: {f} differs from the reference")
                        else:
                            same += 1
                    experts = [f for f in bb if ".mlp.moe." in f]
                    if not experts:
                        fail(f"{tag}: the reference wrote no MoE files")
                    ca, cb = read_ini(os.path.join(da, "config.ini")), read_ini(os.path.join(db, "config.ini"))
                    for sec in ("gpt", "structure"):
                        for k, v in cb[sec].items():
                            if not ca.has_section(sec) or k not in ca[sec]:
                                fail(f"{tag}: config.ini [{sec}] lacks {k}")
                            elif not same_value(ca[sec][k], v):
                                fail(f"{tag}: config.ini [{sec}] {k} = {ca[sec][k]}, reference {v}")
                    # ftx's own keys: the trained top-k and DeepSpeed's gate rule (top-1 as it is,
                    # top-2 renormalised), which FT leaves to the run.
                    for sec, keys in fx["expect"].items():
                        for k, v in keys.items():
                            got = ca[sec].get(k, "<absent>") if ca.has_section(sec) else "<absent>"
                            if not same_value(got, str(v)):
                                fail(f"{tag}: config.ini [{sec}] {k} = {got}, expected {v}")
                    if open(os.path.join(da, "args.txt")).read() != open(os.path.join(db, "args.txt")).read():
                        fail(f"{tag}: args.txt differs from the reference")
                    print(f"ok   compat {tag}: {same} files identical ({len(experts)} MoE files)")


def test_folder_inspect_and_logits():
    """inspect --verify accepts the folders; the engine's logits along the float64 reference's greedy
    paths (tests/reference/deepspeed_moe_reference.py, read from the DeepSpeed checkpoint itself)
    within 1e-4 of the row's largest logit, at TP 1 and under `mpirun -np 2` at TP 2, for top-2
    (moe_tp1) and top-1 (moe_tp2_fp16, converted to fp32 so both sides hold the same weights)."""
    sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
    from deepspeed_moe_reference import expected  # noqa: E402
    tmp = tempfile.mkdtemp(prefix="ftx-moe-")
    try:
        dirs = []
        for fx in fixtures():
            d = os.path.join(tmp, fx["name"])
            os.makedirs(d)
            with open(os.path.join(d, "expected.json"), "w") as f:
                json.dump(expected(fx["src"], PROMPTS, STEPS), f)
            for T in (1, 2):
                r = convert(fx["src"], os.path.join(d, "ft"), T, "fp32")
                if r.returncode != 0:
                    fail(f"{fx['name']}: convert T={T} failed: {r.stderr}")
                    return
                v = subprocess.run([FTX, "inspect", "--verify", os.path.join(d, "ft", f"{T}-gpu")],
                                   capture_output=True, text=True)
                if v.returncode != 0:
                    fail(f"inspect --verify refused {fx['name']} T={T}: {v.stdout[-400:]} {v.stderr[-400:]}")
                else:
                    print(f"ok   folder inspect --verify accepts {fx['name']} T={T}")
            dirs.append(d)
        if not ENGINE_TEST:
            fail("FTX_ARCH_ENGINE_TEST is not set")
            return
        for T in (1, 2):
            cmd = (mpirun(T) if T > 1 else []) + [ENGINE_TEST, "--gtest_filter=ArchEngine.LogitsMatchReference"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                               env=dict(os.environ, FTX_ARCH_MODELS=",".join(dirs), OMP_NUM_THREADS="1"))
            if r.returncode != 0 or "PASSED" not in r.stdout:
                fail(f"logits at TP {T}: {(r.stdout + r.stderr)[-1500:]}")
            else:
                print(f"ok   folder logits within 1e-4 of the float64 DeepSpeed forward at TP {T} ({len(dirs)} models)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_latest_names_the_tag_folder():
    fx = fixtures()[0]
    with tempfile.TemporaryDirectory() as tmp:
        if convert(fx["src"], tmp, 1).returncode != 0:
            fail("convert T=1 failed")
            return
        save = os.path.join(tmp, "save")
        os.makedirs(save)
        os.symlink(fx["src"], os.path.join(save, "global_step10"))
        with open(os.path.join(save, "latest"), "w") as f:
            f.write("global_step10")
        r = convert(save, os.path.join(tmp, "via_latest"), 1)
        name = "model.layers.1.mlp.moe.experts.dense_h_to_4h.weight.0.bin"
        if r.returncode != 0 or open(os.path.join(tmp, "via_latest", "1-gpu", name), "rb").read() \
                != open(os.path.join(tmp, "1-gpu", name), "rb").read():
            fail(f"the save folder with `latest` did not convert as its tag folder: {r.stderr}")
        else:
            print("ok   latest: a save folder's `latest` names the tag folder")


def expect_error(tag, src, needle, T=1):
    with tempfile.TemporaryDirectory() as out:
        r = convert(src, out, T)
        lines = [l for l in r.stderr.strip().splitlines() if l]
        if r.returncode == 0:
            fail(f"{tag}: exit 0, expected an error")
        elif len(lines) != 1 or not lines[0].startswith("ftx: error:"):
            fail(f"{tag}: expected one `ftx: error:` line, got {r.stderr!r}")
        elif needle.lower() not in lines[0].lower():
            fail(f"{tag}: message {lines[0]!r} does not mention {needle!r}")
        else:
            print(f"ok   errors {tag}: {lines[0]}")
        if os.listdir(out):
            fail(f"{tag}: left {os.listdir(out)} behind")


def test_errors_refused_by_name():
    bad = os.path.join(FIX, "bad")
    expect_error("top-k 3", os.path.join(bad, "top3"), "args.topk = 3")
    expect_error("expert tensor parallelism", os.path.join(bad, "expert_tp"), "enable_expert_tensor_parallelism")
    expect_error("residual MoE", os.path.join(bad, "residual"), "mlp_type = residual")
    expect_error("missing expert file", os.path.join(bad, "no_expert"), "layer_1_expert_2_mp_rank_00_model_states.pt")
    expect_error("pipelined expert files", os.path.join(bad, "expert_pp"), "layer_0_expert_0_mp_rank_00_000_model_states.pt")
    expect_error("T=3 does not divide the heads", fixtures()[0]["src"], "divisible", T=3)


def main():
    {"compat": test_compat_ft_gpt_moe_byte_equal, "folder": test_folder_inspect_and_logits,
     "latest": test_latest_names_the_tag_folder, "errors": test_errors_refused_by_name}[sys.argv[1]]()
    if FAILS:
        print(f"{len(FAILS)} failure(s)")
        sys.exit(1)


if __name__ == "__main__":
    main()
