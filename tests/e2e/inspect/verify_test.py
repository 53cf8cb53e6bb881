#!/usr/bin/python3
"""What loading and `ftx inspect --verify` find wrong in a model folder, each a one-line error
naming the file and the offending key or value.

Parts (argv[1]):
  weights:   NaN/Inf and a zeroed region in weight files: the error at load, inspect --verify and
             inspect --stats; fp32, fp16 and bf16 folders, with and without manifest.json
  configini: config.ini edits through the CLI (the key-by-key walk is the gtest config_ini_check_test)
  records:   `inspect --verify` checks what loading checks: config.ini edits (num_layer, dtype,
             tensor_para_size) that generate refuses, manifest records whose own dtype/shape/bytes
             disagree or repeat, a path that does not exist
Environment: FTX_BIN, FTX_FIXTURES (engine/ and convert/ fixtures), FTX_SOURCE_DIR.
"""
import json
import os
import re
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, finish, ftx, one_line_error, write  # noqa: E402

FIX = os.environ["FTX_FIXTURES"]
BPE = os.path.join(FIX, "engine", "gpt2_bpe", "1-gpu")     # GPT-2 tokenizer, fp16
GPT2 = os.path.join(FIX, "engine", "gpt2", "1-gpu")        # fp16, vocab 301, no tokenizer
MEGATRON = os.path.join(FIX, "engine", "megatron", "1-gpu")  # bf16
HF_BIN = os.path.join(FIX, "convert", "hf_gpt2_bin", "model")


def corrupt_copy(src, dst, file, fmt, values, at=5, drop_crc=False):
    shutil.copytree(src, dst)
    path = os.path.join(dst, file)
    data = bytearray(open(path, "rb").read())
    size = struct.calcsize(fmt)
    for i, v in enumerate(values):
        data[(at + i) * size:(at + i + 1) * size] = struct.pack("<" + fmt, v) if not isinstance(v, bytes) else v
    write(path, bytes(data), "wb")
    if drop_crc:
        m = json.load(open(os.path.join(dst, "manifest.json")))
        for f in m["files"]:
            f.pop("crc32", None)
        write(os.path.join(dst, "manifest.json"), json.dumps(m))


def test_weights(tmp):
    conv = os.path.join(tmp, "conv")
    r = ftx("convert-hf", "-i", HF_BIN, "-o", conv, "-q")
    check(r.returncode == 0, f"convert-hf: {r.stderr}")
    good = os.path.join(conv, "1-gpu")
    r = ftx("inspect", "--verify", good)
    check(r.returncode == 0 and r.stdout.count(": OK\n") == 28 and "all OK" in r.stderr,
          f"inspect --verify of a good folder: {r.returncode} {r.stderr!r}")
    csv = write(os.path.join(tmp, "p.csv"), "1,2,3\n")
    out = os.path.join(tmp, "out.jsonl")

    def generate_fails(name, model, *needles):
        r = ftx("generate", "-m", model, "--input-ids", csv, "--max-new-tokens", "3", "--output", out)
        one_line_error(name, r, 1, *needles)
        check(not os.path.exists(out) and not os.path.exists(out + ".partial"), f"{name}: output written")

    nan = float("nan")
    # 1000 NaNs in a layer's matrix, the checksums taken out: the scan finds them.
    layer = "model.layers.1.mlp.dense_h_to_4h.weight.0.bin"
    d = os.path.join(tmp, "nan_nocrc")
    corrupt_copy(good, d, layer, "f", [nan] * 1000, drop_crc=True)
    generate_fails("1000 NaNs (no checksums)", d, f"{d}/{layer}: 1000 non-finite values (NaN or Inf; the first at element 5)")
    r = ftx("inspect", "--verify", d)
    check(r.returncode == 1 and f"{layer}: FAILED (1000 non-finite values" in r.stdout and "1 FAILED" in r.stderr,
          f"inspect --verify, NaNs: {r.stdout[-300:]!r} {r.stderr!r}")
    # The same with the checksums: the checksum speaks first.
    d = os.path.join(tmp, "nan_crc")
    corrupt_copy(good, d, layer, "f", [nan] * 1000)
    generate_fails("1000 NaNs", d, f"{d}/{layer}: checksum", "manifest.json says", f"ftx inspect --verify {d}")
    # The first 8 KB of model.wte.bin zeroed: finite, caught by the checksum only.
    d = os.path.join(tmp, "zeroed")
    corrupt_copy(good, d, "model.wte.bin", "f", [0.0] * 2048, at=0)
    generate_fails("zeroed wte", d, f"{d}/model.wte.bin: checksum")
    r = ftx("inspect", "--verify", "--json", d)
    bad = [json.loads(l) for l in r.stdout.splitlines() if '"ok":false' in l]
    check(r.returncode == 1 and len(bad) == 1 and bad[0]["file"] == "model.wte.bin" and "checksum" in bad[0]["problem"],
          f"inspect --verify --json: {bad}")
    r = ftx("inspect", "--stats", d)
    check(r.returncode == 1 and r.stderr.strip().startswith(f"ftx: error: {d}/model.wte.bin: checksum")
          and len(r.stderr.splitlines()) == 1 and "model.wte" in r.stdout, f"inspect --stats reports: {r.stderr!r}")
    r = ftx("inspect", d)
    check(r.returncode == 0, "plain inspect reads no data (sizes only)")
    # A manifest that lists a size the file does not have.
    d = os.path.join(tmp, "short")
    shutil.copytree(good, d)
    with open(os.path.join(d, "model.wpe.bin"), "ab") as f:
        f.write(b"\0\0\0\0")
    r = ftx("inspect", "--verify", d)
    check(r.returncode == 1 and "model.wpe.bin: FAILED" in r.stdout, f"inspect --verify, a long file: {r.stdout[-200:]!r}")
    # Half-precision folders without a manifest (FT's converters write none): fp16 NaN and Inf,
    # bf16 Inf.
    d = os.path.join(tmp, "fp16")
    corrupt_copy(GPT2, d, "model.wte.bin", "H", [0x7e00, 0x7c00, 0xfc00])
    generate_fails("fp16 NaN/Inf", d, "model.wte.bin: 3 non-finite values")
    d = os.path.join(tmp, "bf16")
    corrupt_copy(MEGATRON, d, "model.layers.2.attention.dense.weight.0.bin", "H", [0x7f80])
    generate_fails("bf16 Inf", d, "model.layers.2.attention.dense.weight.0.bin: 1 non-finite value (NaN or Inf")
    r = ftx("inspect", "--verify", d)
    check(r.returncode == 1 and "no manifest.json: sizes and values checked against config.ini" in r.stderr
          and "dense.weight.0.bin: FAILED (1 non-finite value" in r.stdout, f"inspect --verify without a manifest: {r.stderr!r}")
    r = ftx("inspect", "--verify", HF_BIN)
    one_line_error("--verify an HF folder", r, 1, "--verify checks a converted model folder")


def test_configini(tmp):
    csv = write(os.path.join(tmp, "p.csv"), "1,2,3\n")
    out = os.path.join(tmp, "out.jsonl")
    base = open(os.path.join(BPE, "config.ini")).read()

    def edited(name, **keys):
        d = os.path.join(tmp, name)
        shutil.copytree(BPE, d)
        text = base
        for k, v in keys.items():
            text, n = re.subn(rf"^{k} = .*$", f"{k} = {v}", text, flags=re.M)
            if n == 0:
                text = text.replace("[gpt]\n", f"[gpt]\n{k} = {v}\n", 1)
        write(os.path.join(d, "config.ini"), text)
        return d

    cases = [
        ("vocab_size = -5", dict(vocab_size="-5"), ["config.ini: [gpt] vocab_size = -5: must be at least 1"]),
        ("activation_type = Relu", dict(activation_type="Relu"),
         ["[gpt] activation_type = Relu (FasterTransformer's key) and activation = gelu_tanh (ftx's key) disagree"]),
        ("use_attention_linear_bias = True", dict(use_attention_linear_bias="True"),
         ["use_attention_linear_bias = True", "position_embedding_type = learned", "disagree"]),
        ("has_positional_encoding = False", dict(has_positional_encoding="False"),
         ["has_positional_encoding = False", "position_embedding_type = learned"]),
        # kv_head_num 2 divides 8 (grouped-query attention): config.ini is consistent, and the weight
        # files' sizes tell that it does not describe them.
        ("head_num = 8", dict(head_num="8"), ["/model.wpe.bin: 32768 bytes, expected 131072 (fp16 [512, 128] from config.ini)"]),
        ("head_num = 3", dict(head_num="3"), ["config.ini: [gpt] kv_head_num = 2 (ftx's key) and head_num = 3 "
                                              "(FasterTransformer's key) disagree"]),
        ("weight_data_type = fp8", dict(weight_data_type="fp8"),
         ["config.ini: [gpt] weight_data_type = fp8: not a weight type ftx reads"]),
        ("a key twice", dict(), []),
    ]
    for name, keys, needles in cases:
        if name == "a key twice":
            d = os.path.join(tmp, "twice")
            shutil.copytree(BPE, d)
            write(os.path.join(d, "config.ini"), base + "[gpt]\nend_id = 5\n")
            needles = ["[gpt] end_id is given more than once (50256,5); keep one"]
        else:
            d = edited(re.sub(r"\W+", "_", name), **keys)
        r = ftx("generate", "-m", d, "--input-ids", csv, "--max-new-tokens", "2", "--output", out)
        one_line_error(name, r, 1, d + ("" if name == "head_num = 8" else "/config.ini"), *needles)
        check(not os.path.exists(out), f"{name}: output written")
        r = ftx("inspect", d)
        check(r.returncode == 1 and all(n.replace("fp16", "float16") in r.stderr for n in needles),
              f"inspect {name}: {r.stderr!r}")
    # The TP size from the folder's name when config.ini has none (FT's OPT converter writes none).
    d = os.path.join(tmp, "noTP", "1-gpu")
    shutil.copytree(BPE, d)
    write(os.path.join(d, "config.ini"), re.sub(r"^tensor_para_size = .*\n", "", base, flags=re.M))
    r = ftx("generate", "-m", d, "--input-ids", csv, "--max-new-tokens", "2", "--output", "-", "--quiet")
    check(r.returncode == 0, f"config.ini without tensor_para_size: {r.stderr}")


def edited_copy(src, dst, config=None, manifest=None):
    """A copy of folder src with config.ini lines replaced ({old: new}) and manifest.json edited
    (a function of the parsed JSON)."""
    shutil.copytree(src, dst)
    if config:
        text = open(os.path.join(dst, "config.ini")).read()
        for a, b in config.items():
            check(a in text, f"{dst}: config.ini has no {a!r}")
            text = text.replace(a, b)
        write(os.path.join(dst, "config.ini"), text)
    if manifest:
        m = json.load(open(os.path.join(dst, "manifest.json")))
        manifest(m)
        write(os.path.join(dst, "manifest.json"), json.dumps(m))
    return dst


def test_records(tmp):
    conv = os.path.join(tmp, "conv")
    r = ftx("convert-hf", "-i", HF_BIN, "-o", conv, "-q")
    if not check(r.returncode == 0, f"convert-hf: {r.stderr}"):
        return
    good = os.path.join(conv, "1-gpu")
    ini = open(os.path.join(good, "config.ini")).read()
    layers = int(re.search(r"^num_layer = (\d+)", ini, re.M).group(1))
    csv = write(os.path.join(tmp, "p.csv"), "1,2,3\n")
    out = os.path.join(tmp, "out.jsonl")

    def verify_fails(name, d, *needles):
        r = ftx("inspect", "--verify", d)
        failed = [ln for ln in r.stdout.splitlines() if ": FAILED (" in ln]
        check(r.returncode == 1 and failed and all(any(n in ln for ln in failed) for n in needles),
              f"{name}: inspect --verify: exit {r.returncode}, FAILED lines {failed[:4]!r}, wanted {needles!r}")
        g = ftx("generate", "-m", d, "--input-ids", csv, "--max-new-tokens", "2", "--output", out)
        check(g.returncode != 0, f"{name}: generate loads what --verify refuses? {g.returncode} {g.stderr!r}")
        if os.path.exists(out):
            os.remove(out)

    r = ftx("inspect", "--verify", good)
    check(r.returncode == 0 and "all OK" in r.stderr, f"the converted folder verifies: {r.stderr!r}")
    # E-14: one layer fewer in config.ini: the last layer's files are described by nothing.
    d = edited_copy(good, os.path.join(tmp, "layers"), {f"num_layer = {layers}": f"num_layer = {layers - 1}",
                                                         f"n_layer = {layers}": f"n_layer = {layers - 1}"})
    verify_fails("num_layer edit", d, f"model.layers.{layers - 1}.", "config.ini describes no such tensor")
    # E-15: config.ini says fp16, the files are fp32 (as is the manifest).
    dt = re.search(r"^weight_data_type = (\w+)", ini, re.M).group(1)
    other = "fp16" if dt == "fp32" else "fp32"
    edits = {f"weight_data_type = {dt}": f"weight_data_type = {other}"}
    if "storage_dtype = " in ini:
        sd = re.search(r"^storage_dtype = (\w+)", ini, re.M).group(1)
        edits[f"storage_dtype = {sd}"] = "storage_dtype = " + ("float16" if other == "fp16" else "float32")
    d = edited_copy(good, os.path.join(tmp, "dtype"), edits)
    verify_fails("dtype edit", d, f"config.ini weight_data_type = {other}")
    # E-16: tensor_para_size 2: the .1 files config.ini implies are missing; they are not "listed in manifest.json".
    d = edited_copy(good, os.path.join(tmp, "tp2"), {"tensor_para_size = 1": "tensor_para_size = 2"})
    r = ftx("inspect", "--verify", d)
    check(r.returncode == 1 and ".1.bin: FAILED (missing (config.ini implies it" in r.stdout
          and "listed in manifest.json but missing" not in r.stdout,
          f"tensor_para_size edit: {r.stdout[-400:]!r} {r.stderr!r}")
    # E-13: the manifest's own records.
    f0 = "model.wpe.bin"

    def set_field(key, value):
        def edit(m):
            for e in m["files"]:
                if e["file"] == f0:
                    e[key] = value
        return edit
    want_dtype = "float16" if dt == "fp32" else "float32"
    for name, edit, needle in [
            ("manifest dtype", set_field("dtype", want_dtype), f"manifest.json says {want_dtype}"),
            ("manifest shape", set_field("shape", [999999999999]), "manifest.json says"),
            ("manifest bytes", set_field("bytes", -5), "manifest.json records -5 bytes"),
            ("manifest duplicate", lambda m: m["files"].append(dict(next(e for e in m["files"] if e["file"] == f0))),
             "listed twice in manifest.json")]:
        d = edited_copy(good, os.path.join(tmp, name.replace(" ", "_")), manifest=edit)
        r = ftx("inspect", "--verify", d)
        check(r.returncode == 1 and f"{f0}: FAILED ({needle}" in r.stdout, f"{name}: {r.stdout[-300:]!r}")
    # E-17: a path that does not exist.
    r = ftx("inspect", "--verify", os.path.join(tmp, "nosuch"))
    one_line_error("--verify nosuch", r, 1, "nosuch: no such file or folder")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"weights": test_weights, "configini": test_configini, "records": test_records}[what](tmp)
    finish(f"verify_test {what}")


if __name__ == "__main__":
    main()
