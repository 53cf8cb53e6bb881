#!/usr/bin/python3
"""Megatron Core checkpoints end to end (issue 27), on the committed fixtures of
tests/fixtures/mcore/ (written by megatron-core itself: scripts/fixtures/make_mcore_fixtures.py,
versions in tests/fixtures/mcore/SOURCE.md). Runs with Debian's torch 1.13 (only to write derived inputs).

Usage: mcore_test.py {convert|legacy|errors}
  convert  every fixture (models classic, modern, extra, te, ln1p, and the mixtures of experts moe,
           moe_pre, moe_te (issue 51); training layouts TP x PP 1x1, 2x1, 1x2, 2x2 and TP x EP 1x2,
           2x2; Megatron-LM legacy and torch_dist, NeMo legacy and distributed) through
           `convert-megatron` / `convert-nemo` at inference TP 1 and 2, fp32:
             * per model and TP, every folder holds the same files with the same bytes (manifest.json
               and args.txt aside: they name the source and its args): a dist checkpoint and the
               same weights in the legacy layout, every training layout, Megatron and NeMo;
             * the gtest ArchEngine.LogitsMatchReference (tests/unit/convert_arch_test.cc) on every
               folder, alone at TP 1 and under `mpirun -np 2` at TP 2: logits of every greedy step
               within 1e-4 of the row's largest logit of megatron-core's float64 forward
               (expected.json);
             * `ftx generate` greedy output_ids identical to megatron-core's greedy tokens at TP 1,
               TP 2 (mpirun -np 2), TP 1 x PP 2 (mpirun -np 2), and at TP 1 with KV-cache blocks of 1
               and 4 tokens (the paged cache sized by GQA's and MQA's kv heads).
  legacy   the classic model's mcore shards renamed to the legacy Megatron layout
           (model.language_model.encoder.layers.N.self_attention.query_key_value...; mcore's
           per-head [3, d] QKV rows are the same as checkpoint_version 3's): ftx's folder from the
           mcore checkpoint and from the legacy one, and FT's converter as the spec describes it
           (scripts/reference/ft_converters_ref.py megatron) on the legacy one, byte-identical
           (.bin files; config.ini between the two ftx folders), training TP 1 and 2, inference TP 1 and 2.
  errors   a missing and a truncated .distcp, a .metadata naming a chunk outside its file, an
           unknown class in .metadata, chunks that do not cover a tensor, unsupported options
           (multi-latent attention, virtual pipeline, experts with biases, shared experts and the
           other MoE settings ftx's engine does not compute; Megatron args and NeMo yaml; a shared
           expert's tensor, a missing expert, an expert bias, a missing expert-parallel shard), a zarr
           checkpoint, a layer's linear_fc2 missing from legacy shards (B9: named so, not by its FT
           file): exit 1, one line `ftx: error: <file>: ...`, no output folder.
"""
import argparse
import configparser
import copy
import filecmp
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from dcp_pickle import load_meta, save_meta, stub_class  # noqa: E402
from e2e_util import check, finish, mpirun  # noqa: E402

FTX = os.environ["FTX_BIN"]
SRC = os.environ["FTX_SOURCE_DIR"]
FIX = os.path.join(SRC, "tests", "fixtures", "mcore")
ENGINE_TEST = os.environ.get("FTX_ARCH_ENGINE_TEST", "")
LAYOUTS = ["tp1pp1", "tp2pp1", "tp1pp2", "tp2pp2", "tp1pp1ep2", "tp2pp1ep2"]
ITER = "iter_0000010"


def run(cmd, env=None, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def models():
    return [m for m in ("classic", "modern", "extra", "te", "ln1p", "moe", "moe_pre", "moe_te")
            if os.path.isdir(os.path.join(FIX, m))]


def sources(model):
    """(label, subcommand, input path) of every checkpoint of a model fixture."""
    out = []
    base = os.path.join(FIX, model)
    for lay in LAYOUTS:
        for kind in ("legacy", "dist"):
            p = os.path.join(base, "megatron", lay, kind)
            if os.path.isdir(p):
                out.append((f"megatron-{lay}-{kind}", "convert-megatron", p))
            n = os.path.join(base, "nemo", f"{lay}_{kind}.nemo")
            if os.path.isfile(n):
                out.append((f"nemo-{lay}-{kind}", "convert-nemo", n))
    return out


def convert(sub, src, out, tp, *extra):
    return run([FTX, sub, "-i", src, "-o", out, "-g", str(tp), "-t", "fp32", "--quiet", "--force", *extra])


def folder_files(d, skip=("manifest.json", "args.txt")):
    return sorted(f for f in os.listdir(d) if f not in skip)


def same_folder(a, b, label, only_bins=False):
    fa, fb = folder_files(a), folder_files(b)
    if only_bins:
        fa = [f for f in fa if f.endswith(".bin")]
        fb = [f for f in fb if f.endswith(".bin")]
    if not check(fa == fb, f"{label}: file sets differ: {sorted(set(fa) ^ set(fb))}"):
        return False
    bad = [f for f in fa if not filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False)]
    return check(not bad, f"{label}: files differ: {bad[:5]}")


def manifest_files(d):
    with open(os.path.join(d, "manifest.json")) as f:
        return json.load(f)["files"]


def greedy_ids(folder, prompts, steps, n_ranks, extra):
    with tempfile.TemporaryDirectory() as tmp:
        ids = os.path.join(tmp, "ids.csv")
        with open(ids, "w") as f:
            for p in prompts:
                f.write(",".join(str(t) for t in p) + "\n")
        out = os.path.join(tmp, "out.jsonl")
        cmd = (mpirun(n_ranks) if n_ranks > 1 else []) + [FTX, "generate", "-m", folder, "--input-ids", ids,
                                                          "--max-new-tokens", str(steps), "--top-k", "1",
                                                          "--output", out, "--quiet", *extra]
        r = run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if not check(r.returncode == 0, f"generate {folder} {extra}: {r.stderr.strip()[-400:]}"):
            return None
        with open(out) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        rows.sort(key=lambda r: r.get("index", 0))
        return [r["output_ids"] for r in rows]


def test_convert():
    tmp = tempfile.mkdtemp(prefix="ftx-mcore-")
    try:
        engine_dirs = {1: [], 2: []}
        for model in models():
            with open(os.path.join(FIX, model, "expected.json")) as f:
                exp = json.load(f)
            srcs = sources(model)
            check(srcs, f"{model}: no checkpoints found")
            print(f"{model}: {len(srcs)} checkpoints", flush=True)
            for tp in (1, 2):
                first = None
                for label, sub, src in srcs:
                    d = os.path.join(tmp, model, label)
                    r = convert(sub, src, os.path.join(d, "ft"), tp)
                    if not check(r.returncode == 0, f"{model} {label} TP {tp}: {r.stderr.strip()[-500:]}"):
                        continue
                    if not os.path.exists(os.path.join(d, "expected.json")):
                        shutil.copy(os.path.join(FIX, model, "expected.json"), os.path.join(d, "expected.json"))
                    folder = os.path.join(d, "ft", f"{tp}-gpu")
                    engine_dirs[tp].append(d)
                    if first is None:
                        first = (label, folder)
                        continue
                    # Megatron folders carry args.txt and FT's megatron keys; NeMo's the tokenizer's ids.
                    same_kind = label.split("-")[0] == first[0].split("-")[0]
                    same_folder(first[1], folder, f"{model} TP {tp}: {first[0]} vs {label}", only_bins=not same_kind)
                    if same_kind:
                        a = {x["file"]: x["crc32"] for x in manifest_files(first[1])}
                        b = {x["file"]: x["crc32"] for x in manifest_files(folder)}
                        check(a == b, f"{model} TP {tp}: manifest checksums of {first[0]} and {label} differ")
                if first is None:
                    continue
                # Greedy tokens through the CLI (one source per model: the folders are identical).
                steps = len(exp["greedy"][0])
                runs = [(1, [])] if tp == 1 else [(2, ["--tensor-para-size", "2"])]
                if tp == 1:
                    runs.append((2, ["--tensor-para-size", "1", "--pipeline-para-size", "2"]))
                    # The paged KV cache (sized by kv heads: GQA, MQA) at block sizes below the prompts.
                    runs += [(1, ["--tokens-per-block", str(b)]) for b in (1, 4)]
                for n, extra in runs:
                    got = greedy_ids(first[1], exp["prompts"], steps, n, extra)
                    if got is not None:
                        # end_id (50256) lies outside the tiny vocabulary: every row runs to the length.
                        check(got == exp["greedy"], f"{model} TP {tp} {extra}: greedy tokens {got} != "
                                                    f"megatron-core's {exp['greedy']}")
        if ENGINE_TEST:
            for tp in (1, 2):
                dirs = ",".join(engine_dirs[tp])
                cmd = (mpirun(tp) if tp > 1 else []) + [ENGINE_TEST, "--gtest_filter=ArchEngine.LogitsMatchReference"]
                r = run(cmd, env=dict(os.environ, FTX_ARCH_MODELS=dirs, OMP_NUM_THREADS="1"), timeout=900)
                check(r.returncode == 0 and "PASSED" in r.stdout,
                      f"logits at TP {tp} ({len(engine_dirs[tp])} folders): {(r.stdout + r.stderr)[-1500:]}")
                print(f"logits vs megatron-core at TP {tp}: {len(engine_dirs[tp])} folders checked", flush=True)
        else:
            check(False, "FTX_ARCH_ENGINE_TEST is not set")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- legacy Megatron layout of the same weights ------------------------------------------------

LEGACY_NAMES = [
    ("embedding.", "language_model.embedding."),
    ("decoder.final_layernorm.", "language_model.encoder.final_layernorm."),
    ("decoder.layers.", "language_model.encoder.layers."),
    (".self_attention.linear_qkv.", ".self_attention.query_key_value."),
    (".self_attention.linear_proj.", ".self_attention.dense."),
    (".pre_mlp_layernorm.", ".post_attention_layernorm."),
    (".mlp.linear_fc1.", ".mlp.dense_h_to_4h."),
    (".mlp.linear_fc2.", ".mlp.dense_4h_to_h."),
]


def to_legacy_megatron(src_iter, dst_root):
    """The mcore shards of src_iter as a legacy (non-mcore) Megatron-LM checkpoint under dst_root."""
    import torch
    it = os.path.join(dst_root, ITER)
    for shard in sorted(os.listdir(src_iter)):
        ck = torch.load(os.path.join(src_iter, shard, "model_optim_rng.pt"))
        lm = {"embedding": {"word_embeddings": {}, "position_embeddings": {}}, "encoder": {}}
        for k, v in ck["model"].items():
            if k == "output_layer.weight" or k.endswith("_extra_state"):
                continue  # the last stage's copy of the tied embeddings; module state (None)
            n = k
            for a, b in LEGACY_NAMES:
                n = n.replace(a, b)
            parts = n.split(".")
            assert parts[0] == "language_model", k
            if parts[1] == "embedding":
                lm["embedding"][parts[2]][parts[3]] = v
            else:
                lm["encoder"][".".join(parts[2:])] = v
        args = copy.copy(ck["args"])
        args.layernorm_epsilon = args.norm_epsilon
        for key in ("use_mcore_models", "use_legacy_models", "position_embedding_type", "normalization"):
            if hasattr(args, key):
                delattr(args, key)
        os.makedirs(os.path.join(it, shard))
        torch.save({"args": args, "checkpoint_version": 3.0, "iteration": 10, "model": {"language_model": lm}},
                   os.path.join(it, shard, "model_optim_rng.pt"))
    with open(os.path.join(dst_root, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write("10")


def test_legacy():
    tmp = tempfile.mkdtemp(prefix="ftx-mcore-legacy-")
    ref = os.path.join(SRC, "scripts", "reference", "ft_converters_ref.py")
    try:
        for lay in ("tp1pp1", "tp2pp1"):
            mc = os.path.join(FIX, "classic", "megatron", lay, "legacy")
            leg = os.path.join(tmp, lay, "legacy_megatron")
            to_legacy_megatron(os.path.join(mc, ITER), leg)
            for tp in (1, 2):
                a = os.path.join(tmp, lay, f"mcore_{tp}")
                b = os.path.join(tmp, lay, f"legacy_{tp}")
                c = os.path.join(tmp, lay, f"ft_{tp}")
                ra = convert("convert-megatron", mc, a, tp)
                rb = convert("convert-megatron", leg, b, tp)
                rc = run([sys.executable, ref, "megatron", "-i", os.path.join(leg, ITER), "-o", c, "-g", str(tp),
                          "-t", "fp32"])
                if not (check(ra.returncode == 0, f"mcore {lay} TP {tp}: {ra.stderr}") and
                        check(rb.returncode == 0, f"legacy {lay} TP {tp}: {rb.stderr}") and
                        check(rc.returncode == 0, f"FT reference {lay} TP {tp}: {rc.stderr[-800:]}")):
                    continue
                fa, fb = os.path.join(a, f"{tp}-gpu"), os.path.join(b, f"{tp}-gpu")
                same_folder(fa, fb, f"classic {lay} TP {tp}: mcore vs legacy Megatron", only_bins=True)
                check(filecmp.cmp(os.path.join(fa, "config.ini"), os.path.join(fb, "config.ini"), shallow=False),
                      f"classic {lay} TP {tp}: config.ini differs between the mcore and legacy folders")
                same_folder(fa, os.path.join(c, f"{tp}-gpu"), f"classic {lay} TP {tp}: mcore vs FT's converter",
                            only_bins=True)
                print(f"classic {lay} -> TP {tp}: mcore, legacy and FT folders identical", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- bad inputs ---------------------------------------------------------------------------------

def field(rec, key):
    return rec.state[key]


def expect_error(label, sub, src, out, want):
    shutil.rmtree(out, ignore_errors=True)
    r = convert(sub, src, out, 1)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    check(r.returncode == 1, f"{label}: exit {r.returncode}, expected 1 ({r.stderr.strip()[-300:]})")
    check(len(lines) == 1 and lines[0].startswith("ftx: error: "), f"{label}: not one error line: {r.stderr!r}")
    check(want in r.stderr, f"{label}: {want!r} not in {r.stderr.strip()!r}")
    check(not os.path.exists(os.path.join(out, "1-gpu")), f"{label}: an output folder was written")
    print(f"{label}: {lines[-1] if lines else '(no message)'}")


def test_errors():
    import torch
    tmp = tempfile.mkdtemp(prefix="ftx-mcore-err-")
    base = os.path.join(FIX, "classic", "megatron", "tp2pp1", "dist")
    out = os.path.join(tmp, "out")

    def fresh(name):
        d = os.path.join(tmp, name)
        shutil.copytree(base, d)
        return d, os.path.join(d, ITER)

    try:
        d, it = fresh("missing")
        distcp = sorted(f for f in os.listdir(it) if f.endswith(".distcp"))
        os.remove(os.path.join(it, distcp[-1]))
        expect_error("missing .distcp", "convert-megatron", d, out, distcp[-1])

        d, it = fresh("truncated")
        p = os.path.join(it, distcp[-1])
        os.truncate(p, os.path.getsize(p) // 2)
        expect_error("truncated .distcp", "convert-megatron", d, out, "truncated")

        d, it = fresh("outside")
        meta = load_meta(os.path.join(it, ".metadata"))
        info = next(v for k, v in field(meta, "storage_data").items()
                    if field(k, "fqn") == "embedding.word_embeddings.weight")
        info.state["offset"] = 10 ** 9
        save_meta(meta, os.path.join(it, ".metadata"))
        expect_error("chunk outside its file", "convert-megatron", d, out, "lies at bytes [1000000000")

        d, it = fresh("unknown_class")
        meta = load_meta(os.path.join(it, ".metadata"))
        key = next(k for k in field(meta, "storage_data") if field(k, "fqn") == "embedding.word_embeddings.weight")
        evil = stub_class("os", "system")("echo pwned")
        field(meta, "storage_data")[key] = evil
        save_meta(meta, os.path.join(it, ".metadata"))
        expect_error("unknown class in .metadata", "convert-megatron", d, out, "refusing to load global 'os.system'")

        d, it = fresh("uncovered")
        meta = load_meta(os.path.join(it, ".metadata"))
        sdm = field(meta, "state_dict_metadata")
        name = "decoder.layers.self_attention.linear_qkv.weight"
        gone = field(sdm[name], "chunks").pop()
        storage = field(meta, "storage_data")
        for key in [k for k in storage if field(k, "fqn") == name and field(k, "offset").args == field(gone, "offsets").args]:
            del storage[key]
        save_meta(meta, os.path.join(it, ".metadata"))
        expect_error("chunks that do not cover a tensor", "convert-megatron", d, out, "chunks cover")

        for key, value, want in [("num_experts", 8, "experts with biases are not supported (args.num_experts = 8"),
                                 ("multi_latent_attention", True, "multi-latent attention is not supported"),
                                 ("virtual_pipeline_model_parallel_size", 2, "virtual pipeline parallelism"),
                                 ("qk_layernorm", True, "QK layernorm is not supported")]:
            d, it = fresh("opt_" + key)
            common = torch.load(os.path.join(it, "common.pt"))
            setattr(common["args"], key, value)
            torch.save(common, os.path.join(it, "common.pt"))
            expect_error(f"args.{key}", "convert-megatron", d, out, want)

        # Legacy shards refuse the same way (args in every shard).
        leg = os.path.join(tmp, "legacy_moe")
        shutil.copytree(os.path.join(FIX, "classic", "megatron", "tp1pp1", "legacy"), leg)
        shard = os.path.join(leg, ITER, "mp_rank_00", "model_optim_rng.pt")
        ck = torch.load(shard)
        ck["args"].num_experts = 4
        torch.save(ck, shard)
        expect_error("legacy args.num_experts", "convert-megatron", leg, out, "args.num_experts = 4")

        test_moe_errors(tmp, out)

        # B9: a tensor the configuration needs is named as the checkpoint names it (linear_fc2),
        # not as the FT file it would become (dense_4h_to_h).
        leg = os.path.join(tmp, "legacy_missing")
        shutil.copytree(os.path.join(FIX, "classic", "megatron", "tp1pp1", "legacy"), leg)
        shard = os.path.join(leg, ITER, "mp_rank_00", "model_optim_rng.pt")
        ck = torch.load(shard)
        del ck["model"]["decoder.layers.1.mlp.linear_fc2.weight"]
        torch.save(ck, shard)
        expect_error("B9 legacy missing linear_fc2", "convert-megatron", leg, out,
                     f"ftx: error: {leg}: has no tensor 'decoder.layers.1.mlp.linear_fc2.weight' "
                     "(the weights do not match the configuration)\n")

        d, it = fresh("zarr")
        with open(os.path.join(it, "metadata.json"), "w") as f:
            json.dump({"sharded_backend": "zarr", "sharded_backend_version": 1}, f)
        expect_error("zarr backend", "convert-megatron", d, out, "sharded_backend 'zarr' is not supported")

        test_tied_output_layer(tmp, out)

        # NeMo: yaml options.
        src = os.path.join(FIX, "classic", "nemo", "tp1pp1_dist.nemo")
        for key, value, want in [("num_moe_experts", "8", "experts with biases are not supported (num_moe_experts = 8"),
                                 ("moe_shared_expert_intermediate_size", "64",
                                  "shared experts is not supported (moe_shared_expert_intermediate_size: 64)"),
                                 ("virtual_pipeline_model_parallel_size", "2", "virtual pipeline parallelism"),
                                 # one table with Megatron-LM's args: NeMo refuses its rows too
                                 ("mtp_num_layers", "1", "multi-token prediction layers is not supported (mtp_num_layers: 1)")]:
            stage = os.path.join(tmp, "nemo_" + key)
            with tarfile.open(src) as tf:
                tf.extractall(stage)
            with open(os.path.join(stage, "model_config.yaml"), "a") as f:
                f.write(f"{key}: {value}\n")
            expect_error(f"nemo {key}", "convert-nemo", stage, out, want)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_moe_errors(tmp, out):
    """Megatron Core MoE settings and tensors ftx's engine cannot compute, refused by name (issue 51)."""
    import torch
    base = os.path.join(FIX, "moe", "megatron", "tp1pp1ep2", "dist")
    for key, value, want in [
            ("moe_shared_expert_intermediate_size", 64, "shared experts is not supported (args.moe_shared_expert_intermediate_size = 64)"),
            ("moe_router_score_function", "sigmoid", "moe_router_score_function = sigmoid is not supported"),
            ("moe_router_topk_scaling_factor", 2.5, "a scaled router (top-k scaling factor) is not supported"),
            ("moe_router_group_topk", 2, "group-limited routing is not supported"),
            ("moe_router_enable_expert_bias", True, "a router with expert biases is not supported"),
            ("moe_expert_capacity_factor", 1.0, "token dropping (an expert capacity factor) is not supported"),
            ("moe_router_load_balancing_type", "sinkhorn", "moe_router_load_balancing_type = sinkhorn"),
            ("moe_layer_freq", 2, "moe_layer_freq = 2 is not supported"),
            ("moe_router_topk", 5, "moe_router_topk = 5 is not in [1, args.num_experts = 4]"),
            ("expert_tensor_parallel_size", 2, "expert_tensor_parallel_size = 2 differs from tensor_model_parallel_size = 1")]:
        d = os.path.join(tmp, "moe_" + key)
        shutil.copytree(base, d)
        common = torch.load(os.path.join(d, ITER, "common.pt"), weights_only=False)
        setattr(common["args"], key, value)
        torch.save(common, os.path.join(d, ITER, "common.pt"))
        expect_error(f"moe args.{key}", "convert-megatron", d, out, want)
    # Legacy shards: a shared expert's tensor, and an expert-parallel rank's file missing an expert.
    leg = os.path.join(FIX, "moe", "megatron", "tp1pp1ep2", "legacy")
    for label, edit, want in [
            ("shared expert tensor", lambda m: m.__setitem__("decoder.layers.0.mlp.shared_experts.linear_fc1.weight",
                                                              torch.zeros(64, 32)),
             "has 'decoder.layers.0.mlp.shared_experts.linear_fc1.weight': shared experts (mlp.shared_experts) are not supported"),
            ("missing expert", lambda m: m.pop("decoder.layers.1.mlp.experts.local_experts.1.linear_fc2.weight"),
             "has no 'decoder.layers.1.mlp.experts.local_experts.1.linear_fc2.weight' on tensor parallel rank 0, "
             "expert-parallel rank 1 (global expert 3 of 4)"),
            ("expert bias", lambda m: m.__setitem__("decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.bias",
                                                     torch.zeros(32)),
             "unexpected expert tensor 'decoder.layers.0.mlp.experts.local_experts.0.linear_fc2.bias'")]:
        d = os.path.join(tmp, "moe_legacy_" + label.replace(" ", "_"))
        shutil.copytree(leg, d)
        path = os.path.join(d, ITER, "mp_rank_00_001", "model_optim_rng.pt")
        ck = torch.load(path, weights_only=False)
        edit(ck["model"])
        torch.save(ck, path)
        expect_error(f"moe legacy {label}", "convert-megatron", d, out, want)
    d = os.path.join(tmp, "moe_legacy_no_ep_file")
    shutil.copytree(leg, d)
    shutil.rmtree(os.path.join(d, ITER, "mp_rank_00_001"))
    expect_error("moe legacy missing expert-parallel shard", "convert-megatron", d, out,
                 "missing shard mp_rank_00_001/model_optim_rng.pt (the checkpoint has 1 tensor parallel x 1 pipeline x 2 expert parallel shards)")


def test_tied_output_layer(tmp, out):
    """Arguments that say the output layer is the word embeddings, on a checkpoint that holds its own
    output_layer.weight (the trial's A-32/B-22: it was dropped silently, and the dist form kept it
    under a config.ini saying tied): refused, naming the argument to fix. Megatron's own copy of the
    tied embeddings on a last pipeline stage (classic, PP 2) still converts (test_convert), and a
    copy that no longer equals them is refused too."""
    import torch
    untie = "untie_embeddings_and_output_weights False"
    for layout in ("tp1pp1", "tp2pp1"):
        leg = os.path.join(tmp, "tied_legacy_" + layout)
        shutil.copytree(os.path.join(FIX, "modern", "megatron", layout, "legacy"), leg)
        for shard in sorted(os.listdir(os.path.join(leg, ITER))):
            path = os.path.join(leg, ITER, shard, "model_optim_rng.pt")
            ck = torch.load(path)
            ck["args"].untie_embeddings_and_output_weights = False
            torch.save(ck, path)
        expect_error(f"tied args, own output layer, legacy {layout}", "convert-megatron", leg, out, untie)
    d = os.path.join(tmp, "tied_dist")
    shutil.copytree(os.path.join(FIX, "modern", "megatron", "tp2pp1", "dist"), d)
    common = torch.load(os.path.join(d, ITER, "common.pt"))
    common["args"].untie_embeddings_and_output_weights = False
    torch.save(common, os.path.join(d, ITER, "common.pt"))
    expect_error("tied args, own output layer, dist", "convert-megatron", d, out, untie)
    # Megatron's last-stage copy, changed: no longer the embeddings.
    pp = os.path.join(tmp, "tied_pp2")
    shutil.copytree(os.path.join(FIX, "classic", "megatron", "tp1pp2", "legacy"), pp)
    path = os.path.join(pp, ITER, "mp_rank_00_001", "model_optim_rng.pt")
    ck = torch.load(path)
    ck["model"]["output_layer.weight"][3, 5] += 0.25
    torch.save(ck, path)
    expect_error("tied PP 2, a last-stage copy that differs", "convert-megatron", pp, out, untie)
    # NeMo: share_embeddings_and_output_weights true, or missing (NeMo's default is true).
    for src in ("tp1pp1_legacy.nemo", "tp2pp1_dist.nemo"):
        for edit, want in [("true", "model_config.yaml says share_embeddings_and_output_weights: true"),
                           (None, "model_config.yaml has no share_embeddings_and_output_weights (NeMo's default is true)")]:
            stage = os.path.join(tmp, f"tied_{src}_{edit}")
            with tarfile.open(os.path.join(FIX, "modern", "nemo", src)) as tf:
                tf.extractall(stage)
            y = os.path.join(stage, "model_config.yaml")
            lines = [ln for ln in open(y) if not ln.startswith("share_embeddings_and_output_weights:")]
            if edit:
                lines.append(f"share_embeddings_and_output_weights: {edit}\n")
            with open(y, "w") as f:
                f.writelines(lines)
            expect_error(f"nemo {src}, share_embeddings {edit}", "convert-nemo", stage, out, want)


def main():
    part = sys.argv[1]
    {"convert": test_convert, "legacy": test_legacy, "errors": test_errors}[part]()
    finish(f"mcore {part}")


if __name__ == "__main__":
    main()
