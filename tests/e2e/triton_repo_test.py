#!/usr/bin/env python3
"""`ftx triton-repo` (issue 39): the config.pbtxt it writes is parsed by Triton's own ModelConfig
protobuf (tritonclient's model_config_pb2, pinned in scripts/requirements/triton.txt, with
protobuf's text_format: an unknown field, a bad enum or a syntax error fails the parse), and every
tensor's name, data type, dims, reshape and optional flag is checked against FasterTransformer's
backend tables below, transcribed from triton-inference-server/fastertransformer_backend
all_models/{gpt,gptj,gptneox}/fastertransformer/config.pbtxt and docs/gpt_guide.md (ft-format.md,
"Triton model repository"). Grid: TP 1 and 2 x PP 1 and 2, streaming and not, on the engine
fixtures (FTX_FIXTURES/engine); then GPT-J / GPT-NeoX tables, --copy, --gemm-config, and the bad
inputs, each refused in one line with nothing written.

Usage: triton_repo_test.py    (run under the triton venv; FTX_BIN, FTX_FIXTURES)
"""
import os
import shutil
import subprocess
import sys
import tempfile

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import check, failures, finish  # noqa: E402

FTX = os.environ["FTX_BIN"]
ENGINE = os.path.join(os.environ["FTX_FIXTURES"], "engine")

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


def parse(repo):
    with open(os.path.join(repo, "fastertransformer", "config.pbtxt")) as f:
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
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    finish("triton_repo")


if __name__ == "__main__":
    main()
