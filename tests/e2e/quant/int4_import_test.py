#!/usr/bin/env python3
"""`ftx convert-hf` of GPTQ and AWQ checkpoints into ftx's INT4 files (issue 50), on the committed
fixtures of tests/fixtures/int4_import (scripts/fixtures/make_gptq_awq_fixtures.py: AutoAWQ 0.2.9's
own packer; GPTQModel 7.7.0's packing transcribed; tests/fixtures/int4_import/SOURCE.md), and of
llm-compressor's compressed-tensors checkpoints into ftx's INT4 and INT8 files
(tests/fixtures/compressed_tensors/SOURCE.md).

Usage: int4_import_test.py {weights|logits|errors}
  weights: every case at TP 1, 2 and 4 (AWQ and GPTQ group 64 without act-order at TP 1 and 2; their
           TP 4 is a refusal below): each rank's INT4 files (values, scales, zeros, g_idx) dequantised
           here in float64 equal the producer-side dequantisation exactly, after the transcription of
           the producer's unpacking used here has reproduced the producer's own output (sha256 in
           cases.json). Per rank as FT splits the float weights: q/k/v fused into query_key_value with
           [Q | K | V] of the rank's heads (K/V heads copied per rank at TP 4 > 2 K/V heads), gate and
           up column-parallel, o and down row-parallel. No float file for a layer GEMM; config.ini's
           weight_only_precision = int4 and int4_group_size; the embeddings, norms and lm_head as
           the checkpoint holds them. llm-compressor's W8A16 checkpoints (int8 channel and tensor) at
           TP 1, 2 and 4: each rank's INT8 files (values, column scales) as q * s equal
           compressed-tensors' float64 decompression exactly; weight_only_precision = int8.
  logits:  every case converted at TP 1 and 2 runs in ftx's engine (the gtest convert_arch_test's
           ArchEngine.LogitsMatchReference, alone and under `mpirun -np 2`): the logits of every step
           along the greedy paths of a float64 forward of the dequantised model
           (tests/reference/hf_arch_reference.py with each quantised Linear's weight the producer-side
           dequantisation above) within 1e-4 of the row's largest logit.
  errors:  every refused quantization_config option by key and value (llm-compressor's int8 groups
           and zero points, FP8 static and dynamic as the producer saved them), a v1 zero field of 15, a
           group split across ranks, q/k/v of differing act-orders (they fuse into one GEMM), a family ftx does not import quantised, a Linear left float:
           one-line errors, exit 1, nothing written.
Environment: FTX_BIN.
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.normpath(os.path.join(E2E, "..", ".."))
sys.path.insert(0, E2E)
from e2e_util import check, finish, listing, one_line_error, run_ftx as ftx  # noqa: E402

FIX = os.path.join(SRC, "tests", "fixtures", "int4_import")
CASES = json.load(open(os.path.join(FIX, "cases.json")))
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj"]
DT = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I32": np.int32, "U8": np.uint8, "I64": np.int64}


# ---- safetensors, read and written here (the test venv need not have the package) -----------------

def read_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        if v["dtype"] == "BF16":  # widened exactly to fp32
            h = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.uint16).astype(np.uint32) << 16
            out[k] = h.view(np.float32).reshape(v["shape"]).copy()
            continue
        out[k] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=DT[v["dtype"]]).reshape(v["shape"]).copy()
    return out


def write_st(path, tensors):
    names = {np.dtype(v): k for k, v in DT.items()}
    header, blobs, off = {}, [], 0
    for k, t in tensors.items():
        b = np.ascontiguousarray(t).tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---- the producers' dequantisation, transcribed ----------------------------------------------------

SHIFTS = np.arange(0, 32, 4, dtype=np.uint64)


def fields(words):
    """Each int32 word's eight 4-bit fields, low bits first: [..., 8]."""
    return (words.view(np.uint32).astype(np.uint64)[..., None] >> SHIFTS) & 0xF


def gptq_reference(t, module, v1):
    """GPTQModel: v1 -> v2 (qzeros += 0x11111111 as whole words), dequantize_weight:
    scales[g_idx] * (q - zeros[g_idx]); [out, in] float64."""
    qz = t[module + ".qzeros"].view(np.uint32).astype(np.uint64)
    if v1:
        qz = (qz + 0x11111111) % (1 << 32)
    scales = t[module + ".scales"].astype(np.float64)
    zeros = fields(qz.astype(np.uint32).view(np.int32)).reshape(qz.shape[0], -1)[:, :scales.shape[1]]
    g_idx = t[module + ".g_idx"].astype(np.int64)
    q = fields(t[module + ".qweight"]).transpose(0, 2, 1).reshape(-1, scales.shape[1])[:g_idx.shape[0]]
    return (scales[g_idx] * (q.astype(np.float64) - zeros[g_idx].astype(np.float64))).T


AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def awq_reference(t, module, group_size):
    """AutoAWQ's dequantize_gemm: unpack_awq, reverse_awq_order, (q - z) * scales per group; [out, in]."""
    def unpack(words):
        f = fields(words)  # [rows, words, 8]: field i of word c
        return f[:, :, AWQ_REVERSE_ORDER].reshape(words.shape[0], -1)
    q, z = unpack(t[module + ".qweight"]), unpack(t[module + ".qzeros"])
    s = t[module + ".scales"].astype(np.float64)
    z = np.repeat(z, group_size, axis=0).astype(np.float64)
    s = np.repeat(s, group_size, axis=0)
    return ((q.astype(np.float64) - z) * s).T


def references(case):
    info = CASES["cases"][case]
    t = read_st(os.path.join(FIX, case, "model.safetensors"))
    refs = {}
    for module in sorted({k.rsplit(".", 1)[0] for k in t if k.endswith(".qweight")}):
        if info["method"] == "gptq":
            w = gptq_reference(t, module, info["settings"]["checkpoint_format"] == "gptq")
        else:
            w = awq_reference(t, module, info["settings"]["group_size"])
        w = np.ascontiguousarray(w, dtype="<f8")
        digest = hashlib.sha256(w.tobytes()).hexdigest()
        check(digest == info["reference_sha256"].get(module + ".weight"),
              f"{case}: {module}: the transcribed unpacking differs from the producer's (sha256)")
        refs[module] = w
    return t, refs


# ---- ftx's files ---------------------------------------------------------------------------------

def ini_value(folder, key):
    for line in open(os.path.join(folder, "config.ini")):
        k, _, v = line.partition("=")
        if k.strip() == key:
            return v.strip()
    return None


def int4_dequantized(folder, gemm, rank, rows, cols, group_size):
    """One rank's INT4 files of a [rows, cols] GEMM as float64, by docs/quantization.md's formula
    W[k][n] = (u[k][n] - z[g(k)][n]) * s[g(k)][n]; None when a file's size disagrees."""
    def f(kind, dtype):
        p = os.path.join(folder, f"{gemm}.weight.{kind}.{rank}.bin")
        return np.fromfile(p, dtype=dtype) if os.path.exists(p) else None
    packed, scales = f("int4", np.uint8), f("int4_scales", np.float32)
    zeros, g_idx = f("int4_zeros", np.uint8), f("int4_g_idx", np.int32)
    if packed is None or scales is None or packed.size != rows * cols // 2 or scales.size % cols:
        return None
    u = np.empty((rows, cols), dtype=np.int64)
    p = packed.reshape(rows, cols // 2)
    u[:, 0::2] = p & 0xF
    u[:, 1::2] = p >> 4
    s = scales.reshape(-1, cols).astype(np.float64)
    z = zeros.reshape(-1, cols).astype(np.int64) if zeros is not None else np.full(s.shape, 8, dtype=np.int64)
    g = g_idx.astype(np.int64) if g_idx is not None else np.arange(rows) // (group_size if group_size > 0 else rows)
    return (u - z[g]).astype(np.float64) * s[g]


def expected_pieces(refs, layer, tp, heads, kv_source, kv_ini, d):
    """Each rank's [in, out] float64 matrix per FT GEMM, from the producer's [out, in] references, as
    FT splits the float weights (TensorRT-LLM's layout: K/V heads copied when fewer than ranks)."""
    p = f"model.layers.{layer}."
    ft = f"model.layers.{layer}."
    out = {}
    q, k, v = (refs[p + "self_attn." + n].T for n in ("q_proj", "k_proj", "v_proj"))
    qn = heads * d // tp
    for r in range(tp):
        if kv_ini == 1:
            kv_heads = [0]
        else:
            per = kv_ini // tp
            kv_heads = [j // (kv_ini // kv_source) for j in range(r * per, (r + 1) * per)]
        parts = [q[:, r * qn:(r + 1) * qn]] + [m[:, h * d:(h + 1) * d] for m in (k, v) for h in kv_heads]
        out[(ft + "attention.query_key_value", r)] = np.concatenate(parts, axis=1)
        o = refs[p + "self_attn.o_proj"].T
        out[(ft + "attention.dense", r)] = np.split(o, tp, axis=0)[r]
        out[(ft + "mlp.dense_h_to_4h", r)] = np.split(refs[p + "mlp.gate_proj"].T, tp, axis=1)[r]
        out[(ft + "mlp.dense_h_to_4h.gate", r)] = np.split(refs[p + "mlp.up_proj"].T, tp, axis=1)[r]
        out[(ft + "mlp.dense_4h_to_h", r)] = np.split(refs[p + "mlp.down_proj"].T, tp, axis=0)[r]
    return out


def int8_dequantized(folder, gemm, rank, rows, cols):
    """One rank's INT8 files of a [rows, cols] GEMM as float64, by docs/quantization.md's formula
    W[k][n] = q[k][n] * s[n]; None when a file's size disagrees."""
    def f(kind, dtype):
        p = os.path.join(folder, f"{gemm}.weight.{kind}.{rank}.bin")
        return np.fromfile(p, dtype=dtype) if os.path.exists(p) else None
    q, s = f("int8_wo", np.int8), f("int8_wo_scales", np.float32)
    if q is None or s is None or q.size != rows * cols or s.size != cols:
        return None
    return q.reshape(rows, cols).astype(np.float64) * s.astype(np.float64)[None, :]


def test_int8_weights(tmp):
    """llm-compressor's W8A16 checkpoints: every rank's INT8 files against compressed-tensors' own
    float64 decompression (reference.safetensors), exactly."""
    for case in CT_INT8:
        folder = os.path.join(CT, case, "model")
        c = json.load(open(os.path.join(folder, "config.json")))
        heads, kv_source = c["num_attention_heads"], c["num_key_value_heads"]
        d = c["hidden_size"] // heads
        ref = read_st(os.path.join(CT, case, "reference.safetensors"))
        refs = {k[:-len(".weight")]: v for k, v in ref.items() if k.endswith(".weight")}
        for tp in (1, 2, 4):
            out = os.path.join(tmp, f"{case}-tp{tp}")
            r = ftx(["convert-hf", "-i", folder, "-o", out, "-g", str(tp)])
            if not check(r.returncode == 0, f"{case} TP {tp}: convert-hf failed: {r.stderr.strip()}"):
                continue
            ft = os.path.join(out, f"{tp}-gpu")
            check(ini_value(ft, "weight_only_precision") == "int8", f"{case} TP {tp}: weight_only_precision")
            check(ini_value(ft, "int4_group_size") is None, f"{case} TP {tp}: int4_group_size written")
            kv_ini = int(ini_value(ft, "kv_head_num"))
            files = os.listdir(ft)
            check(not any(".int4" in f for f in files), f"{case} TP {tp}: INT4 files written")
            n = 0
            for layer in range(c["num_hidden_layers"]):
                for (gemm, rank), want in expected_pieces(refs, layer, tp, heads, kv_source, kv_ini, d).items():
                    check(not os.path.exists(os.path.join(ft, f"{gemm}.weight.{rank}.bin")),
                          f"{case} TP {tp}: a float file for {gemm}")
                    got = int8_dequantized(ft, gemm, rank, *want.shape)
                    if check(got is not None, f"{case} TP {tp}: {gemm} rank {rank}: INT8 files missing or of the "
                                              f"wrong size for {want.shape}"):
                        n += 1
                        check(np.array_equal(got, want), f"{case} TP {tp}: {gemm} rank {rank}: max difference "
                                                         f"{np.abs(got - want).max()} from compressed-tensors'")
            print(f"{case} TP {tp}: {n} INT8 GEMM pieces equal compressed-tensors' float64 decompression")


def tps_of(case):
    s = CASES["cases"][case]["settings"]
    # Row-parallel o_proj/down_proj hold 128/4 = 32 rows a rank at TP 4: groups of 64 without
    # act-order would straddle two ranks (refused, errors part).
    if s["group_size"] == 64 and not s.get("desc_act", False):
        return [1, 2]
    return [1, 2, 4]


def test_weights():
    cfg = CASES["config"]
    heads, kv_source = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg["hidden_size"] // heads
    worst = 0.0
    tmp = tempfile.mkdtemp()
    try:
        for case in sorted(CASES["cases"]):
            t, refs = references(case)
            for tp in tps_of(case):
                out = os.path.join(tmp, f"{case}-tp{tp}")
                r = ftx(["convert-hf", "-i", os.path.join(FIX, case), "-o", out, "-g", str(tp)])
                if not check(r.returncode == 0, f"{case} TP {tp}: convert-hf failed: {r.stderr.strip()}"):
                    continue
                folder = os.path.join(out, f"{tp}-gpu")
                files = os.listdir(folder)
                check(ini_value(folder, "weight_only_precision") == "int4", f"{case} TP {tp}: weight_only_precision")
                gs = int(ini_value(folder, "int4_group_size"))
                want_gs = CASES["cases"][case]["settings"]["group_size"]
                check(gs == (want_gs if want_gs > 0 else 0), f"{case} TP {tp}: int4_group_size {gs}")
                kv_ini = int(ini_value(folder, "kv_head_num"))
                floats = [f for f in files if any(f.endswith(g + f".weight.{k}.bin") for g in
                          ("query_key_value", "attention.dense", "dense_h_to_4h", "dense_h_to_4h.gate", "dense_4h_to_h")
                          for k in range(tp))]
                check(not floats, f"{case} TP {tp}: float layer GEMM files written: {floats[:3]}")
                for layer in range(cfg["num_hidden_layers"]):
                    for (gemm, rank), want in expected_pieces(refs, layer, tp, heads, kv_source, kv_ini, d).items():
                        got = int4_dequantized(folder, gemm, rank, *want.shape, gs)
                        if not check(got is not None, f"{case} TP {tp}: {gemm} rank {rank}: files missing or of "
                                                      f"the wrong size for {want.shape}"):
                            continue
                        worst = max(worst, float(np.abs(got - want).max()))
                        check(np.array_equal(got, want), f"{case} TP {tp}: {gemm} rank {rank}: max difference "
                                                         f"{np.abs(got - want).max()} from the producer's")
                # The float tensors are the checkpoint's.
                for src, dst in (("model.embed_tokens.weight", "model.wte.bin"), ("lm_head.weight", "model.lm_head.weight.bin"),
                                 ("model.norm.weight", "model.final_layernorm.weight.bin"),
                                 ("model.layers.0.input_layernorm.weight", "model.layers.0.input_layernorm.weight.bin")):
                    got = np.fromfile(os.path.join(folder, dst), dtype=np.float32)
                    check(np.array_equal(got, t[src].reshape(-1)), f"{case} TP {tp}: {dst} differs from {src}")
                manifest = json.load(open(os.path.join(folder, "manifest.json")))
                listed = {f["file"] for f in manifest["files"]}
                check(all(f in listed for f in files if ".int4" in f), f"{case} TP {tp}: INT4 files missing from the manifest")
                print(f"{case} TP {tp}: {sum('.int4' in f for f in files)} INT4 files equal the producer's dequantisation")
    finally:
        shutil.rmtree(tmp)
    print(f"largest difference from the producer-side float64 dequantisation: {worst}")
    tmp = tempfile.mkdtemp()
    try:
        test_int8_weights(tmp)
    finally:
        shutil.rmtree(tmp)


# ---- the engine on the imported folders -----------------------------------------------------------

PROMPTS = [[1, 5, 9, 13, 2, 40, 7], [3, 33, 17], [62, 11, 4, 4, 50, 21, 8, 30, 1]]
NEW_TOKENS = 6


CT = os.path.join(SRC, "tests", "fixtures", "compressed_tensors")
# llm-compressor's int4 fixtures (tests/fixtures/compressed_tensors/SOURCE.md): name -> TP sizes
# (group 64 would split o_proj's 64 inputs across two ranks at TP 2: refused, not run).
CT_CASES = {"w4a16_group_sym": (1, 2), "w4a16_group_asym": (1, 2), "w4a16_channel_asym": (1, 2),
            "w4a16_group64_fp32": (1,), "w4a16_tensor": (1, 2), "w8a16_channel": (1, 2), "w8a16_tensor": (1, 2)}
# Its W8A16 (int8, symmetric, one scale per output or per matrix): ftx's INT8 weight-only files.
CT_INT8 = ("w8a16_channel", "w8a16_tensor")
# Its schemes ftx refuses, by the key and value config.json holds.
CT_REFUSED = {
    "w8a16_group": "quantization_config.config_groups.group_0.weights.strategy group",
    "w8a16_channel_asym": "quantization_config.config_groups.group_0.weights.symmetric false",
    "fp8_static": "quantization_config.config_groups.group_0.weights.type float",
    "fp8_dynamic": "quantization_config.config_groups.group_0.input_activations.dynamic true",
}


def reference_model(folder, t, refs):
    """hf_arch_reference's float64 model of the checkpoint in `folder`, each quantised Linear's weight
    the producer-side dequantisation."""
    import torch
    sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
    import hf_arch_reference
    c = json.load(open(os.path.join(folder, "config.json")))
    quantised = (".qweight", ".qzeros", ".scales", ".g_idx", ".weight_packed", ".weight_scale", ".weight_zero_point",
                 ".weight_shape", ".weight_g_idx")
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in t.items() if not k.endswith(quantised)}
    for module, w in refs.items():
        sd[module + ".weight"] = torch.from_numpy(w)
    return {"llama": hf_arch_reference.llama}[c["model_type"]](c, sd)


def test_logits():
    import torch
    sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
    import gpt_reference as gref
    exe = os.environ.get("FTX_ARCH_ENGINE_TEST")
    if not check(bool(exe) and os.path.exists(exe), f"FTX_ARCH_ENGINE_TEST ({exe}) is not the convert_arch_test binary"):
        return
    mpirun = shutil.which("mpirun")
    tmp = tempfile.mkdtemp()
    try:
        dirs = {1: [], 2: []}
        sources = [(case, os.path.join(FIX, case), (1, 2)) for case in sorted(CASES["cases"])]
        sources += [(case, os.path.join(CT, case, "model"), tps) for case, tps in CT_CASES.items()]
        for case, folder, tps in sources:
            if case in CASES["cases"]:
                t, refs = references(case)
            else:  # compressed-tensors' own float64 decompression, [out, in]
                t = read_st(os.path.join(folder, "model.safetensors"))
                ref = read_st(os.path.join(CT, case, "reference.safetensors"))
                refs = {k[:-len(".weight")]: v for k, v in ref.items() if k.endswith(".weight")}
            cfg, W = reference_model(folder, t, refs)
            c = json.load(open(os.path.join(folder, "config.json")))
            d = os.path.join(tmp, case)
            for tp in tps:
                r = ftx(["convert-hf", "-i", folder, "-o", os.path.join(d, "ft"), "-g", str(tp), "-t", "fp32"])
                if check(r.returncode == 0, f"{case} TP {tp}: convert-hf failed: {r.stderr.strip()}"):
                    dirs[tp].append(d)
            end_id = c["eos_token_id"] if isinstance(c["eos_token_id"], int) else c["eos_token_id"][0]
            e = {"end_id": end_id, "vocab_size": c["vocab_size"], "prompts": PROMPTS,
                 "prompt_logits": [], "greedy": [], "greedy_logits": []}
            for p in PROMPTS:
                e["prompt_logits"].append(gref.forward(cfg, W, p)[-1].tolist())
                toks, steps = gref.greedy(cfg, W, p, NEW_TOKENS, end_id)
                e["greedy"].append(toks)
                e["greedy_logits"].append([s.tolist() for s in steps])
            with open(os.path.join(d, "expected.json"), "w") as f:
                json.dump(e, f)
        launches = [("TP 1", [exe], dirs[1])]
        if mpirun:
            launches.append(("TP 2", [mpirun, "-np", "2", "--oversubscribe", "--allow-run-as-root", "-x",
                                      "OMP_NUM_THREADS=1", "-x", "FTX_ARCH_MODELS", exe], dirs[2]))
        for tag, cmd, ds in launches:
            env = dict(os.environ, FTX_ARCH_MODELS=",".join(ds))
            r = subprocess.run(cmd + ["--gtest_filter=ArchEngine.*", "--gtest_color=no"], env=env, capture_output=True,
                               text=True)
            ok = r.returncode == 0 and "[  PASSED  ] 1 test" in r.stdout and "SKIPPED" not in r.stdout
            if check(ok, f"engine logits {tag}: {r.stdout[-3000:]}{r.stderr[-1000:]}"):
                print(f"{tag}: {len(ds)} imported checkpoints' logits within 1e-4 of the dequantised float64 model "
                      f"along its greedy paths ({', '.join(os.path.basename(x) for x in ds)})")
    finally:
        shutil.rmtree(tmp)


# ---- refusals ------------------------------------------------------------------------------------

def variant(tmp, case, name, qc_change=None, tensors_change=None, config_change=None):
    folder = os.path.join(tmp, name)
    shutil.copytree(os.path.join(FIX, case), folder)
    cfg = json.load(open(os.path.join(folder, "config.json")))
    if qc_change:
        qc_change(cfg["quantization_config"])
    if config_change:
        config_change(cfg)
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"))
    if tensors_change:
        t = read_st(os.path.join(folder, "model.safetensors"))
        tensors_change(t)
        write_st(os.path.join(folder, "model.safetensors"), t)
    return folder


def refused(tmp, name, folder, *needles, tp=1):
    out = os.path.join(tmp, "out-" + name)
    r = ftx(["convert-hf", "-i", folder, "-o", out, "-g", str(tp)])
    one_line_error(name, r, 1, *needles)
    check(not os.path.exists(out) or not listing(out), f"{name}: something was written: {listing(out)[:3]}")


def set_key(k, v):
    def f(qc):
        qc[k] = v
    return f


def v1_zero_field_15(t):
    qz = t["model.layers.0.self_attn.q_proj.qzeros"].view(np.uint32)
    qz[0, 0] = (qz[0, 0] & ~np.uint32(0xF)) | np.uint32(0xF)


def k_proj_own_order(t):
    """k_proj's groups in another act-order than q_proj's and v_proj's (the same group sizes)."""
    g = t["model.layers.0.self_attn.k_proj.g_idx"]
    t["model.layers.0.self_attn.k_proj.g_idx"] = np.roll(g, 1)


def float_down_proj(t):
    m = "model.layers.0.mlp.down_proj"
    for k in ("qweight", "qzeros", "scales", "g_idx"):
        t.pop(f"{m}.{k}", None)
    t[m + ".weight"] = np.zeros((128, 128), dtype=np.float32)


def test_errors():
    tmp = tempfile.mkdtemp()
    try:
        g, a = "gptq_sym_g32", "awq_g32"
        cases = [
            ("gptq bits 3", g, set_key("bits", 3), "quantization_config.bits = 3"),
            ("gptq bits 8", g, set_key("bits", 8), "quantization_config.bits = 8"),
            ("gptq group_size 0", g, set_key("group_size", 0), "quantization_config.group_size = 0"),
            ("gptq checkpoint_format marlin", g, set_key("checkpoint_format", "marlin"),
             'quantization_config.checkpoint_format = "marlin"'),
            ("gptq format bitblas", g, lambda qc: (qc.pop("checkpoint_format"), qc.update(format="bitblas")),
             'quantization_config.format = "bitblas"'),
            ("gptq pack_dtype int16", g, set_key("pack_dtype", "int16"), 'quantization_config.pack_dtype = "int16"'),
            ("gptq lm_head true", g, set_key("lm_head", True), "quantization_config.lm_head = true"),
            ("gptq dynamic", g, set_key("dynamic", {"-:.*down_proj.*": {}}), "quantization_config.dynamic = "),
            ("gptq unknown key", g, set_key("rotation", "hadamard"), 'quantization_config.rotation = "hadamard"',
             "not a key ftx knows for gptq"),
            ("awq version gemv", a, set_key("version", "gemv"), 'quantization_config.version = "gemv"'),
            ("awq version marlin", a, set_key("version", "marlin"), 'quantization_config.version = "marlin"'),
            ("awq zero_point false", a, set_key("zero_point", False), "quantization_config.zero_point = false"),
            ("awq backend llm-awq", a, set_key("backend", "llm-awq"), 'quantization_config.backend = "llm-awq"'),
            ("awq bits 8", a, set_key("bits", 8), "quantization_config.bits = 8"),
            ("awq group_size -1", a, set_key("group_size", -1), "quantization_config.group_size = -1"),
            ("method bitsandbytes", g, set_key("quant_method", "bitsandbytes"),
             'quantization_config.quant_method = "bitsandbytes"'),
        ]
        for name, case, change, *needles in cases:
            refused(tmp, name, variant(tmp, case, name.replace(" ", "_"), qc_change=change), "config.json", *needles)
        refused(tmp, "gptq v1 zero field 15",
                variant(tmp, g, "v1_15", tensors_change=v1_zero_field_15), "q_proj.qzeros", "stores 15", "gptq_v2")
        refused(tmp, "q/k/v with differing g_idx",
                variant(tmp, "gptq_asym_actorder_g64", "kv_order", tensors_change=k_proj_own_order), "k_proj")
        refused(tmp, "awq g64 at TP 4", os.path.join(FIX, "awq_g64"), "o_proj", "64", tp=4)
        refused(tmp, "gptq with a float down_proj",
                variant(tmp, g, "float_down", tensors_change=float_down_proj), "mlp.dense_4h_to_h", "INT4")
        # A family ftx does not import quantised: GPT-2 (fused Conv1D c_attn).
        gpt2 = os.path.join(SRC, "tests", "fixtures", "hf5", "gpt2", "safetensors")
        folder = os.path.join(tmp, "gpt2_gptq")
        shutil.copytree(gpt2, folder)
        cfg = json.load(open(os.path.join(folder, "config.json")))
        cfg["quantization_config"] = json.load(open(os.path.join(FIX, g, "config.json")))["quantization_config"]
        json.dump(cfg, open(os.path.join(folder, "config.json"), "w"))
        refused(tmp, "gpt2 with gptq", folder, "model_type 'gpt2'", "llama")
        for case, needle in CT_REFUSED.items():
            refused(tmp, "compressed-tensors " + case, os.path.join(CT, case, "model"), "config.json", needle)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    part = sys.argv[1] if len(sys.argv) > 1 else "weights"
    {"weights": test_weights, "logits": test_logits, "errors": test_errors}[part]()
    finish(f"int4_import {part}")
