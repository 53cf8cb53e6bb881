#!/usr/bin/python3
"""Reference for `ftx convert-megatron` on Megatron-DeepSpeed MoE GPT checkpoints: a transcription of
what FasterTransformer's examples/pytorch/gpt/utils/megatron_gpt_moe_ckpt_convert.py (commit acb8091)
does, re-implemented here (not from ftx's code) to check ftx's output byte for byte. Like
ft_converters_ref.py it needs only torch and numpy.

Facts it relies on, with their source:
  FT megatron_gpt_moe_ckpt_convert.py
    * the dense shards: the first of mp_rank_{:02}/model_states.pt, mp_rank_{:02}_{:03}/model_states.pt,
      tp_rank_{:02}_pp_rank_{:03}/model_states.pt, mp_rank_{:02}_model_states.pt, mp_rank_{:02}_{:03}_model_states.pt,
      tp_rank_{:02}_pp_rank_{:03}_model_states.pt (DeepSpeed names) or .../model_rng.pt (not DeepSpeed) whose rank 0
      exists; the state dict under 'model' or 'module'; checkpoint_version must be 3; the encoder under
      [key]['language_model']['encoder'];
    * args: tensor_model_parallel_size, pipeline_model_parallel_size, num_layers, num_attention_heads,
      hidden_size, ffn_hidden_size, max_position_embeddings, padded_vocab_size, layernorm_epsilon,
      num_experts (a list; FT takes num_experts[0]; gpt_with_moe = 1 when it is not 0);
    * every 2-D tensor is transposed (safe_transpose), cast with numpy's astype and written with tofile;
      the dense layers as FT's Megatron converter writes them (QKV of version 3 reordered to [3, n_l, d]);
    * MoE layers: the key layers.N.mlp.deepspeed_moe.gate.wg.weight marks layer N as a MoE layer
      (moe_layers, in the order of the keys) and is written, transposed ([H, E]), from TP rank 0 as
      model.layers.N.mlp.moe.gate.wg.weight.bin;
    * expert files: layer_{n}_expert_{e}_mp_rank_{r:02}_model_states.pt, n the index among the MoE layers,
      e the global expert; the training expert TP size is fixed at 1, so of the dense TP ranks the first
      whose file exists is read; keys holding dense_h_to_4h.weight/.bias, dense_4h_to_h.weight/.bias;
    * the experts of a layer stacked (torch.stack in expert order): dense_h_to_4h.weight [E, F, H]
      transposed to [E, H, F] and split on axis 2 over the inference ranks (.R.bin), dense_h_to_4h.bias
      [E, F] split on axis 1, dense_4h_to_h.weight [E, H, F] transposed to [E, F, H] and split on axis 1,
      dense_4h_to_h.bias [E, H] written once (no rank suffix), all under model.layers.N.mlp.moe.experts.;
    * wte = the TP shards' word embeddings concatenated, wpe from rank 0; args.txt (`k:v` lines);
      config.ini [gpt] model_name, head_num, size_per_head, inter_size, num_layer, max_pos_seq_len,
      vocab_size, has_adapters, adapter_inter_size, layernorm_eps, start_id, end_id, weight_data_type,
      tensor_para_size, and [structure] gpt_with_moe, expert_num, moe_layers (Python's str of the list).
  FT's GPT guide (in its docs folder, GPT-MoE section): the file list and config.ini of a
      converted checkpoint.
  DeepSpeed deepspeed/moe/sharded_moe.py TopKGate: wg = Linear(model_dim, num_experts, bias=False).float()
      (the gate is fp32 in fp16 training); k must be 1 or 2. deepspeed/runtime/engine.py
      _save_moe_checkpoint: expert keys `<module path>.deepspeed_moe.experts.deepspeed_experts.<global id>.*`
      in files named by the MoE layer counter and the global expert id.

Only the DeepSpeed names at pipeline size 1 are transcribed (FT names the gate file by the stage-local
layer index and the expert files of pipelined checkpoints by a scheme it never enables).
Usage: ft_moe_converter_ref.py -i DIR -o OUT -g T -t {fp32,fp16} [--vocab-path F] [--merges-path F]
"""
import argparse
import configparser
import json
import os
import shutil

import numpy as np
import torch

NP = {"fp32": np.float32, "fp16": np.float16}


def to_np(t, dt):
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy().astype(NP[dt])


def tr(t):
    return t.t() if t.dim() == 2 else t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-i", "--input-dir", required=True)
    ap.add_argument("-o", "--saved-dir", required=True)
    ap.add_argument("-g", "--infer-gpu-num", type=int, required=True)
    ap.add_argument("-t", "--weight-data-type", default="fp16", choices=["fp32", "fp16"])
    ap.add_argument("--vocab-path")
    ap.add_argument("--merges-path")
    a = ap.parse_args()
    dt, T = a.weight_data_type, a.infer_gpu_num
    out = os.path.join(a.saved_dir, f"{T}-gpu")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    if a.vocab_path:
        shutil.copy(a.vocab_path, os.path.join(out, "vocab.json"))
    if a.merges_path:
        shutil.copy(a.merges_path, os.path.join(out, "merges.txt"))

    for pattern in ("mp_rank_{:02}/model_states.pt", "mp_rank_{:02}_model_states.pt"):
        if os.path.exists(os.path.join(a.input_dir, pattern.format(0))):
            break
    else:
        raise FileNotFoundError("no mp_rank_00 model states")
    ck0 = torch.load(os.path.join(a.input_dir, pattern.format(0)), map_location="cpu", weights_only=False)
    mkey = "model" if "model" in ck0 else "module"
    assert ck0["checkpoint_version"] == 3
    args = ck0["args"]
    Tt = args.tensor_model_parallel_size
    assert args.pipeline_model_parallel_size == 1
    cks = [ck0] + [torch.load(os.path.join(a.input_dir, pattern.format(r)), map_location="cpu", weights_only=False)
                   for r in range(1, Tt)]
    with open(os.path.join(out, "args.txt"), "w") as f:
        for k, v in vars(args).items():
            f.write(f"{k}:{v}\n")
    lms = [c[mkey]["language_model"] for c in cks]
    to_np(lms[0]["embedding"]["position_embeddings"]["weight"], dt).tofile(os.path.join(out, "model.wpe.bin"))
    wte = np.concatenate([to_np(lm["embedding"]["word_embeddings"]["weight"], dt) for lm in lms], 0)
    wte.tofile(os.path.join(out, "model.wte.bin"))
    vocab_size = getattr(args, "padded_vocab_size", wte.shape[0])
    num_experts = vars(args).get("num_experts", [0])[0]
    heads, H = args.num_attention_heads, args.hidden_size
    d = H // heads
    nl = heads // Tt
    encs = [lm["encoder"] for lm in lms]
    moe_layers = []

    def rank_files(name, vals, axis):
        """Training shards -> T inference files: cut each shard in f (T >= Tt) or join f shards (T < Tt)."""
        if T >= Tt:
            f = T // Tt
            for k, v in enumerate(vals):
                for j, piece in enumerate(np.split(v, f, axis=axis)):
                    piece.tofile(os.path.join(out, f"model.{name}.{k * f + j}.bin"))
        else:
            f = Tt // T
            for i in range(T):
                np.concatenate(vals[i * f:(i + 1) * f], axis=axis).tofile(os.path.join(out, f"model.{name}.{i}.bin"))

    once = ("input_layernorm.", "attention.dense.bias", "post_attention_layernorm.", "mlp.dense_4h_to_h.bias",
            "final_layernorm.")
    for key in encs[0]:
        vals = [to_np(tr(e[key]), dt) for e in encs]
        name = key.replace("self_attention", "attention")
        if "deepspeed_moe.gate" in key:
            moe_layers.append(int(key.split(".")[1]))
            vals[0].tofile(os.path.join(out, "model." + key.replace("deepspeed_moe", "moe") + ".bin"))
        elif "experts" in key:
            raise SystemExit(f"cannot find key '{key}'")
        elif any(s in name for s in once):
            vals[0].tofile(os.path.join(out, f"model.{name}.bin"))
        elif "attention.dense.weight" in name or "mlp.dense_4h_to_h.weight" in name:
            rank_files(name, vals, 0)
        elif "mlp.dense_h_to_4h." in name:
            rank_files(name, vals, -1)
        elif "attention.query_key_value.weight" in name:
            rank_files(name, [v.reshape(H, nl, 3, d).transpose(0, 2, 1, 3).reshape(H, 3, nl * d) for v in vals], -1)
        elif "attention.query_key_value.bias" in name:
            rank_files(name, [v.reshape(nl, 3, d).transpose(1, 0, 2).reshape(3, nl * d) for v in vals], -1)
        else:
            raise SystemExit(f"cannot find key '{key}'")

    # Experts: one file per (MoE layer, expert), read from the first dense TP rank that has it.
    for n, layer in enumerate(moe_layers):
        parts = {"dense_h_to_4h.weight": [], "dense_h_to_4h.bias": [], "dense_4h_to_h.weight": [],
                 "dense_4h_to_h.bias": []}
        for e in range(num_experts):
            for r in range(Tt):
                path = os.path.join(a.input_dir, f"layer_{n}_expert_{e}_mp_rank_{r:02}_model_states.pt")
                if os.path.exists(path):
                    break
            else:
                raise FileNotFoundError(f"layer_{n}_expert_{e}")
            for k, v in torch.load(path, map_location="cpu", weights_only=False).items():
                kind = [p for p in parts if p in k]
                if len(kind) != 1:
                    raise SystemExit(f"cannot find expert_dict key '{k}'")
                parts[kind[0]].append(v)
        prefix = os.path.join(out, f"model.layers.{layer}.mlp.moe.experts.")
        fc1 = to_np(torch.stack(parts["dense_h_to_4h.weight"]).transpose(-1, -2).contiguous(), dt)
        for i, piece in enumerate(np.split(fc1, T, axis=2)):
            piece.tofile(f"{prefix}dense_h_to_4h.weight.{i}.bin")
        b1 = to_np(torch.stack(parts["dense_h_to_4h.bias"]), dt)
        for i, piece in enumerate(np.split(b1, T, axis=1)):
            piece.tofile(f"{prefix}dense_h_to_4h.bias.{i}.bin")
        fc2 = to_np(torch.stack(parts["dense_4h_to_h.weight"]).transpose(-1, -2).contiguous(), dt)
        for i, piece in enumerate(np.split(fc2, T, axis=1)):
            piece.tofile(f"{prefix}dense_4h_to_h.weight.{i}.bin")
        to_np(torch.stack(parts["dense_4h_to_h.bias"]), dt).tofile(f"{prefix}dense_4h_to_h.bias.bin")

    eos = 50256
    if a.vocab_path:
        with open(a.vocab_path) as f:
            eos = json.load(f)["<|endoftext|>"]
    cp = configparser.ConfigParser()
    cp["gpt"] = {
        "model_name": "gpt", "head_num": str(heads), "size_per_head": str(d),
        "inter_size": str(args.ffn_hidden_size), "num_layer": str(args.num_layers),
        "max_pos_seq_len": str(args.max_position_embeddings), "vocab_size": str(vocab_size),
        "has_adapters": "False", "adapter_inter_size": "0", "layernorm_eps": str(args.layernorm_epsilon),
        "start_id": str(eos), "end_id": str(eos), "weight_data_type": dt, "tensor_para_size": str(T)}
    cp["structure"] = {"gpt_with_moe": int(num_experts != 0), "expert_num": num_experts, "moe_layers": moe_layers}
    with open(os.path.join(out, "config.ini"), "w") as f:
        cp.write(f)


if __name__ == "__main__":
    main()
