#!/usr/bin/env python3
"""Ground truth from HuggingFace transformers (issue 26), on the models transformers itself built
and saved: scripts/fixtures/make_hf_ground_truth.py ($FTX_FIXTURES/hf_ground_truth; see there for
the models, the layouts and what is recorded).

Usage: hf_ground_truth_test.py {layouts|engine|generate|errors}
  layouts   every model's four save_pretrained layouts (model.safetensors, sharded safetensors,
            pytorch_model.bin, sharded .bin) convert to the same .bin bytes and config.ini (TP 2, bf16);
            tied models' safetensors hold the shared table once (as transformers saves it); checkpoints
            saved in fp16 (safetensors) and bf16 (.bin) convert with -t fp16 / bf16 to the fp32
            checkpoint's bytes but for the tensors the converter folds (products/sums); a GPT-NeoX
            config.json with only the newer key names (partial_rotary_factor, rope_theta) converts the same.
  engine    each model converted at TP 1 and 2 in fp32, fp16 and bf16 (each dtype from another layout),
            then the gtest HfGroundTruth.LogitsMatchTransformers alone and under `mpirun -np 2`: the
            logits of the prefill and of every decode step along transformers' greedy paths within 1e-4
            of the row's largest |logit| of transformers' float64 logits (tests/unit/hf_ground_truth_test.cc
            says why fp16/bf16 compare with the rounded weights' logits and where the bound is 4u);
            prints the largest relative difference per model.
  generate  `ftx generate`: greedy output_ids equal transformers' generate() at TP 1 and 2 (fp32) and
            equal the rounded model's greedy at TP 1 in fp16 and bf16; beam search (width 3, no end
            id, length penalty 0) gives transformers' beams, best first, with their cumulative log
            probabilities within 1e-4; seeded top-k (k 4, temperature 0.7) and top-p (0.6) draws of the
            first token are tokens transformers' warpers keep, with transformers' log probabilities
            within 1e-4 (top-k: renormalised over the k, FT's semantics; top-p: full softmax).
  errors    the configurations ftx refuses (the fixture's refused/: what man ftx-convert-hf lists) are
            one-line `ftx: error:` messages naming config.json and the key, with no output folder.
"""
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
import e2e_util  # noqa: E402
from e2e_util import check, finish, mpirun, run_ftx  # noqa: E402

FIX = os.path.join(os.environ["FTX_FIXTURES"], "hf_ground_truth")
LAYOUTS = ["safetensors", "safetensors_sharded", "bin", "bin_sharded"]
HALF_LAYOUTS = {"safetensors_fp16": "fp16", "bin_bf16": "bf16"}  # saved by model.half() / .to(bfloat16)
# Engine runs: folder ft_<kind> <- (layout, -t); "fp16src"/"bf16src" are fp32 files of the
# checkpoints saved in half precision, compared with transformers' float64 model of those checkpoints
# (from_pretrained, expected.json's "fp16_checkpoint" / "bf16_checkpoint").
SOURCE_OF = {"fp32": ("safetensors", "fp32"), "fp16": ("bin_sharded", "fp16"),
             "bf16": ("safetensors_sharded", "bf16"), "fp16src": ("safetensors_fp16", "fp32"),
             "bf16src": ("bin_bf16", "fp32")}
KINDS = "fp32,fp16,bf16,fp16src:fp16_checkpoint,bf16src:bf16_checkpoint"
TOL = 1e-4


def models():
    with open(os.path.join(FIX, "models.json")) as f:
        return json.load(f)


def expected(name):
    with open(os.path.join(FIX, name, "expected.json")) as f:
        return json.load(f)


def convert(src, out, T, dt):
    r = run_ftx(["convert-hf", "-i", src, "-o", out, "-g", str(T), "-t", dt, "--quiet", "--force"])
    check(r.returncode == 0, f"convert-hf {src} -g {T} -t {dt}: {r.stderr.strip()}")
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
    for m in info["models"]:
        name = m["name"]
        st = open(os.path.join(FIX, name, "safetensors", "model.safetensors"), "rb").read(200000)
        head = st[8:8 + int.from_bytes(st[:8], "little")].decode()
        lm = any(k in head for k in ('"lm_head.weight"', '"embed_out.weight"'))
        check(lm != m["tied"], f"{name}: tied={m['tied']} but model.safetensors {'has' if lm else 'lacks'} the head")
        with tempfile.TemporaryDirectory() as tmp:
            for T, dt in ((2, "bf16"),):
                ref = None
                for layout in LAYOUTS:
                    got = folder_bytes(convert(os.path.join(FIX, name, layout), os.path.join(tmp, layout), T, dt))
                    if ref is None:
                        ref = got
                        continue
                    diff = sorted(k for k in set(ref) | set(got) if ref.get(k) != got.get(k))
                    check(not diff, f"{name} T={T} {dt}: {layout} differs from safetensors in {diff[:4]}")
            print(f"ok   layouts {name}: {len(ref) - 1} files identical from {', '.join(LAYOUTS)}"
                  f" ({'tied' if m['tied'] else 'untied'} head)")
            half_saved(name, tmp, expected(name)["folded_in_half"])
            if m["model_type"] == "gpt_neox":
                newer_key_names(name, tmp, ref)


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


def engine():
    names = [m["name"] for m in models()["models"]]
    convert_all(names, "ft_")
    exe = os.environ.get("FTX_HF_GT_ENGINE_TEST", "")
    if not check(os.path.exists(exe), f"FTX_HF_GT_ENGINE_TEST ({exe}) is not the hf_ground_truth_test binary"):
        return
    worst = {}
    for (model, dt, tp), v in engine_logits(exe, [os.path.join(FIX, n) for n in names], KINDS).items():
        worst.setdefault(model, {})[f"{dt} {tp}"] = v
    check(len(worst) == len(names), f"max_rel_diff lines for {sorted(worst)}, expected {names}")
    print("largest |ftx - transformers float64| / max(1, max |logit|), prefill and every decode step:")
    for model, d in sorted(worst.items()):
        by = {kind: max(v for k, v in d.items() if k.split()[0] == kind) for kind in SOURCE_OF}
        print(f"  {model:16s} " + "   ".join(f"{k} {v:.2e}" for k, v in by.items()) + f"   ({len(d)} runs)")


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


def generate():
    names = [m["name"] for m in models()["models"]]
    convert_all(names, "gen_", half_tps=(1,))
    for name in names:
        before = len(e2e_util.failures)
        e = expected(name)
        n = len(e["greedy"][0])
        runs = [("fp32", 1, e["hf_generate"]["greedy"]), ("fp32", 2, e["hf_generate"]["greedy"]),
                ("fp16", 1, e["fp16"]["greedy"]), ("bf16", 1, e["bf16"]["greedy"])]
        for dt, T, want in runs:
            got = generate_jsonl(os.path.join(FIX, name, "gen_" + dt, f"{T}-gpu"),
                                 [{"ids": p, "max_new_tokens": 8} for p in e["prompts"]], T)
            if got is not None:
                check([g["output_ids"] for g in got] == want,
                      f"{name} {dt} T={T} greedy {[g['output_ids'] for g in got]} != transformers' {want}")
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
        if len(e2e_util.failures) == before:
            print(f"ok   generate {name}: greedy fp32 T=1,2 / fp16 / bf16 = transformers' ({n}+ tokens); "
                  f"beams = transformers' (cum log prob within {beam_diff:.1e}); "
                  + "; ".join(f"{k}: {v[0]} distinct draws, log prob within {v[1]:.1e}" for k, v in sampled.items()))


def errors():
    refused = models()["refused"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, (_, changed) in refused.items():
            src, out = os.path.join(FIX, "refused", name), os.path.join(tmp, name)
            r = run_ftx(["convert-hf", "-i", src, "-o", out, "--quiet"])
            lines = [line for line in r.stderr.strip().splitlines() if line]
            key = next(iter(changed))
            ok = (check(r.returncode == 1, f"{name}: exit {r.returncode}, expected 1 ({r.stderr.strip()})")
                  and check(len(lines) == 1 and lines[0].startswith("ftx: error: "), f"{name}: {r.stderr!r}")
                  and check(os.path.join(src, "config.json") in lines[0] and key in lines[0],
                            f"{name}: {lines[0]!r} does not name config.json and {key}")
                  and check(not os.path.exists(out), f"{name}: left {out}"))
            if ok:
                print(f"ok   errors {name}: {lines[0]}")


if __name__ == "__main__":
    {"layouts": layouts, "engine": engine, "generate": generate, "errors": errors}[sys.argv[1]]()
    finish("hf_ground_truth " + sys.argv[1])
