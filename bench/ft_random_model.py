"""A GPT-2-shaped FT folder (TP 1, fp32) of random weights, of any size, for the benchmarks that
need a model of a given shape and no particular weights (numpy only; made once, cached in its folder
by a DONE file naming the shape)."""
import os

import numpy as np

GPT2_SMALL = dict(layers=12, hidden=768, heads=12, vocab=50257, positions=1024)
GPT2_MEDIUM = dict(layers=24, hidden=1024, heads=16, vocab=50257, positions=1024)


def make(folder, layers, hidden, heads, vocab, positions, seed=0):
    shape = f"{layers} {hidden} {heads} {vocab} {positions} {seed}"
    done = os.path.join(folder, "DONE")
    if os.path.exists(done) and open(done).read() == shape:
        return folder
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    inter = 4 * hidden

    def save(name, *dims, std=0.02, mean=0.0):
        (rng.standard_normal(dims, dtype=np.float32) * np.float32(std) + np.float32(mean)).tofile(
            os.path.join(folder, name))

    save("model.wte.bin", vocab, hidden)
    save("model.wpe.bin", positions, hidden, std=0.01)
    save("model.final_layernorm.weight.bin", hidden, mean=1.0)
    save("model.final_layernorm.bias.bin", hidden)
    for l in range(layers):
        p = f"model.layers.{l}."
        for ln in ("input_layernorm", "post_attention_layernorm"):
            save(p + ln + ".weight.bin", hidden, mean=1.0)
            save(p + ln + ".bias.bin", hidden)
        save(p + "attention.query_key_value.weight.0.bin", hidden, 3 * hidden)
        save(p + "attention.query_key_value.bias.0.bin", 3 * hidden)
        save(p + "attention.dense.weight.0.bin", hidden, hidden)
        save(p + "attention.dense.bias.bin", hidden)
        save(p + "mlp.dense_h_to_4h.weight.0.bin", hidden, inter)
        save(p + "mlp.dense_h_to_4h.bias.0.bin", inter)
        save(p + "mlp.dense_4h_to_h.weight.0.bin", inter, hidden)
        save(p + "mlp.dense_4h_to_h.bias.bin", hidden)
    with open(os.path.join(folder, "config.ini"), "w") as f:
        f.write(f"[gpt]\nmodel_name = gpt2-bench\nhead_num = {heads}\nsize_per_head = {hidden // heads}\n"
                f"inter_size = {inter}\nnum_layer = {layers}\nmax_pos_seq_len = {positions}\nvocab_size = {vocab}\n"
                f"start_id = {vocab - 1}\nend_id = {vocab - 1}\nweight_data_type = fp32\ntensor_para_size = 1\n"
                "layernorm_eps = 1e-5\narchitecture = gpt\nactivation = gelu_tanh\n"
                "position_embedding_type = learned\ntied_embeddings = 1\n")
    with open(done, "w") as f:
        f.write(shape)
    return folder


def weight_bytes(folder):
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder) if n.endswith(".bin"))
