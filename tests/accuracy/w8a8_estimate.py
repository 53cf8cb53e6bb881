#!/usr/bin/python3
"""A float64 estimate of what SmoothQuant W8A8 (per-tensor, static activation scales, as
TensorRT-LLM's default) costs on the trained fixture, written from the formulas, not from ftx.
It set the provisional W8A8 floors of int8_accuracy_test.cc before `--int8-mode 2` existed; it is
not a test. Same windows as the test (the first 32 of 128 tokens of the held-out book).

  x_q = clamp(round_half_away(x · scale_x_orig_quant), -128, 127)      (per-tensor, static)
  y   = (x_q · W_int8) / scale_x_orig_quant · scale_w_quant_orig       (QKV: one w scale per Q, K, V)
for the QKV, attention-output, FC1 and FC2 GEMMs; everything else in float64 from the folder's
floating-point (smoothed) weights. GPT-2 shapes only (pre-LN, gelu_new, learned positions).

Usage: /usr/bin/python3 tests/accuracy/w8a8_estimate.py FIXTURES/trained
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "fixtures"))
from gpt2_bpe_reference import Encoder  # noqa: E402

WINDOWS, T = 32, 128


def config(d):
    c = {}
    for line in open(os.path.join(d, "config.ini")):
        if "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            c[k] = v
    return int(c["head_num"]), int(c["size_per_head"]), int(c["num_layer"]), int(c["vocab_size"])


def forward(d, ids, w8a8):
    NH, HD, L, V = config(d)
    H = NH * HD

    def f32(name, *shape):
        return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=np.float32)).double().view(*shape)

    def gemm(a, l, g, k, n):
        p = f"model.layers.{l}.{g}"
        if not w8a8:
            return a @ f32(f"{p}.weight.0.bin", k, n)
        sx = f32(f"{p}.scale_x_orig_quant.bin", 1).item()
        wq = torch.from_numpy(np.fromfile(os.path.join(d, f"{p}.weight.int8.0.bin"), dtype=np.int8).astype(np.float64))
        sw = f32(f"{p}.scale_w_quant_orig.bin", -1)
        xs = a * sx
        xq = torch.clamp(torch.sign(xs) * torch.floor(xs.abs() + 0.5), -128, 127)
        return (xq @ wq.view(k, n)) / sx * sw.repeat_interleave(n // sw.numel())

    B = ids.shape[0]
    wte = f32("model.wte.bin", V, H)
    x = wte[ids] + f32("model.wpe.bin", -1, H)[:T]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    for l in range(L):
        p = f"model.layers.{l}."
        a = F.layer_norm(x, (H,), f32(p + "input_layernorm.weight.bin", H), f32(p + "input_layernorm.bias.bin", H), 1e-5)
        qkv = gemm(a, l, "attention.query_key_value", H, 3 * H) + f32(p + "attention.query_key_value.bias.0.bin", 3 * H)
        q, k, v = (t.view(B, T, NH, HD).transpose(1, 2) for t in qkv.split(H, -1))
        att = (q @ k.transpose(-1, -2) / HD ** 0.5).masked_fill(mask, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, H)
        x = x + gemm(o, l, "attention.dense", H, H) + f32(p + "attention.dense.bias.bin", H)
        a = F.layer_norm(x, (H,), f32(p + "post_attention_layernorm.weight.bin", H),
                         f32(p + "post_attention_layernorm.bias.bin", H), 1e-5)
        h = F.gelu(gemm(a, l, "mlp.dense_h_to_4h", H, 4 * H) + f32(p + "mlp.dense_h_to_4h.bias.0.bin", 4 * H),
                   approximate="tanh")
        x = x + gemm(h, l, "mlp.dense_4h_to_h", 4 * H, H) + f32(p + "mlp.dense_4h_to_h.bias.bin", H)
    x = F.layer_norm(x, (H,), f32("model.final_layernorm.weight.bin", H), f32("model.final_layernorm.bias.bin", H), 1e-5)
    return (x @ wte.t())[:, :-1].log_softmax(-1)


def main():
    root = sys.argv[1]
    text = open(os.path.join(root, "hf", "heldout.txt"), encoding="utf-8").read()
    tokens = Encoder(os.path.join(root, "hf")).encode(text)
    ids = torch.tensor([tokens[i * T:(i + 1) * T] for i in range(WINDOWS)])
    ref = forward(os.path.join(root, "ft", "1-gpu"), ids, False)
    print(f"fp32: NLL {-ref.gather(-1, ids[:, 1:, None]).mean().item():.4f} over {ref.shape[0] * ref.shape[1]} positions")
    for name in ("sq-a0", "sq-a05"):
        lq = forward(os.path.join(root, name, "1-gpu"), ids, True)
        agree = (ref.argmax(-1) == lq.argmax(-1)).double().mean().item()
        kl = (ref.exp() * (ref - lq)).sum(-1)
        print(f"{name}: agreement {agree:.4f}  mean KL {kl.mean().item():.3e}  max KL {kl.max().item():.3e}  "
              f"NLL {-lq.gather(-1, ids[:, 1:, None]).mean().item():.4f}")


if __name__ == "__main__":
    main()
