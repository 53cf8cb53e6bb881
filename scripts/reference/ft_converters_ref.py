#!/usr/bin/python3
"""Reference converters, re-implemented from FasterTransformer's converter scripts (not from ftx's
code) in the style of megatron_ckpt_convert.py / nemo_ckpt_convert.py / huggingface_gpt_convert.py
and TensorRT-LLM's hf_gpt_convert.py / nemo_ckpt_convert.py: the same tensor names, transposes, QKV
reshapes, factor-based TP merge/split (output rank i concatenates training ranks i*f .. i*f+f-1, or a
training shard is cut into f ranks), `tofile` in the requested dtype, and the config.ini keys those
scripts write. The layout is docs/ft-layout.md's. It is an independent second implementation used
only to check ftx's output byte for byte.

Where ftx deliberately differs from FT, this reference implements ftx's documented behaviour:
  * Megatron checkpoint_version 1 and 2 QKV orders are reordered (FT reorders only v3);
  * layernorm_eps is always written (FT's HF and NeMo converters omit it); for a Megatron
    checkpoint without args it is Megatron's default 1e-5 (FT assumes 1e-6);
  * HF inter_size is n_inner when set (FT writes 4*n_embd).
Only the keys FT's converters write (plus the TL keys TensorRT-LLM's loader requires) are written here;
ftx may write more.

HF GPT-J, GPT-NeoX, BLOOM and OPT (kinds gptj, gptneox, bloom, opt) follow FT's
huggingface_gptj_ckpt_convert.py, huggingface_gptneox_convert.py, huggingface_bloom_convert.py and
huggingface_opt_convert.py, on the raw HF state dict (no
`transformers` needed), with ftx's documented differences:
  * GPT-J: rotary_embedding is the head size when rotary_dim is null (FT writes "None", which FT's
    reader cannot parse); weight_data_type and the files follow -t (FT always writes fp32);
  * GPT-NeoX without parallel residual: attention.dense.bias and mlp.dense_4h_to_h.bias are NOT
    divided by T (FT's runtime adds them once after the all-reduce, so FT's division is a bug for
    T > 1). With parallel residual, mlp.attention.bias.sum is FT's: each bias in the file dtype,
    divided by T in that dtype, summed in float32; the two separate bias files FT also writes there
    (its loader never reads them) are not written. model_name is _name_or_path (FT takes -model_name);
  * OPT: wte/lm_head with project_in/project_out are torch.matmul in float32, as FT computes them.
XGLM has no public FT converter: kind xglm writes ftx's own layout as ftx-convert-hf(1) documents it.

Usage: ft_converters_ref.py {megatron|nemo|hf|gptj|gptneox|bloom|opt} -i SRC -o OUT -g T -t {fp32,fp16,bf16}
       [--head-num N --trained-tensor-parallel-size Tt] [--vocab-path F] [--merges-path F]
"""
import argparse
import configparser
import glob
import io
import json
import os
import re
import shutil
import struct
import sys
import tarfile
from collections import OrderedDict

import numpy as np
import torch


def save(t, path, dtype):
    t = t.detach().float().contiguous()
    if dtype == "bf16":
        t.to(torch.bfloat16).view(torch.int16).numpy().tofile(path)
    else:
        t.numpy().astype(np.float16 if dtype == "fp16" else np.float32).tofile(path)


# ------------------------------------------------------------------ FT-style merge / split

def merge_split_write(out, name, shards, kind, T, dtype, qkv_blocks=None):
    """kind: 'repl' (shard 0), 'vocab' (concat axis 0, write once), 'col' (last axis), 'row' (axis 0),
    'qkv' (each shard viewed as [..., 3, h_l])."""
    if kind == "repl":
        save(shards[0], f"{out}/{name}.bin", dtype)
        return
    if kind == "vocab":
        save(torch.cat(shards, 0), f"{out}/{name}.bin", dtype)
        return
    Tt = len(shards)
    axis = 0 if kind == "row" else -1
    if kind == "qkv":
        shards = [s.reshape(*s.shape[:-1], 3, s.shape[-1] // 3) for s in shards]
    if Tt >= T:
        f = Tt // T
        for i in range(T):
            v = torch.cat(shards[i * f:(i + 1) * f], axis)
            save(v.reshape(*v.shape[:-2], -1) if kind == "qkv" else v, f"{out}/{name}.{i}.bin", dtype)
    else:
        f = T // Tt
        for k in range(Tt):
            for j, v in enumerate(torch.chunk(shards[k], f, axis)):
                save(v.reshape(*v.shape[:-2], -1) if kind == "qkv" else v, f"{out}/{name}.{k * f + j}.bin", dtype)


def write_config(out, keys):
    cp = configparser.ConfigParser()
    cp["gpt"] = {k: str(v) for k, v in keys.items()}
    with open(f"{out}/config.ini", "w") as f:
        cp.write(f)


def endoftext(vocab_path):
    if vocab_path and os.path.exists(vocab_path):
        with open(vocab_path) as f:
            return json.load(f).get("<|endoftext|>", 50256)
    return 50256


def ft_dtype(t):
    return {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16"}[t]


# ------------------------------------------------------------------ Megatron

def megatron_layer_rule(key):
    """(ft suffix, kind, transpose) for a Megatron layer key with layers.N. removed."""
    key = key.replace("self_attention.", "attention.")
    table = {
        "input_layernorm.weight": ("repl", False), "input_layernorm.bias": ("repl", False),
        "attention.query_key_value.weight": ("qkv", True), "attention.query_key_value.bias": ("qkv", False),
        "attention.dense.weight": ("row", True), "attention.dense.bias": ("repl", False),
        "post_attention_layernorm.weight": ("repl", False), "post_attention_layernorm.bias": ("repl", False),
        "mlp.dense_h_to_4h.weight": ("col", True), "mlp.dense_h_to_4h.bias": ("col", False),
        "mlp.dense_4h_to_h.weight": ("row", True), "mlp.dense_4h_to_h.bias": ("repl", False),
    }
    return (key,) + table[key]


def qkv_to_ft(t, version, nl, d, transposed):
    """Shard's QKV (weight after transpose [H, 3*nl*d], or bias [3*nl*d]) -> FT [.., 3*nl*d] in [3, nl, d]."""
    lead = t.shape[:-1]
    if version == 0:
        return t
    if version == 1:  # [nl, d, 3] -> ftx's derivation: permute (0,3,1,2) on [H, nl, d, 3]
        v = t.reshape(*lead, nl, d, 3)
        v = v.permute(*range(len(lead)), len(lead) + 2, len(lead), len(lead) + 1)
    else:  # v2 / v3 / NeMo: [nl, 3, d]
        v = t.reshape(*lead, nl, 3, d)
        v = v.permute(*range(len(lead)), len(lead) + 1, len(lead), len(lead) + 2)
    return v.reshape(*lead, 3 * nl * d)


def find_megatron_iter(path):
    tracker = os.path.join(path, "latest_checkpointed_iteration.txt")
    if os.path.exists(tracker):
        it = open(tracker).read().strip()
        return os.path.join(path, "release" if it == "release" else "iter_%07d" % int(it))
    return path


def convert_megatron(a):
    it = find_megatron_iter(a.in_file)
    shard_dirs = {}
    for d in sorted(os.listdir(it)):
        m = re.fullmatch(r"mp_rank_(\d\d)(?:_(\d\d\d))?", d) or re.fullmatch(r"tp_rank_(\d\d)_pp_rank_(\d\d\d)", d)
        if m:
            shard_dirs[(int(m.group(1)), int(m.group(2) or 0))] = os.path.join(it, d, "model_optim_rng.pt")
    ck0 = torch.load(shard_dirs[(0, 0)], map_location="cpu")
    args = ck0.get("args")
    version = int(ck0.get("checkpoint_version", 0))
    Tt = getattr(args, "tensor_model_parallel_size", getattr(args, "model_parallel_size", None)) if args else None
    Tt = Tt or a.trained_tensor_parallel_size
    PP = getattr(args, "pipeline_model_parallel_size", 1) if args else 1
    heads = args.num_attention_heads if args else a.head_num
    out = os.path.join(a.saved_dir, f"{a.infer_gpu_num}-gpu")
    os.makedirs(out)
    ckpts = {k: (ck0 if k == (0, 0) else torch.load(p, map_location="cpu")) for k, p in shard_dirs.items()}
    lms = {k: c["model"]["language_model"] for k, c in ckpts.items()}
    wte = [lms[(t, 0)]["embedding"]["word_embeddings"]["weight"] for t in range(Tt)]
    H = wte[0].shape[1]
    num_layers = args.num_layers if args else None
    per = None
    T = a.infer_gpu_num
    d = H // heads
    nl = heads // Tt
    layer_count = 0
    for p in range(PP):
        encs = [lms[(t, p)].get("encoder", lms[(t, p)].get("transformer")) for t in range(Tt)]
        keys = list(encs[0].keys())
        local = 1 + max(int(k.split(".")[1]) for k in keys if k.startswith("layers."))
        per = per or (num_layers // PP if num_layers else local)
        for key in keys:
            vals = [e[key] for e in encs]
            if key.startswith("final_layernorm."):
                merge_split_write(out, "model." + key, vals, "repl", T, a.weight_data_type)
                continue
            m = re.fullmatch(r"layers\.(\d+)\.(.*)", key)
            L = int(m.group(1)) + p * per
            layer_count = max(layer_count, L + 1)
            suffix, kind, tr = megatron_layer_rule(m.group(2))
            vals = [v.t() if tr else v for v in vals]
            if kind == "qkv":
                vals = [qkv_to_ft(v, version, nl, d, tr) for v in vals]
            merge_split_write(out, f"model.layers.{L}.{suffix}", vals, kind, T, a.weight_data_type)
    emb = lms[(0, 0)]["embedding"]
    merge_split_write(out, "model.wpe", [emb["position_embeddings"]["weight"]], "repl", T, a.weight_data_type)
    merge_split_write(out, "model.wte", wte, "vocab", T, a.weight_data_type)
    eos = endoftext(a.vocab_path)
    cfg = OrderedDict(
        model_name="gpt", head_num=heads, size_per_head=d,
        inter_size=getattr(args, "ffn_hidden_size", 4 * H) if args else 4 * H,
        num_layer=num_layers or layer_count,
        max_pos_seq_len=getattr(args, "max_position_embeddings", None) if args else emb["position_embeddings"]["weight"].shape[0],
        vocab_size=getattr(args, "padded_vocab_size", None) if args else sum(w.shape[0] for w in wte),
        has_adapters=False, adapter_inter_size=getattr(args, "project_size", 0) if args else 0,
        layernorm_eps=getattr(args, "layernorm_epsilon", 1e-5) if args else 1e-5,
        start_id=eos, end_id=eos, weight_data_type=ft_dtype(a.weight_data_type), tensor_para_size=T)
    write_config(out, cfg)
    if args:
        with open(os.path.join(out, "args.txt"), "w") as f:
            for k, v in vars(args).items():
                f.write(f"{k}:{v}\n")
    if a.vocab_path:
        shutil.copy(a.vocab_path, os.path.join(out, "vocab.json"))
    if a.merges_path:
        shutil.copy(a.merges_path, os.path.join(out, "merges.txt"))


# ------------------------------------------------------------------ NeMo (FT + TL extensions)

def convert_nemo(a):
    import yaml
    if os.path.isdir(a.in_file):
        root = a.in_file
    else:
        root = a.saved_dir + ".ref-extract"
        os.makedirs(root)
        try:
            tf = tarfile.open(a.in_file, "r:")
        except tarfile.ReadError:
            tf = tarfile.open(a.in_file, "r:gz")
        tf.extractall(root)
    cfg = yaml.safe_load(open(os.path.join(root, "model_config.yaml")))
    Tt = cfg.get("tensor_model_parallel_size", 1)
    T = a.infer_gpu_num
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    d, nl = H // heads, heads // Tt
    gated = cfg.get("activation", "gelu") in ("swiglu", "geglu")
    ln1p = cfg.get("normalization", "layernorm") == "layernorm1p"
    paths = [os.path.join(root, "model_weights.ckpt")] if Tt == 1 else \
        [os.path.join(root, f"mp_rank_{k:02d}", "model_weights.ckpt") for k in range(Tt)]
    sds = [torch.load(p, map_location="cpu") for p in paths]
    out = os.path.join(a.saved_dir, f"{T}-gpu")
    os.makedirs(out)
    pre = "model.language_model."
    for key in sds[0]:
        vals = [sd[key] for sd in sds]
        k = key[len(pre):]
        if k == "embedding.word_embeddings.weight":
            merge_split_write(out, "model.wte", vals, "vocab", T, a.weight_data_type)
            continue
        if k == "embedding.position_embeddings.weight":
            merge_split_write(out, "model.wpe", vals, "repl", T, a.weight_data_type)
            continue
        if k == "output_layer.weight":
            merge_split_write(out, "model.lm_head.weight", vals, "vocab", T, a.weight_data_type)
            continue
        k = k[len("encoder."):]
        if k.startswith("final_layernorm."):
            if ln1p and k.endswith("weight"):
                vals = [v + 1 for v in vals]
            merge_split_write(out, "model." + k, vals, "repl", T, a.weight_data_type)
            continue
        m = re.fullmatch(r"layers\.(\d+)\.(.*)", k)
        suffix, kind, tr = megatron_layer_rule(m.group(2))
        vals = [v.t() if tr else v for v in vals]
        if ln1p and suffix.endswith("layernorm.weight"):
            vals = [v + 1 for v in vals]
        if kind == "qkv":
            vals = [qkv_to_ft(v, 2, nl, d, tr) for v in vals]
        name = f"model.layers.{m.group(1)}.{suffix}"
        if gated and suffix.startswith("mlp.dense_h_to_4h."):
            halves = [torch.chunk(v, 2, -1) for v in vals]
            merge_split_write(out, name, [h[0] for h in halves], kind, T, a.weight_data_type)
            gname = name.replace("mlp.dense_h_to_4h.", "mlp.dense_h_to_4h.gate.")
            merge_split_write(out, gname, [h[1] for h in halves], kind, T, a.weight_data_type)
            continue
        merge_split_write(out, name, vals, kind, T, a.weight_data_type)
    vocab = glob.glob(os.path.join(root, "*vocab*"))
    eos = endoftext(vocab[0] if vocab else None)
    keys = OrderedDict(model_name="gpt", tensor_para_size=T, head_num=heads, size_per_head=d,
                       inter_size=cfg["ffn_hidden_size"], num_layer=cfg["num_layers"])
    if cfg.get("position_embedding_type", "learned_absolute") == "learned_absolute":
        keys["max_pos_seq_len"] = cfg["max_position_embeddings"]
    keys.update(weight_data_type=ft_dtype(a.weight_data_type),
                vocab_size=sum(sd[pre + "embedding.word_embeddings.weight"].shape[0] for sd in sds),
                start_id=eos, end_id=eos, layernorm_eps=cfg.get("layernorm_epsilon", 1e-5))
    write_config(out, keys)
    if not os.path.isdir(a.in_file):
        shutil.rmtree(root)


# ------------------------------------------------------------------ HuggingFace GPT-2 / GPTBigCode

def load_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = OrderedDict()
    for k, v in header.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        buf = bytearray(raw[base + b:base + e])
        if v["dtype"] == "BF16":
            t = torch.frombuffer(buf, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(buf, dtype={"F32": torch.float32, "F16": torch.float16}[v["dtype"]])
        out[k] = t.reshape(v["shape"])
    return out


def load_hf(folder):
    idx = glob.glob(os.path.join(folder, "*.index.json"))
    if os.path.exists(os.path.join(folder, "model.safetensors")):
        return load_safetensors(os.path.join(folder, "model.safetensors"))
    if idx:
        sd = OrderedDict()
        for fn in OrderedDict.fromkeys(json.load(open(idx[0]))["weight_map"].values()):
            sd.update(load_safetensors(os.path.join(folder, fn)))
        return sd
    return torch.load(os.path.join(folder, "pytorch_model.bin"), map_location="cpu")


def convert_hf(a):
    folder = a.in_file
    cfg = json.load(open(os.path.join(folder, "config.json")))
    sd = load_hf(folder)
    santa = any(".q_attn." in k for k in sd)
    linear = cfg["model_type"] == "gpt_bigcode" and not santa
    mqa = santa or (cfg["model_type"] == "gpt_bigcode" and cfg.get("multi_query", True))
    H, heads = cfg["n_embd"], cfg["n_head"]
    d = H // heads
    T = a.infer_gpu_num
    out = os.path.join(a.saved_dir, f"{T}-gpu")
    os.makedirs(out)
    tied = cfg.get("tie_word_embeddings", True)
    dt = a.weight_data_type
    for name, val in sd.items():
        n = name[len("transformer."):] if name.startswith("transformer.") else name
        if re.fullmatch(r"h\.\d+\.attn\.(bias|masked_bias)", n):  # causal-mask buffers, not weights
            continue
        if ".kv_attn." in n:
            continue
        if n == "lm_head.weight":
            if not tied:
                save(val, f"{out}/model.lm_head.weight.bin", dt)
            continue
        if n in ("wte.weight", "wpe.weight"):
            save(val, f"{out}/model.{n[:3]}.bin", dt)
            continue
        if n.startswith("ln_f."):
            save(val, f"{out}/model.final_layernorm.{n[5:]}.bin", dt)
            continue
        m = re.fullmatch(r"h\.(\d+)\.(.*)", n)
        L, rest = m.group(1), m.group(2)
        p = f"{out}/model.layers.{L}."
        if ".q_attn." in rest:
            kv = sd[name.replace(".q_attn.", ".kv_attn.")]
            val = torch.cat([val, kv], -1)
            rest = rest.replace(".q_attn.", ".c_attn.")
        if linear and val.dim() == 2:
            val = val.t()
        if rest.startswith("ln_1."):
            save(val, p + f"input_layernorm.{rest[5:]}.bin", dt)
        elif rest.startswith("ln_2."):
            save(val, p + f"post_attention_layernorm.{rest[5:]}.bin", dt)
        elif rest.startswith("attn.c_attn."):
            w = rest[len("attn.c_attn."):]
            if mqa:  # TL split_and_save_weight, multi_query_mode: [H | d | d], Q split, K/V on every rank
                q, k, v = torch.split(val, [H, d, d], -1)
                for i, qi in enumerate(torch.chunk(q, T, -1)):
                    save(torch.cat([qi, k, v], -1), p + f"attention.query_key_value.{w}.{i}.bin", dt)
            else:  # FT: reshape [H, 3, H] (bias [3, H]) and split the last axis
                v3 = val.reshape(*val.shape[:-1], 3, H)
                for i, vi in enumerate(torch.chunk(v3, T, -1)):
                    save(vi, p + f"attention.query_key_value.{w}.{i}.bin", dt)
        elif rest == "attn.c_proj.weight":
            for i, vi in enumerate(torch.chunk(val, T, 0)):
                save(vi, p + f"attention.dense.weight.{i}.bin", dt)
        elif rest == "attn.c_proj.bias":
            save(val, p + "attention.dense.bias.bin", dt)
        elif rest.startswith("mlp.c_fc."):
            for i, vi in enumerate(torch.chunk(val, T, -1)):
                save(vi, p + f"mlp.dense_h_to_4h.{rest[9:]}.{i}.bin", dt)
        elif rest == "mlp.c_proj.weight":
            for i, vi in enumerate(torch.chunk(val, T, 0)):
                save(vi, p + f"mlp.dense_4h_to_h.weight.{i}.bin", dt)
        elif rest == "mlp.c_proj.bias":
            save(val, p + "mlp.dense_4h_to_h.bias.bin", dt)
        else:
            raise SystemExit(f"unexpected tensor {name}")
    keys = OrderedDict(
        model_name=cfg.get("_name_or_path") or "gpt", head_num=heads, size_per_head=d,
        inter_size=cfg.get("n_inner") or 4 * H,  # ftx: n_inner (FT ignores it)
        max_pos_seq_len=cfg["n_positions"], num_layer=cfg["n_layer"], vocab_size=cfg["vocab_size"],
        start_id=cfg.get("bos_token_id", 50256), end_id=cfg.get("eos_token_id", 50256),
        weight_data_type=ft_dtype(dt), tensor_para_size=T,
        layernorm_eps=cfg.get("layer_norm_epsilon", 1e-5),  # ftx: always written
        # TensorRT-LLM keys (weight.py parse_ft_config)
        n_embd=H, n_head=heads, n_layer=cfg["n_layer"], n_positions=cfg["n_positions"],
        activation_function=cfg.get("activation_function", "gelu_new"),
        layer_norm_epsilon=cfg.get("layer_norm_epsilon", 1e-5),
        storage_dtype={"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}[dt], multi_query_mode=mqa)
    write_config(out, keys)


# ------------------------------------------------------------------ HF GPT-J / GPT-NeoX / BLOOM / OPT

def write_section(out, section, keys, spaces=True):
    cp = configparser.ConfigParser()
    cp[section] = {k: str(v) for k, v in keys.items()}
    with open(f"{out}/config.ini", "w") as f:
        cp.write(f, space_around_delimiters=spaces)


def split_write(val, path, axis, T, dt):
    for i, v in enumerate(torch.chunk(val, T, axis)):
        save(v, f"{path}.{i}.bin", dt)


def convert_gptj(a):
    folder, T, dt = a.in_file, a.infer_gpu_num, a.weight_data_type
    c = json.load(open(os.path.join(folder, "config.json")))
    w = load_hf(folder)
    out = os.path.join(a.saved_dir, f"{T}-gpu")
    os.makedirs(out)
    H, n = c["n_embd"], c["n_head"]
    save(w["transformer.wte.weight"], f"{out}/model.wte.bin", dt)
    for L in range(c["n_layer"]):
        k, p = f"transformer.h.{L}.", f"{out}/model.layers.{L}."
        save(w[k + "ln_1.bias"], p + "input_layernorm.bias.bin", dt)
        save(w[k + "ln_1.weight"], p + "input_layernorm.weight.bin", dt)
        split_write(w[k + "mlp.fc_in.weight"].T, p + "mlp.dense_h_to_4h.weight", -1, T, dt)
        split_write(w[k + "mlp.fc_in.bias"], p + "mlp.dense_h_to_4h.bias", -1, T, dt)
        split_write(w[k + "mlp.fc_out.weight"].T, p + "mlp.dense_4h_to_h.weight", 0, T, dt)
        save(w[k + "mlp.fc_out.bias"], p + "mlp.dense_4h_to_h.bias.bin", dt)
        split_write(w[k + "attn.out_proj.weight"].T, p + "attention.dense.weight", 0, T, dt)
        qkv = torch.stack([w[k + "attn.q_proj.weight"], w[k + "attn.k_proj.weight"], w[k + "attn.v_proj.weight"]])
        split_write(qkv.permute(2, 0, 1), p + "attention.query_key_value.weight", -1, T, dt)
    save(w["transformer.ln_f.weight"], f"{out}/model.final_layernorm.weight.bin", dt)
    save(w["transformer.ln_f.bias"], f"{out}/model.final_layernorm.bias.bin", dt)
    save(w["lm_head.weight"], f"{out}/model.lm_head.weight.bin", dt)
    save(w["lm_head.bias"], f"{out}/model.lm_head.bias.bin", dt)
    write_section(out, "gptj", OrderedDict(
        model_name=c.get("_name_or_path") or "gptj", head_num=n, size_per_head=H // n, inter_size=4 * H,
        num_layer=c["n_layer"], rotary_embedding=c.get("rotary_dim") or H // n,  # ftx: never "None"
        vocab_size=c["vocab_size"], start_id=c["bos_token_id"], end_id=c["eos_token_id"],
        weight_data_type=ft_dtype(dt)))  # ftx: follows -t (FT: always fp32)


def convert_gptneox(a):
    folder, T, dt = a.in_file, a.infer_gpu_num, a.weight_data_type
    c = json.load(open(os.path.join(folder, "config.json")))
    w = load_hf(folder)
    out = os.path.join(a.saved_dir, f"{T}-gpu")
    os.makedirs(out)
    H, n = c["hidden_size"], c["num_attention_heads"]
    d = H // n
    par = int(c.get("use_parallel_residual", True))
    tdt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dt]
    save(w["gpt_neox.embed_in.weight"], f"{out}/model.wte.bin", dt)
    save(w["gpt_neox.final_layer_norm.weight"], f"{out}/model.final_layernorm.weight.bin", dt)
    save(w["gpt_neox.final_layer_norm.bias"], f"{out}/model.final_layernorm.bias.bin", dt)
    save(w["embed_out.weight"], f"{out}/model.lm_head.weight.bin", dt)
    for L in range(c["num_hidden_layers"]):
        k, p = f"gpt_neox.layers.{L}.", f"{out}/model.layers.{L}."
        for ln in ("input_layernorm", "post_attention_layernorm"):
            for wb in ("weight", "bias"):
                save(w[k + f"{ln}.{wb}"], p + f"{ln}.{wb}.bin", dt)
        qw = w[k + "attention.query_key_value.weight"].T  # [H, n*3*d]
        qw = qw.reshape(H, n, 3, d).permute(0, 2, 1, 3).reshape(H, 3, H)
        split_write(qw, p + "attention.query_key_value.weight", -1, T, dt)
        qb = w[k + "attention.query_key_value.bias"].reshape(n, 3, d).permute(1, 0, 2).reshape(3, H)
        split_write(qb, p + "attention.query_key_value.bias", -1, T, dt)
        split_write(w[k + "attention.dense.weight"].T, p + "attention.dense.weight", 0, T, dt)
        split_write(w[k + "mlp.dense_h_to_4h.weight"].T, p + "mlp.dense_h_to_4h.weight", -1, T, dt)
        split_write(w[k + "mlp.dense_h_to_4h.bias"], p + "mlp.dense_h_to_4h.bias", -1, T, dt)
        split_write(w[k + "mlp.dense_4h_to_h.weight"].T, p + "mlp.dense_4h_to_h.weight", 0, T, dt)
        ab, mb = w[k + "attention.dense.bias"], w[k + "mlp.dense_4h_to_h.bias"]
        if par:
            # FT: astype(file dtype), / T in that dtype, tofile, fromfile, add in that dtype.
            div = [(x.float().to(tdt).float() / T).to(tdt) if T > 1 else x.float().to(tdt) for x in (ab, mb)]
            save((div[0].float() + div[1].float()), p + "mlp.attention.bias.sum.bin", dt)
        else:
            save(ab, p + "attention.dense.bias.bin", dt)      # ftx: not divided by T
            save(mb, p + "mlp.dense_4h_to_h.bias.bin", dt)
    write_section(out, "gptneox", OrderedDict(
        model_name=c.get("_name_or_path") or "gptneox", head_num=n, size_per_head=d,
        inter_size=c["intermediate_size"], num_layer=c["num_hidden_layers"],
        rotary_embedding=int(d * c["rotary_pct"]), vocab_size=c["vocab_size"], start_id=c["bos_token_id"],
        end_id=c["eos_token_id"], use_gptj_residual=par, weight_data_type=ft_dtype(dt)))


def convert_bloom(a):
    folder, T, dt = a.in_file, a.infer_gpu_num, a.weight_data_type
    c = json.load(open(os.path.join(folder, "config.json")))
    sd = load_hf(folder)
    out = os.path.join(a.saved_dir, f"{T}-gpu")
    os.makedirs(out)
    H, n = c["hidden_size"], c["n_head"]
    d = H // n
    rename = {"word_embeddings.weight": "wte", "word_embeddings_layernorm.weight": "pre_decoder_layernorm.weight",
              "word_embeddings_layernorm.bias": "pre_decoder_layernorm.bias", "ln_f.weight": "final_layernorm.weight",
              "ln_f.bias": "final_layernorm.bias"}
    split = {"attention.query_key_value.weight": -1, "attention.query_key_value.bias": -1, "attention.dense.weight": 0,
             "mlp.dense_h_to_4h.weight": -1, "mlp.dense_h_to_4h.bias": -1, "mlp.dense_4h_to_h.weight": 0}
    for name, val in sd.items():
        if name == "lm_head.weight":  # BloomModel (what FT loads) has no lm_head: tied
            continue
        name = name[len("transformer."):] if name.startswith("transformer.") else name
        name = re.sub(r"^h\.", "layers.", name)
        suffix = re.sub(r"layers\.\d+\.", "", name)
        name = name.replace(suffix, rename.get(suffix, suffix.replace("self_attention.", "attention.")))
        name = "model." + name
        if val.dim() == 2 and not name.endswith("wte"):
            val = val.T
        if "query_key_value" in name:
            val = val.reshape(-1, n, 3, d).permute(0, 2, 1, 3)
            val = val.reshape(3, H) if name.endswith("bias") else val.reshape(-1, 3, H)
        axis = next((ax for k, ax in split.items() if k in name), None)
        if axis is None:
            save(val, f"{out}/{name}.bin", dt)
        else:
            split_write(val, f"{out}/{name}", axis, T, dt)
    post = c.get("apply_residual_connection_post_layernorm", False)
    write_section(out, "gpt", OrderedDict(
        model_name=c.get("_name_or_path", ""), num_layer=c["n_layer"], head_num=n, inter_size=4 * H,
        size_per_head=d, vocab_size=c["vocab_size"], tensor_para_size=T, weight_data_type=ft_dtype(dt),
        model_variant="bloom-post" if post else "bloom-pre", layernorm_eps=c["layer_norm_epsilon"],
        layernorm_type="post_layernorm" if post else "pre_layernorm", activation_type="Gelu",
        has_positional_encoding=False, has_pre_decoder_layernorm=True, has_post_decoder_layernorm=True,
        use_attention_linear_bias=True, start_id=c["bos_token_id"], end_id=c["eos_token_id"]), spaces=False)


def write_fairseq_layers(sd, P, out, layers, H, T, dt):
    """OPT/XGLM decoder layers: q/k/v_proj transposed and concatenated [H, 3, H] (FT's OPT converter)."""
    for L in range(layers):
        k, p = f"{P}layers.{L}.", f"{out}/model.layers.{L}."
        a_ = k + "self_attn."
        qkv = torch.cat([sd[a_ + f"{x}_proj.weight"].T for x in "qkv"], -1).reshape(H, 3, H)
        split_write(qkv, p + "attention.query_key_value.weight", -1, T, dt)
        qkvb = torch.cat([sd[a_ + f"{x}_proj.bias"] for x in "qkv"], -1).reshape(3, H)
        split_write(qkvb, p + "attention.query_key_value.bias", -1, T, dt)
        split_write(sd[a_ + "out_proj.weight"].T, p + "attention.dense.weight", 0, T, dt)
        save(sd[a_ + "out_proj.bias"], p + "attention.dense.bias.bin", dt)
        for src, dst in (("self_attn_layer_norm", "input_layernorm"), ("final_layer_norm", "post_attention_layernorm")):
            save(sd[k + src + ".weight"], p + dst + ".weight.bin", dt)
            save(sd[k + src + ".bias"], p + dst + ".bias.bin", dt)
        split_write(sd[k + "fc1.weight"].T, p + "mlp.dense_h_to_4h.weight", -1, T, dt)
        split_write(sd[k + "fc1.bias"], p + "mlp.dense_h_to_4h.bias", -1, T, dt)
        split_write(sd[k + "fc2.weight"].T, p + "mlp.dense_4h_to_h.weight", 0, T, dt)
        save(sd[k + "fc2.bias"], p + "mlp.dense_4h_to_h.bias.bin", dt)


def convert_opt(a):
    folder, T, dt = a.in_file, a.infer_gpu_num, a.weight_data_type
    c = json.load(open(os.path.join(folder, "config.json")))
    sd = load_hf(folder)
    out = os.path.join(a.saved_dir, f"{T}-gpu")
    os.makedirs(out)
    P = "model.decoder."
    H = c["hidden_size"]
    emb = sd[P + "embed_tokens.weight"].float()
    save(sd[P + "embed_positions.weight"][2:], f"{out}/model.wpe.bin", dt)
    if P + "project_in.weight" in sd:
        save(torch.matmul(emb, sd[P + "project_in.weight"].float().permute(1, 0)), f"{out}/model.wte.bin", dt)
        save(torch.matmul(emb, sd[P + "project_out.weight"].float()), f"{out}/model.lm_head.weight.bin", dt)
    else:
        save(emb, f"{out}/model.wte.bin", dt)
        save(emb, f"{out}/model.lm_head.weight.bin", dt)
    has_final = P + "final_layer_norm.bias" in sd
    if has_final:
        save(sd[P + "final_layer_norm.weight"], f"{out}/model.final_layernorm.weight.bin", dt)
        save(sd[P + "final_layer_norm.bias"], f"{out}/model.final_layernorm.bias.bin", dt)
    write_fairseq_layers(sd, P, out, c["num_hidden_layers"], H, T, dt)
    write_section(out, "gpt", OrderedDict(
        model_name=c.get("_name_or_path") or "opt", head_num=c["num_attention_heads"],
        size_per_head=H // c["num_attention_heads"], inter_size=c["ffn_dim"],
        max_pos_seq_len=c["max_position_embeddings"], num_layer=c["num_hidden_layers"], layernorm_eps="1e-5",
        layernorm_type="pre_layernorm" if c.get("do_layer_norm_before", True) else "post_layernorm",
        activation_type="Relu", has_post_decoder_layernorm="1" if has_final else "0", vocab_size=c["vocab_size"],
        start_id=c["bos_token_id"], end_id=c["eos_token_id"], weight_data_type=ft_dtype(dt), int8="False"))


def convert_xglm(a):
    """ftx's own XGLM layout (FT has no public XGLM converter; documented in ftx-convert-hf(1)):
    [gpt] section, OPT-style layers, model.wpe.bin = fairseq sinusoids of positions 2..P+1 (float64
    rounded once), model.wte.bin = embed_tokens * sqrt(d_model) (float64 product rounded once),
    model.lm_head.weight.bin = embed_tokens unscaled, model.final_layernorm = model.layer_norm."""
    import math
    folder, T, dt = a.in_file, a.infer_gpu_num, a.weight_data_type
    c = json.load(open(os.path.join(folder, "config.json")))
    sd = load_hf(folder)
    out = os.path.join(a.saved_dir, f"{T}-gpu")
    os.makedirs(out)
    H, P = c["d_model"], c["max_position_embeddings"]
    half = H // 2
    f = torch.exp(torch.arange(half, dtype=torch.float64) * -(math.log(10000.0) / (half - 1)))
    ang = torch.arange(2, P + 2, dtype=torch.float64)[:, None] * f[None, :]
    save(torch.cat([torch.sin(ang), torch.cos(ang)], 1), f"{out}/model.wpe.bin", dt)
    emb = sd["model.embed_tokens.weight"]
    scale = math.sqrt(H) if c.get("scale_embedding", True) else 1.0
    save((emb.double() * scale).float(), f"{out}/model.wte.bin", dt)
    if scale != 1.0:
        save(emb, f"{out}/model.lm_head.weight.bin", dt)
    save(sd["model.layer_norm.weight"], f"{out}/model.final_layernorm.weight.bin", dt)
    save(sd["model.layer_norm.bias"], f"{out}/model.final_layernorm.bias.bin", dt)
    write_fairseq_layers(sd, "model.", out, c["num_layers"], H, T, dt)
    write_section(out, "gpt", OrderedDict(
        model_name=c.get("_name_or_path") or "xglm", head_num=c["attention_heads"],
        size_per_head=H // c["attention_heads"], inter_size=c["ffn_dim"], max_pos_seq_len=P,
        num_layer=c["num_layers"], layernorm_eps=1e-5, layernorm_type="pre_layernorm", activation_type="Gelu",
        has_positional_encoding=True, has_post_decoder_layernorm=True, vocab_size=c["vocab_size"],
        start_id=c["bos_token_id"], end_id=c["eos_token_id"], weight_data_type=ft_dtype(dt),
        tensor_para_size=T, architecture="xglm", activation="Gelu", position_embedding_type="sinusoidal"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["megatron", "nemo", "hf", "gptj", "gptneox", "bloom", "opt", "xglm"])
    ap.add_argument("-i", "--in-file", required=True)
    ap.add_argument("-o", "--saved-dir", required=True)
    ap.add_argument("-g", "--infer-gpu-num", type=int, default=1)
    ap.add_argument("-t", "--weight-data-type", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--head-num", type=int)
    ap.add_argument("--trained-tensor-parallel-size", type=int)
    ap.add_argument("--vocab-path")
    ap.add_argument("--merges-path")
    a = ap.parse_args()
    {"megatron": convert_megatron, "nemo": convert_nemo, "hf": convert_hf, "gptj": convert_gptj,
     "gptneox": convert_gptneox, "bloom": convert_bloom, "opt": convert_opt, "xglm": convert_xglm}[a.kind](a)


if __name__ == "__main__":
    main()
