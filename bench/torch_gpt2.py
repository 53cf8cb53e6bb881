"""PyTorch eager fp32 GPT-2 with a preallocated KV cache on an FT-layout folder (TP 1, fp32 files):
the baseline the CPU benches (bench/generate-cpu, bench/int8-cpu) time ftx against."""
import math
import os
import time

import torch
import torch.nn.functional as F


def load(d, L, H, V, P):
    """The folder's weights as torch tensors (the files read into memory)."""
    I = 4 * H

    def t(name, *shape):
        return torch.from_file(os.path.join(d, name), size=math.prod(shape), dtype=torch.float32).view(*shape)
    W = {"wte": t("model.wte.bin", V, H), "wpe": t("model.wpe.bin", P, H),
         "lnf": (t("model.final_layernorm.weight.bin", H), t("model.final_layernorm.bias.bin", H)), "layers": []}
    for l in range(L):
        p = f"model.layers.{l}."
        W["layers"].append(dict(
            ln1=(t(p + "input_layernorm.weight.bin", H), t(p + "input_layernorm.bias.bin", H)),
            ln2=(t(p + "post_attention_layernorm.weight.bin", H), t(p + "post_attention_layernorm.bias.bin", H)),
            qkv=t(p + "attention.query_key_value.weight.0.bin", H, 3 * H),
            qkv_b=t(p + "attention.query_key_value.bias.0.bin", 3 * H),
            o=t(p + "attention.dense.weight.0.bin", H, H), o_b=t(p + "attention.dense.bias.bin", H),
            fc=t(p + "mlp.dense_h_to_4h.weight.0.bin", H, I), fc_b=t(p + "mlp.dense_h_to_4h.bias.0.bin", I),
            pr=t(p + "mlp.dense_4h_to_h.weight.0.bin", I, H), pr_b=t(p + "mlp.dense_4h_to_h.bias.bin", H)))
    return W


@torch.inference_mode()
def generate(W, prompts, new_tokens, heads):
    """Greedy decoding of `prompts` [B, S] (a LongTensor). Returns (tokens [B, new], total seconds,
    prefill seconds: the prompt pass that makes the first token)."""
    B, S = prompts.shape
    L, H = len(W["layers"]), W["wte"].shape[1]
    NH, d = heads, H // heads
    T = S + new_tokens
    kc = [torch.zeros(B, NH, T, d) for _ in range(L)]
    vc = [torch.zeros(B, NH, T, d) for _ in range(L)]
    out = []
    t0 = time.perf_counter()
    prefill = 0.0
    ids, pos0 = prompts, 0
    for step in range(new_tokens):
        n = ids.shape[1]
        pos = torch.arange(pos0, pos0 + n)
        x = W["wte"][ids] + W["wpe"][pos]
        mask = None
        if n > 1:
            mask = torch.full((n, pos0 + n), float("-inf")).triu(pos0 + 1)
        for l, Lw in enumerate(W["layers"]):
            h = F.layer_norm(x, (H,), *Lw["ln1"], 1e-5)
            qkv = torch.addmm(Lw["qkv_b"], h.view(-1, H), Lw["qkv"]).view(B, n, 3, NH, d)
            q, k, v = qkv.unbind(2)
            kc[l][:, :, pos0:pos0 + n] = k.transpose(1, 2)
            vc[l][:, :, pos0:pos0 + n] = v.transpose(1, 2)
            K, Vv = kc[l][:, :, :pos0 + n], vc[l][:, :, :pos0 + n]
            s = torch.matmul(q.transpose(1, 2), K.transpose(2, 3)) / math.sqrt(d)
            if mask is not None:
                s = s + mask
            a = torch.matmul(torch.softmax(s, dim=-1), Vv).transpose(1, 2).reshape(B * n, H)
            x = x + torch.addmm(Lw["o_b"], a, Lw["o"]).view(B, n, H)
            h = F.layer_norm(x, (H,), *Lw["ln2"], 1e-5)
            f = F.gelu(torch.addmm(Lw["fc_b"], h.view(-1, H), Lw["fc"]), approximate="tanh")
            x = x + torch.addmm(Lw["pr_b"], f, Lw["pr"]).view(B, n, H)
        last = F.layer_norm(x[:, -1], (H,), *W["lnf"], 1e-5)
        logits = last @ W["wte"].T
        nxt = logits.argmax(-1)
        out.append(nxt)
        ids, pos0 = nxt[:, None], pos0 + n
        if step == 0:
            prefill = time.perf_counter() - t0
    return torch.stack(out, 1), time.perf_counter() - t0, prefill
