#!/usr/bin/env python3
"""convert-hf on checkpoints saved by transformers 5 (issue 37): the committed fixtures of
tests/fixtures/hf5/ (written by transformers 5.23.0's save_pretrained, with its float64 logits;
tests/fixtures/hf5/SOURCE.md says how), read with transformers 5's config keys (dtype, rope_parameters, ...).

Usage: hf5_test.py {engine|generate|layouts|errors}
  engine    every model but the sliding-window one converted at TP 1 and 2 (fp32), and the bf16
            saves converted to fp32 files, through the gtest HfGroundTruth.LogitsMatchTransformers
            alone and under `mpirun -np 2`: the logits of the prefill and of every decode step along
            transformers' greedy paths within 1e-4 of the row's largest |logit| of its float64 logits.
  generate  `ftx generate` greedy output_ids (top_p 1e-6: the top token) equal transformers' greedy
            tokens, and each token's log probability (full softmax) equals log_softmax of
            transformers' float64 logits within 1e-4, at TP 1 and 2 for every model, at TP 4 for
            llama and qwen2 (2 KV heads, and qwen2's K/V biases, copied to 4 ranks), at PP 2 for
            llama; mistral (sliding
            window 6, prompts of up to 9 tokens + 8 new) with --memory-len 6.
  layouts   sharded saves convert to the bytes of the single-file save; config.ini records what
            changes the math: GPT-NeoX's rotary_pct 0.5 and rotary_base 5000 read from
            rope_parameters (the case of issue 37), the rope scaling keys, qkv_bias, sliding_window,
            the KV heads copied at TP 4.
  errors    each configuration of refused/ (transformers 5's own config.json beside its model's
            weights) is one `ftx: error:` line naming config.json and the key, with no output;
            mistral without --memory-len is refused at its first position beyond the window; a NaN in
            the checkpoint, and a bf16 value beyond fp16's range converted with -t fp16, are refused
            naming the tensor; a key ftx does not know draws a warning naming it. Cases R3 to L15,
            each an exact message, exit 1 and nothing written: R3 (a rope type named
            before its fields), R18/R28 (a key of the wrong JSON type), R19/R34 (sizes and eps in
            config.json's names), B8 (an integer-typed weight), B9 (a missing tensor in the
            checkpoint's name, every architecture), L15 (the sliding-window refusal naming the prompt
            and the first position beyond the window).
"""
import configparser
import json
import math
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
import e2e_util  # noqa: E402
from e2e_util import check, finish, run_ftx  # noqa: E402
from hf_ground_truth_test import convert, engine_logits, generate_jsonl  # noqa: E402

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "hf5")
TOL = 1e-4
WINDOW_FLAGS = {"mistral": ["--memory-len", "6"]}


def fixture_json(*path):
    with open(os.path.join(FIX, *path)) as f:
        return json.load(f)


def ini_of(d):
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(os.path.join(d, "config.ini"))
    return ini["gptneox"] if ini.has_section("gptneox") else ini["gptj"] if ini.has_section("gptj") else ini["gpt"]


def engine():
    models = fixture_json("models.json")["models"]
    exe = os.environ.get("FTX_HF_GT_ENGINE_TEST", "")
    if not check(os.path.exists(exe), f"FTX_HF_GT_ENGINE_TEST ({exe}) is not the hf_ground_truth_test binary"):
        return
    print(f"fixtures made with {fixture_json('models.json')['versions']}")
    with tempfile.TemporaryDirectory() as tmp:
        runs = {"fp32": [], "bf16src:bf16": []}
        for m in models:
            name = m["name"]
            if name in WINDOW_FLAGS:
                continue  # needs --memory-len: checked through generate
            d = os.path.join(tmp, name)
            os.makedirs(d)
            shutil.copy(os.path.join(FIX, name, "expected.json"), d)
            for T in (1, 2):
                convert(os.path.join(FIX, name, "safetensors"), os.path.join(d, "ft_fp32"), T, "fp32")
                if "bf16" in m["layouts"]:
                    convert(os.path.join(FIX, name, "bf16"), os.path.join(d, "ft_bf16src"), T, "fp32")
            runs["fp32"].append(d)
            if "bf16" in m["layouts"]:
                runs["bf16src:bf16"].append(d)
        worst = {}
        for kinds, dirs in runs.items():
            worst.update({" ".join(k): v for k, v in engine_logits(exe, dirs, kinds).items()})
        print("largest |ftx - transformers float64| / max(1, max |logit|), prefill and every decode step:")
        for k, v in sorted(worst.items()):
            print(f"  {k:32s} {v:.2e}")


def log_softmax(row):
    top = max(row)
    s = math.log(sum(math.exp(x - top) for x in row)) + top
    return [x - s for x in row]


def check_greedy(name, e, folder, T, extra=(), section=None):
    want = e if section is None else e[section]
    # top_p this small keeps the top token alone (greedy), and its log probability is the full
    # softmax's (FT's greedy, top_k 1, renormalises over the one token: always 0).
    got = generate_jsonl(folder, [{"ids": p, "max_new_tokens": 8, "return_log_probs": True, "top_p": 1e-6}
                                  for p in e["prompts"]], T, list(extra))
    if got is None:
        return None
    ids = [g["output_ids"] for g in got]
    worst = 0.0
    if check(ids == want["greedy"], f"{name} T={T}: greedy {ids} != transformers' {want['greedy']}"):
        for g, steps in zip(got, want["greedy_logits"]):
            for tok, lp, row in zip(g["output_ids"], g["output_log_probs"], steps):
                worst = max(worst, abs(lp - log_softmax(row)[tok]))
        check(worst <= TOL, f"{name} T={T}: log probs differ from transformers' by {worst:.2e}")
    return worst


def generate():
    with tempfile.TemporaryDirectory() as tmp:
        for m in fixture_json("models.json")["models"]:
            name = m["name"]
            e = fixture_json(name, "expected.json")
            extra = WINDOW_FLAGS.get(name, [])
            before = len(e2e_util.failures)
            tps = (1, 2, 4) if name in ("llama", "qwen2") else (1, 2)
            seen = []
            for T in tps:
                folder = convert(os.path.join(FIX, name, "safetensors"), os.path.join(tmp, name), T, "fp32")
                seen.append(check_greedy(name, e, folder, T, extra))
                if T == 1 and name == "llama":  # two pipeline stages over the 1-gpu folder
                    seen.append(check_greedy(name + " PP 2", e, folder, 2, extra + ["--pipeline-para-size", "2"]))
            if "bf16" in m["layouts"]:
                # fp32 files: transformers' reference is the bf16 weights widened; with -t bf16 a
                # tensor the converter folds (GPT-NeoX's summed biases) would round once more.
                folder = convert(os.path.join(FIX, name, "bf16"), os.path.join(tmp, name + "_bf16"), 1, "fp32")
                seen.append(check_greedy(name + " bf16", e, folder, 1, extra, "bf16"))
            if len(e2e_util.failures) == before:
                print(f"ok   generate {name}: greedy = transformers' at TP {', '.join(map(str, tps))}"
                      f"{' and PP 2' if name == 'llama' else ''}"
                      f"{' and from its bf16 save' if 'bf16' in m['layouts'] else ''}"
                      f"{' with ' + ' '.join(extra) if extra else ''}; log probs within {max(seen):.1e}")


def layouts():
    with tempfile.TemporaryDirectory() as tmp:
        for m in fixture_json("models.json")["models"]:
            if "sharded" not in m["layouts"]:
                continue
            name = m["name"]
            a = convert(os.path.join(FIX, name, "safetensors"), os.path.join(tmp, name + "_one"), 2, "bf16")
            b = convert(os.path.join(FIX, name, "sharded"), os.path.join(tmp, name + "_sharded"), 2, "bf16")
            files = sorted(f for f in os.listdir(a) if f.endswith(".bin"))
            same = files == sorted(f for f in os.listdir(b) if f.endswith(".bin")) and all(
                open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read() for f in files)
            if check(same, f"{name}: the sharded save converts to other bytes than the single file"):
                print(f"ok   layouts {name}: sharded safetensors = model.safetensors ({len(files)} files)")
        want = {
            ("neox_rp50_base5000", 1): {"rotary_pct": "0.5", "rotary_base": "5e+03", "rotary_embedding": "4"},
            ("neox_linear", 1): {"rotary_scaling_type": "linear", "rotary_scaling_factor": "3", "rotary_dim": "8"},
            ("llama", 1): {"rotary_scaling_type": "llama3", "rotary_scaling_factor": "4",
                           "rotary_scaling_low_freq_factor": "1", "rotary_scaling_high_freq_factor": "4",
                           "rotary_scaling_original_max_positions": "64", "kv_head_num": "2",
                           "normalization": "rmsnorm", "activation": "SiGLU", "has_bias": "0"},
            ("llama", 4): {"kv_head_num": "4", "source_kv_head_num": "2"},
            ("qwen2", 1): {"qkv_bias": "1", "has_bias": "0", "rotary_base": "1e+06", "tied_embeddings": "1"},
            ("mistral", 1): {"sliding_window": "6", "kv_head_num": "1", "multi_query_mode": "True"},
        }
        for (name, T), keys in want.items():
            sec = ini_of(convert(os.path.join(FIX, name, "safetensors"), os.path.join(tmp, name + "_ini"), T, "fp32"))
            got = {k: sec.get(k) for k in keys}
            if check(got == keys, f"{name} T={T}: config.ini has {got}, expected {keys}"):
                print(f"ok   layouts {name} T={T}: config.ini " + ", ".join(f"{k} = {v}" for k, v in keys.items()))


def set_bf16(path, tensor, index, value):
    """Element `index` of bf16 tensor `tensor` in a safetensors file set to `value` (rounded)."""
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        begin = header[tensor]["data_offsets"][0]
        f.seek(8 + n + begin + 2 * index)
        f.write(struct.pack("<I", struct.unpack("<I", struct.pack("<f", value))[0])[2:])


def one_error_line(r, src, key, out):
    lines = [line for line in r.stderr.strip().splitlines() if line]
    return (check(r.returncode == 1, f"{src}: exit {r.returncode}, expected 1 ({r.stderr.strip()})")
            and check(len(lines) == 1 and lines[0].startswith("ftx: error: "), f"{src}: {r.stderr!r}")
            and check(key in lines[0], f"{src}: {lines[0]!r} does not name {key}")
            and check(out is None or not os.path.exists(out), f"{src}: left {out}")) and lines[0]


def exact_error(r, name, want, out):
    """Exit 1, stderr exactly `ftx: error: WANT`, and no output folder (or file) left at `out`."""
    return (check(r.returncode == 1, f"{name}: exit {r.returncode}, expected 1 ({r.stderr.strip()})")
            and check(r.stderr == f"ftx: error: {want}\n", f"{name}: stderr {r.stderr!r}, expected {want!r}")
            and check(not os.path.exists(out) and not os.path.exists(out + ".partial"), f"{name}: left {out}"))


def copy_model(tmp, base, name, edit=None):
    """tests/fixtures/hf5/BASE/safetensors copied to TMP/NAME, its config.json changed by edit(cfg)."""
    src = os.path.join(tmp, name)
    shutil.copytree(os.path.join(FIX, base, "safetensors"), src)
    if edit:
        path = os.path.join(src, "config.json")
        cfg = json.load(open(path))
        edit(cfg)
        with open(path, "w") as f:
            json.dump(cfg, f)
    return src


def convert_refused(tmp, src, want):
    """convert-hf of SRC: refused with exactly `want` (config.json's path in it as {cfg}), nothing written."""
    out = os.path.join(tmp, "out_" + os.path.basename(src))
    r = run_ftx(["convert-hf", "-i", src, "-o", out, "--quiet"])
    want = want.format(cfg=os.path.join(src, "config.json"), src=src)
    if exact_error(r, os.path.basename(src), want, out):
        print(f"ok   {os.path.basename(src)}: {want}")


def test_R3_rope_type_refused_by_its_name(tmp):
    """longrope (4.x rope_scaling, 5.x rope_parameters) and its old name su: the type is named, not
    one of its fields."""
    longrope = {"short_factor": [1.0] * 4, "long_factor": [2.0] * 4, "original_max_position_embeddings": 64}

    def scaling(kind, key):
        def edit(cfg):
            del cfg["rope_parameters"]
            cfg["rope_theta"] = 10000.0
            cfg["rope_scaling"] = dict(longrope, **{key: kind})
        return edit

    def params(cfg):
        cfg["rope_parameters"] = dict(longrope, rope_type="longrope", rope_theta=10000.0)

    for name, edit, key, kind in (("R3_longrope", scaling("longrope", "rope_type"), "rope_scaling.rope_type", "longrope"),
                                  ("R3_su", scaling("su", "type"), "rope_scaling.type", "su"),
                                  ("R3_longrope5", params, "rope_parameters.rope_type", "longrope")):
        convert_refused(tmp, copy_model(tmp, "llama", name, edit),
                        "{cfg}: " + f"{key} = '{kind}' is not supported (supported: linear, llama3)")


def test_R18_R19_R28_R34_config_values_in_config_jsons_names(tmp):
    """A key of the wrong JSON type says so (R18, R28: a boolean); sizes and the norm epsilon are
    checked in config.json's key names, not FT's num_layer / layernorm_eps (R19, R34)."""
    cases = (
        ("R18_str", "llama", "hidden_size", "32", 'hidden_size = "32" is not an integer'),
        ("R18_float", "llama", "hidden_size", 32.0, "hidden_size = 32.0 is not an integer"),
        ("R18_heads", "gpt2", "n_head", "4", 'n_head = "4" is not an integer'),
        ("R19_layers", "llama", "num_hidden_layers", -1, "num_hidden_layers = -1 is not a positive integer"),
        ("R19_n_layer", "gptj", "n_layer", 0, "n_layer = 0 is not a positive integer"),
        ("R19_vocab", "opt", "vocab_size", -64, "vocab_size = -64 is not a positive integer"),
        ("R34_eps0", "llama", "rms_norm_eps", 0, "rms_norm_eps = 0 is not in (0, 1] (the norm divides by "
         "sqrt(variance + eps): with eps 0 a row whose variance is 0, e.g. all zeros, becomes NaN)"),
        ("R34_neox", "neox_linear", "layer_norm_eps", 0.0, "layer_norm_eps = 0.0 is not in (0, 1] (the norm divides "
         "by sqrt(variance + eps): with eps 0 a row whose variance is 0, e.g. all zeros, becomes NaN)"),
        ("R28_tied", "llama", "tie_word_embeddings", "false", 'tie_word_embeddings = "false" is not a boolean (true or false)'),
        ("R28_gpt2", "gpt2", "tie_word_embeddings", "true", 'tie_word_embeddings = "true" is not a boolean (true or false)'),
        ("R28_bias", "llama", "attention_bias", 0, "attention_bias = 0 is not a boolean (true or false)"),
    )
    for name, base, key, value, want in cases:
        convert_refused(tmp, copy_model(tmp, base, name, lambda cfg: cfg.__setitem__(key, value)), "{cfg}: " + want)


def st_read(path):
    """A safetensors file as [(name, dtype, shape, bytes)] in file order, and its metadata."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    return [(k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()], meta


def st_write(path, tensors, meta):
    header, offset = {}, 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors))


def edit_weights(src, edit):
    path = os.path.join(src, "model.safetensors")
    tensors, meta = st_read(path)
    st_write(path, edit(tensors), meta)
    return path


def test_B8_integer_weight_is_refused(tmp):
    """model.norm.weight retagged I32 (the same bytes): refused naming the file, the tensor and the
    dtype. A buffer ftx does not read may be of any type (GPT-2's bool attention mask converts)."""
    for name, dtype, torch_name in (("B8_i32", "I32", "int32"), ("B8_u8", "U8", "uint8"), ("B8_bool", "BOOL", "bool")):
        src = copy_model(tmp, "llama", name)

        def retag(tensors):
            out = []
            for n, dt, shape, data in tensors:
                if n == "model.norm.weight":
                    dt = dtype
                    shape = [len(data) // (4 if dtype == "I32" else 1)]
                out.append((n, dt, shape, data))
            return out

        path = edit_weights(src, retag)
        convert_refused(tmp, src, f"{path}:model.norm.weight: dtype {torch_name} where a floating-point weight belongs "
                                  "(an integer or boolean tensor in a float model is a broken file; its values cast to "
                                  "float would be another model)")
    src = copy_model(tmp, "gpt2", "B8_mask")
    edit_weights(src, lambda t: t + [("transformer.h.0.attn.bias", "BOOL", [1, 1, 4, 4], bytes([1, 0, 0, 0] * 4))])
    r = run_ftx(["convert-hf", "-i", src, "-o", os.path.join(tmp, "out_B8_mask"), "--quiet"])
    if check(r.returncode == 0, f"gpt2 with a BOOL attn.bias buffer: {r.stderr.strip()}"):
        print("ok   B8: a BOOL buffer ftx does not read (GPT-2's attn.bias) converts")


def test_B9_missing_tensor_named_as_the_checkpoint_names_it(tmp):
    """Layer 1's MLP output weight deleted, in every architecture: named by the checkpoint's name
    (model.layers.1.mlp.down_proj.weight), not FT's (dense_4h_to_h); a layer's q/k/v all gone: the three."""
    cases = [(m, n) for m, n in (
        ("gpt2", "transformer.h.1.mlp.c_proj.weight"), ("bigcode", "transformer.h.1.mlp.c_proj.weight"),
        ("gptj", "transformer.h.1.mlp.fc_out.weight"), ("neox_linear", "gpt_neox.layers.1.mlp.dense_4h_to_h.weight"),
        ("bloom", "transformer.h.1.mlp.dense_4h_to_h.weight"), ("opt", "model.decoder.layers.1.fc2.weight"),
        ("xglm", "model.layers.1.fc2.weight"), ("llama", "model.layers.1.mlp.down_proj.weight"),
        ("mistral", "model.layers.1.mlp.down_proj.weight"), ("qwen2", "model.layers.1.mlp.down_proj.weight"))]
    for base, gone in cases:
        src = copy_model(tmp, base, "B9_" + base)
        edit_weights(src, lambda t: [x for x in t if x[0] != gone])
        convert_refused(tmp, src, "{src}: " + f"has no tensor '{gone}' (the weights do not match the configuration)")
    for base, fmt in (("llama", "model.layers.1.self_attn.{}_proj.weight"), ("gptj", "transformer.h.1.attn.{}_proj.weight")):
        src = copy_model(tmp, base, "B9_qkv_" + base)
        names = [fmt.format(p) for p in "qkv"]
        edit_weights(src, lambda t: [x for x in t if x[0] not in names])
        convert_refused(tmp, src, "{src}: has none of the tensors " + ", ".join(f"'{n}'" for n in names) +
                        " (the weights do not match the configuration)")


def test_L15_sliding_window_refusal_names_the_prompt(tmp):
    """Mistral (sliding_window 6) without --memory-len: a request that would run position 6 is refused
    before it runs, naming the file, line and prompt number and position 6 (the first beyond the
    window), whether the prompt or its new tokens reach it; one that stays below runs. A session
    round starting after its context is named by request and session."""
    e = fixture_json("mistral", "expected.json")
    folder = convert(os.path.join(FIX, "mistral", "safetensors"), os.path.join(tmp, "L15_mistral"), 1, "fp32")
    tail = ("position 6 is beyond the model's sliding attention window (config.ini sliding_window = 6); run with "
            "--memory-len 6 to attend to exactly the last 6 positions, as the model does")
    nine, five = e["prompts"][2], e["prompts"][0]
    for name, lines, want in (
            ("prompt", ["", json.dumps({"ids": nine, "max_new_tokens": 1})],
             "line 2 (prompt 1): 9 prompt tokens + 1 new tokens run through position 8; " + tail),
            ("new tokens", [json.dumps({"ids": five, "max_new_tokens": 3})],
             "line 1 (prompt 1): 5 prompt tokens + 3 new tokens run through position 6; " + tail)):
        req, out = os.path.join(tmp, "L15.jsonl"), os.path.join(tmp, "L15_out.jsonl")
        with open(req, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = run_ftx(["generate", "-m", folder, "--prompts", req, "--output", out, "--quiet", "--max-new-tokens", "1"])
        if exact_error(r, f"L15 {name}", f"{req}: {want}", out):
            print(f"ok   L15 {name}: {req}: {want}")
    # 5 prompt tokens + 2 new tokens run positions 0..5: below the window, as the engine counts them.
    got = generate_jsonl(folder, [{"ids": five, "max_new_tokens": 2}])
    if got is not None and check(len(got[0]["output_ids"]) == 2, f"L15 below the window: {got}"):
        print("ok   L15: 5 prompt tokens + 2 new tokens (positions 0 to 5) run without --memory-len")
    req, out = os.path.join(tmp, "L15s.jsonl"), os.path.join(tmp, "L15s_out.jsonl")
    with open(req, "w") as f:
        f.write(json.dumps({"ids": five[:3], "max_new_tokens": 1, "session": "a"}) + "\n")
        f.write(json.dumps({"ids": five[:4], "max_new_tokens": 1, "session": "a"}) + "\n")
    r = run_ftx(["generate", "-m", folder, "--prompts", req, "--output", out, "--quiet", "--max-new-tokens", "1"])
    want = 'ftx: error: request 2 (session "a"): ' + tail
    if check(r.returncode == 1 and r.stderr.startswith(want), f"L15 session: exit {r.returncode}, {r.stderr!r}"):
        print(f"ok   L15 session: {want}")


def errors():
    meta = fixture_json("models.json")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (base, changed) in meta["refused"].items():
            src = os.path.join(tmp, name)
            shutil.copytree(os.path.join(FIX, base, "safetensors"), src)
            shutil.copy(os.path.join(FIX, "refused", name, "config.json"), src)
            out = os.path.join(tmp, "out_" + name)
            r = run_ftx(["convert-hf", "-i", src, "-o", out, "--quiet"])
            line = one_error_line(r, name, changed[0], out)
            if line and check(os.path.join(src, "config.json") in line, f"{name}: {line!r} does not name config.json"):
                print(f"ok   errors {name}: {line}")
        # The sliding window without --memory-len: refused at the first position beyond it.
        e = fixture_json("mistral", "expected.json")
        folder = convert(os.path.join(FIX, "mistral", "safetensors"), os.path.join(tmp, "mistral"), 1, "fp32")
        req = os.path.join(tmp, "long.jsonl")
        with open(req, "w") as f:
            f.write(json.dumps({"ids": e["prompts"][2], "max_new_tokens": 8}) + "\n")
        r = run_ftx(["generate", "-m", folder, "--prompts", req, "--output", os.path.join(tmp, "o.jsonl"), "--quiet",
                     "--max-new-tokens", "1"])
        line = one_error_line(r, "mistral without --memory-len", "sliding_window = 6", None)
        if line:
            print(f"ok   errors mistral without --memory-len: {line}")
        # A NaN in the checkpoint, and a bf16 value beyond fp16's range with -t fp16: refused naming
        # the tensor, not written as a folder the engine would later call corrupt.
        for what, value, dt, needle in (("nan", float("nan"), "fp32", "non-finite value"),
                                        ("big", 1e5, "fp16", "-t bf16 or -t fp32")):
            src = os.path.join(tmp, "gpt2_" + what)
            shutil.copytree(os.path.join(FIX, "gpt2", "bf16"), src)
            set_bf16(os.path.join(src, "model.safetensors"), "transformer.h.1.mlp.c_fc.weight", 3, value)
            out = os.path.join(tmp, "out_" + what)
            r = run_ftx(["convert-hf", "-i", src, "-o", out, "-t", dt, "--quiet"])
            line = one_error_line(r, "gpt2 " + what, needle, out)
            if line and check("h.1.mlp.c_fc.weight" in line, f"{what}: {line!r} does not name the tensor"):
                print(f"ok   errors gpt2 {what} -t {dt}: {line}")
        # A key ftx does not know: converted, with a warning naming it.
        src = os.path.join(tmp, "unknown_key")
        shutil.copytree(os.path.join(FIX, "llama", "safetensors"), src)
        cfg = json.load(open(os.path.join(src, "config.json")))
        cfg["attn_logit_softcapping"] = 30.0
        json.dump(cfg, open(os.path.join(src, "config.json"), "w"))
        r = run_ftx(["convert-hf", "-i", src, "-o", os.path.join(tmp, "out_unknown"), "--quiet"])
        warned = [l for l in r.stderr.splitlines() if l.startswith("ftx: warning:") and "attn_logit_softcapping" in l]
        if check(r.returncode == 0 and len(warned) == 1, f"unknown key: rc {r.returncode}, stderr {r.stderr!r}"):
            print(f"ok   errors unknown key: {warned[0]}")
        for test in (test_R3_rope_type_refused_by_its_name, test_R18_R19_R28_R34_config_values_in_config_jsons_names,
                     test_B8_integer_weight_is_refused, test_B9_missing_tensor_named_as_the_checkpoint_names_it,
                     test_L15_sliding_window_refusal_names_the_prompt):
            test(tmp)


if __name__ == "__main__":
    {"engine": engine, "generate": generate, "layouts": layouts, "errors": errors}[sys.argv[1]]()
    finish("hf5 " + sys.argv[1])
