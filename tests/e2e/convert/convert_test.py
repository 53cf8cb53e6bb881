#!/usr/bin/python3
"""End-to-end tests of `ftx convert-megatron|convert-nemo|convert-hf`.

Modes (one ctest entry each):
  compat KIND   byte compatibility with scripts/reference/ft_converters_ref.py (written from the spec):
                every .bin the reference writes exists in ftx's output with identical bytes, ftx
                writes no .bin the reference does not, and every config.ini key the reference writes
                is in ftx's config.ini with an equal value (numbers compared numerically). Megatron:
                args.txt identical. Checked for T in {1,2,4} x fp32, T=2 fp16, T=1 bf16, for every
                fixture of that converter (QKV v0/v1/v2/v3 incl. ftx's v1/v2 fix, TP merge and split,
                PP 2 with mp_rank_XX_YYY and tp_rank_XX_pp_rank_YYY, zip and legacy torch files,
                .nemo tar / tar.gz / folder, swiglu gate, layernorm1p, rope, no bias, output_layer,
                HF bin/legacy/safetensors/sharded/fp16/untied, StarCoder and SantaCoder MQA).
                Also checks manifest.json: every file listed with its shape, dtype and crc32.
  roundtrip     every fixture converted for T in {1,2,4} and fp32/fp16/bf16; the per-rank files
                are reassembled (QKV [H,3,H/T] blocks, MQA [Q_r | K | V], column/row splits) and
                compared to truth.pt, the unsplit FT-layout tensors computed by the fixture maker
                from the logical model: exact for fp32, exact against truth rounded to fp16/bf16.
  errors        bad inputs: one-line `ftx: error:` message, non-zero exit, no N-gpu/ folder left.
"""
import configparser
import json
import os
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import torch

FTX = os.environ["FTX_BIN"]
FIX = os.path.join(os.environ["FTX_FIXTURES"], "convert")
SRC = os.environ["FTX_SOURCE_DIR"]
REF = os.path.join(SRC, "scripts", "reference", "ft_converters_ref.py")
PY = os.environ.get("FTX_TORCH_PYTHON", "/usr/bin/python3")
FAILS = []


def fail(msg):
    print("FAIL:", msg)
    FAILS.append(msg)


def fixtures():
    with open(os.path.join(FIX, "fixtures.json")) as f:
        return json.load(f)


def ftx_convert(fx, out, T, dt, extra=()):
    cmd = [FTX, f"convert-{fx['converter']}", "-i", fx["src"], "-o", out, "-g", str(T), "-t", dt, "--quiet"]
    cmd += fx["flags"] + list(extra)
    return subprocess.run(cmd, capture_output=True, text=True)


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


def check_manifest(d):
    man = json.load(open(os.path.join(d, "manifest.json")))
    listed = {f["file"]: f for f in man["files"]}
    bins = {f for f in os.listdir(d) if f.endswith(".bin")}
    if set(listed) != bins:
        fail(f"{d}: manifest lists {sorted(set(listed) ^ bins)} differently from the folder")
    for name, f in listed.items():
        data = open(os.path.join(d, name), "rb").read()
        if zlib.crc32(data) != f["crc32"] or len(data) != f["bytes"]:
            fail(f"{d}/{name}: crc32/size does not match manifest")
        elem = {"float32": 4, "float16": 2, "bfloat16": 2}[f["dtype"]]
        if int(np.prod(f["shape"])) * elem != len(data):
            fail(f"{d}/{name}: manifest shape {f['shape']} does not match {len(data)} bytes")


def compat(kind):
    fxs = [f for f in fixtures() if f["converter"] == kind]
    assert fxs, kind
    for fx in fxs:
        for T, dt in [(1, "fp32"), (2, "fp32"), (4, "fp32"), (2, "fp16"), (1, "bf16")]:
            tag = f"{fx['name']} T={T} {dt}"
            with tempfile.TemporaryDirectory() as tmp:
                a, b = os.path.join(tmp, "ftx"), os.path.join(tmp, "ref")
                r = ftx_convert(fx, a, T, dt)
                if r.returncode != 0:
                    fail(f"{tag}: ftx failed: {r.stderr.strip()}")
                    continue
                ref = [PY, REF, kind, "-i", fx["src"], "-o", b, "-g", str(T), "-t", dt] + fx["flags"]
                rr = subprocess.run(ref, capture_output=True, text=True)
                if rr.returncode != 0:
                    fail(f"{tag}: reference failed: {rr.stderr.strip()[-500:]}")
                    continue
                da, db = os.path.join(a, f"{T}-gpu"), os.path.join(b, f"{T}-gpu")
                ba = {f for f in os.listdir(da) if f.endswith(".bin")}
                bb = {f for f in os.listdir(db) if f.endswith(".bin")}
                if ba != bb:
                    fail(f"{tag}: file sets differ: only ftx {sorted(ba - bb)[:5]}, only ref {sorted(bb - ba)[:5]}")
                for f in sorted(ba & bb):
                    if open(os.path.join(da, f), "rb").read() != open(os.path.join(db, f), "rb").read():
                        fail(f"{tag}: {f} differs from the reference")
                ca, cb = read_ini(os.path.join(da, "config.ini")), read_ini(os.path.join(db, "config.ini"))
                for k, v in cb["gpt"].items():
                    if k not in ca["gpt"]:
                        fail(f"{tag}: config.ini lacks {k}")
                    elif not same_value(ca["gpt"][k], v):
                        fail(f"{tag}: config.ini {k} = {ca['gpt'][k]}, reference {v}")
                for k, v in fx["expect"].items():
                    if not same_value(ca["gpt"].get(k, "<absent>"), str(v)):
                        fail(f"{tag}: config.ini {k} = {ca['gpt'].get(k)}, expected {v}")
                if os.path.exists(os.path.join(db, "args.txt")):
                    if open(os.path.join(da, "args.txt")).read() != open(os.path.join(db, "args.txt")).read():
                        fail(f"{tag}: args.txt differs from the reference")
                check_manifest(da)
            print(f"ok   compat {tag}")


def load_bin(path, dt, shape):
    raw = np.fromfile(path, dtype={"fp32": np.float32, "fp16": np.float16, "bf16": np.int16}[dt])
    t = torch.from_numpy(raw.copy())
    t = t.view(torch.bfloat16).float() if dt == "bf16" else t.float()
    return t.reshape(shape)


def reassemble(d, name, truth, T, dt, mqa, H, D):
    """Rebuilds the unsplit tensor `name` from files in d."""
    full = truth.shape
    single = os.path.join(d, name + ".bin")
    if os.path.exists(single):
        return load_bin(single, dt, full)
    parts = []
    is_qkv = "query_key_value" in name
    is_row = name.endswith("dense.weight") and "attention" in name or name.endswith("dense_4h_to_h.weight")
    for r in range(T):
        p = os.path.join(d, f"{name}.{r}.bin")
        if not os.path.exists(p):
            raise FileNotFoundError(p)
        if is_row:
            shape = (full[0] // T,) + tuple(full[1:])
        elif is_qkv and mqa:
            shape = tuple(full[:-1]) + (H // T + 2 * D,)
        else:
            shape = tuple(full[:-1]) + (full[-1] // T,)
        parts.append(load_bin(p, dt, shape))
    if is_row:
        return torch.cat(parts, 0)
    if is_qkv and mqa:
        qs = [p[..., :H // T] for p in parts]
        return torch.cat(qs + [parts[0][..., H // T:]], -1)
    if is_qkv:
        parts = [p.reshape(*p.shape[:-1], 3, -1) for p in parts]
        return torch.cat(parts, -1).reshape(full)
    return torch.cat(parts, -1)


def roundtrip():
    for fx in fixtures():
        truth = torch.load(os.path.join(os.path.dirname(fx["src"].rstrip("/")) if fx["converter"] != "megatron"
                                        else fx["src"].split("/release")[0], "truth.pt"))
        for T in (1, 2, 4):
            for dt in ("fp32", "fp16", "bf16"):
                tag = f"{fx['name']} T={T} {dt}"
                with tempfile.TemporaryDirectory() as tmp:
                    r = ftx_convert(fx, tmp, T, dt)
                    if r.returncode != 0:
                        fail(f"{tag}: ftx failed: {r.stderr.strip()}")
                        continue
                    d = os.path.join(tmp, f"{T}-gpu")
                    bins = {f for f in os.listdir(d) if f.endswith(".bin")}
                    used = set()
                    for name, t in truth.items():
                        try:
                            got = reassemble(d, name, t, T, dt, fx.get("mqa", False), 32, 8)
                        except FileNotFoundError as e:
                            fail(f"{tag}: missing {e}")
                            continue
                        want = {"fp32": t.float(), "fp16": t.half().float(), "bf16": t.bfloat16().float()}[dt]
                        if not torch.equal(got, want):
                            fail(f"{tag}: {name} differs from the source (max |d| {(got - want).abs().max():.3g})")
                        used |= {f for f in bins if f == name + ".bin" or f.startswith(name + ".") and
                                 f[len(name) + 1:-4].isdigit()}
                    extra = bins - used
                    if extra:
                        fail(f"{tag}: files not in the source model: {sorted(extra)[:5]}")
                print(f"ok   roundtrip {tag}")


def expect_error(tag, cmd, needle, out):
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in r.stderr.strip().splitlines() if l]
    if r.returncode == 0:
        fail(f"{tag}: exit 0, expected an error")
    elif len(lines) != 1 or not lines[0].startswith("ftx: error:"):
        fail(f"{tag}: expected one `ftx: error:` line, got {r.stderr!r}")
    elif needle.lower() not in lines[0].lower():
        fail(f"{tag}: message {lines[0]!r} does not mention {needle!r}")
    leftovers = [f for f in os.listdir(out) if f.endswith("-gpu") and os.path.exists(os.path.join(out, f, "config.ini"))] \
        if os.path.isdir(out) else []
    if leftovers and "existing" not in tag:
        fail(f"{tag}: left {leftovers} behind")
    print(f"ok   errors {tag}: {lines[0] if lines else ''}")


def errors():
    bad = os.path.join(FIX, "bad")
    fx = {f["name"]: f for f in fixtures()}
    with tempfile.TemporaryDirectory() as tmp:
        def conv(kind, src, T=1, *extra):
            return [FTX, f"convert-{kind}", "-i", src, "-o", tmp, "-g", str(T), "--quiet"] + list(extra)
        expect_error("heads not divisible", conv("megatron", fx["meg_v3_tp1"]["src"], 3), "divisible", tmp)
        expect_error("ffn not divisible", conv("hf", os.path.join(bad, "bad_ffn", "model"), 4), "inter_size", tmp)
        expect_error("missing mp_rank", conv("megatron", os.path.join(bad, "missing_rank"), 1), "mp_rank_01", tmp)
        expect_error("shards disagree", conv("megatron", os.path.join(bad, "shape_mismatch"), 1), "disagree", tmp)
        expect_error("unknown model_type", conv("hf", os.path.join(bad, "unknown_type", "model")), "gpt_bigcode", tmp)
        expect_error("config/weights mismatch", conv("hf", os.path.join(bad, "config_mismatch", "model")), "mismatch", tmp)
        expect_error("v0 without --head-num", conv("megatron", fx["meg_v0_tp2_legacy"]["src"]), "--", tmp)
        expect_error("bad dtype", conv("hf", fx["hf_gpt2_bin"]["src"], 1, "-t", "int8"), "fp32", tmp)
        # Existing output: kept, error without --force, replaced with it.
        ok = subprocess.run(conv("hf", fx["hf_gpt2_bin"]["src"]), capture_output=True, text=True)
        if ok.returncode != 0:
            fail(f"first conversion failed: {ok.stderr}")
        marker = os.path.join(tmp, "1-gpu", "config.ini")
        before = open(marker).read()
        expect_error("existing output", conv("hf", fx["hf_starcoder"]["src"]), "exist", tmp)
        if open(marker).read() != before:
            fail("existing output was modified without --force")
        r = subprocess.run(conv("hf", fx["hf_starcoder"]["src"], 1, "--force"), capture_output=True, text=True)
        if r.returncode != 0 or "multi_query_mode = True" not in open(marker).read():
            fail(f"--force did not replace the output: {r.stderr}")
        if [f for f in os.listdir(tmp) if f.startswith(".")]:
            fail(f"temporary folders left: {os.listdir(tmp)}")
    # Full disk: a 64 KiB tmpfs (needs root and mount permission).
    mnt = tempfile.mkdtemp()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt], capture_output=True).returncode != 0:
        print("skip errors full disk: cannot mount a tmpfs here")
    else:
        try:
            expect_error("full disk", [FTX, "convert-megatron", "-i", fx["meg_v3_tp1"]["src"], "-o", mnt, "--quiet"],
                         "space", mnt)
            left = os.listdir(mnt)
            if left:
                fail(f"full disk: left {left} behind")
        finally:
            subprocess.run(["umount", mnt])
            os.rmdir(mnt)


def main():
    mode = sys.argv[1]
    if mode == "compat":
        compat(sys.argv[2])
    elif mode == "roundtrip":
        roundtrip()
    elif mode == "errors":
        errors()
    if FAILS:
        print(f"{len(FAILS)} failure(s)")
        sys.exit(1)
    print("all ok")


if __name__ == "__main__":
    main()
