#!/usr/bin/python3
"""The converters on the inputs a user gets wrong: each refused with a one-line error naming what it
is, nothing clobbered or left behind.

Parts (argv[1]):
  paths:     convert-hf -i that does not exist, a named weight file beside another, -m given the
             wrong kind of path (OUT, an HF folder, config.ini, a .bin, a .nemo, ...)
  interrupt: a conversion stopped by SIGINT, SIGKILL, a file size limit (ulimit -f), and one
             writing the same output at the same time; man ftx-generate's examples as printed
  allowlist: TransformerEngine 1.x `_extra_state` (io.BytesIO) in Megatron Core shards, and the
             pathlib.PosixPath torch's own FileSystemWriter records in `.metadata`: both convert, to
             the same files as the fixtures they were made from, with no code run
  values:    a NaN in the source checkpoint (HF and Megatron Core), and bf16 weights beyond fp16's
             range converted with -t fp16: refused at conversion, naming the source tensor
             (generate's "convert the model again" could not help), nothing left; a virtual-pipeline
             swiglu shard, torch_dist folders and .nemo without .metadata, Megatron Core names under
             mcore_gpt: false: each named for what it is
Environment: FTX_BIN, FTX_FIXTURES (engine/ and convert/ fixtures), FTX_SOURCE_DIR.
"""
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, extracted, finish, ftx, listing, one_line_error, write  # noqa: E402

FTX = os.environ["FTX_BIN"]
FIX = os.environ["FTX_FIXTURES"]
SRC = os.environ["FTX_SOURCE_DIR"]
BPE = os.path.join(FIX, "engine", "gpt2_bpe", "1-gpu")     # GPT-2 tokenizer, fp16
HF_BIN = os.path.join(FIX, "convert", "hf_gpt2_bin", "model")
HF_ST = os.path.join(FIX, "convert", "hf_gpt2_safetensors", "model")
MCORE = os.path.join(SRC, "tests", "fixtures", "mcore")


def read_floats(path, fmt):
    data = open(path, "rb").read()
    return struct.unpack(f"<{len(data) // struct.calcsize(fmt)}{fmt}", data)


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


def same_bins(what, a, b):
    fa = sorted(f for f in os.listdir(os.path.join(a, "1-gpu")) if f.endswith(".bin")) if os.path.isdir(a) else []
    fb = sorted(f for f in os.listdir(os.path.join(b, "1-gpu")) if f.endswith(".bin")) if os.path.isdir(b) else []
    check(fa and fa == fb and all(open(os.path.join(a, "1-gpu", f), "rb").read() == open(os.path.join(b, "1-gpu", f), "rb").read()
                                  for f in fa), f"{what}: the converted files differ ({len(fa)} vs {len(fb)})")


def test_allowlist(tmp):
    import torch
    it = "iter_0000010"
    # TE 1.x: every uint8 _extra_state of the TE fixture as TE 1.x stored it, an io.BytesIO holding a
    # torch.save'd dict.
    src = os.path.join(MCORE, "te", "megatron", "tp1pp1", "legacy")
    te1 = os.path.join(tmp, "te1")
    shutil.copytree(src, te1)
    shard = os.path.join(te1, it, "mp_rank_00", "model_optim_rng.pt")
    ck = torch.load(shard)
    n = 0
    for k in list(ck["model"]):
        if k.endswith("_extra_state"):
            buf = io.BytesIO()
            torch.save({"scale_fwd": torch.ones(3), "recipe": "delayed"}, buf)
            buf.seek(0)
            ck["model"][k] = buf
            n += 1
    torch.save(ck, shard)
    check(n > 0, "the TE fixture has _extra_state entries")
    outs = {}
    for name, path in [("te2", src), ("te1", te1)]:
        outs[name] = os.path.join(tmp, "out_" + name)
        r = ftx("convert-megatron", "-i", path, "-o", outs[name], "-q")
        check(r.returncode == 0, f"convert-megatron {name}: {r.returncode} {r.stderr.strip()!r}")
    same_bins("TE 1.x BytesIO _extra_state", outs["te2"], outs["te1"])
    # PyTorch's FileSystemWriter keeps the folder in StorageMeta.checkpoint_id as a PosixPath.
    from dcp_pickle import load_meta, save_meta, stub_class
    import pathlib
    dist = os.path.join(MCORE, "classic", "megatron", "tp2pp1", "dist")
    pp = os.path.join(tmp, "pp")
    shutil.copytree(dist, pp)
    meta_path = os.path.join(pp, it, ".metadata")
    meta = load_meta(meta_path)
    sm = stub_class("torch.distributed.checkpoint.metadata", "StorageMeta")()
    sm.state = {"checkpoint_id": pathlib.PosixPath(os.path.join(pp, it)), "save_id": "2f6c0e", "load_id": None,
                "modules": []}
    meta.state["storage_meta"] = sm
    save_meta(meta, meta_path)
    check(b"pathlib" in open(meta_path, "rb").read(), "the .metadata names pathlib.PosixPath")
    for name, path in [("dist", dist), ("posix", pp)]:
        outs[name] = os.path.join(tmp, "out_" + name)
        r = ftx("convert-megatron", "-i", path, "-o", outs[name], "-q")
        check(r.returncode == 0, f"convert-megatron {name}: {r.returncode} {r.stderr.strip()!r}")
    same_bins("DCP .metadata with a PosixPath", outs["dist"], outs["posix"])
    # Still nothing else: pathlib's other callables stay refused.
    meta = load_meta(meta_path)
    meta.state["storage_meta"].state["checkpoint_id"] = stub_class("pathlib", "Path").__new__(stub_class("pathlib", "Path"))
    save_meta(meta, meta_path)
    r = ftx("convert-megatron", "-i", pp, "-o", os.path.join(tmp, "evil"), "-q")
    one_line_error("pathlib.Path in .metadata", r, 1, "refusing to load global 'pathlib.Path'")


def test_values(tmp):
    import torch
    src = os.path.join(HF_BIN, "pytorch_model.bin")
    sd = torch.load(src)
    name = next(k for k in sd if k.endswith("h.1.mlp.c_fc.weight"))

    def hf_copy(tag, edit):
        d = os.path.join(tmp, tag)
        shutil.copytree(HF_BIN, d)
        m = {k: v.clone() for k, v in sd.items()}
        edit(m)
        torch.save(m, os.path.join(d, "pytorch_model.bin"))
        return d

    def refused(label, argv, out, *needles):
        r = ftx(*argv)
        one_line_error(label, r, 1, *needles)
        check(not os.path.exists(out) or not os.listdir(out), f"{label}: {out} holds {os.listdir(out) if os.path.exists(out) else []}")

    # H-8: one NaN in an HF weight.
    d = hf_copy("hf_nan", lambda m: m[name].view(-1).__setitem__(7, float("nan")))
    out = os.path.join(tmp, "o_nan")
    refused("HF NaN", ["convert-hf", "-i", d, "-o", out], out, name, "1 non-finite value", "the first at element 7",
            "in the checkpoint itself")
    # H-9: a bf16 checkpoint with a weight of 1e5, to fp16 (largest finite 65504).
    def big_bf16(m):
        for k, v in list(m.items()):
            if v.is_floating_point():
                m[k] = v.to(torch.bfloat16)
        m[name].view(-1)[3] = 1e5
    d = hf_copy("hf_big", big_bf16)
    out = os.path.join(tmp, "o_big")
    refused("bf16 1e5 to fp16", ["convert-hf", "-i", d, "-o", out, "-t", "fp16"], out, name,
            "beyond float16's range (largest finite 65504)", "-t bf16 or -t fp32")
    r = ftx("convert-hf", "-i", d, "-o", os.path.join(tmp, "o_big_bf16"), "-t", "bf16", "-q")
    check(r.returncode == 0, f"the same to bf16 converts: {r.stderr!r}")
    # Megatron Core legacy shard with a NaN in linear_fc2.
    leg = os.path.join(tmp, "mc_nan")
    shutil.copytree(os.path.join(MCORE, "modern", "megatron", "tp1pp1", "legacy"), leg)
    shard = os.path.join(leg, "iter_0000010", "mp_rank_00", "model_optim_rng.pt")
    ck = torch.load(shard)
    ck["model"]["decoder.layers.1.mlp.linear_fc2.weight"].view(-1)[0] = float("nan")
    torch.save(ck, shard)
    out = os.path.join(tmp, "o_mc")
    refused("mcore NaN", ["convert-megatron", "-i", leg, "-o", out], out, "mp_rank_00:layers.1.mlp.linear_fc2.weight",
            "in the checkpoint itself")
    # a virtual-pipeline shard (model0, model1) of a swiglu model: the pipeline is named, not swiglu.
    vpp = os.path.join(tmp, "vpp")
    shutil.copytree(os.path.join(MCORE, "modern", "megatron", "tp1pp1", "legacy"), vpp)
    shard = os.path.join(vpp, "iter_0000010", "mp_rank_00", "model_optim_rng.pt")
    ck = torch.load(shard)
    ck["model0"] = ck.pop("model")
    ck["model1"] = dict(ck["model0"])
    ck["args"].virtual_pipeline_model_parallel_size = 2
    torch.save(ck, shard)
    refused("virtual pipeline, swiglu", ["convert-megatron", "-i", vpp, "-o", out], out,
            "virtual pipeline checkpoints (model0, ...) are not supported")
    # a torch_dist folder without .metadata.
    dn = os.path.join(tmp, "d-nometa")
    shutil.copytree(os.path.join(MCORE, "modern", "megatron", "tp1pp1", "dist"), dn)
    os.remove(os.path.join(dn, "iter_0000010", ".metadata"))
    refused("torch_dist without .metadata", ["convert-megatron", "-i", dn, "-o", out], out,
            "holds torch_dist chunk files", "but no .metadata")
    # B-20 (#40): a distributed .nemo without model_weights/.metadata.
    stage = extracted(os.path.join(MCORE, "modern", "nemo", "tp1pp1_dist.nemo"), os.path.join(tmp, "nemo-nometa"))
    os.remove(os.path.join(stage, "model_weights", ".metadata"))
    refused("dist .nemo without .metadata", ["convert-nemo", "-i", stage, "-o", out], out,
            "is a torch_dist chunk file, but model_weights/.metadata", "is missing")
    # B-21: Megatron Core names under mcore_gpt: false.
    stage = extracted(os.path.join(MCORE, "classic", "nemo", "tp2pp1_legacy.nemo"), os.path.join(tmp, "nemo-notmcore"))
    y = os.path.join(stage, "model_config.yaml")
    text = open(y).read()
    check("mcore_gpt: true" in text, "the fixture's yaml says mcore_gpt: true")
    write(y, text.replace("mcore_gpt: true", "mcore_gpt: false"))
    refused("mcore names, mcore_gpt false", ["convert-nemo", "-i", stage, "-o", out], out,
            "model_config.yaml says mcore_gpt: false, but the weights have Megatron Core names", "set mcore_gpt: true")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"paths": test_paths, "interrupt": test_interrupt, "allowlist": test_allowlist, "values": test_values}[what](tmp)
    finish(f"inputs_test {what}")


if __name__ == "__main__":
    main()
