#!/usr/bin/python3
"""End-to-end tests of `ftx convert-mesh-jax` (issue 49: seed 002's GPT-J from its original checkpoint).

The fixture is tests/fixtures/mesh_jax/ (scripts/fixtures/make_mesh_jax_fixtures.py; tests/fixtures/mesh_jax/SOURCE.md): a
tiny GPT-J (8 shards, 11 layers, d_model 32, 8 heads, inter 64, vocabulary 64) in mesh-transformer-jax's
slim layout (step_7/shard_N/0.npz .. 15.npz, bfloat16 as jax saves it), and ft/1-gpu, ft/2-gpu:
FasterTransformer's own gptj_ckpt_convert.py run on it with jax 0.4.30 from PyPI.

Modes (one ctest entry each):
  compat   FT's converter's files, byte for byte, at -g 1 and 2 (the second with FT's own flag names,
           --ckpt-dir / --output-dir / --n-inference-gpus); -t fp16 and bf16 equal FT's float32 values
           rounded to those types; config.ini holds the keys FT's converter writes, with the fixture's
           shape where FT writes GPT-J-6B's; `ftx inspect` lists one .npz as numpy does.
  decode   greedy tokens of `ftx generate` on the converted folder (TP 1 and 2) equal transformers'
           GPTJForCausalLM in float64, its weights built from the shards as mesh-transformer-jax's
           to_hf_weights.py builds them (transcribed here: its reshard rules).
  differ   a checkpoint where FT's converter and to_hf_weights.py disagree: per-shard biases that
           differ (FT's reshape raises), layer norms of shards 1..7 moved off their initial values
           (FT multiplies shard 0's by 8): ftx writes what the model computes, as to_hf_weights.py
           does (biases summed, shard 0's layer norm).
  errors   a missing shard, a shard beyond --shards, a missing or extra numbered file, a truncated
           .npz, a wrong shape, a compressed .npz, fewer arrays, heads that do not fit: one-line
           `ftx: error:` naming the file, non-zero exit, no N-gpu/ folder left; `generate -m` given
           the checkpoint names convert-mesh-jax.
Environment: FTX_BIN, FTX_SOURCE_DIR. Runs under the test venv (transformers 4.45.2, Debian's numpy and torch).
"""
import configparser
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, E2E)
from e2e_util import check, finish, run_ftx  # noqa: E402

SRC = os.environ["FTX_SOURCE_DIR"]
FIX = os.path.join(SRC, "tests", "fixtures", "mesh_jax")
STEP = os.path.join(FIX, "step_7")
SHAPE = json.load(open(os.path.join(FIX, "versions.json")))["shape"]
S, L, D, H = SHAPE["shards"], SHAPE["layers"], SHAPE["d_model"], SHAPE["n_heads"]
INTER, V = SHAPE["inter_size"], SHAPE["vocab"]
ROT = 2
# What the arrays cannot say, as flags (FT's converter hardcodes GPT-J-6B's 16 heads and 64 rotary dims).
SHAPE_FLAGS = ["--head-num", str(H), "--rotary-dim", str(ROT), "--max-seq-len", "64"]


def convert(src, out, *extra, shape=SHAPE_FLAGS):
    return run_ftx(["convert-mesh-jax", "-i", src, "-o", out, "-q", *shape, *extra])


# ------------------------------------------------------------------ the slim layout, read and written

def load_slim(step):
    """Per shard, the arrays in file order (float64; bfloat16 '|V2'/'<V2' widened), and the step."""
    shards = []
    for s in range(S):
        arrays = []
        files = sorted(glob.glob(os.path.join(step, f"shard_{s}", "*.npz")),
                       key=lambda p: int(os.path.basename(p)[:-4]))
        for f in files:
            z = np.load(f)
            for name in z.files:
                a = z[name]
                if a.dtype.kind == "V":
                    a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
                arrays.append(a.astype(np.float64))
        shards.append(arrays)
    return shards


def write_slim(step, shards, pieces=16):
    """np.savez files as checkpoint.py writes them (bfloat16 as numpy's 2-byte void, '|V2')."""
    for s, arrays in enumerate(shards):
        d = os.path.join(step, f"shard_{s}")
        os.makedirs(d, exist_ok=True)
        out = []
        for a in arrays:
            if a.ndim == 0:
                out.append(np.array(int(a), dtype=np.int32))
            else:
                b = torch.tensor(a, dtype=torch.float32).to(torch.bfloat16).view(torch.int16).numpy()
                out.append(b.view(np.uint16).view(np.dtype("V2")))
        k, m = divmod(len(out), pieces)
        for i in range(pieces):
            with open(os.path.join(d, f"{i}.npz"), "wb") as f:
                np.savez(f, *out[i * k + min(i, m):(i + 1) * k + min(i + 1, m)])


def to_hf(shards):
    """The HF GPT-J state dict mesh-transformer-jax's to_hf_weights.py makes of the shards: its
    reshard() with shards_in 8 -> 1 (column-parallel weights concatenated on the output axis,
    row-parallel on the input axis, the embedding's and linear_5's biases summed over the shards,
    layer norms shard 0's), transposed to nn.Linear's [out, in], the embedding bias added to every
    row of wte; layer_N in string order."""
    def col(i):
        return np.concatenate([sh[i] for sh in shards], axis=-1)

    def row(i):
        return np.concatenate([sh[i] for sh in shards], axis=0)

    def total(i):
        return np.sum([sh[i] for sh in shards], axis=0)

    def first(i):
        return shards[0][i]

    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    sd = {"transformer.wte.weight": t(row(1) + total(0))}
    for p, layer in enumerate(sorted(map(str, range(L)))):
        b, h = 2 + 10 * p, f"transformer.h.{layer}."
        sd[h + "attn.q_proj.weight"] = t(col(b).T)
        sd[h + "attn.v_proj.weight"] = t(col(b + 1).T)
        sd[h + "attn.k_proj.weight"] = t(col(b + 2).T)
        sd[h + "attn.out_proj.weight"] = t(row(b + 3).T)
        sd[h + "mlp.fc_in.bias"] = t(col(b + 4))
        sd[h + "mlp.fc_in.weight"] = t(col(b + 5).T)
        sd[h + "mlp.fc_out.bias"] = t(total(b + 6))
        sd[h + "mlp.fc_out.weight"] = t(row(b + 7).T)
        sd[h + "ln_1.bias"] = t(first(b + 8))
        sd[h + "ln_1.weight"] = t(first(b + 9))
    e = 2 + 10 * L
    sd["lm_head.bias"] = t(col(e))
    sd["lm_head.weight"] = t(col(e + 1).T)
    sd["transformer.ln_f.bias"] = t(first(e + 2))
    sd["transformer.ln_f.weight"] = t(first(e + 3))
    return sd


def hf_model(sd):
    import transformers
    cfg = transformers.GPTJConfig(vocab_size=V, n_positions=64, n_embd=D, n_layer=L, n_head=H, rotary_dim=ROT,
                                  n_inner=INTER, activation_function="gelu_new", layer_norm_epsilon=1e-5,
                                  tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    m = transformers.GPTJForCausalLM(cfg).double().eval()
    missing, unexpected = m.load_state_dict(sd, strict=False)
    check(not unexpected and all(".attn.bias" in k or "masked_bias" in k for k in missing),
          f"HF GPT-J state dict: missing {missing}, unexpected {unexpected}")
    return m


def ft_files(folder):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "*.bin")))


# ------------------------------------------------------------------ modes

def test_compat(tmp):
    for g in (1, 2):
        out = os.path.join(tmp, f"g{g}")
        if g == 1:
            r = convert(STEP, out)
        else:  # FT's converter's own flag names
            r = run_ftx(["convert-mesh-jax", "--ckpt-dir", STEP + "/", "--output-dir", out, "--n-inference-gpus", "2",
                         "-q", *SHAPE_FLAGS])
        if not check(r.returncode == 0, f"convert -g {g}: {r.stderr.strip()}"):
            continue
        ft, got = os.path.join(FIX, "ft", f"{g}-gpu"), os.path.join(out, f"{g}-gpu")
        check(ft_files(got) == ft_files(ft), f"-g {g}: ftx writes {ft_files(got)}, FT's converter {ft_files(ft)}")
        same = 0
        for name in ft_files(ft):
            a, b = open(os.path.join(ft, name), "rb").read(), open(os.path.join(got, name), "rb").read()
            same += check(a == b, f"-g {g}: {name} differs from FT's converter's ({len(b)} vs {len(a)} bytes)")
        print(f"-g {g}: {same} of {len(ft_files(ft))} files byte-identical to FT's converter's")
        ini = configparser.ConfigParser()
        ini.read(os.path.join(got, "config.ini"))
        # The keys FT's converter writes ([gptj], GPT-J-6B's numbers hardcoded), with this model's shape.
        want = {"head_num": H, "size_per_head": D // H, "inter_size": INTER, "num_layer": L, "rotary_embedding": ROT,
                "vocab_size": V, "start_id": 50256, "end_id": 50256, "weight_data_type": "fp32",
                "tensor_para_size": g}
        for k, v in want.items():
            check(ini.has_option("gptj", k) and ini.get("gptj", k) == str(v),
                  f"-g {g}: config.ini [gptj] {k} = {ini.get('gptj', k, fallback=None)}, expected {v}")
    # inspect: one file of a shard, the arrays in np.load's order with their shapes.
    r = run_ftx(["inspect", "--json", os.path.join(STEP, "shard_0", "0.npz")])
    if check(r.returncode == 0, f"inspect 0.npz: {r.stderr.strip()}"):
        rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        z = np.load(os.path.join(STEP, "shard_0", "0.npz"))
        want = [(n, list(z[n].shape)) for n in z.files]
        got = [(row.get("name"), row.get("shape")) for row in rows]
        check(got == want, f"inspect 0.npz lists {got}, numpy {want}")
    # fp16 / bf16: FT's float32 values (float16-exact by construction) rounded to the type.
    for dt, torch_dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        out = os.path.join(tmp, dt)
        r = convert(STEP, out, "-g", "2", "-t", dt)
        if not check(r.returncode == 0, f"convert -t {dt}: {r.stderr.strip()}"):
            continue
        ft, got = os.path.join(FIX, "ft", "2-gpu"), os.path.join(out, "2-gpu")
        bad = []
        for name in ft_files(ft):
            want = torch.from_numpy(np.fromfile(os.path.join(ft, name), dtype=np.float32)).to(torch_dt)
            want = want.view(torch.int16).numpy().tobytes()
            if open(os.path.join(got, name), "rb").read() != want:
                bad.append(name)
        check(not bad, f"-t {dt}: {bad} differ from FT's values rounded to {dt}")
        print(f"-t {dt} -g 2: every file equals FT's float32 values rounded to {dt}")


def greedy_hf(model, prompt, n):
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq])).logits[0, -1]
            seq.append(int(torch.argmax(logits)))
    return seq[len(prompt):]


def greedy_ftx(folder, prompts, n, tmp, tp):
    req = os.path.join(tmp, "req.jsonl")
    with open(req, "w") as f:
        f.writelines(json.dumps({"ids": p, "max_new_tokens": n}) + "\n" for p in prompts)
    r = run_ftx(["generate", "-m", folder, "--prompts", req, "--output", "-", "--max-new-tokens", str(n)] +
                (["--threads", "1"] if tp > 1 else []), mpi=tp if tp > 1 else 0)
    if not check(r.returncode == 0, f"generate TP {tp}: {r.stderr.strip()[-600:]}"):
        return None
    return [json.loads(line)["output_ids"] for line in r.stdout.splitlines() if line.startswith("{")]


def test_decode(tmp):
    model = hf_model(to_hf(load_slim(STEP)))
    prompts = [[1, 2, 3], [40, 7, 7, 19, 63], [5]]
    want = [greedy_hf(model, p, 8) for p in prompts]
    for tp in (1, 2):
        out = os.path.join(tmp, f"tp{tp}")
        r = convert(STEP, out, "-g", str(tp))
        if not check(r.returncode == 0, f"convert -g {tp}: {r.stderr.strip()}"):
            continue
        got = greedy_ftx(os.path.join(out, f"{tp}-gpu"), prompts, 8, tmp, tp)
        if got is not None and check(got == want, f"TP {tp}: ftx's greedy tokens {got}, transformers' float64 {want}"):
            print(f"TP {tp}: greedy tokens of {len(prompts)} prompts equal transformers' float64 GPTJForCausalLM")


def test_differ(tmp):
    shards = load_slim(STEP)
    rng = np.random.default_rng(7)
    b0, e = 2, 2 + 10 * L  # layer "0" at position 0; the projection's arrays at e
    for s in range(S):
        shards[s][0] = rng.integers(-127, 128, D) / 1024            # embedding bias, per shard
        shards[s][b0 + 6] = rng.integers(-127, 128, D) / 1024       # linear_5/b (fc_out bias), per shard
        if s > 0:  # ln_1 and ln_f of shards 1..7: equal to each other, off their initial values
            shards[s][b0 + 9] = np.full(D, 0.5)
            shards[s][e + 2] = np.full(D, 0.25)
    step = os.path.join(tmp, "step_1")
    write_slim(step, shards)
    out = os.path.join(tmp, "out")
    r = convert(step, out)
    if not check(r.returncode == 0, f"convert: {r.stderr.strip()}"):
        return
    sd = to_hf(load_slim(step))
    got = lambda n: np.fromfile(os.path.join(out, "1-gpu", n + ".bin"), dtype=np.float32)  # noqa: E731
    f32 = lambda t: t.numpy().astype(np.float32).reshape(-1)  # noqa: E731
    cases = [("model.wte", "transformer.wte.weight", "embedding + the 8 shards' biases summed"),
             ("model.layers.0.mlp.dense_4h_to_h.bias", "transformer.h.0.mlp.fc_out.bias", "fc_out bias summed"),
             ("model.layers.0.input_layernorm.weight", "transformer.h.0.ln_1.weight", "shard 0's ln_1"),
             ("model.final_layernorm.bias", "transformer.ln_f.bias", "shard 0's ln_f")]
    for ft_name, hf_name, what in cases:
        check(np.array_equal(got(ft_name), f32(sd[hf_name])), f"{ft_name}: not to_hf_weights.py's {what}")
    print("biases that differ per shard summed, layer norms shard 0's: as to_hf_weights.py (FT's converter "
          "raises on the first, multiplies the second by 8)")


def test_errors(tmp):
    def case(label, damage, needle, extra=(), shape=SHAPE_FLAGS, src=None):
        step = os.path.join(tmp, label, "step_7")
        shutil.copytree(STEP, step)
        damage(step)
        out = os.path.join(tmp, label, "out")
        r = convert(src(step) if src else step, out, *extra, shape=shape)
        lines = r.stderr.strip().splitlines()
        ok = check(r.returncode != 0, f"{label}: exit 0")
        ok &= check(len(lines) == 1 and lines[0].startswith("ftx: error: ") and needle in lines[0],
                    f"{label}: stderr {r.stderr.strip()!r} is not one `ftx: error:` line naming {needle!r}")
        ok &= check(not os.path.exists(os.path.join(out, "1-gpu")), f"{label}: left {out}/1-gpu behind")
        if ok:
            print(f"{label}: {lines[0]}")

    def truncate(path):
        data = open(path, "rb").read()
        open(path, "wb").write(data[: len(data) // 2])

    def clobber_magic(path):  # the first member's .npy magic overwritten, the zip intact
        data = bytearray(open(path, "rb").read())
        at = data.index(b"\x93NUMPY")
        data[at:at + 6] = b"NOTNPY"
        open(path, "wb").write(bytes(data))

    def replace(path, index, array):
        z = np.load(path)
        arrays = [z[n] for n in z.files]
        arrays[index] = array
        with open(path, "wb") as f:
            np.savez(f, *arrays)

    def compress(path):
        z = np.load(path)
        arrays = [z[n] for n in z.files]
        with open(path, "wb") as f:
            np.savez_compressed(f, *arrays)

    case("missing_shard", lambda s: shutil.rmtree(os.path.join(s, "shard_5")), "step_7/shard_5: missing")
    case("extra_shard", lambda s: shutil.copytree(os.path.join(s, "shard_0"), os.path.join(s, "shard_8")),
         "step_7/shard_8: is a shard beyond --shards 8")
    case("four_shards", lambda s: None, "step_7/shard_4: is a shard beyond --shards 4", ["--shards", "4"])
    case("missing_file", lambda s: os.remove(os.path.join(s, "shard_3", "7.npz")), "shard_3/7.npz: missing")
    case("missing_first_file", lambda s: os.remove(os.path.join(s, "shard_0", "7.npz")), "shard_0/7.npz: missing")
    case("extra_file", lambda s: shutil.copy(os.path.join(s, "shard_2", "0.npz"), os.path.join(s, "shard_2", "16.npz")),
         "shard_2/16.npz: is beyond shard_0's 0.npz .. 15.npz")
    case("truncated_npz", lambda s: truncate(os.path.join(s, "shard_2", "4.npz")), "shard_2/4.npz")
    case("damaged_member", lambda s: clobber_magic(os.path.join(s, "shard_6", "1.npz")),
         "shard_6/1.npz:arr_0.npy: not a .npy file")
    # 0.npz holds the embedding bias, the embedding and layer 0's first arrays: arr_2 is q [32, 4].
    case("wrong_shape", lambda s: replace(os.path.join(s, "shard_1", "0.npz"), 2, np.zeros((32, 5), np.float32)),
         "shard_1/0.npz:arr_2: layer_0/~/linear/w (q_proj) has shape [32, 5], expected [32, 4]")
    case("compressed", lambda s: compress(os.path.join(s, "shard_4", "9.npz")), "np.savez_compressed")
    case("fewer_arrays", lambda s: [os.remove(os.path.join(s, f"shard_{k}", "15.npz")) for k in range(S)],
         "step_7/shard_0: holds 110 arrays")
    case("integer_weights", lambda s: replace(os.path.join(s, "shard_0", "3.npz"), 0, np.zeros((4, 32), np.int32)),
         "shard_0/3.npz:arr_0")
    case("heads", lambda s: None, "--head-num 3 does not fit d_model 32", shape=["--head-num", "3"])
    case("not_a_folder", lambda s: None, "shard_0/0.npz: is not a folder",
         src=lambda s: os.path.join(s, "shard_0", "0.npz"))
    # The unconverted checkpoint given to a decoder: told what to run.
    r = run_ftx(["generate", "-m", STEP, "--input-ids", os.path.join(tmp, "none.csv"), "--output", "-",
                 "--max-new-tokens", "1"])
    check(r.returncode != 0 and "is a mesh-transformer-jax checkpoint" in r.stderr and
          f"ftx convert-mesh-jax -i {STEP} -o OUT" in r.stderr, f"generate -m STEP: {r.stderr.strip()!r}")


def main():
    mode = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"compat": test_compat, "decode": test_decode, "differ": test_differ, "errors": test_errors}[mode](tmp)
    finish(f"mesh_jax {mode}")


if __name__ == "__main__":
    main()
