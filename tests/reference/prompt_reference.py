"""Reference for NeMo prompt-learning conversion, written from the formats below (TensorRT-LLM's
nemo_prompt_convert.py, FT's nemo_ckpt_convert.py), not from ftx's code.

A prompt .nemo is a tar (plain or gzip) or its extracted folder holding model_config.yaml and
model_weights.ckpt (at the root or under mp_rank_00/).
  * PEFT p-tuning (`peft` in the config): one table, the tensor under
    model.embedding.adapter_layer.ptuning_adapter.inference_table (or any key containing
    adapter_layer.ptuning_adapter); its task is the first task template's name, else "ptuning".
  * classic: for each entry of task_templates, in order, the checkpoint's prompt_table dict's
    prompt_table.<taskname>.prompt_embeddings.weight [len, H]; tasks without one are skipped.
TensorRT-LLM's .npy: float32 [tasks, max_len, H], shorter tables zero-padded.
FT's folder: model.prompt_table.<task>.weight.bin = the table as raw [len, H] in the folder's weight
dtype; config.ini num_tasks, prompt_learning_start_id, prompt_learning_type = 3, [task_K] task_name,
prompt_length.
"""
import io
import os
import tarfile

import numpy as np
import torch
import yaml


def _members(path):
    """{relative name: bytes} of model_config.yaml and the weights."""
    out = {}
    if os.path.isdir(path):
        for root, _, files in os.walk(path):
            for f in files:
                full = os.path.join(root, f)
                with open(full, "rb") as fh:
                    out[os.path.relpath(full, path)] = fh.read()
        return out
    with tarfile.open(path, "r:*") as tf:
        for m in tf.getmembers():
            if m.isfile():
                out[os.path.normpath(m.name).lstrip("./")] = tf.extractfile(m).read()
    return out


def read_tables(path):
    """[(task_name, tensor [len, H] in its saved dtype)] in template order."""
    files = _members(path)
    cfg = yaml.safe_load(files["model_config.yaml"])
    if "model" in cfg and isinstance(cfg["model"], dict) and "task_templates" not in cfg:
        cfg = cfg["model"]
    ck = files.get("model_weights.ckpt") or files["mp_rank_00/model_weights.ckpt"]
    sd = torch.load(io.BytesIO(ck), map_location="cpu")
    if "state_dict" in sd:
        sd = sd["state_dict"]
    templates = cfg.get("task_templates") or []
    if cfg.get("peft"):
        key = "model.embedding.adapter_layer.ptuning_adapter.inference_table"
        if key not in sd:
            key = next(k for k in sd if "adapter_layer.ptuning_adapter" in k)
        name = templates[0]["taskname"] if templates else "ptuning"
        return [(name, sd[key])]
    table = sd["prompt_table"]
    out = []
    for t in templates:
        k = f"prompt_table.{t['taskname']}.prompt_embeddings.weight"
        if k in table:
            out.append((t["taskname"], table[k]))
    return out


def npy_table(path):
    tables = read_tables(path)
    H = tables[0][1].shape[1]
    n = max(t.shape[0] for _, t in tables)
    a = np.zeros((len(tables), n, H), dtype=np.float32)
    for i, (_, t) in enumerate(tables):
        a[i, : t.shape[0]] = t.float().numpy()
    return a


FT_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def ft_files(path, weight_data_type):
    """{file name: bytes} FT reads, and the config entries [(section, key, value)]."""
    files, ini = {}, []
    tables = read_tables(path)
    for i, (name, t) in enumerate(tables):
        t = t.to(FT_TORCH[weight_data_type]).contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        files[f"model.prompt_table.{name}.weight.bin"] = raw
        ini += [(f"task_{i}", "task_name", name), (f"task_{i}", "prompt_length", str(t.shape[0]))]
    return files, ini
