#!/usr/bin/env python3
"""`ftx triton-repo` (issue 39): the config.pbtxt it writes is parsed by Triton's own ModelConfig
protobuf (tritonclient's model_config_pb2, pinned in scripts/requirements/triton.txt, with
protobuf's text_format: an unknown field, a bad enum or a syntax error fails the parse), and every
tensor's name, data type, dims, reshape and optional flag is checked against FasterTransformer's
backend tables below, transcribed from triton-inference-server/fastertransformer_backend
all_models/{gpt,gptj,gptneox}/fastertransformer/config.pbtxt and its GPT guide's tables. Grid:
TP 1 and 2 x PP 1 and 2, streaming and not, on the engine fixtures (FTX_FIXTURES/engine); then
GPT-J / GPT-NeoX tables, --copy, --gemm-config, and the bad inputs, each refused in one line with
nothing written. The test_T* functions (user trial cases):
an output folder that is, holds or lies inside an input, or is a file, is refused with both paths
named and the inputs left byte for byte as they were (T-1, T-2, T30, T31); config.ini values that
FasterTransformer's model class neither reads nor has fixed in code are refused by key and value
(T-3: the transformers-5 GPT-NeoX checkpoints of tests/fixtures/hf5 with rotary base 5000 and
linear rope scaling, converted by convert-hf, and config.ini values edited into copies of the
engine fixtures). --ensemble and --model-name (issue 49): every config.pbtxt of the repository
parsed by Triton's ModelConfig, each ensemble step's input_map/output_map checked against the
inputs and outputs of the step's model and the ensemble's own (names, data types, dims), and the
written preprocessing/postprocessing model.py run under a stub of triton_python_backend_utils:
their ids and texts are those of the tokenizers library on the copied tokenizer files.

Usage: triton_repo_test.py    (run under the triton venv; FTX_BIN, FTX_FIXTURES)
"""
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types

import numpy as np
import tokenizers
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as mc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, failures, finish  # noqa: E402

FTX = os.environ["FTX_BIN"]
ENGINE = os.path.join(os.environ["FTX_FIXTURES"], "engine")
HF5 = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "hf5")

# FT's GPT backend: (name, Triton type, dims, reshaped to a scalar, optional). GPT_ONLY: absent
# from the GPT-J and GPT-NeoX models' configs.
S, O = True, True
GPT_INPUTS = [
    ("input_ids", "TYPE_UINT32", [-1], False, False),
    ("input_lengths", "TYPE_UINT32", [1], S, False),
    ("request_output_len", "TYPE_UINT32", [-1], False, False),
    ("runtime_top_k", "TYPE_UINT32", [1], S, O),
    ("runtime_top_p", "TYPE_FP32", [1], S, O),
    ("beam_search_diversity_rate", "TYPE_FP32", [1], S, O),
    ("temperature", "TYPE_FP32", [1], S, O),
    ("len_penalty", "TYPE_FP32", [1], S, O),
    ("repetition_penalty", "TYPE_FP32", [1], S, O),
    ("random_seed", "TYPE_UINT64", [1], S, O),
    ("is_return_log_probs", "TYPE_BOOL", [1], S, O),
    ("is_return_context_embeddings", "TYPE_BOOL", [1], S, O),
    ("beam_width", "TYPE_UINT32", [1], S, O),
    ("start_id", "TYPE_UINT32", [1], S, O),
    ("end_id", "TYPE_UINT32", [1], S, O),
    ("stop_words_list", "TYPE_INT32", [2, -1], False, O),
    ("bad_words_list", "TYPE_INT32", [2, -1], False, O),
    ("prompt_learning_task_name_ids", "TYPE_UINT32", [1], S, O),
    ("request_prompt_embedding", "DATA", [-1, -1], False, O),  # FT's example: FP16 for data_type fp16
    ("request_prompt_lengths", "TYPE_UINT32", [1], S, O),
    ("request_prompt_type", "TYPE_UINT32", [1], S, O),
    ("top_p_decay", "TYPE_FP32", [1], S, O),
    ("top_p_min", "TYPE_FP32", [1], S, O),
    ("top_p_reset_ids", "TYPE_UINT32", [1], S, O),
]
GPT_OUTPUTS = [
    ("output_ids", "TYPE_UINT32", [-1, -1]),
    ("sequence_length", "TYPE_UINT32", [-1]),
    ("response_input_lengths", "TYPE_INT32", [-1]),
    ("cum_log_probs", "TYPE_FP32", [-1]),
    ("output_log_probs", "TYPE_FP32", [-1, -1]),
    ("context_embeddings", "TYPE_FP32", [-1, -1]),
]
GPT_ONLY = {"is_return_context_embeddings", "request_prompt_embedding", "request_prompt_lengths",
            "request_prompt_type", "response_input_lengths", "context_embeddings"}
DATA_TYPES = {"fp16": "TYPE_FP16", "bf16": "TYPE_BF16", "fp32": "TYPE_FP32"}


def ftx(*args):
    return subprocess.run([FTX, "triton-repo", *args], capture_output=True, text=True)


def parse(repo, model="fastertransformer"):
    with open(os.path.join(repo, model, "config.pbtxt")) as f:
        return text_format.Parse(f.read(), mc.ModelConfig())


def params(cfg):
    return {k: v.string_value for k, v in cfg.parameters.items()}


def check_tensors(what, got, table, model_type, data_type, outputs):
    want = [t for t in table if model_type == "GPT" or t[0] not in GPT_ONLY]
    check([t.name for t in got] == [t[0] for t in want], f"{what}: {'outputs' if outputs else 'inputs'} "
          f"{[t.name for t in got]}, expected {[t[0] for t in want]}")
    by_name = {t.name: t for t in got}
    for row in want:
        name, typ, dims = row[:3]
        t = by_name.get(name)
        if t is None:
            continue
        typ = DATA_TYPES[data_type] if typ == "DATA" else typ
        check(mc.DataType.Name(t.data_type) == typ, f"{what}: {name} is {mc.DataType.Name(t.data_type)}, expected {typ}")
        check(list(t.dims) == dims, f"{what}: {name} dims {list(t.dims)}, expected {dims}")
        if not outputs:
            reshaped, optional = row[3], row[4]
            check(t.HasField("reshape") == reshaped and list(t.reshape.shape) == [],
                  f"{what}: {name} reshape {t.reshape if t.HasField('reshape') else None}, expected "
                  f"{'[ ]' if reshaped else 'none'}")
            check(t.optional == optional, f"{what}: {name} optional {t.optional}, expected {optional}")
    if not outputs and "input_ids" in by_name:
        check(by_name["input_ids"].allow_ragged_batch == (model_type == "GPT"),
              f"{what}: input_ids allow_ragged_batch {by_name['input_ids'].allow_ragged_batch}")


def check_repo(what, repo, folder, tp, pp, streaming, model_type="GPT", data_type="fp16", int8_mode=0,
               max_batch=1024):
    cfg = parse(repo)
    check(cfg.name == "fastertransformer" and cfg.backend == "fastertransformer",
          f"{what}: name/backend {cfg.name!r}/{cfg.backend!r}")
    check(cfg.default_model_filename == f"{tp}-gpu", f"{what}: default_model_filename {cfg.default_model_filename!r}")
    check(cfg.max_batch_size == max_batch, f"{what}: max_batch_size {cfg.max_batch_size}")
    check(cfg.model_transaction_policy.decoupled == streaming,
          f"{what}: decoupled {cfg.model_transaction_policy.decoupled}, expected {streaming}")
    check(len(cfg.instance_group) == 1 and cfg.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU
          and cfg.instance_group[0].count == 1, f"{what}: instance_group {cfg.instance_group}")
    gpt = model_type == "GPT"
    check(cfg.HasField("dynamic_batching") == gpt, f"{what}: dynamic_batching present {cfg.HasField('dynamic_batching')}")
    if gpt:
        check(len(cfg.batch_input) == 1 and cfg.batch_input[0].target_name == ["input_ids_item_shape"]
              and cfg.batch_input[0].kind == mc.BatchInput.BATCH_ITEM_SHAPE
              and cfg.batch_input[0].data_type == mc.TYPE_INT32 and cfg.batch_input[0].source_input == ["input_ids"],
              f"{what}: batch_input {cfg.batch_input}")
    check_tensors(what, cfg.input, GPT_INPUTS, model_type, data_type, False)
    check_tensors(what, cfg.output, GPT_OUTPUTS, model_type, data_type, True)
    want = {"tensor_para_size": str(tp), "pipeline_para_size": str(pp), "data_type": data_type,
            "model_type": model_type, "enable_custom_all_reduce": "0",
            "model_checkpoint_path": os.path.join(os.path.abspath(repo), "fastertransformer", "1", f"{tp}-gpu")}
    if gpt:
        want["int8_mode"] = str(int8_mode)
    check(params(cfg) == want, f"{what}: parameters {params(cfg)}, expected {want}")
    model = os.path.join(repo, "fastertransformer", "1", f"{tp}-gpu")
    check(os.path.samefile(os.path.join(model, "config.ini"), os.path.join(folder, "config.ini")),
          f"{what}: {model} does not lead to {folder}")


def refused(what, args, repo, needle, code=1):
    r = ftx(*args, "-o", repo)
    lines = r.stderr.strip().splitlines()
    ok = check(r.returncode == code and len(lines) == 1 and lines[0].startswith("ftx: error:") and needle in lines[0],
               f"{what}: rc {r.returncode}, stderr {r.stderr!r} (expected one line with {needle!r})")
    check(not os.path.exists(repo) and not [n for n in os.listdir(os.path.dirname(repo)) if ".tmp-" in n],
          f"{what}: something was left behind in {os.path.dirname(repo)}")
    if ok:
        print(f"  refused ({what}): {lines[0]}")


def snapshot(folder):
    """Every entry under `folder`: a file's sha256, a link's target (links are not followed)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in files + dirs:
            p = os.path.join(root, name)
            rel = os.path.relpath(p, folder)
            if os.path.islink(p):
                out[rel] = "-> " + os.readlink(p)
            elif os.path.isfile(p):
                out[rel] = hashlib.sha256(open(p, "rb").read()).hexdigest()
            else:
                out[rel] = "dir"
    return out


def refused_intact(what, args, needles, kept, code):
    """`ftx triton-repo ARGS` refused in one line holding every needle, with exit code `code`; each
    path in `kept` (folders and files) afterwards exactly as before, and no temporary left beside it.
    Returns the line."""
    before = {k: snapshot(k) if os.path.isdir(k) else open(k, "rb").read() for k in kept}
    r = ftx(*args)
    lines = r.stderr.strip().splitlines()
    ok = check(r.returncode == code and len(lines) == 1 and lines[0].startswith("ftx: error:")
               and all(n in lines[0] for n in needles),
               f"{what}: rc {r.returncode}, stderr {r.stderr!r} (expected rc {code}, one line with {needles!r})")
    for k in kept:
        after = snapshot(k) if os.path.isdir(k) else open(k, "rb").read()
        check(after == before[k], f"{what}: {k} changed")
        parent = os.path.dirname(os.path.abspath(k))
        check(not [n for n in os.listdir(parent) if ".tmp-" in n or ".old-" in n],
              f"{what}: a temporary was left in {parent}: {os.listdir(parent)}")
    if ok:
        print(f"  refused ({what}): {lines[0]}")
    return lines[0] if lines else ""


def copy_engine(name, dst):
    """A copy of the engine fixture conversion ENGINE/name (its 1-gpu and 2-gpu folders) at dst."""
    shutil.copytree(os.path.join(ENGINE, name), dst, symlinks=True)
    return dst


def test_T1_force_never_deletes_the_model(tmp):
    """-o a folder that holds the model folder (or --gemm-config's file), --force or not, directly or
    through a symbolic link: refused naming both paths, nothing deleted."""
    x = copy_engine("gpt2", os.path.join(tmp, "T1", "out"))
    model = os.path.join(x, "1-gpu")
    for force in ([], ["--force"]):
        refused_intact(f"T-1 -o the model's parent {' '.join(force)}", ["-m", model, "-o", x, *force],
                       [x + ": holds the model folder " + model + " (-m)"]
                       + (["which --force would delete"] if force else []),
                       [x], 2)
    refused_intact("T-1 -o the model's grandparent --force", ["-m", model, "-o", os.path.dirname(x), "--force"],
                   [os.path.dirname(x) + ": holds the model folder " + model], [x], 2)
    link = os.path.join(tmp, "T1", "link")
    os.symlink(x, link)
    refused_intact("T-1 -o a link to the model's parent --force", ["-m", model, "-o", link, "--force"],
                   [link + " (" + os.path.realpath(x) + "): holds the model folder " + model], [x, link], 2)
    refused_intact("T-1 -m through a link, -o the model's parent --force",
                   ["-m", os.path.join(link, "1-gpu"), "-o", x, "--force"],
                   [x + ": holds the model folder " + os.path.join(link, "1-gpu")], [x], 2)
    other = copy_engine("gpt2", os.path.join(tmp, "T1", "other"))
    gemm = os.path.join(other, "gemm_config.in")
    with open(gemm, "w") as f:
        f.write("batch_size, seq_len, head_num, size_per_head dataType ### batchCount, n, m, k, algoId, customOption, "
                "tile, numSplitsK, swizzle, reductionScheme, workspaceSize, stages, exec_time\n")
    refused_intact("T-1 -o the folder of --gemm-config's file --force",
                   ["-m", model, "-o", other, "--gemm-config", gemm, "--force"],
                   [other + ": holds the --gemm-config file " + gemm, "which --force would delete"], [x, other], 2)


def test_T2_force_never_replaces_the_model(tmp):
    """-o the model folder itself, however spelled: refused naming it, the weights untouched."""
    x = copy_engine("gpt2", os.path.join(tmp, "T2", "out"))
    model = os.path.join(x, "1-gpu")
    for out in (model, model + "/", os.path.join(x, "2-gpu", "..", "1-gpu")):
        for force in ([], ["--force"]):
            refused_intact(f"T-2 -o {os.path.relpath(out, tmp)} {' '.join(force)}", ["-m", model, "-o", out, *force],
                           [out.rstrip("/") + ": is the model folder " + model + " (-m)"], [x], 2)


def test_T30_output_inside_the_model(tmp):
    """-o a folder inside the model folder, with --copy or a link, --force or not: refused as lying
    inside the model folder (not as ftx's temporary folder), nothing written into the model."""
    x = copy_engine("gpt2", os.path.join(tmp, "T30", "out"))
    model = os.path.join(x, "1-gpu")
    for mode in (["--copy"], [], ["--copy", "--force"], ["--force"]):
        out = os.path.join(model, "repo")
        refused_intact(f"T30 -o inside the model {' '.join(mode)}", ["-m", model, "-o", out, *mode],
                       [out + ": lies inside the model folder " + model + " (-m)"], [x], 2)
        check(".tmp-" not in ftx("-m", model, "-o", out, *mode).stderr, "T30: the message names a temporary folder")
    link = os.path.join(tmp, "T30", "link")
    os.symlink(model, link)
    refused_intact("T30 -o inside the model through a link --copy", ["-m", model, "-o", os.path.join(link, "repo"),
                                                                     "--copy"],
                   ["lies inside the model folder " + model], [x], 2)


def test_T31_force_never_replaces_a_file(tmp):
    """-o a regular file (or a symbolic link), --force or not: refused, the file (the link and its
    target) left as it was."""
    d = os.path.join(tmp, "T31")
    os.makedirs(d)
    prompts = os.path.join(d, "prompts.txt")
    with open(prompts, "w") as f:
        f.write("Hello\n")
    model = os.path.join(ENGINE, "gpt2", "1-gpu")
    for force in ([], ["--force"]):
        refused_intact(f"T31 -o a file {' '.join(force)}", ["-m", model, "-o", prompts, *force],
                       [prompts + ": is a file", "--force replaces only a folder"], [prompts], 2)
    target = os.path.join(d, "repo-target")
    os.makedirs(target)
    with open(os.path.join(target, "keep"), "w") as f:
        f.write("mine")
    link = os.path.join(d, "repo-link")
    os.symlink(target, link)
    refused_intact("T31 -o a symbolic link --force", ["-m", model, "-o", link, "--force"],
                   [link + ": is a symbolic link"], [target], 2)
    check(os.path.islink(link) and os.readlink(link) == target, "T31: the link was replaced")


def edited_copy(src, dst, edits):
    """A copy of the model folder src at dst, with config.ini's model section edited: edits maps a
    key to its new text (None: delete it); keys it lacks are added."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.ini")
    out, section, left = [], None, dict(edits)

    def flush():
        if section in ("gpt", "gptj", "gptneox"):
            out.extend(f"{k} = {v}" for k, v in left.items() if v is not None)
            left.clear()

    for line in open(path).read().splitlines():
        s = line.strip()
        if s.startswith("["):
            flush()
            section = s[1:-1]
        elif "=" in s and section in ("gpt", "gptj", "gptneox") and s.split("=")[0].strip() in edits:
            k = s.split("=")[0].strip()
            if edits[k] is not None:
                out.append(f"{k} = {edits[k]}")
            left.pop(k, None)
            continue
        out.append(line)
    flush()
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return dst


def test_T3_refuses_what_the_ft_class_cannot_run(tmp):
    """GPT-NeoX checkpoints (transformers 5's, tests/fixtures/hf5) with rotary base 5000 and with
    linear rope scaling, converted by convert-hf: refused by key and value, since GptNeoXTritonModel
    reads neither (base 10000, unscaled, in FT's code). Then one config.ini value at a time edited
    into copies of the engine fixtures: each fixed value of GPT-J, GPT-NeoX and GPT that the folder
    contradicts is refused by key and value; the values the classes read, and GPT's no-position
    model, are served."""
    d = os.path.join(tmp, "T3")
    os.makedirs(d)
    for name, key in (("neox_rp50_base5000", "rotary_base"), ("neox_linear", "rotary_scaling_type")):
        rope = json.load(open(os.path.join(HF5, name, "safetensors", "config.json")))["rope_parameters"]
        out = os.path.join(d, name)
        r = subprocess.run([FTX, "convert-hf", "-i", os.path.join(HF5, name, "safetensors"), "-o", out, "-q"],
                           capture_output=True, text=True)
        if not check(r.returncode == 0, f"T-3 convert-hf {name}: {r.stderr.strip()}"):
            continue
        folder = os.path.join(out, "1-gpu")
        repo = os.path.join(d, name + "-repo")
        line = refused_intact(f"T-3 {name}", ["-m", folder, "-o", repo],
                              [os.path.join(folder, "config.ini") + ": [gptneox] " + key + " = ", "GptNeoXTritonModel"],
                              [out], 1)
        m = re.search(r"\] " + key + r" = (\S+):", line)
        value = m and (float(m.group(1)) if key == "rotary_base" else m.group(1))
        check(value == (rope["rope_theta"] if key == "rotary_base" else rope["rope_type"]),
              f"T-3 {name}: the message names {key} = {value}, the checkpoint has {rope}")
        check(not os.path.exists(repo), f"T-3 {name}: {repo} was written")

    # (fixture, edits, refused key = value or None for served, class name)
    neox, gptj, gpt2 = (os.path.join(ENGINE, n, "1-gpu") for n in ("gptneox", "gptj", "gpt2"))
    relu = {"activation": "Relu", "activation_function": "relu", "activation_type": None}
    silu = {"activation": "Silu", "activation_function": "silu", "activation_type": "Silu"}
    eps = {"layernorm_eps": "0.001", "layer_norm_epsilon": "0.001"}
    cases = [
        (neox, {"rotary_base": "20000"}, "rotary_base = 20000", "GptNeoXTritonModel"),
        (neox, {"rotary_scaling_type": "linear", "rotary_scaling_factor": "2"}, "rotary_scaling_type = linear",
         "GptNeoXTritonModel"),
        (neox, {"rotary_style": "interleaved"}, "rotary_style = interleaved", "GptNeoXTritonModel"),
        (neox, relu, "activation = Relu", "GptNeoXTritonModel"),
        (neox, eps, "layernorm_eps = 0.001", "GptNeoXTritonModel"),
        (neox, {"do_layer_norm_before": "False"}, "do_layer_norm_before = False", "GptNeoXTritonModel"),
        (neox, {"shared_input_norm": "1"}, "shared_input_norm = 1", "GptNeoXTritonModel"),
        (neox, {"normalization": "rmsnorm"}, "normalization = rmsnorm", "GptNeoXTritonModel"),
        (neox, {"embedding_scale": "2"}, "embedding_scale = 2", "GptNeoXTritonModel"),
        (neox, {"use_gptj_residual": "0", "parallel_residual": "0"}, None, "GPT-NeoX"),  # read by the class
        (gptj, {"rotary_base": "5000"}, "rotary_base = 5000", "GptJTritonModel"),
        (gptj, {"rotary_scaling_type": "linear", "rotary_scaling_factor": "4"}, "rotary_scaling_type = linear",
         "GptJTritonModel"),
        (gptj, {"rotary_style": "half_split"}, "rotary_style = half_split", "GptJTritonModel"),
        (gptj, {"parallel_residual": "0"}, "parallel_residual = 0", "GptJTritonModel"),
        (gptj, {"shared_input_norm": "0"}, "shared_input_norm = 0", "GptJTritonModel"),
        (gptj, eps, "layernorm_eps = 0.001", "GptJTritonModel"),
        (gptj, {"sliding_window": "4"}, "sliding_window = 4", "GptJTritonModel"),
        (gptj, {"layernorm_eps": "1e-5", "layer_norm_epsilon": "1e-5"}, None, "GPT-J"),  # FT runs 1e-6
        (gpt2, {"parallel_residual": "1"}, "parallel_residual = 1", "ParallelGptTritonModel"),
        (gpt2, silu, "activation = Silu", "ParallelGptTritonModel"),
        (gpt2, {"normalization": "rmsnorm"}, "normalization = rmsnorm", "ParallelGptTritonModel"),
        (gpt2, {"kv_head_num": "2"}, "kv_head_num = 2", "ParallelGptTritonModel"),
        (gpt2, {"sliding_window": "8"}, "sliding_window = 8", "ParallelGptTritonModel"),
        (gpt2, {"embedding_scale": "8"}, "embedding_scale = 8", "ParallelGptTritonModel"),
        (gpt2, {"position_embedding_type": "sinusoidal"}, "position_embedding_type = sinusoidal",
         "ParallelGptTritonModel"),
        (gpt2, {"layernorm_eps": "0.001", "layer_norm_epsilon": "0.001"}, None, "GPT"),  # read by the class
        (gpt2, {"position_embedding_type": "none", "has_positional_encoding": "False"}, None, "GPT"),
    ]
    for i, (src, edits, refused_as, cls) in enumerate(cases):
        folder = edited_copy(src, os.path.join(d, f"edit{i}", "1-gpu"), edits)
        repo = os.path.join(d, f"edit{i}-repo")
        what = f"T-3 {os.path.basename(os.path.dirname(src))} {edits}"
        if refused_as is None:
            r = ftx("-m", folder, "-o", repo, "-q")
            if check(r.returncode == 0, f"{what}: rc {r.returncode}, {r.stderr.strip()}"):
                got = params(parse(repo))["model_type"]
                check(got == cls, f"{what}: model_type {got}, expected {cls}")
            continue
        sec = "gptneox" if cls.startswith("GptNeoX") else "gptj" if cls.startswith("GptJ") else "gpt"
        refused_intact(what, ["-m", folder, "-o", repo],
                       [os.path.join(folder, "config.ini") + ": [" + sec + "] " + refused_as, cls], [folder], 1)
        check(not os.path.exists(repo), f"{what}: {repo} was written")


# --ensemble (issue 49): the whole of FT's all_models/<model> example.

ENSEMBLE_MODELS = ("preprocessing", "postprocessing", "ensemble")
NUMPY_OF = {"TYPE_UINT32": np.uint32, "TYPE_INT32": np.int32, "TYPE_STRING": np.object_}


def dims_compatible(a, b):
    """Triton's rule for two tensors' dims: the same rank, each dimension equal or -1 on a side."""
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def check_ensemble_graph(what, repo, ft_name, report=check):
    """Every config.pbtxt in the repository parses; each ensemble step's model is in the repository;
    each input_map key is an input of that model and its value an ensemble input or an earlier
    step's output, each output_map key an output of the model; across every connection the data
    types match and the dims are compatible; every required input of a step is fed, every ensemble
    input used and every ensemble output produced (each fault to `report`). Returns the parsed
    configs by model name."""
    models = sorted(n for n in os.listdir(repo) if os.path.isfile(os.path.join(repo, n, "config.pbtxt")))
    report(models == sorted((ft_name,) + ENSEMBLE_MODELS), f"{what}: models {models}")
    cfgs = {}
    for n in models:
        try:
            cfgs[n] = parse(repo, n)
        except text_format.ParseError as e:
            report(False, f"{what}: {n}/config.pbtxt: {e}")
            return cfgs
        report(cfgs[n].name == n, f"{what}: {n}/config.pbtxt names {cfgs[n].name!r}")
        report(os.path.isdir(os.path.join(repo, n, "1")), f"{what}: {n} has no version folder 1")
    batch = {n: c.max_batch_size for n, c in cfgs.items()}
    report(len(set(batch.values())) == 1 and min(batch.values()) > 0, f"{what}: max_batch_size {batch}")
    ens = cfgs["ensemble"]
    report(ens.platform == "ensemble", f"{what}: ensemble platform {ens.platform!r}")
    # tensor name -> (data type, dims, where it comes from)
    known = {t.name: (t.data_type, list(t.dims), "ensemble input") for t in ens.input}
    used = set()
    for i, step in enumerate(ens.ensemble_scheduling.step):
        cfg = cfgs.get(step.model_name)
        if not report(cfg is not None, f"{what}: step {i} runs {step.model_name!r}, not in the repository"):
            continue
        ins, outs = {t.name: t for t in cfg.input}, {t.name: t for t in cfg.output}
        for key, value in step.input_map.items():
            t, src = ins.get(key), known.get(value)
            where = f"{what}: step {i} ({step.model_name}) input {key} <- {value}"
            if not (report(t is not None, f"{where}: the model has no input {key}")
                    and report(src is not None, f"{where}: nothing earlier produces {value}")):
                continue
            used.add(value)
            report(src[0] == t.data_type, f"{where}: {mc.DataType.Name(src[0])} from the {src[2]}, the input is "
                  f"{mc.DataType.Name(t.data_type)}")
            report(dims_compatible(src[1], list(t.dims)), f"{where}: dims {src[1]} from the {src[2]}, the input "
                  f"has {list(t.dims)}")
        missing = [n for n, t in ins.items() if not t.optional and n not in step.input_map]
        report(not missing, f"{what}: step {i} ({step.model_name}) leaves required inputs {missing} unfed")
        for key, value in step.output_map.items():
            t = outs.get(key)
            if report(t is not None, f"{what}: step {i} ({step.model_name}) has no output {key}"):
                report(value not in known, f"{what}: {value} produced twice")
                known[value] = (t.data_type, list(t.dims), f"{step.model_name} output {key}")
    for t in ens.output:
        src = known.get(t.name)
        if report(src is not None and src[2] != "ensemble input", f"{what}: no step produces ensemble output {t.name}"):
            used.add(t.name)
            report(src[0] == t.data_type and dims_compatible(src[1], list(t.dims)),
                  f"{what}: ensemble output {t.name} is {mc.DataType.Name(t.data_type)} {list(t.dims)}, "
                  f"the {src[2]} {mc.DataType.Name(src[0])} {src[1]}")
    unused = sorted(set(known) - used)
    report(not unused, f"{what}: tensors nobody reads: {unused}")
    return cfgs


def pb_utils_stub():
    """The part of Triton's triton_python_backend_utils that a model.py calls."""
    m = types.ModuleType("triton_python_backend_utils")

    class Tensor:
        def __init__(self, name, array):
            self._name, self._array = name, array

        def name(self):
            return self._name

        def as_numpy(self):
            return self._array

    class InferenceResponse:
        def __init__(self, output_tensors, error=None):
            self._outputs, self._error = output_tensors, error

        def output_tensors(self):
            return self._outputs

        def has_error(self):
            return self._error is not None

    class InferenceRequest:
        def __init__(self, inputs):
            self._inputs = inputs

        def inputs(self):
            return self._inputs

    def get_input_tensor_by_name(request, name):
        return next((t for t in request.inputs() if t.name() == name), None)

    m.Tensor, m.InferenceResponse, m.InferenceRequest = Tensor, InferenceResponse, InferenceRequest
    m.get_input_tensor_by_name = get_input_tensor_by_name
    return m


def load_python_model(repo, name, cfg):
    """repo/name/1/model.py imported (with the stub as triton_python_backend_utils) and initialized
    as the Python backend does, with the model's config as JSON."""
    sys.modules["triton_python_backend_utils"] = pb_utils_stub()
    path = os.path.join(repo, name, "1", "model.py")
    spec = importlib.util.spec_from_file_location(f"ftx_{name}_{abs(hash(repo))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.TritonPythonModel()
    model.initialize({"model_config": json.dumps(json_format.MessageToDict(cfg, preserving_proto_field_name=True)),
                      "model_name": name, "model_version": "1"})
    return model


def run_model(what, model, cfg, inputs):
    """One request through model.execute; its outputs by name, each checked against the config's
    data type and dims (with the batch dimension in front)."""
    pb = sys.modules["triton_python_backend_utils"]
    request = pb.InferenceRequest([pb.Tensor(k, v) for k, v in inputs.items()])
    responses = model.execute([request])
    if not check(len(responses) == 1 and not responses[0].has_error(), f"{what}: responses {responses}"):
        return {}
    got = {t.name(): t.as_numpy() for t in responses[0].output_tensors()}
    declared = {t.name: t for t in cfg.output}
    check(set(got) == set(declared), f"{what}: outputs {sorted(got)}, the config declares {sorted(declared)}")
    batch = len(next(iter(inputs.values())))
    for n, a in got.items():
        t = declared.get(n)
        if t is None:
            continue
        typ = mc.DataType.Name(t.data_type)
        check(a.dtype == NUMPY_OF[typ], f"{what}: {n} is {a.dtype}, the config says {typ}")
        check(a.shape[0] == batch and dims_compatible(list(t.dims), list(a.shape[1:])),
              f"{what}: {n} has shape {a.shape}, the config says [batch] + {list(t.dims)}")
    return got


def strings(texts):
    return np.array([[t.encode("utf-8")] for t in texts], dtype=object)


ENSEMBLE_TEXTS = ["Hello, world!", "  two  spaces and\ttabs\n", "naïve café 東京 🙂", "<|endoftext|> after",
                  "Numbers 12345 and 3.14"]


def word_list_reference(tok, rows):
    """FT's [batch, 2, N] word-list format from `tok` (tokenizers), computed on its own."""
    import csv
    flat, offs = [], []
    for row in rows:
        words = next(csv.reader([row]), [])
        ids = [tok.encode(w, add_special_tokens=False).ids for w in words]
        ids = [x for x in ids if x]
        flat.append(sum(ids, []))
        offs.append(list(np.cumsum([len(x) for x in ids])))
    n = max([1] + [len(f) for f in flat])
    out = np.zeros((len(rows), 2, n), np.int32)
    out[:, 1] = -1
    for i, (f, o) in enumerate(zip(flat, offs)):
        out[i, 0, :len(f)], out[i, 1, :len(o)] = f, o
    return out


def check_python_models(what, repo, cfgs, reference, pad_id):
    """preprocessing and postprocessing model.py against `reference`, the tokenizers library's
    Tokenizer on the same files."""
    pre = load_python_model(repo, "preprocessing", cfgs["preprocessing"])
    out = run_model(f"{what} preprocessing", pre, cfgs["preprocessing"], {
        "QUERY": strings(ENSEMBLE_TEXTS),
        "REQUEST_OUTPUT_LEN": np.full((len(ENSEMBLE_TEXTS), 1), 8, np.uint32),
        "BAD_WORDS_DICT": strings(["hello,world", "", '"a, b",café', "x", ""]),
        "STOP_WORDS_DICT": strings(["", "\n", "!", "", "東京, 🙂"])})
    if not out:
        return
    want = [reference.encode(t).ids for t in ENSEMBLE_TEXTS]
    lengths = out["REQUEST_INPUT_LEN"][:, 0].tolist()
    got = [out["INPUT_ID"][i, :n].tolist() for i, n in enumerate(lengths)]
    check(got == want, f"{what}: preprocessing ids {got}, tokenizers gives {want}")
    check(all((out["INPUT_ID"][i, n:] == pad_id).all() for i, n in enumerate(lengths)),
          f"{what}: INPUT_ID not padded with {pad_id}: {out['INPUT_ID']}")
    check(out["REQUEST_OUTPUT_LEN"].tolist() == [[8]] * len(ENSEMBLE_TEXTS), f"{what}: REQUEST_OUTPUT_LEN")
    for name, rows in (("BAD_WORDS_IDS", ["hello,world", "", '"a, b",café', "x", ""]),
                       ("STOP_WORDS_IDS", ["", "\n", "!", "", "東京, 🙂"])):
        ref = word_list_reference(reference, rows)
        check(out[name].tolist() == ref.tolist(), f"{what}: {name} {out[name].tolist()}, expected {ref.tolist()}")
    print(f"  {what}: preprocessing gave the tokenizers library's ids for {len(want)} texts and both word lists")

    post = load_python_model(repo, "postprocessing", cfgs["postprocessing"])
    # Two beams per request, output_ids padded past each beam's sequence_length (with id 0).
    width = max(len(x) for x in want) + 3
    tokens = np.zeros((len(want), 2, width), np.uint32)
    seq = np.zeros((len(want), 2), np.uint32)
    for i, ids in enumerate(want):
        tokens[i, 0, :len(ids)] = ids
        tokens[i, 1, :len(want[-1 - i])] = want[-1 - i]
        seq[i] = [len(ids), len(want[-1 - i])]
    out = run_model(f"{what} postprocessing", post, cfgs["postprocessing"], {"TOKENS_BATCH": tokens, "SEQUENCE_LENGTH": seq})
    if out:
        texts = [[t.decode("utf-8") for t in row] for row in out["OUTPUT"].tolist()]
        ref = [[reference.decode(want[i]), reference.decode(want[-1 - i])] for i in range(len(want))]
        check(texts == ref, f"{what}: postprocessing texts {texts}, tokenizers decodes {ref}")
        print(f"  {what}: postprocessing decoded {len(want)} x 2 beams as the tokenizers library does")


def byte_level_tokenizer_json(path, vocab_size):
    """A byte-level BPE tokenizer.json trained here (GPT-NeoX's kind) small enough for the engine
    fixtures' 300-token vocabularies."""
    tok = tokenizers.ByteLevelBPETokenizer()
    tok.train_from_iterator(ENSEMBLE_TEXTS * 20 + ["the quick brown fox jumps over the lazy dog"] * 20,
                            vocab_size=vocab_size, min_frequency=1, special_tokens=["<|endoftext|>"],
                            show_progress=False)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tok.save(path)
    return path


def check_the_checker(repo, d):
    """check_ensemble_graph on broken copies of a written repository: each fault is reported."""
    text = open(os.path.join(repo, "ensemble", "config.pbtxt")).read()
    faults = [  # (what, the edit, a word of the expected report)
        ("bad_words_list fed the prompt's ids",
         ('key: "bad_words_list"\n        value: "_BAD_WORDS_IDS"', 'key: "bad_words_list"\n        value: "_INPUT_ID"', 1),
         "TYPE_UINT32 from the preprocessing output INPUT_ID, the input is TYPE_INT32"),
        ("a step input the model lacks", ('key: "TOKENS_BATCH"', 'key: "TOKENS"', 1), "no input TOKENS"),
        ("an ensemble output nobody makes", ('name: "OUTPUT_0"', 'name: "OUTPUT_9"', 1), "OUTPUT_9"),
        ("a step of a missing model", ('model_name: "postprocessing"', 'model_name: "post"', 1), "'post'"),
    ]
    for what, (old, new, count), word in faults:
        broken = os.path.join(d, "broken")
        shutil.rmtree(broken, ignore_errors=True)
        shutil.copytree(repo, broken, symlinks=True)
        with open(os.path.join(broken, "ensemble", "config.pbtxt"), "w") as f:
            f.write(text.replace(old, new, count))
        found = []
        check_ensemble_graph("broken", broken, "fastertransformer", lambda ok, msg: ok or found.append(msg))
        check(any(word in m for m in found), f"the graph checker missed {what}: {found}")
    print(f"  the graph checker reported each of {len(faults)} faults put into a copy")


def test_I49_ensemble(tmp):
    """--ensemble for GPT (GPT-2's vocab.json + merges.txt from the model folder), GPT-J (a
    tokenizer.json given as a file, --model-name) and GPT-NeoX (a folder given): the graph checked,
    the Python models run against the tokenizers library."""
    d = os.path.join(tmp, "E1")
    os.makedirs(d)
    bpe = os.path.join(ENGINE, "gpt2_bpe", "1-gpu")
    repo = os.path.join(d, "gpt2")
    r = ftx("-m", bpe, "-o", repo, "--ensemble")
    if check(r.returncode == 0, f"E1 gpt2 --ensemble: {r.stderr.strip()}"):
        check("ensemble" in r.stderr and "tokenizers" in r.stderr, f"E1: summary {r.stderr!r}")
        check_repo("E1 gpt2 --ensemble", repo, bpe, 1, 1, False)
        cfgs = check_ensemble_graph("E1 gpt2", repo, "fastertransformer")
        for m in ("preprocessing", "postprocessing"):
            v = os.path.join(repo, m, "1")
            check(sorted(os.listdir(v)) == ["merges.txt", "model.py", "vocab.json"], f"E1: {v} holds {os.listdir(v)}")
            for f in ("vocab.json", "merges.txt"):
                check(open(os.path.join(v, f), "rb").read() == open(os.path.join(bpe, f), "rb").read(),
                      f"E1: {m}/1/{f} is not the model's")
        steps = [s.model_name for s in cfgs["ensemble"].ensemble_scheduling.step]
        check(steps == ["preprocessing", "fastertransformer", "postprocessing"], f"E1: steps {steps}")
        ins = [t.name for t in cfgs["ensemble"].input]
        want_ins = ["INPUT_0", "INPUT_1", "INPUT_2", "INPUT_3"] + [
            t[0] for t in GPT_INPUTS if t[4] and t[0] not in ("stop_words_list", "bad_words_list",
                                                              "is_return_context_embeddings")]
        check(ins == want_ins, f"E1: ensemble inputs {ins}, FT's example has {want_ins}")
        reference = tokenizers.ByteLevelBPETokenizer(os.path.join(bpe, "vocab.json"), os.path.join(bpe, "merges.txt"))
        check_python_models("E1 gpt2", repo, cfgs, reference, 50256)
        check_the_checker(repo, d)

    for name, model_name, as_file in (("gptj", "gptj_6b", True), ("gptneox", "gpt3_1.3b", False)):
        folder = os.path.join(ENGINE, name, "2-gpu")
        tok = byte_level_tokenizer_json(os.path.join(d, name + "-tok", "tokenizer.json"), 290)
        repo = os.path.join(d, name)
        r = ftx("-m", folder, "-o", repo, "--ensemble", "--model-name", model_name, "-q",
                "--tokenizer", tok if as_file else os.path.dirname(tok))
        if not check(r.returncode == 0, f"E1 {name} --ensemble: {r.stderr.strip()}"):
            continue
        cfgs = check_ensemble_graph(f"E1 {name}", repo, model_name)
        check(params(cfgs[model_name])["model_checkpoint_path"] ==
              os.path.join(os.path.abspath(repo), model_name, "1", "2-gpu"), f"E1 {name}: model_checkpoint_path")
        steps = [s.model_name for s in cfgs["ensemble"].ensemble_scheduling.step]
        check(steps == ["preprocessing", model_name, "postprocessing"], f"E1 {name}: steps {steps}")
        check(not {"request_prompt_embedding", "is_return_context_embeddings"} & {t.name for t in cfgs["ensemble"].input},
              f"E1 {name}: GPT-only inputs in the ensemble")
        for m in ("preprocessing", "postprocessing"):
            v = os.path.join(repo, m, "1")
            check(sorted(os.listdir(v)) == ["model.py", "tokenizer.json"], f"E1 {name}: {v} holds {os.listdir(v)}")
        end_id = int(re.search(r"end_id = (\d+)", open(os.path.join(folder, "config.ini")).read()).group(1))
        check_python_models(f"E1 {name}", repo, cfgs, tokenizers.Tokenizer.from_file(tok), end_id)


def test_I49_model_name(tmp):
    """--model-name without --ensemble: the FT model's folder, name and model_checkpoint_path."""
    repo = os.path.join(tmp, "E2")
    folder = os.path.join(ENGINE, "gpt2", "1-gpu")
    r = ftx("-m", folder, "-o", repo, "--model-name", "gpt3_1.3b", "--server-path", "/models", "-q")
    if check(r.returncode == 0, f"E2: {r.stderr.strip()}"):
        check(sorted(os.listdir(repo)) == ["gpt3_1.3b"], f"E2: {os.listdir(repo)}")
        cfg = parse(repo, "gpt3_1.3b")
        check(cfg.name == "gpt3_1.3b" and cfg.backend == "fastertransformer", f"E2: name {cfg.name!r}")
        check(params(cfg)["model_checkpoint_path"] == "/models/gpt3_1.3b/1/1-gpu",
              f"E2: model_checkpoint_path {params(cfg)['model_checkpoint_path']}")
        check(os.path.samefile(os.path.join(repo, "gpt3_1.3b", "1", "1-gpu", "config.ini"),
                               os.path.join(folder, "config.ini")), "E2: the folder is not linked")
    repo = os.path.join(tmp, "E2-ensemble-name")  # "ensemble" is free without --ensemble
    r = ftx("-m", folder, "-o", repo, "--model-name", "ensemble", "-q")
    check(r.returncode == 0 and parse(repo, "ensemble").name == "ensemble", f"E2 ensemble as a name: {r.stderr}")


def test_I49_ensemble_refusals(tmp):
    """Each refused in one line, nothing written: bad --model-name values; --tokenizer without
    --ensemble; no tokenizer files; a tokenizer with more ids than the model; a SentencePiece model;
    -o holding the --tokenizer files."""
    d = os.path.join(tmp, "E3")
    os.makedirs(d)
    out = os.path.join(d, "repo")
    gpt2, bpe = os.path.join(ENGINE, "gpt2", "1-gpu"), os.path.join(ENGINE, "gpt2_bpe", "1-gpu")
    for name, needle in (("", "--model-name: empty value"), ("a/b", "no '/'"), ("..", "not . or .."), (".", "not . or .."),
                         ("x\ny", "control character")):
        refused(f"--model-name {name!r}", ["-m", gpt2, "--model-name", name], out, needle, code=2)
    for name in ENSEMBLE_MODELS:
        refused(f"--ensemble --model-name {name}", ["-m", bpe, "--ensemble", "--model-name", name], out,
                f"--model-name '{name}': --ensemble writes a model of that name", code=2)
    refused("--tokenizer without --ensemble", ["-m", bpe, "--tokenizer", bpe], out, "add --ensemble", code=2)
    refused("--ensemble without tokenizer files", ["-m", gpt2, "--ensemble"], out,
            gpt2 + ": no tokenizer files here or in the parent folder")
    refused("--ensemble with GPT-2's tokenizer on a 301-token model", ["-m", gpt2, "--ensemble", "--tokenizer", bpe],
            out, "has 50257 tokens, the model folder " + gpt2 + " has vocab_size 301")
    refused("--ensemble --tokenizer a missing folder", ["-m", bpe, "--ensemble", "--tokenizer", os.path.join(d, "nope")],
            out, os.path.join(d, "nope"))
    spm = os.path.join(d, "spm")
    os.makedirs(spm)
    with open(os.path.join(spm, "corpus.txt"), "w") as f:
        f.write("\n".join(ENSEMBLE_TEXTS * 10 + ["the quick brown fox jumps over the lazy dog"] * 10) + "\n")
    r = subprocess.run(["spm_train", "--input", os.path.join(spm, "corpus.txt"), "--model_prefix",
                        os.path.join(spm, "tokenizer"), "--vocab_size", "60", "--model_type", "bpe"],
                       capture_output=True, text=True)
    if check(r.returncode == 0, f"spm_train: {r.stderr[-500:]}"):
        refused("--ensemble with a SentencePiece model", ["-m", gpt2, "--ensemble", "--tokenizer", spm], out,
                os.path.join(spm, "tokenizer.model") + ": a sentencepiece tokenizer")
    tokdir = os.path.join(d, "holder", "tok")
    byte_level_tokenizer_json(os.path.join(tokdir, "tokenizer.json"), 290)
    for force in ([], ["--force"]):
        refused_intact(f"-o holding --tokenizer's files {' '.join(force)}",
                       ["-m", gpt2, "--ensemble", "--tokenizer", tokdir, "-o", os.path.join(d, "holder"), *force],
                       [os.path.join(d, "holder") + ": holds the --tokenizer files " + tokdir]
                       + (["which --force would delete"] if force else []), [os.path.join(d, "holder")], 2)


def main():
    tmp = tempfile.mkdtemp(prefix="ftx-triton-")
    gpt2 = {tp: os.path.join(ENGINE, "gpt2", f"{tp}-gpu") for tp in (1, 2)}
    n = 0
    for tp in (1, 2):
        for pp in (1, 2):
            for streaming in (False, True):
                repo = os.path.join(tmp, f"gpt2-tp{tp}-pp{pp}-{'s' if streaming else 'n'}")
                args = ["-m", gpt2[tp], "-o", repo, "--pipeline-para-size", str(pp), "-q"]
                if tp == 2:
                    args += ["--tensor-para-size", "2"]
                r = ftx(*args, *(["--streaming"] if streaming else []))
                if check(r.returncode == 0, f"tp{tp} pp{pp} streaming={streaming}: {r.stderr.strip()}"):
                    check_repo(f"gpt2 TP {tp} x PP {pp}{' streaming' if streaming else ''}", repo, gpt2[tp], tp, pp,
                               streaming)
                    n += 1
    print(f"  {n} of 8 grid repositories parsed by Triton's ModelConfig and matched FT's GPT table")

    # Data type and INT8 from the flags; the other model classes; a copy; a gemm_config.in.
    repo = os.path.join(tmp, "gpt2-bf16-int8")
    r = ftx("-m", gpt2[1], "-o", repo, "-t", "bf16", "--int8-mode", "1", "--max-batch-size", "8", "-q")
    if check(r.returncode == 0, f"bf16 int8: {r.stderr.strip()}"):
        check_repo("gpt2 bf16 int8_mode 1", repo, gpt2[1], 1, 1, False, data_type="bf16", int8_mode=1, max_batch=8)
    for name, model_type, dtype in (("gptj", "GPT-J", "fp32"), ("gptneox", "GPT-NeoX", "fp32"),
                                    ("bloom", "GPT", "fp32"), ("opt_post", "GPT", "fp32"), ("megatron", "GPT", "bf16")):
        folder = os.path.join(ENGINE, name, "2-gpu")
        repo = os.path.join(tmp, name)
        r = ftx("-m", folder, "-o", repo, "-q")
        if check(r.returncode == 0, f"{name}: {r.stderr.strip()}"):
            check_repo(name, repo, folder, 2, 1, False, model_type=model_type, data_type=dtype)
    repo = os.path.join(tmp, "copied")
    r = ftx("-m", gpt2[1], "-o", repo, "--copy", "-q")
    if check(r.returncode == 0, f"--copy: {r.stderr.strip()}"):
        model = os.path.join(repo, "fastertransformer", "1", "1-gpu")
        check(not os.path.islink(model) and sorted(os.listdir(model)) == sorted(os.listdir(gpt2[1])),
              f"--copy: {model} is not a copy of {gpt2[1]}")
        check(all(open(os.path.join(model, f), "rb").read() == open(os.path.join(gpt2[1], f), "rb").read()
                  for f in os.listdir(gpt2[1])), "--copy: a copied file differs")
    gemm = os.path.join(tmp, "gemm_config.in")
    header = ("batch_size, seq_len, head_num, size_per_head dataType ### batchCount, n, m, k, algoId, customOption, "
              "tile, numSplitsK, swizzle, reductionScheme, workspaceSize, stages, exec_time")
    row = "1 1 4 16 1 ### 1 192 1 64 -1 -1 -1 -1 -1 -1 -1 -1 0.010000\n"
    with open(gemm, "w") as f:  # FT's gpt_gemm header and one cuBLAS row
        f.write(header + "\n" + row)
    with open(gemm + ".fp32", "w") as f:  # ftx gemm-tune's metadata: tuned for fp32
        f.write(header + ' ### ftx v1 gpu="NVIDIA H100" cc=9.0 cuda=13000 cublaslt=130100 dtype=fp32 int8_mode=0\n'
                + row.replace(" 1 ### ", " 0 ### "))
    repo = os.path.join(tmp, "with-gemm")
    r = ftx("-m", gpt2[1], "-o", repo, "--gemm-config", gemm, "--server-path", "/models", "-q")
    if check(r.returncode == 0, f"--gemm-config: {r.stderr.strip()}"):
        check(open(os.path.join(repo, "gemm_config.in")).read() == open(gemm).read(), "gemm_config.in not placed in DIR")
        check(params(parse(repo))["model_checkpoint_path"] == "/models/fastertransformer/1/1-gpu",
              f"--server-path: {params(parse(repo))['model_checkpoint_path']}")

    # Bad inputs: one line each, nothing written.
    bad = os.path.join(tmp, "bad")
    os.makedirs(bad)
    out = os.path.join(bad, "repo")
    refused("TP does not match the folder", ["-m", gpt2[1], "--tensor-para-size", "2"], out,
            "converted for tensor_para_size 1")
    refused("TP 1 grid on a TP 2 folder", ["-m", gpt2[2], "--tensor-para-size", "1"], out,
            "converted for tensor_para_size 2")
    refused("PP does not divide the layers", ["-m", gpt2[1], "--pipeline-para-size", "3"], out,
            "not divisible by pipeline_para_size 3")
    refused("weight-only INT8 in fp32", ["-m", gpt2[1], "--int8-mode", "1", "-t", "fp32"], out, "data_type fp32")
    refused("W8A8 without FT's files", ["-m", gpt2[1], "--int8-mode", "2"], out, "ftx smoothquant --format ft")
    refused("int8_mode for GPT-J", ["-m", os.path.join(ENGINE, "gptj", "1-gpu"), "--int8-mode", "1"], out,
            "int8_mode for its GPT model only")
    refused("bf16 GPT-NeoX", ["-m", os.path.join(ENGINE, "gptneox", "1-gpu"), "-t", "bf16"], out, "fp16 or fp32")
    refused("multi-query attention", ["-m", os.path.join(ENGINE, "santacoder", "1-gpu")], out, "multi-query")
    refused("rotary GPT without biases", ["-m", os.path.join(ENGINE, "gptnext", "1-gpu")], out, "rotary")
    refused("an unknown data type", ["-m", gpt2[1], "-t", "int4"], out, "int4")
    refused("not a model folder", ["-m", ENGINE], out, ENGINE)
    refused("int8 mode 3", ["-m", gpt2[1], "--int8-mode", "3"], out, "--int8-mode 3", code=2)
    refused("max batch size 0", ["-m", gpt2[1], "--max-batch-size", "0"], out, "--max-batch-size 0", code=2)
    refused("a relative server path", ["-m", gpt2[1], "--server-path", "models"], out, "--server-path", code=2)
    with open(gemm + ".bad", "w") as f:
        f.write("not a gemm config\n1 2 3\n")
    refused("a malformed gemm_config.in", ["-m", gpt2[1], "--gemm-config", gemm + ".bad"], out, gemm + ".bad")
    refused("a gemm_config.in of another data type", ["-m", gpt2[1], "--gemm-config", gemm + ".fp32"], out,
            "tuned for fp32")
    os.makedirs(out)
    with open(os.path.join(out, "keep"), "w") as f:
        f.write("mine")
    r = ftx("-m", gpt2[1], "-o", out)
    check(r.returncode == 1 and "--force" in r.stderr and os.listdir(out) == ["keep"],
          f"an existing DIR without --force: rc {r.returncode}, {r.stderr.strip()}, {os.listdir(out)}")
    r = ftx("-m", gpt2[1], "-o", out, "--force", "-q")
    check(r.returncode == 0 and sorted(os.listdir(out)) == ["fastertransformer"],
          f"--force: rc {r.returncode}, {r.stderr.strip()}, {os.listdir(out)}")
    test_T1_force_never_deletes_the_model(tmp)
    test_T2_force_never_replaces_the_model(tmp)
    test_T30_output_inside_the_model(tmp)
    test_T31_force_never_replaces_a_file(tmp)
    test_T3_refuses_what_the_ft_class_cannot_run(tmp)
    test_I49_ensemble(tmp)
    test_I49_model_name(tmp)
    test_I49_ensemble_refusals(tmp)
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    finish("triton_repo")


if __name__ == "__main__":
    main()
