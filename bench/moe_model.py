"""bench/moe's model maker, run by the hf5 venv's python (scripts/pyenv hf5: transformers 5, which has
Qwen3-MoE): a random mixture-of-experts model of the given shape (fixed seed, bf16), written by
save_pretrained with GPT-2's tokenizer (llama.cpp's converter recognises its pre-tokenizer).

  moe_model.py OUT FAMILY SHAPE.json     FAMILY qwen3_moe (Qwen3MoeForCausalLM) or mixtral
                                         (MixtralForCausalLM at the same MoE dimensions)
SHAPE: {"layers", "hidden", "heads", "kv_heads", "head_dim", "experts", "top_k", "moe_inter", "vocab"}.
"""
import json
import os
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2_DATA = os.path.join(ROOT, "data", "gpt2")


def config(family, s):
    import transformers
    common = dict(vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                  num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"], head_dim=s["head_dim"],
                  num_experts_per_tok=s["top_k"], max_position_embeddings=4096, rms_norm_eps=1e-6,
                  tie_word_embeddings=False, bos_token_id=50256, eos_token_id=50256)
    if family == "qwen3_moe":
        # Every layer sparse (Qwen3-30B-A3B: decoder_sparse_step 1, no mlp_only_layers), renormalised top-k.
        return transformers.Qwen3MoeConfig(num_experts=s["experts"], moe_intermediate_size=s["moe_inter"],
                                           intermediate_size=s["moe_inter"] * s["top_k"], decoder_sparse_step=1,
                                           mlp_only_layers=[], norm_topk_prob=True, **common)
    if family == "mixtral":
        return transformers.MixtralConfig(num_local_experts=s["experts"], intermediate_size=s["moe_inter"], **common)
    raise SystemExit(f"moe_model.py: unknown family {family}")


def main():
    out, family, shape = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = config(family, shape)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.save_pretrained(out, max_shard_size="64GB")
    # Loaded from a folder: transformers 5's constructor given the two files makes an empty vocabulary.
    src = os.path.join(out, "gpt2-tokenizer")
    os.makedirs(src, exist_ok=True)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(GPT2_DATA, name), src)
    tok = transformers.GPT2Tokenizer.from_pretrained(src)
    shutil.rmtree(src)
    if shape["vocab"] > len(tok):
        tok.add_tokens([f"<t{i}>" for i in range(len(tok), shape["vocab"])])
    tok.save_pretrained(out)
    with open(os.path.join(out, "bench-moe.json"), "w") as f:
        json.dump({"family": family, "shape": shape, "transformers": transformers.__version__,
                   "torch": torch.__version__}, f)


if __name__ == "__main__":
    main()
