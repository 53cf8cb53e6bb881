#!/usr/bin/env python3
"""The key tables of `man ftx-convert-hf` (CONFIG.JSON KEYS, printed from each family's table in
lib/convert/hf/) say what convert-hf does with each config.json key; this checks that they are
true on every transformers-5 checkpoint of tests/fixtures/hf5 (models.json's "models"):

  I46_no_effect  every key a table lists as "Not part of the math" (the family's and every
                 architecture's), present in config.json or not, set to another value: the
                 conversion succeeds and writes the same tensor files and the same config.ini
                 (but model_name, which _name_or_path names);
  I46_read       every key a table lists under "Read" that config.json holds, set to another value:
                 the conversion is refused (one `ftx: error:` line) or writes other files; a key
                 whose change changes nothing would be one the reader does not read. A key that
                 matters only with others (Qwen's window keys, OPT's final norm of pre-LN models)
                 is changed on a copy where those others make it matter (CONTEXT), compared with
                 that copy unchanged.

A changed value keeps the JSON type (a number moved by a little, a boolean flipped, a string
suffixed, null made 1, a list's numbers doubled, an object's first number moved or, without one, an
unknown field added).
Environment: FTX_BIN, FTX_SOURCE_DIR.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, E2E)
from e2e_util import check, finish, run_ftx  # noqa: E402

SRC = os.environ.get("FTX_SOURCE_DIR") or os.path.normpath(os.path.join(E2E, "..", ".."))
HF5 = os.path.join(SRC, "tests", "fixtures", "hf5")


def man_tables():
    """{section: (read keys, no-effect keys)} from man/ftx-convert-hf.1's CONFIG.JSON KEYS."""
    text = open(os.path.join(SRC, "man", "ftx-convert-hf.1")).read()
    text = text[text.index(".SH CONFIG.JSON KEYS"):]
    text = text[:text.index(".SH ", 4)]
    tables = {}
    for part in text.split(".SS ")[1:]:
        name, body = part.split("\n", 1)
        read = re.findall(r"^\\fB(.+?)\\fR$", body, re.M)
        m = re.search(r"^Not part of the math: (.*?)\.$", body, re.M | re.S)
        none = [k.strip() for k in m.group(1).replace("\n", " ").split(",")] if m else []
        tables[name.strip()] = ([k.replace("\\-", "-") for k in read], [k.replace("\\-", "-") for k in none])
    return tables


def changed(v):
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    if isinstance(v, float):
        return v * 1.5 + 0.01
    if isinstance(v, str):
        return v + "_x"
    if v is None:
        return 1
    if isinstance(v, list):
        return [changed(x) for x in v] if v else [1]
    if isinstance(v, dict):
        out = dict(v)
        for k, x in v.items():
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                out[k] = changed(x)
                return out
        out["ftx_unknown_field"] = 1
        return out
    raise TypeError(v)


def convert(src, out):
    r = run_ftx(["convert-hf", "-i", src, "-o", out, "-t", "fp32", "--quiet"])
    return r


# GPT-2's conversion copies every config.json key into config.ini, as FT's does.
COPIES_CONFIG = ("gpt2", "gpt_bigcode")
# A value of the key's own type where config.json has none.
ABSENT = {"_name_or_path": "someone/some-model"}


DELETE = object()
SLIDING = {"use_sliding_window": True, "sliding_window": 4, "layer_types": ["sliding_attention"] * 2}
QWEN = {"sliding_window": ({"use_sliding_window": True, "layer_types": ["sliding_attention"] * 2}, 1),
        "use_sliding_window": ({"sliding_window": 4, "layer_types": ["sliding_attention"] * 2}, True),
        "max_window_layers": ({**SLIDING, "layer_types": DELETE}, 0),
        "layer_types": ({"use_sliding_window": True, "sliding_window": 4}, ["sliding_attention"] * 2)}
# Qwen3-MoE has no layer_types: use_sliding_window alone puts the window on every layer.
QWEN3_MOE = {"sliding_window": ({"use_sliding_window": True}, 1), "use_sliding_window": ({"sliding_window": 4}, True)}
# (family, key): (the other keys' values that make the key matter, the key's new value).
CONTEXT = {**{("qwen2", k): v for k, v in QWEN.items()}, **{("qwen3", k): v for k, v in QWEN.items()},
           **{("qwen3_moe", k): v for k, v in QWEN3_MOE.items()},
           # pre-LN without the final norm matches the post-LN fixture's tensors; with it, one is missing.
           ("opt", "_remove_final_layer_norm"): ({"do_layer_norm_before": True, "_remove_final_layer_norm": True}, False)}


def layered(entry, layers):
    """A QWEN entry with its lists of layer types as long as the model's `layers`, and a window to
    start from: Qwen2-MoE's config saves sliding_window 0 when use_sliding_window is false."""
    fit = lambda v: [v[0]] * layers if isinstance(v, list) else v  # noqa: E731
    context, value = entry
    return {"sliding_window": 4, **{k: fit(v) for k, v in context.items()}}, fit(value)


def edited_copy(base, cfg, changes, dest):
    """base copied to dest with config.json's keys set (DELETE: removed)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(base, dest)
    out = dict(cfg)
    for k, v in changes.items():
        if v is DELETE:
            out.pop(k, None)
        else:
            out[k] = v
    json.dump(out, open(os.path.join(dest, "config.json"), "w"))
    return out


def files_of(folder, key=None):
    """{name: bytes} of a 1-gpu folder; config.ini without its model_name line and (for the families
    of COPIES_CONFIG) the line of `key`."""
    out = {}
    drop = (b"model_name =",) + ((f"{key} =".encode(),) if key else ())
    for f in sorted(os.listdir(folder)):
        data = open(os.path.join(folder, f), "rb").read()
        if f == "config.ini":
            data = b"\n".join(line for line in data.split(b"\n") if not line.startswith(drop))
        if f != "manifest.json":  # names the source's files and config
            out[f] = data
    return out


def main():
    tables = man_tables()
    common_read, common_none = tables["every architecture"]
    models = json.load(open(os.path.join(HF5, "models.json")))["models"]
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            name, family = m["name"], m["model_type"]
            base = os.path.join(HF5, name, "safetensors")
            cfg = json.load(open(os.path.join(base, "config.json")))
            first = os.path.join(tmp, "base_" + name)
            r = convert(base, first)
            if not check(r.returncode == 0, f"{name}: {r.stderr.strip()}"):
                continue
            read, none = tables[family]
            quiet, moved = [], []
            for kind, keys in (("no_effect", none + common_none), ("read", read + common_read)):
                for key in keys:
                    if key == "model_type" or (kind == "read" and key not in cfg):
                        continue
                    context, value = CONTEXT.get((family, key), ({}, None)) if kind == "read" else ({}, None)
                    if family == "qwen2_moe" and kind == "read" and key in QWEN:  # Qwen2's keys, on this many layers
                        context, value = layered(QWEN[key], cfg["num_hidden_layers"])
                    old = dict(cfg)
                    reference = first
                    if context:
                        old = edited_copy(base, cfg, context, os.path.join(tmp, "ctx"))
                        reference = os.path.join(tmp, "ctx_out")
                        shutil.rmtree(reference, ignore_errors=True)
                        r = convert(os.path.join(tmp, "ctx"), reference)
                        if not check(r.returncode == 0, f"{name} with {context}: {r.stderr.strip()}"):
                            continue
                    if value is None:
                        value = changed(old[key]) if key in old else ABSENT.get(key, 1)
                    src = os.path.join(tmp, "src")
                    edited_copy(base, old, {key: value}, src)
                    out = os.path.join(tmp, "out")
                    shutil.rmtree(out, ignore_errors=True)
                    r = convert(src, out)
                    what = (f"{name}: {key} {json.dumps(old.get(key))} -> {json.dumps(value)}" +
                            (f" (with {json.dumps({k: v for k, v in context.items() if v is not DELETE})})"
                             if context else ""))
                    copied = key if family in COPIES_CONFIG else None
                    want = files_of(os.path.join(reference, "1-gpu"), copied)
                    if kind == "no_effect":
                        ok = check(r.returncode == 0, f"I46_no_effect {what}: refused: {r.stderr.strip()}") and \
                            check(files_of(os.path.join(out, "1-gpu"), copied) == want,
                                  f"I46_no_effect {what}: the folder changed (the table says it is not part of the math)")
                        if ok:
                            quiet.append(key)
                    else:
                        lines = r.stderr.strip().splitlines()
                        refused = r.returncode == 1 and len(lines) == 1 and lines[0].startswith("ftx: error: ")
                        other = r.returncode == 0 and files_of(os.path.join(out, "1-gpu"), copied) != want
                        if check(refused or other, f"I46_read {what}: nothing changed (exit {r.returncode}, "
                                                   f"{r.stderr.strip()[-300:]!r}); the table says it is read"):
                            moved.append(key)
            print(f"ok   {name} ({family}): {len(quiet)} keys not part of the math change nothing; "
                  f"{len(moved)} keys read change the folder or are refused")
    finish("key_tables_test")


if __name__ == "__main__":
    main()
