#!/usr/bin/env python3
"""Writes a tiny random GPT-2 in the HuggingFace layout (config.json, pytorch_model.bin,
vocab.json, merges.txt) with GPT-2's real tokenizer, for the benchmarks and tests that need a
model of a given shape fast (scripts/make_trained_gpt2.py makes the trained one of the demo).

Usage: /usr/bin/python3 scripts/make_tiny_gpt2.py OUTDIR [--layers N] [--hidden H] [--heads A] [--seed S]
The weights are random (seeded), so generated text is gibberish; the point is the pipeline.
"""
import argparse
import json
import math
import os
import shutil
from collections import OrderedDict

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--positions", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    h, v, p = a.hidden, a.vocab, a.positions
    std = 0.02
    sd = OrderedDict()
    sd["transformer.wte.weight"] = torch.randn(v, h) * std
    sd["transformer.wpe.weight"] = torch.randn(p, h) * std
    for i in range(a.layers):
        pre = f"transformer.h.{i}."
        sd[pre + "ln_1.weight"] = 1 + 0.1 * torch.randn(h)
        sd[pre + "ln_1.bias"] = 0.1 * torch.randn(h)
        sd[pre + "attn.bias"] = torch.tril(torch.ones(p, p, dtype=torch.bool)).view(1, 1, p, p)
        sd[pre + "attn.masked_bias"] = torch.tensor(-1e4)
        sd[pre + "attn.c_attn.weight"] = torch.randn(h, 3 * h) * std * 4
        sd[pre + "attn.c_attn.bias"] = torch.randn(3 * h) * std
        sd[pre + "attn.c_proj.weight"] = torch.randn(h, h) * std / math.sqrt(2 * a.layers)
        sd[pre + "attn.c_proj.bias"] = torch.randn(h) * std
        sd[pre + "ln_2.weight"] = 1 + 0.1 * torch.randn(h)
        sd[pre + "ln_2.bias"] = 0.1 * torch.randn(h)
        sd[pre + "mlp.c_fc.weight"] = torch.randn(h, 4 * h) * std * 4
        sd[pre + "mlp.c_fc.bias"] = torch.randn(4 * h) * std
        sd[pre + "mlp.c_proj.weight"] = torch.randn(4 * h, h) * std / math.sqrt(2 * a.layers)
        sd[pre + "mlp.c_proj.bias"] = torch.randn(h) * std
    sd["transformer.ln_f.weight"] = 1 + 0.1 * torch.randn(h)
    sd["transformer.ln_f.bias"] = 0.1 * torch.randn(h)
    if a.dtype == "float16":
        sd = OrderedDict((k, t.half() if t.is_floating_point() else t) for k, t in sd.items())
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # tied: shares wte's storage, as HF saves it
    os.makedirs(a.out, exist_ok=True)
    torch.save(sd, os.path.join(a.out, "pytorch_model.bin"))
    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "_name_or_path": "tiny-gpt2",
        "vocab_size": v, "n_positions": p, "n_embd": h, "n_layer": a.layers, "n_head": a.heads,
        "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "bos_token_id": 50256, "eos_token_id": 50256, "tie_word_embeddings": True,
        "torch_dtype": a.dtype,
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "gpt2")
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(data, name), os.path.join(a.out, name))
    print(a.out)


if __name__ == "__main__":
    main()
