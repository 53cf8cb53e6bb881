#!/usr/bin/env python3
"""`ftx inspect --stats --json` against torch's own listing, for every kind of input ftx reads.

Each fixture is written here by the real producer (torch.save zip and legacy, tarfile for .nemo,
numpy for .npy, the safetensors layout written from its spec), then listed twice: by torch/numpy
(names, dtypes, shapes, float64 sums) and by ftx. Names, dtypes and shapes must match exactly; min
and max exactly; sum and abs_sum to 1e-12 relative to abs_sum (torch sums pairwise, ftx
sequentially, both in float64). Then bad inputs at the command line: one line `ftx: error: <file>:
...`, exit code 1, and for a pickle that asks for os.system, no side effect.
"""
import argparse
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import zipfile
from collections import OrderedDict

import numpy as np
import torch

FTX = os.environ["FTX_BIN"]
SRC = os.environ["FTX_SOURCE_DIR"]
OUT = os.path.join(os.environ["FTX_FIXTURES"], "inspect")


def flatten(obj, prefix=""):
    """Tensor leaves of nested dicts/lists, keys joined with '.' (ftx's naming)."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}.{i}" if prefix else str(i))


def torch_entry(name, t):
    d = t.to(torch.float64) if t.dtype != torch.bool else t.to(torch.float64)
    return {"name": name, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "sum": float(d.sum()), "abs_sum": float(d.abs().sum()),
            "min": float(d.min()) if t.numel() else 0.0, "max": float(d.max()) if t.numel() else 0.0}


def state_dict(seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(6, 8, generator=g)
    big = torch.randn(4, 5, 3, generator=g)
    return OrderedDict([
        ("model", {"language_model": {
            "embedding": {"word_embeddings": {"weight": torch.randn(16, 8, generator=g).half()}},
            "encoder": OrderedDict([
                ("layers.0.input_layernorm.weight", torch.randn(8, generator=g).bfloat16()),
                ("layers.0.attention.query_key_value.weight", w),
                ("layers.0.attention.dense.weight", w.t()),                # non-contiguous view
                ("layers.0.mlp.dense_h_to_4h.weight", w[2:5, 1:7]),        # offset + strides
                ("layers.0.tied", w),                                      # shared storage
                ("layers.0.slice", big[:, 1, ::2]),
            ]),
        }}),
        ("dtypes", {
            "f64": torch.randn(3, generator=g, dtype=torch.float64),
            "i8": torch.randint(-128, 127, (7,), generator=g, dtype=torch.int8),
            "u8": torch.randint(0, 255, (2, 3), generator=g, dtype=torch.uint8),
            "i32": torch.randint(-1000, 1000, (5,), generator=g, dtype=torch.int32),
            "i64": torch.arange(20, dtype=torch.int64)[3:17:2],
            "i16": torch.randint(-1000, 1000, (4,), generator=g, dtype=torch.int16),
            "b": torch.rand(9, generator=g) > 0.5,
            "scalar": torch.tensor(3.5),
            "empty": torch.zeros(0, 4),
        }),
        ("args", argparse.Namespace(hidden_size=8, num_layers=1, tensor_model_parallel_size=1)),
        ("checkpoint_version", 3.0),
        ("iteration", 10),
    ])


def safetensors_bytes(tensors):
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int8: "I8",
             torch.int64: "I64", torch.bool: "BOOL", torch.int32: "I32", torch.float64: "F64"}
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        if t.dtype == torch.bool:
            raw = t.numpy().astype(np.uint8).tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def make_fixtures():
    """Returns [(path, expected entries)]."""
    os.makedirs(OUT, exist_ok=True)
    cases = []
    sd = state_dict(1)
    expected = [torch_entry(n, t) for n, t in flatten(sd)]
    for fmt, kw in (("zip", {}), ("legacy", {"_use_new_zipfile_serialization": False})):
        path = os.path.join(OUT, f"megatron_{fmt}.pt")
        torch.save(sd, path, **kw)
        # Expected listing from torch's own load of the file, not from the object saved.
        loaded = torch.load(path, map_location="cpu")
        cases.append((path, [torch_entry(n, t) for n, t in flatten(loaded)]))
        assert [e["name"] for e in cases[-1][1]] == [e["name"] for e in expected]

    # .nemo: tar and tar.gz, two TP shards inside, './' member prefixes as NeMo writes them.
    shards = []
    for r in range(2):
        g = torch.Generator().manual_seed(10 + r)
        shard = OrderedDict([
            ("model.language_model.embedding.word_embeddings.weight", torch.randn(8, 4, generator=g)),
            ("model.language_model.encoder.layers.0.mlp.dense_h_to_4h.weight", torch.randn(4, 4, generator=g).half()),
        ])
        buf = io.BytesIO()
        torch.save(shard, buf)
        shards.append((f"mp_rank_0{r}/model_weights.ckpt", buf.getvalue()))
    for mode, ext in (("w", "nemo"), ("w:gz", "gz.nemo")):
        path = os.path.join(OUT, f"model.{ext}")
        with tarfile.open(path, mode) as tar:
            for name, data in [("model_config.yaml", b"num_layers: 1\nhidden_size: 4\n")] + shards:
                info = tarfile.TarInfo("./" + name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        exp = []
        for name, data in shards:
            loaded = torch.load(io.BytesIO(data), map_location="cpu")
            exp += [torch_entry(f"{name}:{n}", t) for n, t in flatten(loaded)]
        cases.append((path, exp))

    # safetensors, single file and a sharded HF folder; a sharded pytorch_model.bin folder.
    g = torch.Generator().manual_seed(3)
    st = OrderedDict([("wte.weight", torch.randn(10, 4, generator=g).half()),
                      ("h.0.ln_1.weight", torch.randn(4, generator=g).bfloat16()),
                      ("h.0.attn.c_attn.weight", torch.randn(4, 12, generator=g)),
                      ("h.0.q", torch.randint(-5, 5, (3, 3), generator=g, dtype=torch.int8)),
                      ("mask", torch.rand(5, generator=g) > 0.3)])
    path = os.path.join(OUT, "model.safetensors")
    with open(path, "wb") as f:
        f.write(safetensors_bytes(st))
    cases.append((path, [torch_entry(n, t) for n, t in st.items()]))
    for kind in ("safetensors", "bin"):
        folder = os.path.join(OUT, f"hf_sharded_{kind}")
        os.makedirs(folder, exist_ok=True)
        items = list(st.items())
        parts = [OrderedDict(items[:2]), OrderedDict(items[2:])]
        weight_map = {}
        for i, part in enumerate(parts):
            fname = f"model-0000{i + 1}-of-00002.safetensors" if kind == "safetensors" else \
                f"pytorch_model-0000{i + 1}-of-00002.bin"
            if kind == "safetensors":
                with open(os.path.join(folder, fname), "wb") as f:
                    f.write(safetensors_bytes(part))
            else:
                torch.save(part, os.path.join(folder, fname))
            weight_map.update({n: fname for n in part})
        index = "model.safetensors.index.json" if kind == "safetensors" else "pytorch_model.bin.index.json"
        with open(os.path.join(folder, index), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({"model_type": "gpt2"}, f)
        cases.append((folder, [torch_entry(n, t) for n, t in st.items()]))

    # .npy from numpy itself.
    arr = np.random.default_rng(5).standard_normal((3, 7)).astype(np.float32)
    path = os.path.join(OUT, "prompt_table.npy")
    np.save(path, arr)
    cases.append((path, [torch_entry("prompt_table", torch.from_numpy(arr))]))
    return cases


def ft_folder_case():
    """An FT folder made by `ftx convert-hf` from a tiny GPT-2 written by torch: the .bin files hold no
    shapes, so inspect takes them from config.ini; each must equal its source tensor in torch (Conv1D
    weights are already [in, out]; QKV stays [H, 3H] at TP 1)."""
    src = os.path.join(SRC, "scripts", "make_tiny_gpt2.py")
    hf, ft = os.path.join(OUT, "tiny_hf"), os.path.join(OUT, "tiny_ft")
    subprocess.run([sys.executable, src, hf, "--layers", "1", "--hidden", "16", "--heads", "2", "--positions", "32",
                    "--vocab", "300"], check=True, capture_output=True)
    subprocess.run([FTX, "convert-hf", "-i", hf, "-o", ft, "-g", "1", "--force", "--quiet"], check=True)
    sd = torch.load(os.path.join(hf, "pytorch_model.bin"), map_location="cpu")
    names = {"model.wpe": "wpe.weight", "model.wte": "wte.weight",
             "model.final_layernorm.weight": "ln_f.weight", "model.final_layernorm.bias": "ln_f.bias",
             "model.layers.0.input_layernorm.weight": "h.0.ln_1.weight",
             "model.layers.0.attention.query_key_value.weight.0": "h.0.attn.c_attn.weight",
             "model.layers.0.attention.dense.weight.0": "h.0.attn.c_proj.weight",
             "model.layers.0.mlp.dense_h_to_4h.weight.0": "h.0.mlp.c_fc.weight",
             "model.layers.0.mlp.dense_4h_to_h.weight.0": "h.0.mlp.c_proj.weight"}
    expected = [torch_entry(ft_name, sd["transformer." + hf_name]) for ft_name, hf_name in names.items()]
    return os.path.join(ft, "1-gpu"), expected


def close(a, b, scale):
    return abs(a - b) <= 1e-12 * max(1.0, scale)


def check_listing(path, expected, subset=False):
    out = subprocess.run([FTX, "inspect", "--stats", "--json", path], capture_output=True, text=True)
    if out.returncode != 0:
        return [f"{path}: ftx exited {out.returncode}: {out.stderr.strip()}"]
    got = [json.loads(line) for line in out.stdout.splitlines()]
    if subset:  # only the named tensors, in the expected order
        by_name = {g["name"]: g for g in got}
        got = [by_name.get(e["name"], {"name": "<missing " + e["name"] + ">"}) for e in expected]
    errors = []
    if [g["name"] for g in got] != [e["name"] for e in expected]:
        return [f"{path}: names differ:\n  ftx   {[g['name'] for g in got]}\n  torch {[e['name'] for e in expected]}"]
    for g, e in zip(got, expected):
        for key in ("dtype", "shape", "min", "max"):
            if g[key] != e[key]:
                errors.append(f"{path}: {e['name']}: {key} ftx={g[key]} torch={e[key]}")
        for key in ("sum", "abs_sum"):
            if not close(g[key], e[key], e["abs_sum"]):
                errors.append(f"{path}: {e['name']}: {key} ftx={g[key]!r} torch={e[key]!r}")
    return errors


class SystemCall:
    """Pickles as a call of os.system: loading it with pickle would run the command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def bad_inputs():
    """(path, substring the error must contain, marker file that must not appear)."""
    cases = [(os.path.join(OUT, "does_not_exist.pt"), "does_not_exist.pt", None)]
    good = os.path.join(OUT, "megatron_zip.pt")
    data = open(good, "rb").read()
    trunc = os.path.join(OUT, "truncated.pt")
    with open(trunc, "wb") as f:
        f.write(data[: len(data) // 2])
    cases.append((trunc, "truncated.pt", None))
    marker = os.path.join(OUT, "PWNED")
    evil = os.path.join(OUT, "evil.pt")
    with zipfile.ZipFile(evil, "w", zipfile.ZIP_STORED) as z:
        z.writestr("evil/data.pkl", pickle.dumps({"x": SystemCall(marker)}, protocol=2))
        z.writestr("evil/version", "3\n")
    cases.append((evil, "system", marker))
    junk = os.path.join(OUT, "junk.bin")
    with open(junk, "wb") as f:
        f.write(b"\x00\x01 this is not a checkpoint" * 10)
    cases.append((junk, "unrecognised", None))
    return cases


def main():
    failures = []
    passed = failed = 0
    cases = make_fixtures()
    for path, expected in cases:
        errs = check_listing(path, expected)
        failures += errs
        passed, failed = passed + (not errs), failed + bool(errs)
        print(f"{'FAIL' if errs else 'ok  '} inspect {os.path.basename(path)} ({len(expected)} tensors)")
    path, expected = ft_folder_case()
    errs = check_listing(path, expected, subset=True)
    failures += errs
    passed, failed = passed + (not errs), failed + bool(errs)
    print(f"{'FAIL' if errs else 'ok  '} inspect FT folder {path} ({len(expected)} tensors checked)")
    # A short .bin is named with its size and the size config.ini implies.
    short = os.path.join(path, "model.layers.0.attention.dense.weight.0.bin")
    with open(short, "r+b") as f:
        f.truncate(100)
    bad = [(path, "model.layers.0.attention.dense.weight.0.bin: 100 bytes, expected 1024", None)]
    for path, needle, marker in bad_inputs() + bad:
        if marker and os.path.exists(marker):
            os.remove(marker)
        out = subprocess.run([FTX, "inspect", "--stats", path], capture_output=True, text=True)
        lines = out.stderr.strip().splitlines()
        ok = (out.returncode == 1 and len(lines) == 1 and lines[0].startswith("ftx: error: ")
              and needle in lines[0] and out.stdout == "" and not (marker and os.path.exists(marker)))
        print(f"{'ok  ' if ok else 'FAIL'} bad input {os.path.basename(path)}: {lines[-1] if lines else ''}")
        passed, failed = passed + ok, failed + (not ok)
        if not ok:
            failures.append(f"{path}: exit {out.returncode}, stderr {out.stderr!r}, stdout {out.stdout[:200]!r}")
    for f in failures:
        print(f, file=sys.stderr)
    print(f"{passed} passed, {failed} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
