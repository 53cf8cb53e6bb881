#!/usr/bin/python3
"""Reference converters, re-implemented FROM THE SPEC (/work/shared/spec/ft-format.md §2.2, §3, §4)
in the style of FasterTransformer's megatron_ckpt_convert.py / nemo_ckpt_convert.py /
huggingface_gpt_convert.py and TensorRT-LLM's hf_gpt_convert.py / nemo_ckpt_convert.py: the same
tensor names, transposes, QKV reshapes, factor-based TP merge/split (§3.7), `tofile` in the requested
dtype, and the config.ini keys of §2.2. It is an independent second implementation used only to
check ftx's output byte for byte.

Where ftx deliberately differs from FT, this reference implements ftx's documented behaviour:
  * Megatron checkpoint_version 1 and 2 QKV orders are reordered (FT reorders only v3), §3.6/§7.4;
  * layernorm_eps is always written (FT's HF and NeMo converters omit it), §7.3; for a Megatron
    checkpoint without args it is Megatron's default 1e-5 (FT assumes 1e-6);
  * HF inter_size is n_inner when set (FT writes 4*n_embd), §2.2.
Only the keys listed in §2.2 (plus the TL keys TensorRT-LLM's loader requires) are written here;
ftx may write more.

Usage: ft_converters_ref.py {megatron|nemo|hf} -i SRC -o OUT -g T -t {fp32,fp16,bf16}
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


# ------------------------------------------------------------------ FT-style merge / split (§3.7)

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


# ------------------------------------------------------------------ Megatron (§3.6, §4)

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["megatron", "nemo", "hf"])
    ap.add_argument("-i", "--in-file", required=True)
    ap.add_argument("-o", "--saved-dir", required=True)
    ap.add_argument("-g", "--infer-gpu-num", type=int, default=1)
    ap.add_argument("-t", "--weight-data-type", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--head-num", type=int)
    ap.add_argument("--trained-tensor-parallel-size", type=int)
    ap.add_argument("--vocab-path")
    ap.add_argument("--merges-path")
    a = ap.parse_args()
    {"megatron": convert_megatron, "nemo": convert_nemo, "hf": convert_hf}[a.kind](a)


if __name__ == "__main__":
    main()
