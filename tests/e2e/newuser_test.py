#!/usr/bin/python3
"""What a new user trips over (issue 25), each with the bad input, the one-line error (or the right
behaviour) and nothing clobbered or left behind.

Parts (argv[1]):
  paths:      convert-hf -i that does not exist, a named weight file beside another, -m given the
              wrong kind of path (OUT, an HF folder, config.ini, a .bin, a .nemo, ...)
  weights:    NaN/Inf and a zeroed region in weight files: the error at load, inspect --verify and
              inspect --stats; fp32, fp16 and bf16 folders, with and without manifest.json
  configini:  the issue's config.ini edits through the CLI (the key-by-key walk is the gtest
              config_ini_check_test)
  prompts:    JSONL with a byte-order mark, a JSON array, "[INST]" text, an empty prompts file,
              --output equal to --prompts
  flags:      a table of every subcommand's numeric, path and choice flags x bad values (0,
              negative, huge, NaN, Inf, the wrong type, empty): one line, exit 2 (1 for a file),
              nothing written; and the cross-flag rules (min-length, beam + top-k, temperature)
  spellings:  FasterTransformer's spellings: accepted converter flags, "did you mean" elsewhere,
              `ftx convert`, gpt_gemm's positional arguments
  chat_pipe:  ftx chat in a pipe: one line per round even when the answer has line breaks
  chat_tty:   ftx chat in a terminal (tmux): Ctrl-C stops the answer and the chat goes on, Ctrl-C
              while typing drops the line, Up recalls earlier lines, Ctrl-D ends (exit 77 without tmux)
  interrupt:  a conversion stopped by SIGINT, SIGKILL, a file size limit (ulimit -f), and one
              writing the same output at the same time; man ftx-generate's examples as printed
Environment: FTX_BIN, FTX_FIXTURES (engine/ and convert/ fixtures), FTX_SOURCE_DIR.
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util  # noqa: E402
from e2e_util import check, finish, one_line_error  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.environ["FTX_FIXTURES"]
SRC = os.environ["FTX_SOURCE_DIR"]
BPE = os.path.join(FIX, "engine", "gpt2_bpe", "1-gpu")     # GPT-2 tokenizer, fp16
GPT2 = os.path.join(FIX, "engine", "gpt2", "1-gpu")        # fp16, vocab 301, no tokenizer
MEGATRON = os.path.join(FIX, "engine", "megatron", "1-gpu")  # bf16
HF_BIN = os.path.join(FIX, "convert", "hf_gpt2_bin", "model")
HF_ST = os.path.join(FIX, "convert", "hf_gpt2_safetensors", "model")


def ftx(*args, cwd=None, input=None, timeout=60, env=None):
    return subprocess.run([FTX, *args], capture_output=True, text=True, cwd=cwd, input=input, timeout=timeout,
                          env=env)


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


def read_floats(path, fmt):
    data = open(path, "rb").read()
    return struct.unpack(f"<{len(data) // struct.calcsize(fmt)}{fmt}", data)


# ---- paths ----

def test_paths(tmp):
    # convert-hf -i a folder that does not exist: an error naming it; neither the parent nor the
    # current folder (both hold an HF model) is converted.
    hf = os.path.join(tmp, "hf")
    shutil.copytree(HF_BIN, os.path.join(hf, "gpt2"))
    shutil.copy(os.path.join(HF_BIN, "config.json"), hf)  # the parent looks like a model too
    shutil.copy(os.path.join(HF_BIN, "pytorch_model.bin"), hf)
    before = listing(tmp)
    r = ftx("convert-hf", "-i", "hf/gpt2-finetuned-v2", "-o", "out", cwd=tmp)
    one_line_error("-i a missing folder", r, 1, "hf/gpt2-finetuned-v2: no such file or folder")
    r = ftx("convert-hf", "-i", "typo", "-o", "out", cwd=hf)
    one_line_error("-i typo in a model folder", r, 1, "typo: no such file or folder")
    check(listing(tmp) == before, f"a failed -i left files: {sorted(set(listing(tmp)) - set(before))}")
    for conv, extra in (("convert-megatron", []), ("convert-nemo", [])):
        r = ftx(conv, "-i", "nope", "-o", "out", *extra, cwd=tmp)
        check(r.returncode == 1 and "nope" in r.stderr and len(r.stderr.splitlines()) == 1,
              f"{conv} -i nope: {r.returncode} {r.stderr!r}")
    check(listing(tmp) == before, "converters of a missing -i left files")

    # A folder with both pytorch_model.bin and model.safetensors holding different weights: the
    # named file is the one converted.
    both = os.path.join(tmp, "both")
    shutil.copytree(HF_BIN, both)
    st = open(os.path.join(HF_ST, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", st[:8])[0]
    header = json.loads(st[8:8 + n])
    body = bytearray(st[8 + n:])
    lo, hi = header["transformer.wte.weight"]["data_offsets"]
    body[lo:hi] = struct.pack(f"<{(hi - lo) // 4}f", *[0.25] * ((hi - lo) // 4))  # another wte
    write(os.path.join(both, "model.safetensors"), st[:8 + n] + bytes(body), "wb")

    def wte_of(in_path, out):
        r = ftx("convert-hf", "-i", in_path, "-o", out, "-q")
        check(r.returncode == 0, f"convert-hf -i {in_path}: {r.stderr}")
        return read_floats(os.path.join(out, "1-gpu", "model.wte.bin"), "f") if r.returncode == 0 else None

    from_bin = wte_of(os.path.join(both, "pytorch_model.bin"), os.path.join(tmp, "o_bin"))
    from_st = wte_of(os.path.join(both, "model.safetensors"), os.path.join(tmp, "o_st"))
    from_folder = wte_of(both, os.path.join(tmp, "o_folder"))
    reference = wte_of(HF_BIN, os.path.join(tmp, "o_ref"))
    check(from_bin is not None and from_bin == reference, "-i folder/pytorch_model.bin converts that file")
    check(from_st is not None and set(from_st) == {0.25}, "-i folder/model.safetensors converts that file")
    check(from_folder is not None and set(from_folder) == {0.25}, "-i folder prefers model.safetensors (transformers' order)")
    r = ftx("convert-hf", "-i", os.path.join(both, "vocab.json"), "-o", os.path.join(tmp, "o_vocab"))
    one_line_error("-i vocab.json", r, 1, "vocab.json: is not a HuggingFace weight file")
    shard = os.path.join(tmp, "shard")
    shutil.copytree(os.path.join(FIX, "convert", "hf_gpt2_sharded", "model"), shard)
    r = ftx("convert-hf", "-i", os.path.join(shard, "model-00001-of-00002.safetensors"), "-o", os.path.join(tmp, "o_sh"))
    one_line_error("-i one shard", r, 1, "is one shard of a sharded checkpoint")
    check(not os.path.exists(os.path.join(tmp, "o_vocab")) and not os.path.exists(os.path.join(tmp, "o_sh")),
          "a refused -i left an output folder")

    # -m given something other than OUT/N-gpu: what it is and what to pass instead.
    out = os.path.join(tmp, "o_ref")
    csv = write(os.path.join(tmp, "p.csv"), "1,2\n")
    nemo = write(os.path.join(tmp, "m.nemo"), "not really")
    meg = os.path.join(tmp, "meg")
    os.makedirs(os.path.join(meg, "release"))
    write(os.path.join(meg, "latest_checkpointed_iteration.txt"), "release\n")
    interrupted = os.path.join(tmp, "half")
    os.makedirs(os.path.join(interrupted, ".1-gpu.tmp-999999"))
    cases = [
        ("-m OUT", out, f"is a conversion's output folder, not a model folder; pass {out}/1-gpu"),
        ("-m an HF folder", HF_BIN, "is a HuggingFace model folder (config.json), not a converted one; convert it first"),
        ("-m config.ini", os.path.join(out, "1-gpu", "config.ini"), f"is the model's config.ini; pass the folder that holds it: {out}/1-gpu"),
        ("-m a .bin", os.path.join(out, "1-gpu", "model.wte.bin"), "is one weight file; pass the folder that holds it"),
        ("-m a .nemo", nemo, "is a NeMo archive, not a converted model; convert it first (ftx convert-nemo"),
        ("-m a Megatron checkpoint", meg, "is a Megatron checkpoint, not a converted model"),
        ("-m a torch_dist iteration", os.path.join(SRC, "tests", "fixtures", "mcore", "modern", "megatron", "tp2pp2",
                                                   "dist", "iter_0000010"), "is a Megatron checkpoint, not a converted"),
        ("-m a TP x PP iteration", os.path.join(SRC, "tests", "fixtures", "mcore", "modern", "megatron", "tp2pp2",
                                                "legacy", "iter_0000010"), "is a Megatron checkpoint, not a converted"),
        ("-m an interrupted conversion", interrupted, "holds only the unfinished output of an interrupted conversion"),
        ("-m a missing folder", os.path.join(tmp, "nope"), "no such model folder"),
        ("-m an empty folder", os.path.join(tmp, "meg", "release"), "no config.ini: not a converted model folder"),
    ]
    res = os.path.join(tmp, "res.jsonl")
    for name, m, needle in cases:
        for cmd in (["generate", "-m", m, "--input-ids", csv, "--max-new-tokens", "2", "--output", res],
                    ["eval-lambada", "-m", m, "--max-examples", "1"], ["chat", "-m", m],
                    ["gemm-tune", "-m", m, "--batch-size", "1", "--beam-width", "1", "--max-input-len", "8",
                     "--data-type", "fp32", "-o", res],
                    ["smoothquant", "-i", m, "-o", os.path.join(tmp, "sq"), "--alpha", "0.5"]):
            r = ftx(*cmd, input="")
            one_line_error(f"{cmd[0]} {name}", r, 1, needle)
    check(not os.path.exists(res) and not os.path.exists(os.path.join(tmp, "sq")), "-m errors left outputs")


# ---- weights ----

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


# ---- config.ini ----

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


# ---- prompts ----

def test_prompts(tmp):
    out = os.path.join(tmp, "out.jsonl")

    def gen(prompts, *extra):
        return ftx("generate", "-m", BPE, "--prompts", prompts, "--max-new-tokens", "4", "--output", "-", "--quiet",
                   *extra)

    # JSONL written by a Windows editor: a byte-order mark before the first "{".
    bom = write(os.path.join(tmp, "bom.jsonl"),
                '\ufeff{"text": "Hello", "max_new_tokens": 2}\n{"text": "World", "max_new_tokens": 3}\n', "w")
    r = gen(bom)
    res = [json.loads(l) for l in r.stdout.splitlines()] if r.returncode == 0 else []
    check(r.returncode == 0 and [len(x["output_ids"]) for x in res] == [2, 3] and [x["input_length"] for x in res] == [1, 1],
          f"JSONL with a BOM: {r.returncode} {r.stderr!r} {res}")
    # A JSON array of requests and strings: each element is a request.
    arr = write(os.path.join(tmp, "arr.json"),
                json.dumps([{"text": "Hello", "max_new_tokens": 2}, "World", {"ids": [1, 2], "max_new_tokens": 1}], indent=1))
    r = gen(arr)
    res = [json.loads(l) for l in r.stdout.splitlines()] if r.returncode == 0 else []
    check(r.returncode == 0 and [len(x["output_ids"]) for x in res] == [2, 4, 1] and res[2]["input_length"] == 2,
          f"a JSON array: {r.returncode} {r.stderr!r} {res}")
    one_line_error("a broken JSON array", gen(write(os.path.join(tmp, "broken.json"), '[{"text": "a"},')), 1,
                   "broken.json: starts like a JSON array of prompts but is not valid JSON")
    one_line_error("a JSON array of numbers", gen(write(os.path.join(tmp, "nums.json"), '[{"ids": [1]}, 5]')), 1,
                   "nums.json: element 2 (prompt 2): expected a request object or a text string, not 5")
    # Text that starts with a bracket stays text.
    inst = write(os.path.join(tmp, "inst.txt"), "[INST] Hello [/INST]\n")
    r = gen(inst)
    check(r.returncode == 0 and json.loads(r.stdout)["input_length"] > 3, f"[INST] text: {r.stderr!r}")
    # An empty prompts file: a warning, an empty output, no nonsense timings.
    empty = write(os.path.join(tmp, "empty.txt"), "")
    r = ftx("generate", "-m", BPE, "--prompts", empty, "--max-new-tokens", "4", "--output", out)
    check(r.returncode == 0 and r.stderr.strip() == f"ftx: warning: {empty} has no prompts; {out} holds no results"
          and open(out).read() == "", f"an empty prompts file: {r.returncode} {r.stderr!r}")
    os.remove(out)
    # --output naming the prompts file (also through another path): refused, the prompts kept.
    p = write(os.path.join(tmp, "p.txt"), "Hello\n")
    for o in (p, os.path.join(tmp, ".", "p.txt"), os.path.join(tmp, "link.txt")):
        if o.endswith("link.txt") and not os.path.exists(o):
            os.symlink(p, o)
        r = ftx("generate", "-m", BPE, "--prompts", p, "--max-new-tokens", "4", "--output", o, "--force")
        one_line_error(f"--output {o}", r, 2, "is the same file as --prompts")
        check(open(p).read() == "Hello\n", "the prompts file is untouched")
    r = ftx("eval-lambada", "-m", BPE, "--data", p, "--output", p)
    one_line_error("eval-lambada --output = --data", r, 2, "is the same file as --data")


# ---- flags x bad values ----

HUGE = "9223372036854775807"
OVER = "99999999999999999999"
BAD_INT_POS = ["0", "-1", HUGE, OVER, "nan", "inf", "abc", "", "1.5"]   # counts that must be >= 1
BAD_INT_NONNEG = ["-1", HUGE, OVER, "nan", "inf", "abc", "", "1.5"]     # counts where 0 means "default"
BAD_REAL = ["nan", "inf", "-inf", "abc", ""]


def flag_table(tmp):
    """(subcommand argv before the flag, flag, bad values, output paths that must not appear)."""
    csv = write(os.path.join(tmp, "p.csv"), "1,2\n")
    txt = write(os.path.join(tmp, "p.txt"), "Hello\n")
    out = os.path.join(tmp, "res.jsonl")
    conv_out = os.path.join(tmp, "conv")
    gen = ["generate", "-m", BPE, "--input-ids", csv, "--output", out]
    gen_n = gen + ["--max-new-tokens", "2"]
    chat = ["chat", "-m", BPE, "--input", txt]
    ev = ["eval-lambada", "-m", BPE, "--data", write(os.path.join(tmp, "l.jsonl"), '{"text": "a b c"}\n'),
          "--output", out]
    conv = ["convert-hf", "-i", HF_BIN, "-o", conv_out, "-q"]
    meg = ["convert-megatron", "-i", os.path.join(FIX, "convert", "meg_v3_tp1"), "-o", conv_out, "-q"]
    nemo = ["convert-nemo", "-i", os.path.join(FIX, "convert", "nemo_tp1_tgz", "model.nemo"), "-o", conv_out, "-q"]
    sq = ["smoothquant", "-i", BPE, "-o", conv_out, "-q", "--calib-data", txt]
    gemm = ["gemm-tune", "--head-num", "4", "--size-per-head", "16", "--inter-size", "64", "--vocab-size", "100",
            "--data-type", "fp32", "-o", out]
    gemm_req = ["--batch-size", "1", "--beam-width", "1", "--max-input-len", "8"]
    outs = [out, conv_out]
    T = []
    for base in (gen_n, chat):
        T += [
            (base, "--top-k", BAD_INT_NONNEG + ["1025"]),
            (base, "--top-p", BAD_REAL + ["-0.1", "1.5"]),
            (base, "--temperature", BAD_REAL + ["-1"]),
            (base, "--repetition-penalty", BAD_REAL + ["0", "-1"]),
            (base, "--presence-penalty", BAD_REAL),
            (base, "--len-penalty", BAD_REAL),
            (base, "--beam-search-diversity-rate", BAD_REAL),
            (base, "--min-length", BAD_INT_NONNEG),
            (base, "--beam-width", BAD_INT_POS + ["65"]),
            (base, "--seed", ["-1", OVER, "nan", "abc", "", "1.5"]),
            (base, "--start-id", ["-5", HUGE, OVER, "nan", "abc", "", "50257"]),
            (base, "--end-id", ["-5", HUGE, OVER, "nan", "abc", ""]),
            (base, "--session-len", BAD_INT_NONNEG),
            (base, "--memory-len", BAD_INT_NONNEG),
            (base, "--threads", BAD_INT_NONNEG),
            (base, "--tensor-para-size", BAD_INT_NONNEG + ["2"]),
            (base, "--pipeline-para-size", BAD_INT_NONNEG + ["2"]),
            (base, "--int8-mode", ["-1", "3", "abc", "", "nan"]),
            (base, "--device", ["gpu", "", "CPU"]),
            (base, "--dtype", ["fp64", "", "int8"]),
            (base, "--tokenizer", [os.path.join(tmp, "nope")]),
            (base, "--gemm-config", [os.path.join(tmp, "nope")]),
        ]
    T += [
        (gen, "--max-new-tokens", BAD_INT_POS + ["16777217"]),
        (chat, "--max-new-tokens", BAD_INT_POS + ["16777217"]),
        (gen_n, "--batch-size", BAD_INT_POS + ["65537"]),
        (gen_n, "--max-seq-len", BAD_INT_NONNEG + ["16777217"]),
        (gen_n, "--batching", ["eager", ""]),
        (gen_n, "--prompt-table", [os.path.join(tmp, "nope.npy")]),
        (gen_n, "--task", ["squad"]),
        (["generate", "-m", BPE, "--output", out, "--max-new-tokens", "2"], "--prompts", [os.path.join(tmp, "nope")]),
        (["generate", "-m", BPE, "--output", out, "--max-new-tokens", "2"], "--input-ids", [os.path.join(tmp, "nope")]),
        (ev, "--batch-size", BAD_INT_POS + ["65537"]),
        (ev, "--max-examples", [v for v in BAD_INT_POS if v != HUGE]),  # a huge N is "all"
        (ev, "--threads", BAD_INT_NONNEG),
        (ev, "--tensor-para-size", BAD_INT_NONNEG + ["2"]),
        (ev, "--int8-mode", ["-1", "3", "abc"]),
        (ev, "--data", [os.path.join(tmp, "nope")]),
        (ev, "--device", ["gpu"]),
        (ev, "--dtype", ["fp64"]),
        (chat, "--input", [os.path.join(tmp, "nope")]),
    ]
    for base in (conv, meg, nemo):
        T += [
            (base, "-g", BAD_INT_POS + ["5000"]),
            (base, "-p", BAD_INT_POS + ["5000"]),
            (base, "-t", ["fp64", "int8", "", "abc"]),
            (base, "--start-id", ["-5", OVER, "nan", "abc", "", "4294967296"]),
            (base, "--end-id", ["-5", OVER, "nan", "abc", "", "4294967296"]),
            (base, "--vocab-path", [os.path.join(tmp, "nope")]),
        ]
    T += [
        (conv, "--smoothquant", BAD_REAL + ["-0.1", "1.5"]),
        (conv + ["--smoothquant", "0.5"], "--calib-samples", BAD_INT_POS + ["16777217"]),
        (conv + ["--smoothquant", "0.5"], "--calib-seq-len", BAD_INT_POS + ["16777217"]),
        (conv + ["--smoothquant", "0.5"], "--calib-data", [os.path.join(tmp, "nope")]),
        (conv, "--model", ["llama", ""]),
        (meg, "--head-num", ["-1", OVER, "nan", "abc", "", "3"]),
        (meg, "--trained-tensor-parallel-size", ["-1", OVER, "nan", "abc", ""]),
        (nemo, "--prompt-start-id", ["-5", OVER, "nan", "abc"]),
        (nemo, "--prompt-in-file", [os.path.join(tmp, "nope.nemo")]),
        (sq, "--alpha", BAD_REAL + ["-0.1", "1.5"]),
        (sq + ["--alpha", "0.5"], "-g", BAD_INT_POS + ["5000"]),
        (sq + ["--alpha", "0.5"], "-t", ["fp64", ""]),
        (sq + ["--alpha", "0.5"], "--calib-samples", BAD_INT_POS + ["16777217"]),
        (sq + ["--alpha", "0.5"], "--calib-seq-len", BAD_INT_POS + ["16777217"]),
        (sq + ["--alpha", "0.5"], "--threads", BAD_INT_NONNEG),
        (sq + ["--alpha", "0.5"], "--format", ["onnx", ""]),
        (sq + ["--alpha", "0.5"], "--act-ranges", [os.path.join(tmp, "nope.json")]),
        (gemm + gemm_req[2:], "--batch-size", BAD_INT_POS + ["65537"]),
        (gemm + gemm_req[:2] + gemm_req[4:], "--beam-width", BAD_INT_POS + ["65"]),
        (gemm + gemm_req[:4], "--max-input-len", BAD_INT_POS + ["16777217"]),
        (gemm + gemm_req, "--tensor-para-size", BAD_INT_NONNEG + ["3"]),
        (gemm + gemm_req, "--int8-mode", ["-1", "3", "abc"]),
        (gemm + gemm_req, "--repeats", BAD_INT_POS + ["10001"]),
        (gemm + gemm_req, "--num-layer", BAD_INT_NONNEG),
        (["gemm-tune", "--size-per-head", "16", "--inter-size", "64", "--vocab-size", "100", "--data-type", "fp32",
          "-o", out] + gemm_req, "--head-num", ["-1", HUGE, OVER, "nan", "abc", ""]),
        (["prompt-convert", "-i", os.path.join(tmp, "nope.nemo"), "--model-dir", BPE], "--start-id", ["-5", OVER, "abc"]),
        (["tokenize", "--input", txt, "--output", out], "--tokenizer", [os.path.join(tmp, "nope"), ""]),
        (["inspect"], "", [os.path.join(tmp, "nope"), ""]),
    ]
    return T, outs


def test_flags(tmp):
    table, outs = flag_table(tmp)
    runs = 0
    for base, flag, values in table:
        for v in values:
            args = base + ([flag, v] if flag else [v])
            t0 = time.time()
            r = ftx(*args, input="", timeout=60)
            dt = time.time() - t0
            runs += 1
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            name = " ".join([base[0], flag, repr(v)])
            # A usage error names the flag (or its long name); a file error names the file.
            named = bool(lines) and ((flag and any(n in lines[0] for n in (flag, flag.lstrip("-")))) or (v and v in lines[0])
                                     or (v == "" and "an empty argument" in lines[0]))
            ok = r.returncode in (1, 2) and len(lines) == 1 and lines[0].startswith("ftx: error:") and named
            check(ok and dt < 20, f"{name}: exit {r.returncode}, {dt:.1f} s, stderr {lines!r}")
            for o in outs:
                if os.path.exists(o):
                    check(False, f"{name}: {o} was written")
                    shutil.rmtree(o) if os.path.isdir(o) else os.remove(o)
    print(f"flags: {runs} bad values over {len(table)} flags")
    # Leftovers of any kind (.tmp-PID, .partial) in the working folder.
    stray = [p for p in listing(tmp) if ".tmp-" in p or p.endswith(".partial") or p.endswith(".index")]
    check(not stray, f"left behind: {stray}")

    # Rules across flags (lib's request checks, so JSON lines get them too).
    csv = write(os.path.join(tmp, "q.csv"), "1,2\n")
    out = os.path.join(tmp, "r.jsonl")
    g = ["generate", "-m", BPE, "--input-ids", csv, "--output", out]
    for args, code, needles in [
        (["--max-new-tokens", HUGE], 2, ["--max-new-tokens 9223372036854775807 must be at most 16777216"]),
        (["--max-new-tokens", "4", "--min-length", "10"], 2, ["--min-length 10 is more than --max-new-tokens 4"]),
        (["--max-new-tokens", "4", "--beam-width", "4", "--top-k", "5"], 2,
         ["--top-k 5 has no effect with beam search (--beam-width 4)"]),
        (["--max-new-tokens", "4", "--beam-width", "4", "--top-p", "0.5"], 2, ["--top-p 0.5 has no effect with beam search"]),
        (["--max-new-tokens", "4", "--temperature", "0.9"], 2,
         ["--temperature 0.9 has no effect with greedy decoding (--top-k 0 and --top-p 0)"]),
        (["--max-new-tokens", "10000000"], 1, ["exceeds the model's max_pos_seq_len 512"]),
    ]:
        one_line_error(" ".join(args), ftx(*g, *args), code, *needles)
        check(not os.path.exists(out), f"{args}: output written")
    jl = write(os.path.join(tmp, "q.jsonl"), json.dumps({"ids": [1], "max_new_tokens": 3, "min_length": 5}) + "\n")
    one_line_error("JSON min_length > max_new_tokens",
                   ftx("generate", "-m", BPE, "--prompts", jl, "--max-new-tokens", "4", "--output", out), 1,
                   "line 1 (prompt 1): min_length 5 is more than max_new_tokens 3")
    # Temperature with top-k or top-p, or 0 (greedy) or 1 (the default), is fine.
    for args in (["--temperature", "0.9", "--top-k", "5"], ["--temperature", "0.9", "--top-p", "0.5"],
                 ["--temperature", "0"], ["--beam-width", "2"]):
        r = ftx(*g[:-1], "-", "--max-new-tokens", "2", "--quiet", *args)
        check(r.returncode == 0, f"{args}: {r.stderr!r}")
    one_line_error("eval-lambada --max-examples 0", ftx("eval-lambada", "-m", BPE, "--max-examples", "0"), 2,
                   "--max-examples 0 must be at least 1")


# ---- FasterTransformer's spellings ----

def test_spellings(tmp):
    # FT's converter flags, accepted: the same folder as ftx's own spelling.
    r = ftx("convert-hf", "-in_file", HF_BIN, "-saved_dir", os.path.join(tmp, "ft"), "-i_g", "2",
            "-weight_data_type", "fp16", "-t_g", "1", "-processes", "2", "-q")
    check(r.returncode == 0 and r.stderr.strip() == "ftx: note: -t_g ignored: ftx reads the HuggingFace weights whole; "
          "the training GPU count is not needed", f"FT's convert-hf flags: {r.returncode} {r.stderr!r}")
    r2 = ftx("convert-hf", "-i", HF_BIN, "-o", os.path.join(tmp, "ftx"), "-g", "2", "-t", "fp16", "-q")
    same = r.returncode == 0 and r2.returncode == 0 and all(
        open(os.path.join(tmp, "ft", "2-gpu", f), "rb").read() == open(os.path.join(tmp, "ftx", "2-gpu", f), "rb").read()
        for f in os.listdir(os.path.join(tmp, "ftx", "2-gpu")) if f.endswith(".bin"))
    check(same, "FT's spellings convert exactly what ftx's do")
    v0 = [os.path.join(FIX, "convert", "meg_v0_tp2_legacy", "release")]
    r = ftx("convert-megatron", "-i", v0[0],
            "-o", os.path.join(tmp, "meg"), "-h_n", "4", "-t_g", "2", "--infer_gpu_num", "1", "-cpu", "1", "-q")
    check(r.returncode == 0 and os.path.isdir(os.path.join(tmp, "meg", "1-gpu"))
          and "-cpu ignored: ftx always reads checkpoints on the CPU" in r.stderr, f"FT's megatron flags: {r.stderr!r}")
    # Everywhere else: "did you mean".
    csv = write(os.path.join(tmp, "p.csv"), "1\n")
    out = os.path.join(tmp, "o.jsonl")
    for args, needle in [
        (["generate", "-m", BPE, "--input-ids", csv, "--output", out, "--max-new-tokens", "2", "--top_k", "5"],
         "generate: --top_k is not an ftx flag; did you mean --top-k?"),
        (["generate", "-m", BPE, "--input-ids", csv, "--output", out, "--output_len", "2"],
         "generate: --output_len is not an ftx flag; did you mean --max-new-tokens?"),
        (["generate", "--ckpt_path", BPE, "--input-ids", csv, "--output", out, "--max-new-tokens", "2"],
         "generate: --ckpt_path is not an ftx flag; did you mean --model?"),
        (["generate", "-m", BPE, "--input-ids", csv, "--output", out, "--max-new-token", "2"],
         "did you mean --max-new-tokens?"),
        (["generate", "-m", BPE, "--input-ids", csv, "--output", out, "--max-new-tokens", "2", "--lib_path", "x.so"],
         "--lib_path is not an ftx flag; ftx needs no library path"),
        (["chat", "-m", BPE, "--sample_input_file", csv], "did you mean --input?"),
        (["eval-lambada", "-m", BPE, "--lambada_path", csv], "did you mean --data?"),
        (["convert-nemo", "-i", "x.nemo", "-o", os.path.join(tmp, "n"), "-p_o", "p"],
         "ftx writes the prompt tables into the model folder with --prompt-in-file"),
        (["convert", "-i", HF_BIN, "-o", os.path.join(tmp, "c")],
         "unknown subcommand 'convert'; did you mean 'convert-hf', 'convert-megatron' or 'convert-nemo'?"),
        (["genrate", "-m", BPE], "unknown subcommand 'genrate'; did you mean 'generate'?"),
        (["gemm-tune", "8", "1", "32", "12", "128", "6144", "51200", "1", "1", "0"],
         "gemm-tune takes flags, not gpt_gemm's positional arguments; the same request is: ftx gemm-tune --batch-size 8 "
         "--beam-width 1 --max-input-len 32 --head-num 12 --size-per-head 128 --inter-size 6144 --vocab-size 51200 "
         "--data-type fp16 --tensor-para-size 1"),
    ]:
        one_line_error(" ".join(args[:1] + [a for a in args if a.startswith("-") and "_" in a]), ftx(*args), 2, needle)
    check(not os.path.exists(out) and not os.path.exists(os.path.join(tmp, "c")), "spelling errors wrote outputs")


# ---- chat ----

def newline_model(tmp):
    """gpt2_bpe whose every answer is line breaks: the final layernorm outputs its bias, which is
    GPT-2's "\\n" row of the (tied) embedding scaled up, so token 198 wins every step."""
    d = os.path.join(tmp, "newlines", "1-gpu")
    shutil.copytree(BPE, d)
    H = 32
    wte = open(os.path.join(d, "model.wte.bin"), "rb").read()
    row = struct.unpack(f"<{H}e", wte[198 * H * 2:199 * H * 2])
    write(os.path.join(d, "model.final_layernorm.weight.bin"), struct.pack(f"<{H}e", *[0.0] * H), "wb")
    write(os.path.join(d, "model.final_layernorm.bias.bin"), struct.pack(f"<{H}e", *[x * 50 for x in row]), "wb")
    os.remove(os.path.join(d, "manifest.json")) if os.path.exists(os.path.join(d, "manifest.json")) else None
    return d


def test_chat_pipe(tmp):
    model = newline_model(tmp)
    lines = ["Hello", "/reset", "Again"]
    r = ftx("chat", "-m", model, "--max-new-tokens", "5", "--quiet", input="\n".join(lines) + "\n")
    out = r.stdout.split("\n")
    check(r.returncode == 0 and out == ["\\n" * 5, "\\n" * 5, ""], f"one line per round: {r.returncode} {r.stdout!r} {r.stderr!r}")
    r = ftx("generate", "-m", model, "--prompts", "-", "--max-new-tokens", "5", "--output", "-", "--quiet", input="Hello\n")
    check(r.returncode == 0 and json.loads(r.stdout)["text"] == "\n" * 5, f"generate gives the same text: {r.stdout!r}")


def test_chat_tty(tmp):
    if not shutil.which("tmux"):
        print("SKIP: tmux is not installed")
        sys.exit(77)
    with e2e_util.TmuxChat(tmp, ["-m", BPE, "--max-new-tokens", "400"], "ftxnu") as t:
        pane, keys = t.pane, t.keys

        def stats():
            return t.stderr_lines("[round")

        def wait_for(pred, what, timeout=30):
            return t.wait_for(pred, what, timeout)

        wait_for(lambda: pane().startswith(">"), "the prompt")
        keys("Hello", literal=True)
        keys("Enter")
        wait_for(lambda: len(pane().split("\n")[1]) > 20, "the answer to stream")
        keys("C-c")  # stops the answer, not the chat
        wait_for(lambda: len(stats()) == 1, "round 1 to end")
        s = stats()
        check(s and "; stopped]" in s[0] and int(re.search(r": (\d+) tokens", s[0]).group(1)) < 400,
              f"Ctrl-C stopped the answer: {s}")
        wait_for(lambda: pane().rstrip().endswith(">"), "the next prompt")
        # A new session: round 1 may have run to hundreds of tokens before the Ctrl-C landed (a
        # loaded machine), and round 2's 400 more would pass the model's 512 positions.
        keys("/reset", literal=True)
        keys("Enter")
        time.sleep(0.3)
        wait_for(lambda: pane().rstrip().endswith(">"), "the prompt after /reset")
        keys("abc", literal=True)
        keys("C-c")  # drops the line being typed
        time.sleep(0.3)
        keys("Up")  # "/reset"
        keys("Up")  # "Hello", the line before it
        keys("Enter")
        wait_for(lambda: len(pane().rstrip().split("> Hello")[-1]) > 20, "round 2's answer to stream")
        keys("C-c")
        wait_for(lambda: len(stats()) == 2, "round 2 to end")
        s = stats()
        check(len(s) == 2 and "1 new" in s[1] and re.search(r"context \d+ tokens", s[1]),
              f"Up, Up recalled the one-token line 'Hello' (not 'abc', not '/reset', not escape codes): {s}")
        wait_for(lambda: pane().rstrip().endswith(">"), "the third prompt")
        keys("C-d")
        wait_for(lambda: t.exit_status() is not None, "chat to end")
        check(t.exit_status() == "0", f"Ctrl-D ends the chat with exit 0: {t.exit_status()!r}")
        check("\x1b[A" not in pane() and "^[[A" not in pane(), "no escape codes reached the screen")


# ---- interrupted conversions ----

def test_interrupt(tmp):
    # A model big enough (128 MB) that a conversion lasts long enough to be stopped.
    mid = os.path.join(tmp, "mid")
    subprocess.run(["/usr/bin/python3", os.path.join(SRC, "scripts", "make_tiny_gpt2.py"), mid, "--layers", "2",
                    "--hidden", "512", "--heads", "8"], check=True, stdout=subprocess.DEVNULL)

    def convert_and(sig, out):
        """convert-hf, sent `sig` once its temporary folder exists; its result."""
        for attempt in range(3):
            shutil.rmtree(out, ignore_errors=True)
            p = subprocess.Popen([FTX, "convert-hf", "-i", mid, "-o", out, "-q", "-p", "1"], stderr=subprocess.PIPE,
                                 text=True)
            t0 = time.time()
            while p.poll() is None and time.time() - t0 < 30:
                if os.path.isdir(out) and any(".tmp-" in n for n in os.listdir(out)):
                    p.send_signal(sig)
                    break
                time.sleep(0.001)
            err = p.communicate()[1]
            if p.returncode < 0 or p.returncode >= 128:
                return p.returncode, err
        check(False, f"could not stop a conversion with signal {sig} in 3 tries")
        return None, ""

    out = os.path.join(tmp, "o_int")
    rc, err = convert_and(signal.SIGINT, out)
    check(rc == -signal.SIGINT and err.strip() == f"ftx: error: stopped by SIGINT (Ctrl-C): {out}/1-gpu was not written "
          "(its unfinished temporary is removed)", f"SIGINT: {rc} {err!r}")
    check(not os.path.exists(out), f"SIGINT left {listing(out) if os.path.exists(out) else ''}")
    rc, err = convert_and(signal.SIGTERM, out)
    check(rc == -signal.SIGTERM and "stopped by SIGTERM" in err and not os.path.exists(out), f"SIGTERM: {rc} {err!r}")
    # SIGKILL: nothing can run; the next conversion to the same output removes what was left, says so.
    rc, err = convert_and(signal.SIGKILL, out)
    left = [n for n in os.listdir(out) if ".tmp-" in n] if os.path.isdir(out) else []
    check(rc == -signal.SIGKILL and len(left) == 1, f"SIGKILL leaves one temporary: {left}")
    r = ftx("convert-hf", "-i", HF_BIN, "-o", out, "-q")
    check(r.returncode == 0 and left and r.stderr.strip() == f"ftx: note: removed {out}/{left[0]}, left by an interrupted "
          f"run (pid {left[0].split('-')[-1]})" and sorted(os.listdir(out)) == ["1-gpu"], f"the next run: {r.stderr!r}")
    # A file size limit: an error naming the file and the limit, no SIGXFSZ death, nothing left.
    out2 = os.path.join(tmp, "o_fsize")
    r = subprocess.run(["bash", "-c", f"ulimit -f 1000; exec {FTX} convert-hf -i {mid} -o {out2} -q"],
                       capture_output=True, text=True)
    one_line_error("ulimit -f", r, 1, "write failed: File too large (the file size limit, `ulimit -f`, is reached)")
    check(not os.path.exists(out2), f"ulimit -f left {listing(out2) if os.path.exists(out2) else ''}")
    # Another process writing the same output now: refused, its folder untouched.
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        busy = os.path.join(tmp, "o_busy", f".1-gpu.tmp-{sleeper.pid}")
        os.makedirs(busy)
        r = ftx("convert-hf", "-i", HF_BIN, "-o", os.path.dirname(busy), "-q")
        one_line_error("a running writer", r, 1, f"process {sleeper.pid} is writing this output now")
        check(os.path.isdir(busy), "the running writer's folder is untouched")
    finally:
        sleeper.kill()
        sleeper.wait()
    # An old output moved aside by a --force run that was killed before the new one moved in: put back.
    conv = os.path.join(tmp, "o_old")
    os.makedirs(conv)
    shutil.copytree(os.path.join(out, "1-gpu"), os.path.join(conv, ".1-gpu.old-999999"))
    r = ftx("convert-hf", "-i", HF_BIN, "-o", conv, "-q")
    lines = r.stderr.splitlines()
    check(r.returncode == 1 and len(lines) == 2 and lines[0].startswith(f"ftx: note: restored {conv}/1-gpu from ")
          and lines[1] == f"ftx: error: {conv}/1-gpu exists; use --force to overwrite"
          and sorted(os.listdir(conv)) == ["1-gpu"], f"the old output is put back: {lines} {os.listdir(conv)}")

    # man ftx-generate's examples run as printed (the model and files replaced by fixtures; CUDA by
    # the CPU where there is no GPU).
    man = open(os.path.join(SRC, "man", "ftx-generate.1")).read()
    ex = man[man.index(".SH EXAMPLES"):man.index(".SH SEE ALSO")]
    ex = ex.replace("\\-", "-").replace("\\\\\n", " ")
    cmds = [l.strip() for l in ex.splitlines() if l.strip().startswith(("ftx generate", "cat prompts.txt"))]
    check(len(cmds) >= 4, f"examples found: {cmds}")
    work = os.path.join(tmp, "man")
    os.makedirs(work)
    write(os.path.join(work, "prompts.txt"), "Hello\nWorld\n")
    write(os.path.join(work, "start_ids.csv"), "1,2,3\n")
    write(os.path.join(work, "requests.jsonl"), '{"text": "Hi", "top_p": 0.9, "seed": 7}\n')
    os.makedirs(os.path.join(work, "gpt2"))
    os.symlink(BPE, os.path.join(work, "gpt2", "1-gpu"))
    gpu = subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0 if shutil.which("nvidia-smi") else False
    for c in cmds:
        if not gpu:
            c = c.replace("--device cuda ", "")
        c = c.replace("ftx ", FTX + " ", 1).replace("| jq .text", "")
        r = subprocess.run(["bash", "-c", c], capture_output=True, text=True, cwd=work, timeout=120)
        check(r.returncode == 0, f"man example {c!r}: {r.stderr!r}")
        for f in ("out.jsonl", "results.jsonl"):
            if os.path.exists(os.path.join(work, f)):
                os.remove(os.path.join(work, f))


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"paths": test_paths, "weights": test_weights, "configini": test_configini, "prompts": test_prompts,
         "flags": test_flags, "spellings": test_spellings, "chat_pipe": test_chat_pipe, "chat_tty": test_chat_tty,
         "interrupt": test_interrupt}[what](tmp)
    finish(f"newuser_test {what}")


if __name__ == "__main__":
    main()
