#!/usr/bin/env python3
"""Ground truth from HuggingFace transformers: convert-hf and the engine against what transformers
itself computes, on two sets of tiny models that transformers built and saved (argv[2]):

  tf4  transformers 4.45 (the pinned test venv), made at test time by
       scripts/fixtures/make_hf_ground_truth.py ($FTX_FIXTURES/hf_ground_truth, the hf_gt_fx fixture;
       see there for the models and what is recorded): every save_pretrained layout (model.safetensors,
       sharded safetensors, pytorch_model.bin, sharded .bin; fp16 and bf16 saves), transformers'
       generate() beams and its sampling warpers.
  tf5  transformers 5.23.0, committed under tests/fixtures/hf5/ (tests/fixtures/hf5/SOURCE.md says
       how), read with its config keys (dtype, rope_parameters, ...): rope scaling, grouped-query
       attention, qkv biases, a sliding window.

Each part runs the same checks on both sets, and the checks only one set's contents allow:

Usage: hf_ground_truth_test.py {layouts|engine|generate|errors} {tf4|tf5}
  layouts   every save layout of a model converts (TP 2, bf16) to the same .bin bytes and config.ini; a
            tied model's model.safetensors holds the shared table once (as transformers saves it).
            tf4: checkpoints saved in fp16 (safetensors) and bf16 (.bin) convert with -t fp16 / bf16 to
            the fp32 checkpoint's bytes but for the tensors the converter folds (products/sums); a
            GPT-NeoX config.json with only the newer key names (partial_rotary_factor, rope_theta)
            converts the same. tf5: config.ini records what changes the math: GPT-NeoX's rotary_pct 0.5
            and rotary_base 5000 read from rope_parameters (the case of issue 37), the rope scaling
            keys, qkv_bias, sliding_window, the KV heads copied at TP 4, Gemma 2's norms, scales,
            softcaps and per-layer windows, Gemma 3's q/k norms and local rotary base, the mixtures of
            experts' [structure] section, router, experts' and shared expert's widths (issue 51).
  engine    each model converted at TP 1 and 2, then the gtest HfGroundTruth.LogitsMatchTransformers
            alone and under `mpirun -np 2`: the logits of the prefill and of every decode step along
            transformers' greedy paths within 1e-4 of the row's largest |logit| of transformers' float64
            logits (tests/unit/hf_ground_truth_test.cc says why fp16/bf16 compare with the rounded
            weights' logits and where the bound is 4u); prints the largest relative difference per model.
            tf4: fp32, fp16 and bf16 files (each dtype from another layout), and fp32 files of the fp16
            and bf16 saves; tf5: fp32 files, and fp32 files of the bf16 saves (all but the
            sliding-window model, which needs --memory-len: generate checks it).
  generate  `ftx generate` greedy output_ids equal transformers' greedy tokens at TP 1 and 2 (fp32).
            tf4: also in fp16 and bf16 at TP 1 (the rounded model's greedy); beam search (width 3, no
            end id, length penalty 0) gives transformers' beams, best first, with their cumulative log
            probabilities within 1e-4; seeded top-k (k 4, temperature 0.7) and top-p (0.6) draws of the
            first token are tokens transformers' warpers keep, with transformers' log probabilities
            within 1e-4 (top-k: renormalised over the k, FT's semantics; top-p: full softmax).
            tf5: greedy as top_p 1e-6 (the top token alone), each token's log probability (full
            softmax) equal to log_softmax of transformers' float64 logits within 1e-4; also at TP 4 for
            llama, qwen2, qwen3, phi3_longrope, gemma2 and gemma3_text (2 KV heads, and qwen2's K/V biases,
            copied to 4 ranks), at PP 2 for llama, phi3_longrope and gemma3_text,
            and from the bf16 saves; mistral (sliding window 6, prompts of up to 9 tokens + 8 new) with
            --memory-len 6. Issue 49 (each of those runs): context_log_probs of each prompt followed by
            its greedy tokens, scored with --max-new-tokens 0, within 1e-4 of log_softmax of
            transformers' float64 logits at every position the fixture holds them (the prompt's last on).
  errors    each configuration of the set's refused/ (what man ftx-convert-hf lists; tf5: transformers
            5's own config.json beside its model's weights) is one `ftx: error:` line naming
            config.json and the key, exit 1, with no output folder.
            tf5 also: mistral without --memory-len is refused at its first position beyond the window; a
            NaN in the checkpoint, and a bf16 value beyond fp16's range converted with -t fp16, are
            refused naming the tensor; a key ftx does not know draws a warning naming it. Cases R3 to
            L15, each an exact message, exit 1 and nothing written: R3 (a rope type named before its
            fields), R18/R28 (a key of the wrong JSON type), R19/R34 (sizes and eps in config.json's
            names), B8 (an integer-typed weight), B9 (a missing tensor in the checkpoint's name, every
            architecture), L15 (the sliding-window refusal naming the prompt and the first position
            beyond the window).
"""
import configparser
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
import e2e_util  # noqa: E402
from e2e_util import check, finish, mpirun, run_ftx  # noqa: E402

SETS = {"tf4": os.path.join(os.environ.get("FTX_FIXTURES", ""), "hf_ground_truth"),
        "tf5": os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "fixtures", "hf5")}
# The save_pretrained layouts of one model that hold the same weights (each a folder of the model's).
SAVES = {"tf4": ["safetensors", "safetensors_sharded", "bin", "bin_sharded"], "tf5": ["safetensors", "sharded"]}
# tf4's half-precision saves (model.half() / .to(bfloat16)), converted with the matching -t.
HALF_LAYOUTS = {"safetensors_fp16": "fp16", "bin_bf16": "bf16"}
# tf4's engine runs: folder ft_<kind> <- (layout, -t); "fp16src"/"bf16src" are fp32 files of the
# checkpoints saved in half precision, compared with transformers' float64 model of those checkpoints
# (from_pretrained, expected.json's "fp16_checkpoint" / "bf16_checkpoint").
SOURCE_OF = {"fp32": ("safetensors", "fp32"), "fp16": ("bin_sharded", "fp16"),
             "bf16": ("safetensors_sharded", "bf16"), "fp16src": ("safetensors_fp16", "fp32"),
             "bf16src": ("bin_bf16", "fp32")}
KINDS = "fp32,fp16,bf16,fp16src:fp16_checkpoint,bf16src:bf16_checkpoint"
WINDOW_FLAGS = {"mistral": ["--memory-len", "6"]}  # tf5's sliding-window model
TOL = 1e-4
SET = FIX = None  # the set argv[2] names, and its folder


def models():
    with open(os.path.join(FIX, "models.json")) as f:
        return json.load(f)


def expected(name):
    with open(os.path.join(FIX, name, "expected.json")) as f:
        return json.load(f)


def ini_of(d):
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(os.path.join(d, "config.ini"))
    return ini["gptneox"] if ini.has_section("gptneox") else ini["gptj"] if ini.has_section("gptj") else ini["gpt"]


def convert(src, out, T, dt, flags=()):
    r = run_ftx(["convert-hf", "-i", src, "-o", out, "-g", str(T), "-t", dt, "--quiet", "--force", *flags])
    check(r.returncode == 0, f"convert-hf {src} -g {T} -t {dt} {' '.join(flags)}: {r.stderr.strip()}")
    return os.path.join(out, f"{T}-gpu")


def folder_bytes(d):
    """The .bin files and config.ini of an FT folder (manifest.json names the source, so it differs)."""
    out = {f: open(os.path.join(d, f), "rb").read() for f in os.listdir(d) if f.endswith(".bin")}
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(os.path.join(d, "config.ini"))
    out["config.ini"] = {s: dict(ini[s]) for s in ini.sections()}
    return out


def layouts():
    info = models()
    print(f"fixtures made with {info['versions']}")
    with tempfile.TemporaryDirectory() as tmp:
        for m in info["models"]:
            name, work = m["name"], os.path.join(tmp, m["name"])
            os.makedirs(work)
            st = open(os.path.join(FIX, name, "safetensors", "model.safetensors"), "rb").read(200000)
            head = st[8:8 + int.from_bytes(st[:8], "little")].decode()
            lm = any(k in head for k in ('"lm_head.weight"', '"embed_out.weight"'))
            check(lm != m["tied"], f"{name}: tied={m['tied']} but model.safetensors {'has' if lm else 'lacks'} the head")
            saves = [s for s in SAVES[SET] if os.path.isdir(os.path.join(FIX, name, s))]
            ref = None
            for layout in saves:
                got = folder_bytes(convert(os.path.join(FIX, name, layout), os.path.join(work, layout), 2, "bf16"))
                if ref is None:
                    ref = got
                    continue
                diff = sorted(k for k in set(ref) | set(got) if ref.get(k) != got.get(k))
                check(not diff, f"{name} T=2 bf16: {layout} differs from safetensors in {diff[:4]}")
            if len(saves) > 1:
                print(f"ok   layouts {name}: {len(ref) - 1} files identical from {', '.join(saves)}"
                      f" ({'tied' if m['tied'] else 'untied'} head)")
            if SET == "tf4":
                half_saved(name, work, expected(name)["folded_in_half"])
                if m["model_type"] == "gpt_neox":
                    newer_key_names(name, work, ref)
        if SET == "tf5":
            config_ini_records(tmp)


def half_saved(name, tmp, folded):
    """A checkpoint saved in fp16 (bf16) converts with -t fp16 (bf16) to the bytes the fp32
    checkpoint gives (config.ini's copy of torch_dtype aside), but for the tensors convert-hf
    computes from several (expected.json's folded_in_half): those are now products or sums of
    rounded factors."""
    names = [f.split(" ")[0] for f in folded]
    skip = [re.compile(re.escape(n).replace(r"\*", r"\d+") + r"(\.\d+)?\.bin$") for n in names]
    for layout, dt in HALF_LAYOUTS.items():
        want = folder_bytes(convert(os.path.join(FIX, name, "safetensors"), os.path.join(tmp, "f32_" + dt), 2, dt))
        got = folder_bytes(convert(os.path.join(FIX, name, layout), os.path.join(tmp, layout), 2, dt))
        for ini in (want, got):  # GPT-2's section copies config.json's keys, torch_dtype among them
            ini["config.ini"].get("gpt", {}).pop("torch_dtype", None)
        diff = sorted(k for k in set(want) | set(got)
                      if want.get(k) != got.get(k) and not any(p.match(k) for p in skip))
        if check(not diff, f"{name}: {layout} -t {dt} differs from the fp32 checkpoint's in {diff[:4]}"):
            print(f"ok   layouts {name}: {layout} -t {dt} gives the fp32 checkpoint's bytes"
                  + (f" (but {', '.join(names)})" if names else ""))


def newer_key_names(name, tmp, want):
    """transformers 4.4x writes rotary_pct/rotary_emb_base and their newer names
    partial_rotary_factor/rope_theta; a config with only the newer ones converts the same."""
    src = os.path.join(tmp, "newer_keys")
    shutil.copytree(os.path.join(FIX, name, "safetensors"), src)
    cfg = json.load(open(os.path.join(src, "config.json")))
    for k in ("rotary_pct", "rotary_emb_base"):
        del cfg[k]
    json.dump(cfg, open(os.path.join(src, "config.json"), "w"))
    got = folder_bytes(convert(src, os.path.join(tmp, "newer_out"), 2, "bf16"))
    diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    if check(not diff, f"{name} with partial_rotary_factor/rope_theta only: differs in {diff[:4]}"):
        print(f"ok   layouts {name}: config.json with only partial_rotary_factor and rope_theta converts the same")


def config_ini_records(tmp):
    """config.ini records what changes the math, read from transformers 5's config keys."""
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
        # head_dim 16 with hidden_size 32 (4 heads x 16 = 64), q_norm / k_norm, no biases.
        ("qwen3", 1): {"qk_norm": "1", "size_per_head": "16", "hidden_size": "32", "kv_head_num": "2",
                       "has_bias": "0", "qkv_bias": None, "tied_embeddings": "0"},
        ("qwen3", 4): {"kv_head_num": "4", "source_kv_head_num": "2"},
        ("qwen3_tied", 1): {"qk_norm": "1", "tied_embeddings": "1"},
        # Phi-3: half of each 16-wide head rotated, longrope with the attention factor derived (4 = 128 / 32);
        # Phi-4-mini: 3/4 rotated, attention factor 1.25 given, tied; both 2 KV heads (copied at TP 4).
        ("phi3_longrope", 1): {"rotary_dim": "8", "rotary_scaling_type": "longrope", "rotary_scaling_factor": "4",
                               "rotary_scaling_original_max_positions": "32",
                               "rotary_scaling_short_factor": "1,1.25,2.5,6",
                               "rotary_scaling_long_factor": "1.5,3,9,2e+01",
                               "rotary_scaling_attention_factor": None, "kv_head_num": "2", "tied_embeddings": "0"},
        ("phi3_longrope", 4): {"kv_head_num": "4", "source_kv_head_num": "2"},
        ("phi4mini", 1): {"rotary_dim": "12", "rotary_scaling_type": "longrope",
                          "rotary_scaling_attention_factor": "1.25", "tied_embeddings": "1"},
        # rope_parameters: yarn, factor 4, original 8, beta_fast 2, beta_slow 0.5, no attention_factor.
        # Gemma 2: GeGLU tanh, four (1 + w) norms a layer, sqrt(48) in fp32 (-t fp32), 24^-1/2, both
        # softcaps, layer 0 sliding (window 4) and layer 1 full; no global sliding_window.
        ("gemma2", 1): {"activation": "geglu_tanh", "normalization": "rmsnorm", "sandwich_norm": "1",
                        "norm_unit_offset": "1", "size_per_head": "16", "hidden_size": "48", "kv_head_num": "2",
                        "embedding_scale": "6.928203105926514", "attention_scale": "0.2041241452319315",
                        "attention_softcap": "5", "final_logit_softcap": "3", "layer_window": "4,0",
                        "sliding_window": None, "tied_embeddings": "1", "has_bias": "0", "start_id": "1",
                        "end_id": "0"},
        ("gemma2", 2): {"kv_head_num": "2", "layer_window": "4,0"},
        # Gemma 3: Gemma 2's block without softcaps, q/k norms, layers 0-1 sliding (window 4) with
        # their own base 100, layer 2 full with base 10000 (linear factor 8 in gemma3_text_linear).
        ("gemma3_text", 1): {"activation": "geglu_tanh", "sandwich_norm": "1", "norm_unit_offset": "1",
                             "qk_norm": "1", "size_per_head": "16", "hidden_size": "48",
                             "embedding_scale": "6.928203105926514", "attention_scale": "0.1767766952966369",
                             "attention_softcap": None, "final_logit_softcap": None, "layer_window": "4,4,0",
                             "rotary_base": "1e+04", "rotary_base_local": "1e+02", "rotary_scaling_type": None,
                             "tied_embeddings": "1", "start_id": "1", "end_id": "0"},
        ("gemma3_text", 4): {"kv_head_num": "4", "source_kv_head_num": "2", "layer_window": "4,4,0"},
        ("gemma3_text_linear", 1): {"rotary_base": "1e+04", "rotary_base_local": "1e+02",
                                    "rotary_scaling_type": "linear", "rotary_scaling_factor": "8"},
        ("qwen3_yarn", 1): {"rotary_scaling_type": "yarn", "rotary_scaling_factor": "4",
                            "rotary_scaling_original_max_positions": "8", "rotary_scaling_beta_fast": "2",
                            "rotary_scaling_beta_slow": "0.5", "rotary_scaling_mscale": "0",
                            "rotary_scaling_mscale_all_dim": "0", "rotary_scaling_truncate": "1",
                            "rotary_scaling_attention_factor": None, "rotary_dim": "16"},
        ("mixtral", 1): {"moe_top_k": "2", "moe_router": "softmax_topk_renorm", "kv_head_num": "2",
                         "activation": "SiGLU", "has_bias": "0", "inter_size": "32"},
        # Issue 51: the experts' width apart from the dense layer's, the shared expert's, the router
        # as norm_topk_prob says, q/k biases (qwen2_moe) and q/k norms with head_dim (qwen3_moe).
        ("qwen2_moe", 2): {"moe_top_k": "2", "moe_router": "softmax_topk", "inter_size": "40",
                           "moe_inter_size": "16", "moe_shared_expert_inter_size": "24", "qkv_bias": "1",
                           "kv_head_num": "2"},
        ("qwen2_moe_step2", 1): {"moe_router": "softmax_topk_renorm", "moe_shared_expert_inter_size": "24"},
        ("qwen3_moe", 1): {"moe_top_k": "2", "moe_router": "softmax_topk_renorm", "inter_size": "40",
                           "moe_inter_size": "16", "moe_shared_expert_inter_size": None, "qk_norm": "1",
                           "size_per_head": "16", "hidden_size": "48"},
        ("qwen3_moe_step2", 1): {"moe_router": "softmax_topk"},
    }
    for (name, T), keys in want.items():
        sec = ini_of(convert(os.path.join(FIX, name, "safetensors"), os.path.join(tmp, name + "_ini"), T, "fp32"))
        got = {k: sec.get(k) for k in keys}
        if check(got == keys, f"{name} T={T}: config.ini has {got}, expected {keys}"):
            print(f"ok   layouts {name} T={T}: config.ini " + ", ".join(f"{k} = {v}" for k, v in keys.items()))
    # FT's GPT-MoE section, as its megatron_gpt_moe_ckpt_convert.py writes it (moe_layers a Python list).
    # Qwen's layers of experts: mlp_only_layers and decoder_sparse_step leave the others dense.
    for name, T, layers in (("mixtral", 1, "[0, 1]"), ("qwen2_moe", 2, "[0, 2]"), ("qwen2_moe_step2", 1, "[1]"),
                            ("qwen3_moe", 1, "[1, 2]"), ("qwen3_moe_step2", 1, "[1]")):
        ini = configparser.ConfigParser(interpolation=None)
        ini.read(os.path.join(tmp, name + "_ini", f"{T}-gpu", "config.ini"))  # converted above
        structure = dict(ini["structure"]) if ini.has_section("structure") else None
        want_structure = {"gpt_with_moe": "1", "expert_num": "4", "moe_layers": layers}
        if check(structure == want_structure, f"{name}: config.ini [structure] is {structure}, expected {want_structure}"):
            print(f"ok   layouts {name}: config.ini [structure] " +
                  ", ".join(f"{k} = {v}" for k, v in want_structure.items()))


def convert_all(names, prefix, fp32_tps=(1, 2), half_tps=(1, 2)):
    """Each model in each dtype, to <model>/<prefix><dtype>/<T>-gpu (a prefix per test: ctest may
    run them at once)."""
    for name in names:
        for kind, (layout, dt) in SOURCE_OF.items():
            if prefix == "gen_" and kind.endswith("src"):
                continue
            for T in fp32_tps if kind == "fp32" else half_tps:
                convert(os.path.join(FIX, name, layout), os.path.join(FIX, name, prefix + kind), T, dt)


def engine_logits(exe, dirs, kinds):
    """The gtest HfGroundTruth.LogitsMatchTransformers on the model folders `dirs` (each with
    expected.json and ft_<kind>/<T>-gpu) for FTX_HF_GT_KINDS `kinds`, alone and under mpirun -np 2:
    {(model, dtype, "tp1"|"tp2"): largest relative difference}."""
    env = dict(os.environ, FTX_HF_GT_MODELS=",".join(dirs), FTX_HF_GT_KINDS=kinds)
    worst = {}
    for tag, cmd in (("tp1", [exe]), ("tp2", mpirun(2) + ["-x", "FTX_HF_GT_MODELS", "-x", "FTX_HF_GT_KINDS", exe])):
        r = subprocess.run(cmd + ["--gtest_filter=HfGroundTruth.*", "--gtest_color=no"], env=env,
                           capture_output=True, text=True)
        ok = r.returncode == 0 and "[  PASSED  ] 1 test" in r.stdout and "SKIPPED" not in r.stdout
        check(ok, f"engine logits {kinds} {tag}: {r.stdout[-3000:]}{r.stderr[-1000:]}")
        for line in r.stdout.splitlines():
            if line.startswith("max_rel_diff "):
                _, model, dt, tp, v = line.split()
                worst[(model, dt, tp)] = float(v)
        if ok:
            print(f"ok   engine logits {tag}: {len(dirs)} models x {kinds} within the bounds")
    return worst


def engine_runs(tmp):
    """{FTX_HF_GT_KINDS: [model folders]} of the set: each folder holds expected.json and
    ft_<kind>/<T>-gpu for T 1 and 2."""
    names = [m["name"] for m in models()["models"]]
    if SET == "tf4":
        convert_all(names, "ft_")
        return {KINDS: [os.path.join(FIX, n) for n in names]}
    runs = {"fp32": [], "bf16src:bf16": []}
    for m in models()["models"]:
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
    return runs


def engine():
    print(f"fixtures made with {models()['versions']}")
    exe = os.environ.get("FTX_HF_GT_ENGINE_TEST", "")
    with tempfile.TemporaryDirectory() as tmp:
        runs = engine_runs(tmp)
        if not check(os.path.exists(exe), f"FTX_HF_GT_ENGINE_TEST ({exe}) is not the hf_ground_truth_test binary"):
            return
        worst = {}
        for kinds, dirs in runs.items():
            for (model, dt, tp), v in engine_logits(exe, dirs, kinds).items():
                worst.setdefault(model, {})[f"{dt} {tp}"] = v
    want = sorted({os.path.basename(d) for dirs in runs.values() for d in dirs})
    check(sorted(worst) == want, f"max_rel_diff lines for {sorted(worst)}, expected {want}")
    print("largest |ftx - transformers float64| / max(1, max |logit|), prefill and every decode step:")
    for model, d in sorted(worst.items()):
        dts = sorted({k.split()[0] for k in d})
        by = {dt: max(v for k, v in d.items() if k.split()[0] == dt) for dt in dts}
        print(f"  {model:18s} " + "   ".join(f"{k} {v:.2e}" for k, v in by.items()) + f"   ({len(d)} runs)")


def generate_jsonl(model_dir, requests, T=1, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        req, out = os.path.join(tmp, "req.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(req, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in requests))
        args = ["generate", "-m", model_dir, "--prompts", req, "--output", out, "--quiet", *extra]
        if "--max-new-tokens" not in extra:
            args += ["--max-new-tokens", "1"]  # each request names its own
        if T > 1:
            args += ["--threads", "1"]
        r = run_ftx(args, mpi=T if T > 1 else 0)
        if not check(r.returncode == 0, f"generate {model_dir}: {r.stderr.strip()[-800:]}"):
            return None
        with open(out) as f:
            return [json.loads(line) for line in f]


def log_softmax(row):
    top = max(row)
    s = math.log(sum(math.exp(x - top) for x in row)) + top
    return [x - s for x in row]


def check_greedy(label, folder, T, prompts, want, want_logits=None, extra=()):
    """`ftx generate` of 8 new tokens on FOLDER at TP T gives the greedy tokens `want`. With
    want_logits (transformers' float64 logits that chose each token) the request is top_p 1e-6, which
    keeps the top token alone and reports its full-softmax log probability (FT's greedy, top_k 1,
    renormalises over the one token: always 0), checked against log_softmax within TOL.
    Returns the largest log-probability difference (0 without want_logits), None when it did not run."""
    params = {"return_log_probs": True, "top_p": 1e-6} if want_logits else {}
    got = generate_jsonl(folder, [dict(params, ids=p, max_new_tokens=8) for p in prompts], T, list(extra))
    if got is None:
        return None
    ids = [g["output_ids"] for g in got]
    worst = 0.0
    if check(ids == want, f"{label} T={T}: greedy {ids} != transformers' {want}") and want_logits:
        for g, steps in zip(got, want_logits):
            for tok, lp, row in zip(g["output_ids"], g["output_log_probs"], steps):
                worst = max(worst, abs(lp - log_softmax(row)[tok]))
        check(worst <= TOL, f"{label} T={T}: log probs differ from transformers' by {worst:.2e}")
    return worst


def test_I49_context_log_probs(label, folder, T, prompts, want, want_logits, extra=()):
    """Prompt scoring against transformers: each prompt followed by its greedy continuation is scored
    with --max-new-tokens 0 and --return-context-log-probs; at every position from the prompt's last
    on, the fixture holds transformers' float64 logits (prompt_logits, then greedy_logits: the whole
    sequence run with no cache), so context_log_probs[len(prompt) - 1 + k] must equal
    log_softmax(greedy_logits[k])[greedy[k]] within TOL (the one-token prompt: every position).
    Returns (the largest difference, positions compared), None when it did not run."""
    seqs = [p + w for p, w in zip(prompts, want)]  # each request's max_new_tokens 0: scoring alone
    got = generate_jsonl(folder, [{"ids": s, "return_context_log_probs": True, "max_new_tokens": 0} for s in seqs], T,
                         list(extra))
    if got is None:
        return None
    worst, n = 0.0, 0
    for p, w, steps, g in zip(prompts, want, want_logits, got):
        lp = g["context_log_probs"]
        if not check(len(lp) == len(p) + len(w) - 1 and g["output_ids"] == [],
                     f"{label} T={T}: {len(lp)} context_log_probs for {len(p) + len(w)} tokens, output {g['output_ids']}"):
            continue
        for k, (tok, row) in enumerate(zip(w, steps)):
            worst = max(worst, abs(lp[len(p) - 1 + k] - log_softmax(row)[tok]))
            n += 1
    check(worst <= TOL, f"{label} T={T}: context_log_probs differ from transformers' by {worst:.2e}")
    return worst, n


def greedy_runs(m, e, tmp):
    """(label, folder, T, want, want_logits, extra) of the set's greedy checks of model m."""
    name = m["name"]
    if SET == "tf4":
        gen = lambda dt, T: os.path.join(FIX, name, "gen_" + dt, f"{T}-gpu")  # noqa: E731 (convert_all's)
        return [(f"{name} fp32", gen("fp32", 1), 1, e["hf_generate"]["greedy"], None, []),
                (f"{name} fp32", gen("fp32", 2), 2, e["hf_generate"]["greedy"], None, []),
                (f"{name} fp16", gen("fp16", 1), 1, e["fp16"]["greedy"], None, []),
                (f"{name} bf16", gen("bf16", 1), 1, e["bf16"]["greedy"], None, [])]
    extra = WINDOW_FLAGS.get(name, [])
    runs = []
    for T in (1, 2, 4) if name in ("llama", "qwen2", "qwen3", "phi3_longrope", "gemma2", "gemma3_text",
                                   "mixtral") else (1, 2):
        folder = convert(os.path.join(FIX, name, "safetensors"), os.path.join(tmp, name), T, "fp32")
        runs.append((name, folder, T, e["greedy"], e["greedy_logits"], extra))
        if T == 1 and name in ("llama", "phi3_longrope", "gemma3_text", "mixtral"):  # two pipeline stages over the 1-gpu folder
            runs.append((name + " PP 2", folder, 2, e["greedy"], e["greedy_logits"],
                         extra + ["--pipeline-para-size", "2"]))
        if T == 2 and name == "mixtral":  # TP 2 x PP 2 over the 2-gpu folder
            runs.append((name + " TP 2 x PP 2", folder, 4, e["greedy"], e["greedy_logits"],
                         extra + ["--pipeline-para-size", "2"]))
        if T > 1 and name == "mixtral":
            # Expert parallelism: whole experts on each rank (convert-hf --moe-ep-size), every rank
            # routing every row; and over two pipeline stages of 2 ranks each.
            ep = convert(os.path.join(FIX, name, "safetensors"), os.path.join(tmp, name + "_ep"), T, "fp32",
                         ["--moe-ep-size", str(T)])
            runs.append((name + " whole experts", ep, T, e["greedy"], e["greedy_logits"], extra))
            if T == 2:
                runs.append((name + " whole experts, TP 2 x PP 2", ep, 4, e["greedy"], e["greedy_logits"],
                             extra + ["--pipeline-para-size", "2"]))
    if "bf16" in m["layouts"]:
        # fp32 files: transformers' reference is the bf16 weights widened; with -t bf16 a
        # tensor the converter folds (GPT-NeoX's summed biases) would round once more.
        folder = convert(os.path.join(FIX, name, "bf16"), os.path.join(tmp, name + "_bf16"), 1, "fp32")
        runs.append((name + " bf16", folder, 1, e["bf16"]["greedy"], e["bf16"]["greedy_logits"], extra))
    return runs


def generate():
    info = models()["models"]
    if SET == "tf4":
        convert_all([m["name"] for m in info], "gen_", half_tps=(1,))
    with tempfile.TemporaryDirectory() as tmp:
        for m in info:
            name, e = m["name"], expected(m["name"])
            before = len(e2e_util.failures)
            runs = greedy_runs(m, e, tmp)
            seen = [check_greedy(label, folder, T, e["prompts"], want, logits, extra)
                    for label, folder, T, want, logits, extra in runs]
            scored = [test_I49_context_log_probs(label, folder, T, e["prompts"], want, logits, extra)
                      for label, folder, T, want, logits, extra in runs if SET == "tf5"]
            more = beams_and_draws(name, e) if "beam" in e else ""
            if len(e2e_util.failures) == before:
                lp = f"; log probs within {max(seen):.1e}" if any(r[4] for r in runs) else ""
                if scored:
                    lp += (f"; I49 context_log_probs within {max(x[0] for x in scored):.1e} of transformers' "
                           f"({sum(x[1] for x in scored)} positions)")
                print(f"ok   generate {name}: greedy = transformers' in " + ", ".join(f"{r[0]} T={r[2]}" for r in runs)
                      + (f" with {' '.join(WINDOW_FLAGS[name])}" if SET == "tf5" and name in WINDOW_FLAGS else "") + lp + more)


def beams_and_draws(name, e):
    """tf4's beam search and seeded top-k / top-p draws against transformers' generate() and warpers."""
    fp32 = os.path.join(FIX, name, "gen_fp32", "1-gpu")
    # Beam search, as in the fixture: no end id (one past the vocabulary), length penalty 0.
    beam = e["beam"]
    got = generate_jsonl(fp32, [{"ids": p} for p in e["prompts"]], 1,
                         ["--beam-width", str(beam["num_beams"]), "--len-penalty", "0", "--max-new-tokens",
                          str(beam["new_tokens"]), "--end-id", str(e["vocab_size"] + 7)])
    beam_diff = 0.0
    for i, want in enumerate(e["hf_generate"]["beam"] if got else []):
        have = got[i]["beams"]
        check([b["output_ids"] for b in have] == [b["output_ids"] for b in want],
              f"{name} beams of prompt {i}: {[b['output_ids'] for b in have]} != {[b['output_ids'] for b in want]}")
        for b, w in zip(have, want):
            beam_diff = max(beam_diff, abs(b["cum_log_prob"] - w["cum_log_prob"]))
    check(beam_diff <= TOL, f"{name} beam cum_log_prob differs by {beam_diff:.2e}")
    # Seeded sampling of the first token against transformers' warpers.
    s = e["sampling"]
    kinds = {"top_k": {"top_k": s["top_k"], "temperature": s["temperature"]}, "top_p": {"top_p": s["top_p"]}}
    reqs = [dict(params, ids=p, seed=seed, max_new_tokens=1, return_log_probs=True)
            for params in kinds.values() for p in e["prompts"] for seed in range(1, 33)]
    got = generate_jsonl(fp32, reqs, 1, ["--end-id", str(e["vocab_size"] + 7)]) or []
    sampled = {}
    for kind in kinds:
        seen, worst = set(), 0.0
        for r, g in zip(reqs, got):
            if kind not in r:
                continue
            allowed = e["hf_generate"][kind][e["prompts"].index(r["ids"])]
            tok = str(g["output_ids"][0])
            if not check(tok in allowed, f"{name} {kind} seed {r['seed']}: token {tok} not in {sorted(allowed)}"):
                continue
            seen.add((tuple(r["ids"]), tok))
            worst = max(worst, abs(g["output_log_probs"][0] - allowed[tok]))
        check(worst <= TOL, f"{name} {kind}: log prob differs from transformers' by {worst:.2e}")
        sampled[kind] = (len(seen), worst)
    return (f"; beams = transformers' (cum log prob within {beam_diff:.1e}); "
            + "; ".join(f"{k}: {v[0]} distinct draws, log prob within {v[1]:.1e}" for k, v in sampled.items()))


def refused_source(tmp, name, base):
    """The refused configuration NAME as a model folder: tf4 saved the whole model, tf5 its config.json
    alone (beside the base model's weights)."""
    d = os.path.join(FIX, "refused", name)
    if os.listdir(d) != ["config.json"]:
        return d
    src = os.path.join(tmp, name)
    shutil.copytree(os.path.join(FIX, base, "safetensors"), src)
    shutil.copy(os.path.join(d, "config.json"), src)
    return src


def errors():
    with tempfile.TemporaryDirectory() as tmp:
        for name, (base, changed) in models()["refused"].items():
            src, out = refused_source(tmp, name, base), os.path.join(tmp, "out_" + name)
            r = run_ftx(["convert-hf", "-i", src, "-o", out, "--quiet"])
            lines = [line for line in r.stderr.strip().splitlines() if line]
            key = next(iter(changed))  # tf4: {key: value}; tf5: [key, ...]
            ok = (check(r.returncode == 1, f"{name}: exit {r.returncode}, expected 1 ({r.stderr.strip()})")
                  and check(len(lines) == 1 and lines[0].startswith("ftx: error: "), f"{name}: {r.stderr!r}")
                  and check(os.path.join(src, "config.json") in lines[0] and key in lines[0],
                            f"{name}: {lines[0]!r} does not name config.json and {key}")
                  and check(not os.path.exists(out), f"{name}: left {out}"))
            if ok:
                print(f"ok   errors {name}: {lines[0]}")
        if SET == "tf5":
            tf5_refusals(tmp)


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


def test_I46_qwen3_refusals_name_their_key(tmp):
    """Qwen3 configurations transformers computes and ftx does not: one line naming the key and value.
    A config.json without head_dim means Qwen3Config's 128, not hidden_size / heads (16 here), so
    the fixture's 16-wide heads (its 16-wide q_norm / k_norm first) no longer match."""
    def set_(**kv):
        return lambda cfg: cfg.update(kv)

    def partial(cfg):
        cfg["rope_parameters"]["partial_rotary_factor"] = 0.5

    def top_original(cfg):
        cfg["original_max_position_embeddings"] = 16

    cases = (
        ("I46_bias", "qwen3", set_(attention_bias=True),
         "attention_bias true is not supported (Qwen3's q/k/v and o biases without MLP biases)"),
        ("I46_partial", "qwen3", partial,
         "rope_parameters.partial_rotary_factor = 0.5 is not supported (qwen3 rotates the whole head)"),
        ("I46_slide", "qwen3", set_(use_sliding_window=True, sliding_window=4,
                                    layer_types=["full_attention", "sliding_attention"]),
         "use_sliding_window true with 1 of 2 layers sliding (layer_types / max_window_layers) is not supported: "
         "ftx's window is the same for every layer"),
        # transformers refuses a layer type it does not know, whatever use_sliding_window says.
        ("I46_layer_type", "qwen3", set_(layer_types=["full_attention", "chunked_attention"]),
         'layer_types holds "chunked_attention" (full_attention or sliding_attention)'),
        ("I46_layer_types_count", "qwen3", set_(layer_types=["full_attention"]),
         'layer_types = ["full_attention"] is not a list of 2 layer types'),
        ("I46_yarn_original", "qwen3_yarn", top_original,
         "original_max_position_embeddings = 16 and rope_parameters.original_max_position_embeddings = 8 disagree "
         "(which one transformers uses depends on its version); make them equal"),
    )
    for name, base, edit, want in cases:
        convert_refused(tmp, copy_model(tmp, base, name, edit), "{cfg}: " + want)
    src = copy_model(tmp, "qwen3", "I46_no_head_dim", lambda cfg: cfg.pop("head_dim"))
    out = os.path.join(tmp, "out_I46_no_head_dim")
    r = run_ftx(["convert-hf", "-i", src, "-o", out, "--quiet"])
    line = one_error_line(r, "qwen3 without head_dim", "the configuration implies [128]", out)
    if line:
        print(f"ok   I46 qwen3 without head_dim (128): {line}")


def test_I46_gemma2_refusals_name_their_key(tmp):
    """Gemma 2 configurations transformers computes and ftx does not run: one line naming the key and value."""
    def set_(**kv):
        return lambda cfg: cfg.update(kv)

    cases = (
        ("I46_g2_bias", set_(attention_bias=True),
         "attention_bias true is not supported (Gemma 2's q/k/v and o biases without MLP biases)"),
        ("I46_g2_act", set_(hidden_activation="silu"),
         "hidden_activation = 'silu' is not supported (gemma2: gelu_pytorch_tanh, i.e. GeGLU with the tanh GELU)"),
        ("I46_g2_window", set_(sliding_window=None),
         "sliding_window = null with layer 0 sliding_attention (layer_types) is not supported"),
        ("I46_g2_types", set_(layer_types=["sliding_attention", "chunked_attention"]),
         'layer_types[1] = "chunked_attention" is not supported (sliding_attention, full_attention)'),
        ("I46_g2_softcap", set_(attn_logit_softcapping=0.0),
         "attn_logit_softcapping = 0.0 is not a positive number (null: no softcap)"),
    )
    for name, edit, want in cases:
        convert_refused(tmp, copy_model(tmp, "gemma2", name, edit), "{cfg}: " + want)
    # SmoothQuant folds its smoothing into the norms' gammas, which Gemma's files hold as gamma - 1.
    folder = convert(os.path.join(FIX, "gemma2", "safetensors"), os.path.join(tmp, "I46_g2_sq"), 1, "fp32")
    out = os.path.join(tmp, "out_I46_g2_sq")
    r = run_ftx(["smoothquant", "-i", folder, "-o", out, "--alpha", "0.5", "--quiet"])
    if exact_error(r, "I46_g2_sq", os.path.join(folder, "config.ini") + ": norm_unit_offset = 1: --alpha 0.5 would fold "
                   "the smoothing into norms that scale by 1 + gamma, which ftx smoothquant does not (use --alpha 0)", out):
        print("ok   I46_g2_sq: smoothquant --alpha 0.5 of gemma2 refused naming norm_unit_offset")


def test_I46_phi3_refusals_name_their_key(tmp):
    """Phi-3 configurations transformers computes and ftx does not, one line naming the key and value;
    and a request whose positions pass longrope's original_max_position_embeddings (32 here), where
    transformers switches the whole sequence to long_factor: refused naming the prompt and the key,
    while one that stays within it runs."""
    def rope(**kv):
        return lambda cfg: cfg["rope_parameters"].update(kv)

    def set_(**kv):
        return lambda cfg: cfg.update(kv)

    cases = (
        ("I46_phi3_linear", "phi3_longrope", rope(rope_type="linear", factor=2.0),
         "rope_parameters.rope_type = 'linear' is not supported (supported: longrope)"),
        ("I46_phi3_factor", "phi3_longrope", rope(factor=2.0),
         "rope_parameters.factor = 2.0 is not max_position_embeddings / original_max_position_embeddings = 4.0 "
         "(transformers 4.x derives the attention factor from the ratio, 5.x from rope_parameters.factor); give "
         "attention_factor, or make them agree"),
        ("I46_phi3_original", "phi3_longrope", set_(original_max_position_embeddings=64),
         "original_max_position_embeddings = 64 and rope_parameters.original_max_position_embeddings = 32 disagree "
         "(which one transformers uses depends on its version); make them equal"),
        ("I46_phi3_head_dim", "phi3_longrope", set_(head_dim=8),
         "head_dim = 8 is not hidden_size / num_attention_heads = 16 (not supported)"),
        ("I46_phi3_short", "phi3_longrope", rope(short_factor=[1.0, 2.0]),
         "rope scaling longrope: short_factor and long_factor must hold 4 numbers (rotary dims 8 / 2), not 2 and 4"),
    )
    for name, base, edit, want in cases:
        convert_refused(tmp, copy_model(tmp, base, name, edit), "{cfg}: " + want)
    folder = convert(os.path.join(FIX, "phi3_longrope", "safetensors"), os.path.join(tmp, "I46_phi3"), 1, "fp32")
    # su and yarn, longrope's older names in 4.x rope_scaling, are longrope to Phi3Config: the same folder.
    for older in ("su", "yarn"):
        def as_rope_scaling(cfg, older=older):
            sc = cfg.pop("rope_parameters")  # as 4.x wrote Phi-3: theta and partial at the top level
            cfg["rope_theta"], cfg["partial_rotary_factor"] = sc.pop("rope_theta"), sc.pop("partial_rotary_factor")
            sc["type"] = older
            del sc["rope_type"]
            cfg["rope_scaling"] = sc
        src = copy_model(tmp, "phi3_longrope", "I46_phi3_" + older, as_rope_scaling)
        other = convert(src, os.path.join(tmp, "I46_phi3_out_" + older), 1, "fp32")
        same = all(open(os.path.join(folder, f), "rb").read() == open(os.path.join(other, f), "rb").read()
                   for f in os.listdir(folder) if f.endswith(".bin") or f == "config.ini")
        if check(same and sorted(os.listdir(folder)) == sorted(os.listdir(other)),
                 f"I46 phi3 rope_scaling type {older}: another folder than rope_type longrope's"):
            print(f"ok   I46 phi3: rope_scaling type '{older}' converts as longrope")
    nine = expected("phi3_longrope")["prompts"][2]
    ids = (nine * 4)[:30]
    tail = ("a sequence of 33 positions is longer than the longrope rotary's original_max_position_embeddings = 32 "
            "(config.ini rotary_scaling_original_max_positions), beyond which the model rotates by long_factor, which "
            "ftx does not compute; keep prompt + new tokens within 32")
    req, out = os.path.join(tmp, "I46_phi3.jsonl"), os.path.join(tmp, "I46_phi3_out.jsonl")
    with open(req, "w") as f:
        f.write(json.dumps({"ids": ids, "max_new_tokens": 4}) + "\n")
    r = run_ftx(["generate", "-m", folder, "--prompts", req, "--output", out, "--quiet", "--max-new-tokens", "1"])
    want = f"{req}: line 1 (prompt 1): 30 prompt tokens + 4 new tokens run through position 32; {tail}"
    if exact_error(r, "I46 phi3 beyond the original length", want, out):
        print(f"ok   I46 phi3 beyond original_max_position_embeddings: {want}")
    # 30 + 3 new tokens run positions 0..31 (the last token is never fed): within it.
    got = generate_jsonl(folder, [{"ids": ids, "max_new_tokens": 3}], extra=("--max-new-tokens", "3", "--min-length", "3"))
    if got is not None and check(len(got[0]["output_ids"]) == 3, f"I46 phi3 within the original length: {got}"):
        print("ok   I46 phi3: 30 prompt tokens + 3 new tokens (positions 0 to 31) run")
    # A session's second round after 20 + 4 tokens of context: 8 more + 2 new run through position 32
    # (33 positions; the last new token is never fed).
    req, out = os.path.join(tmp, "I46_phi3s.jsonl"), os.path.join(tmp, "I46_phi3s_out.jsonl")
    with open(req, "w") as f:
        f.write(json.dumps({"ids": ids[:20], "max_new_tokens": 4, "min_length": 4, "session": "a"}) + "\n")
        f.write(json.dumps({"ids": ids[:8], "max_new_tokens": 2, "session": "a"}) + "\n")
    r = run_ftx(["generate", "-m", folder, "--prompts", req, "--output", out, "--quiet", "--max-new-tokens", "1"])
    want = 'ftx: error: request 2 (session "a"): ' + tail
    if check(r.returncode == 1 and r.stderr.startswith(want), f"I46 phi3 session: exit {r.returncode}, {r.stderr!r}"):
        print(f"ok   I46 phi3 session: {want}")


def test_I46_gemma3_refusals_name_their_key(tmp):
    """Gemma 3 configurations transformers computes and ftx does not run: one line naming the key and
    value. And a transformers-4 config.json (rope_theta, rope_local_base_freq, sliding_window_pattern,
    no layer_types or rope_parameters) converts to the files of the transformers-5 one."""
    def set_(**kv):
        return lambda cfg: cfg.update(kv)

    def rope(**sets):
        full = dict(rope_type="default", rope_theta=10000.0)
        local = dict(rope_type="default", rope_theta=100.0)
        return set_(rope_parameters=dict(dict(full_attention=full, sliding_attention=local), **sets))

    cases = (
        ("I46_g3_local_scaled", rope(sliding_attention=dict(rope_type="linear", factor=2.0, rope_theta=100.0)),
         "rope_parameters.sliding_attention.rope_type = \"linear\" is not supported (Gemma 3's sliding layers "
         "rotate unscaled: default)"),
        ("I46_g3_local_field", rope(sliding_attention=dict(rope_type="default", rope_theta=100.0, factor=1.0)),
         "rope_parameters.sliding_attention.factor = 1.0 is not supported (Gemma 3's sliding layers: rope_type "
         "default and rope_theta only)"),
        ("I46_g3_full_yarn", rope(full_attention=dict(rope_type="yarn", factor=4.0, rope_theta=10000.0)),
         "rope_parameters.full_attention.rope_type = 'yarn' is not supported (supported: linear)"),
        ("I46_g3_other_type", rope(chunked_attention=dict(rope_type="default", rope_theta=10.0)),
         "rope_parameters.chunked_attention is not a layer type of Gemma 3 (full_attention, sliding_attention)"),
        ("I46_g3_flat", set_(rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
         'rope_parameters = {{"rope_theta":10000.0,"rope_type":"default"}} is not one set per layer type (Gemma 3: '
         "full_attention and sliding_attention)"),
        ("I46_g3_bases_disagree", set_(rope_local_base_freq=50.0),
         "rope_local_base_freq = 50.0 and rope_parameters.sliding_attention.rope_theta = 100.0 disagree (which one "
         "transformers uses depends on its version); make them equal"),
        ("I46_g3_pattern", lambda cfg: (cfg.pop("layer_types"), cfg.update(sliding_window_pattern=0)),
         "sliding_window_pattern = 0 is not a positive integer"),
        ("I46_g3_bias", set_(attention_bias=True),
         "attention_bias true is not supported (Gemma 3's q/k/v and o biases without MLP biases)"),
    )
    for name, edit, want in cases:
        convert_refused(tmp, copy_model(tmp, "gemma3_text", name, edit), "{cfg}: " + want)

    def four(cfg):
        for k in ("layer_types", "rope_parameters", "_sliding_window_pattern"):
            del cfg[k]
        cfg.update(rope_theta=10000.0, rope_local_base_freq=100.0, sliding_window_pattern=3)

    want = folder_bytes(convert(os.path.join(FIX, "gemma3_text", "safetensors"), os.path.join(tmp, "g3_5x"), 2, "fp32"))
    got = folder_bytes(convert(copy_model(tmp, "gemma3_text", "g3_4x", four), os.path.join(tmp, "g3_4x_out"), 2, "fp32"))
    diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    if check(not diff, f"gemma3_text with 4.x keys: differs in {diff[:4]}"):
        print("ok   I46 gemma3_text: rope_theta, rope_local_base_freq and sliding_window_pattern 3 convert as "
              "rope_parameters and layer_types")


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
        ("mistral", "model.layers.1.mlp.down_proj.weight"), ("qwen2", "model.layers.1.mlp.down_proj.weight"),
        ("qwen3", "model.layers.1.self_attn.k_norm.weight"),
        ("gemma2", "model.layers.1.post_feedforward_layernorm.weight"),
        ("gemma3_text", "model.layers.2.self_attn.q_norm.weight"))]
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
    e = expected("mistral")
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


def tf5_refusals(tmp):
    """What only tf5's models allow: the sliding window, values no FT file may hold, unknown keys, and
    the cases R3 to L15 on edited copies."""
    # The sliding window without --memory-len: refused at the first position beyond it.
    e = expected("mistral")
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
                 test_L15_sliding_window_refusal_names_the_prompt, test_I46_qwen3_refusals_name_their_key,
                 test_I46_phi3_refusals_name_their_key, test_I46_gemma2_refusals_name_their_key,
                 test_I46_gemma3_refusals_name_their_key):
        test(tmp)


if __name__ == "__main__":
    SET, FIX = sys.argv[2], SETS[sys.argv[2]]
    {"layouts": layouts, "engine": engine, "generate": generate, "errors": errors}[sys.argv[1]]()
    finish(f"hf_ground_truth {sys.argv[1]} {SET}")
