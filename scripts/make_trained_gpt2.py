#!/usr/bin/python3
"""Trains a small GPT-2 on the King James Bible and writes it in the HuggingFace layout
(config.json, pytorch_model.bin with HF's parameter names and Conv1D [in, out] weights, GPT-2's
vocab.json and merges.txt), so that `ftx convert-hf` converts it like any GPT-2 checkpoint.

Why: random weights have no activation outliers and no preferences, so they can show neither what
INT8 quantization does to a model's predictions nor readable generated text. A few minutes of
training on 2 CPU cores gives both.

Usage: /usr/bin/python3 scripts/make_trained_gpt2.py OUT_DIR [--steps N] [--force] ...
  Text: Debian's bible-kjv (`bible -l100000 gen1:1-rev22:21`, one verse a line), verses joined by
  newlines, tokenized with GPT-2's BPE (scripts/fixtures/gpt2_bpe_reference.py). The last book,
  Revelation, is held out: never trained on, written to OUT_DIR/heldout.txt (one verse a line) for
  accuracy measurements; OUT_DIR/calib.jsonl holds SmoothQuant calibration texts from the
  training books.
  Cached: OUT_DIR/STAMP records a hash of the recipe (options, RECIPE, torch version); a rerun
  that finds the same stamp does nothing. A different model in OUT_DIR is replaced only with
  --force. The folder appears complete or not at all (written beside it, then renamed).
  Time: 3 to 4 minutes on 2 cores (600 steps of 8 x 128 tokens, ~600k tokens, 0.6 epoch).
  Progress (loss) goes to stderr; the folder's path to stdout.

Vocabulary: GPT-2's 50257 ids are kept, but only the ids that occur in the training text are
trained. The others keep all-zero embedding rows (input and, tied, output), so their logit is
exactly 0; training uses the exact full-vocabulary softmax all the same, with those ids folded
into one term log(n_unused) (n_unused logits of 0), so the written model's full softmax is the one
that was trained, at a fraction of the cost of the 50257-wide output GEMM.
"""
import argparse
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from collections import OrderedDict

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fixtures"))
from gpt2_bpe_reference import Encoder  # noqa: E402

HELD_OUT_BOOK = "Revelation"
CALIB_SAMPLES, CALIB_VERSES = 128, 6
RECIPE = 1  # part of the cache stamp: bump when a change below alters the weights or files written
VOCAB = 50257


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def read_bible():
    """[(book, verse text)] in canonical order, from the bible-kjv package."""
    try:
        out = subprocess.run(["bible", "-l100000", "gen1:1-rev22:21"], check=True, capture_output=True,
                             text=True).stdout
    except FileNotFoundError:
        sys.exit("make_trained_gpt2.py: `bible` not found: install Debian's bible-kjv (scripts/setup does)")
    verses, book = [], None
    for line in out.split("\n"):
        if not line.strip():
            continue
        if line.startswith("  "):  # "  12 And the earth brought forth grass, ..."
            number, _, text = line.strip().partition(" ")
            if not number.isdigit() or book is None:
                sys.exit(f"make_trained_gpt2.py: unexpected verse line from `bible`: {line!r}")
            verses.append((book, text))
        else:  # "Genesis 1", "1 Samuel 3", "Song of Solomon 2"
            book = line.rsplit(" ", 1)[0]
    if len(verses) < 30000:
        sys.exit(f"make_trained_gpt2.py: `bible` printed only {len(verses)} verses (expected 31102)")
    return verses


def tokenize(enc, verses):
    ids = []
    for v in verses:
        ids.extend(enc.encode(v + "\n"))
    return ids


class GPT2(torch.nn.Module):
    """GPT-2 (pre-LN, learned positions, gelu_new, tied embeddings) over the trained ids only."""

    def __init__(self, n_used, layers, hidden, heads, positions):
        super().__init__()
        self.heads = heads
        h = hidden
        std = 0.02
        p = torch.nn.ParameterDict()
        p["wte"] = torch.nn.Parameter(torch.randn(n_used, h) * std)
        p["wpe"] = torch.nn.Parameter(torch.randn(positions, h) * 0.01)
        for i in range(layers):
            pre = f"h_{i}_"
            p[pre + "ln_1_weight"] = torch.nn.Parameter(torch.ones(h))
            p[pre + "ln_1_bias"] = torch.nn.Parameter(torch.zeros(h))
            p[pre + "attn_c_attn_weight"] = torch.nn.Parameter(torch.randn(h, 3 * h) * std)
            p[pre + "attn_c_attn_bias"] = torch.nn.Parameter(torch.zeros(3 * h))
            p[pre + "attn_c_proj_weight"] = torch.nn.Parameter(torch.randn(h, h) * std / math.sqrt(2 * layers))
            p[pre + "attn_c_proj_bias"] = torch.nn.Parameter(torch.zeros(h))
            p[pre + "ln_2_weight"] = torch.nn.Parameter(torch.ones(h))
            p[pre + "ln_2_bias"] = torch.nn.Parameter(torch.zeros(h))
            p[pre + "mlp_c_fc_weight"] = torch.nn.Parameter(torch.randn(h, 4 * h) * std)
            p[pre + "mlp_c_fc_bias"] = torch.nn.Parameter(torch.zeros(4 * h))
            p[pre + "mlp_c_proj_weight"] = torch.nn.Parameter(torch.randn(4 * h, h) * std / math.sqrt(2 * layers))
            p[pre + "mlp_c_proj_bias"] = torch.nn.Parameter(torch.zeros(h))
        p["ln_f_weight"] = torch.nn.Parameter(torch.ones(h))
        p["ln_f_bias"] = torch.nn.Parameter(torch.zeros(h))
        self.p = p
        self.layers = layers

    def forward(self, x):
        """x: [B, T] trained-id indices → logits over the trained ids [B, T, n_used]."""
        p, B, T = self.p, x.shape[0], x.shape[1]
        h = p["wte"][x] + p["wpe"][:T]
        H = h.shape[-1]
        nh, hd = self.heads, H // self.heads
        for i in range(self.layers):
            pre = f"h_{i}_"
            a = F.layer_norm(h, (H,), p[pre + "ln_1_weight"], p[pre + "ln_1_bias"], 1e-5)
            qkv = a @ p[pre + "attn_c_attn_weight"] + p[pre + "attn_c_attn_bias"]
            q, k, v = (t.view(B, T, nh, hd).transpose(1, 2) for t in qkv.split(H, dim=-1))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            o = (att @ v).transpose(1, 2).reshape(B, T, H)
            h = h + o @ p[pre + "attn_c_proj_weight"] + p[pre + "attn_c_proj_bias"]
            m = F.layer_norm(h, (H,), p[pre + "ln_2_weight"], p[pre + "ln_2_bias"], 1e-5)
            m = F.gelu(m @ p[pre + "mlp_c_fc_weight"] + p[pre + "mlp_c_fc_bias"], approximate="tanh")
            h = h + m @ p[pre + "mlp_c_proj_weight"] + p[pre + "mlp_c_proj_bias"]
        h = F.layer_norm(h, (H,), p["ln_f_weight"], p["ln_f_bias"], 1e-5)
        return h @ p["wte"].t()


def full_vocab_loss(logits, target, n_unused):
    """Cross-entropy of the 50257-way softmax in which the untrained ids have logit 0."""
    pad = torch.full(logits.shape[:-1] + (1,), math.log(n_unused), dtype=logits.dtype)
    return F.cross_entropy(torch.cat([logits, pad], -1).flatten(0, 1), target.flatten())


def export(model, used, a, out):
    """HF GPT2LMHeadModel state dict: full 50257-row wte (zeros for untrained ids), Conv1D [in, out]."""
    p, h = model.p, a.hidden
    wte = torch.zeros(VOCAB, h)
    wte[torch.tensor(used)] = p["wte"].detach()
    sd = OrderedDict()
    sd["transformer.wte.weight"] = wte
    sd["transformer.wpe.weight"] = p["wpe"].detach().clone()
    P = a.positions
    for i in range(a.layers):
        pre, src = f"transformer.h.{i}.", f"h_{i}_"
        for name in ("ln_1.weight", "ln_1.bias"):
            sd[pre + name] = p[src + name.replace(".", "_")].detach().clone()
        sd[pre + "attn.bias"] = torch.tril(torch.ones(P, P, dtype=torch.bool)).view(1, 1, P, P)
        sd[pre + "attn.masked_bias"] = torch.tensor(-1e4)
        for name in ("attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                     "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
                     "mlp.c_proj.bias"):
            sd[pre + name] = p[src + name.replace(".", "_")].detach().clone()
    sd["transformer.ln_f.weight"] = p["ln_f_weight"].detach().clone()
    sd["transformer.ln_f.bias"] = p["ln_f_bias"].detach().clone()
    sd["lm_head.weight"] = sd["transformer.wte.weight"]  # tied, sharing storage as HF saves it
    torch.save(sd, os.path.join(out, "pytorch_model.bin"))
    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "_name_or_path": "ftx-kjv-gpt2",
        "vocab_size": VOCAB, "n_positions": P, "n_ctx": P, "n_embd": h, "n_layer": a.layers,
        "n_head": a.heads, "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "bos_token_id": 50256, "eos_token_id": 50256, "tie_word_embeddings": True, "torch_dtype": "float32",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def replace_folder(tmp, out):
    """The finished folder tmp becomes out (an older out goes first)."""
    if os.path.exists(out):
        shutil.rmtree(out)
    os.rename(tmp, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--positions", type=int, default=256, help="n_positions (max sequence length)")
    ap.add_argument("--seq", type=int, default=128, help="training window length")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: all cores)")
    ap.add_argument("--force", action="store_true", help="replace a different model already in OUT_DIR")
    ap.add_argument("--cache", default="", help="a folder of trained models by STAMP, shared between checkouts "
                    "(the tests pass ~/.cache/ftx/trained-gpt2: a clean clone's CI run trains only a changed recipe)")
    a = ap.parse_args()
    out = os.path.abspath(a.out)

    # The stamp names everything the weights depend on (bump RECIPE when the training code
    # changes), so a cached folder is never stale and an edit to the comments retrains nothing.
    recipe = {k: v for k, v in vars(a).items() if k not in ("out", "threads", "force", "cache")}
    recipe.update(recipe_version=RECIPE, torch=torch.__version__)
    stamp = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
    stamp_file = os.path.join(out, "STAMP")
    if os.path.exists(stamp_file) and open(stamp_file).read().strip() == stamp:
        log(f"make_trained_gpt2.py: {out} is up to date (STAMP matches)")
        print(out)
        return
    if os.path.exists(out) and not a.force:
        sys.exit(f"make_trained_gpt2.py: {out} exists and holds another model (or none); --force replaces it")
    cached = os.path.join(a.cache, stamp) if a.cache else ""
    if cached and os.path.exists(os.path.join(cached, "STAMP")):
        tmp = f"{out}.partial-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(cached, tmp)
        replace_folder(tmp, out)
        log(f"make_trained_gpt2.py: {out} copied from the cache ({cached})")
        print(out)
        return

    torch.manual_seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    started = time.time()
    verses = read_bible()
    train_verses = [t for b, t in verses if b != HELD_OUT_BOOK]
    held_verses = [t for b, t in verses if b == HELD_OUT_BOOK]
    data_dir = os.path.join(HERE, "..", "data", "gpt2")
    enc = Encoder(data_dir)
    ids = tokenize(enc, train_verses)
    used = sorted(set(ids))
    index = {t: i for i, t in enumerate(used)}
    data = torch.tensor([index[t] for t in ids], dtype=torch.long)
    n_unused = VOCAB - len(used)
    log(f"make_trained_gpt2.py: {len(train_verses)} training verses, {len(ids)} tokens, {len(used)} distinct ids "
        f"(held out: {len(held_verses)} verses of {HELD_OUT_BOOK}); tokenized in {time.time() - started:.1f} s")

    model = GPT2(len(used), a.layers, a.hidden, a.heads, a.positions)
    decay = [q for n, q in model.p.items() if q.dim() == 2]
    other = [q for n, q in model.p.items() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    warmup = max(1, a.steps // 20)
    gen = torch.Generator().manual_seed(a.seed)
    offsets = torch.arange(a.seq + 1)
    t0 = time.time()
    for step in range(1, a.steps + 1):
        lr = a.lr * (step / warmup if step <= warmup else
                     0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (a.steps - warmup))))
        for g in opt.param_groups:
            g["lr"] = lr
        start = torch.randint(0, len(data) - a.seq - 1, (a.batch,), generator=gen)
        window = data[start[:, None] + offsets]
        loss = full_vocab_loss(model(window[:, :-1]), window[:, 1:], n_unused)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == 1 or step == a.steps:
            log(f"  step {step}/{a.steps}  loss {loss.item():.3f}  lr {lr:.2e}  {time.time() - t0:.0f} s")

    # Held-out loss (ids unseen in training count through the zero-logit term of the full softmax).
    with torch.no_grad():
        held = tokenize(enc, held_verses)
        n = (len(held) - 1) // a.seq
        seen = torch.tensor([index.get(t, -1) for t in held[: n * a.seq + 1]])
        x = seen[:-1].clamp(min=0).view(n, a.seq)
        y = seen[1:].clone()
        logits = model(x)
        y[y < 0] = len(used)  # the folded term stands for every untrained id
        lp = torch.cat([logits, torch.full(logits.shape[:-1] + (1,), math.log(n_unused))], -1).log_softmax(-1)
        nll = -lp.flatten(0, 1).gather(1, y.view(-1, 1)).squeeze(1)
        unseen = (seen[1:] < 0)
        nll[unseen] += math.log(n_unused)  # one particular untrained id: log(1/n_unused) of the term
        log(f"make_trained_gpt2.py: held-out ({HELD_OUT_BOOK}) loss {nll.mean().item():.3f} over {len(nll)} tokens; "
            f"trained in {time.time() - t0:.0f} s")

    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = f"{out}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    export(model, used, a, tmp)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(data_dir, name), os.path.join(tmp, name))
    with open(os.path.join(tmp, "heldout.txt"), "w") as f:
        f.write("".join(v + "\n" for v in held_verses))
    # SmoothQuant calibration texts from the training books (never the held-out one): runs of
    # consecutive verses at seeded places, as `ftx smoothquant --calib-data` reads them.
    rng = random.Random(a.seed)
    with open(os.path.join(tmp, "calib.jsonl"), "w") as f:
        for _ in range(CALIB_SAMPLES):
            first = rng.randrange(len(train_verses) - CALIB_VERSES)
            text = "".join(v + "\n" for v in train_verses[first:first + CALIB_VERSES])
            f.write(json.dumps({"text": text}) + "\n")
    with open(os.path.join(tmp, "STAMP"), "w") as f:
        f.write(stamp + "\n")
    if cached:  # a copy first, renamed into place: a cache entry with a STAMP is always whole
        os.makedirs(a.cache, exist_ok=True)
        part = f"{cached}.partial-{os.getpid()}"
        shutil.rmtree(part, ignore_errors=True)
        shutil.copytree(tmp, part)
        try:
            os.rename(part, cached)
        except OSError:  # another run put it there first
            shutil.rmtree(part, ignore_errors=True)
    replace_folder(tmp, out)
    print(out)


if __name__ == "__main__":
    main()
