"""bench/cpu-peers' worker, run by the cpu-peers venv's python (scripts/pyenv cpu-peers): makes the
HF model and the peers' files from it, and times CTranslate2 and llama.cpp, one engine and
precision per process (each engine's thread pools and memory start fresh, as ftx's do).

  peer_engines.py make-hf OUT SHAPE.json           a random model of that shape (fixed seed), save_pretrained: GPT-2
                                                   ({"arch": "gpt2", "layers", "hidden"}) or Llama ({"arch": "llama",
                                                   "layers", "hidden", "heads", "kv_heads", "ffn", "vocab"}, tied head)
  peer_engines.py ct2-convert HF OUT               ct2-transformers-converter's converter (float32 weights; the compute
                                                   type is chosen at load, as CT2 users do)
  peer_engines.py gguf HF OUT TYPE                 a GGUF (f32, f16, bf16, q8_0) with the gguf package; q4_0 and
                                                   q4_k_m: the f32 GGUF requantised by llama.cpp's own quantiser
                                                   (llama_model_quantize, as its llama-quantize tool does)
  peer_engines.py gguf-bytes GGUF                  the bytes of its layer matrices and of the matrix the output
                                                   reads (output.weight, else the tied token_embd), as JSON
  peer_engines.py ct2|llama MODEL TYPE TASK.json   timings, printed as one JSON line
  peer_engines.py ct2-batch MODEL TYPE JOB.json    bench/batch-job's requests through one generate_batch; each
                                                   request's token arrival times, as one JSON line
  peer_engines.py versions                         each engine's version, as JSON

TASK.json: {"threads": 2, "repeat": 3, "vocab": 50257, "check": [ids], "check_new": 8,
            "decode": {"1": [[ids], ...], "8": ...}, "new": 32, "prefill": {"64": [ids], "512": [ids]}}
Result: {"check_ids": [...], "decode_ms": {"1": [ms per step, one per repeat]}, "prefill_ms": {"64": [...]}, "isa": "..."}
The decode time per step is (time for `new` tokens - time for 1 token) / (new - 1): the prompt and
the first token (prefill) are left out. Prefill is the time from the prompt to the first token's logits.
"""
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2_DATA = os.path.join(ROOT, "data", "gpt2")
VOCAB = 50257


def gpt2_tokenizer(vocab_size):
    """GPT-2's own tokenizer, with numbered added tokens up to `vocab_size` when the model's vocabulary
    is larger (the Llama shape): CTranslate2 takes its vocabulary from the tokenizer, and llama.cpp's
    BPE loader needs GPT-2's byte tokens."""
    import transformers
    tok = transformers.GPT2TokenizerFast(vocab_file=os.path.join(GPT2_DATA, "vocab.json"),
                                         merges_file=os.path.join(GPT2_DATA, "merges.txt"))
    if vocab_size > len(tok):
        tok.add_tokens([f"<t{i}>" for i in range(len(tok), vocab_size)])
    return tok


def make_hf(out, shape):
    import torch
    import transformers
    torch.manual_seed(0)
    if shape["arch"] == "gpt2":
        H = shape["hidden"]
        cfg = transformers.GPT2Config(n_layer=shape["layers"], n_embd=H, n_head=H // 64, n_positions=1024,
                                      vocab_size=VOCAB, bos_token_id=50256, eos_token_id=50256)
    else:
        # Llama 3.2's shape and rope base; no rope scaling (which changes no cost: a table computed once).
        cfg = transformers.LlamaConfig(num_hidden_layers=shape["layers"], hidden_size=shape["hidden"],
                                       num_attention_heads=shape["heads"], num_key_value_heads=shape["kv_heads"],
                                       intermediate_size=shape["ffn"], vocab_size=shape["vocab"],
                                       max_position_embeddings=2048, rope_theta=500000.0, rms_norm_eps=1e-5,
                                       tie_word_embeddings=True, bos_token_id=50256, eos_token_id=50256)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(out, safe_serialization=True, max_shard_size="64GB")  # one model.safetensors
    gpt2_tokenizer(cfg.vocab_size).save_pretrained(out)


def ct2_convert(hf, out):
    """ct2-transformers-converter's own converter class, called from Python for one change: CTranslate2
    4.8 passes transformers 5's `dtype` to from_pretrained, which transformers 4.46 (the last to run on
    Debian's torch 1.13) calls `torch_dtype`."""
    from ctranslate2.converters import TransformersConverter

    class Converter(TransformersConverter):
        def load_model(self, model_class, model_name_or_path, **kwargs):
            if "dtype" in kwargs:
                kwargs["torch_dtype"] = kwargs.pop("dtype")
            return model_class.from_pretrained(model_name_or_path, **kwargs)

    Converter(hf).convert(out, force=True)


LLAMA_FTYPES = {"q4_0": 2, "q4_k_m": 15}  # llama.h's LLAMA_FTYPE_MOSTLY_Q4_0, LLAMA_FTYPE_MOSTLY_Q4_K_M


def quantize_gguf(hf, out, kind):
    """llama.cpp's 4-bit files as its users make them: an f32 GGUF requantised by llama_model_quantize
    (its own choice of types per tensor: q4_k_m mixes Q4_K and Q6_K; both put the output matrix in Q6_K)."""
    import ctypes
    import llama_cpp
    f32 = out + ".f32"
    write_gguf(hf, f32, "f32")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = LLAMA_FTYPES[kind]
    params.nthread = int(os.environ.get("OMP_NUM_THREADS", "2"))
    rc = llama_cpp.llama_model_quantize(f32.encode(), out.encode(), ctypes.byref(params))
    os.remove(f32)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize {kind}: {rc}")


def gguf_bytes(path):
    import gguf
    r = gguf.GGUFReader(path)
    layers = head = 0
    names = {t.name for t in r.tensors}
    head_name = "output.weight" if "output.weight" in names else "token_embd.weight"
    for t in r.tensors:
        if t.name.startswith("blk.") and t.name.endswith(".weight") and len(t.shape) == 2 and t.shape[1] > 1:
            layers += int(t.n_bytes)
        elif t.name == head_name:
            head = int(t.n_bytes)
    return {"layer_bytes": layers, "head_bytes": head}


def write_gguf(hf, out, kind):
    """A GGUF of llama.cpp's gpt2 or llama architecture from the HF safetensors: the same tensors under
    GGUF names (GPT-2's Conv1D matrices, [in, out] in HF, transposed to [out, in]; Llama's Q and K rows
    reordered from transformers' rotate-half pairing to llama.cpp's interleaved one, as its
    convert_hf_to_gguf.py does); 2-D weight matrices (and the tied token embedding, which llama.cpp also
    uses as the output matrix) in `kind`, the rest f32."""
    import gguf
    from safetensors.numpy import load_file
    cfg = json.load(open(os.path.join(hf, "config.json")))
    w = load_file(os.path.join(hf, "model.safetensors"))
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "bf16": gguf.GGMLQuantizationType.BF16, "q8_0": gguf.GGMLQuantizationType.Q8_0}[kind]
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[kind]
    llama = cfg["model_type"] == "llama"
    wr = gguf.GGUFWriter(out, "llama" if llama else "gpt2")
    wr.add_name("bench-" + cfg["model_type"])
    if llama:
        H, L, heads, kv = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], \
            cfg["num_key_value_heads"]
        wr.add_context_length(cfg["max_position_embeddings"])
        wr.add_embedding_length(H)
        wr.add_feed_forward_length(cfg["intermediate_size"])
        wr.add_block_count(L)
        wr.add_head_count(heads)
        wr.add_head_count_kv(kv)
        wr.add_rope_dimension_count(H // heads)
        wr.add_rope_freq_base(cfg["rope_theta"])
        wr.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        wr.add_vocab_size(cfg["vocab_size"])
    else:
        H, L = cfg["n_embd"], cfg["n_layer"]
        wr.add_context_length(cfg["n_positions"])
        wr.add_embedding_length(H)
        wr.add_feed_forward_length(4 * H)
        wr.add_block_count(L)
        wr.add_head_count(cfg["n_head"])
        wr.add_layer_norm_eps(cfg["layer_norm_epsilon"])
    wr.add_file_type(ftype)
    tok = json.load(open(os.path.join(hf, "tokenizer.json")))
    vocab = dict(tok["model"]["vocab"])
    vocab.update({t["content"]: t["id"] for t in tok.get("added_tokens", [])})
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    assert len(tokens) == cfg["vocab_size"], (len(tokens), cfg["vocab_size"])
    merges = [l.rstrip("\n") for l in open(os.path.join(GPT2_DATA, "merges.txt"), encoding="utf-8")
              if l.strip() and not l.startswith("#version")]
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("gpt-2")
    wr.add_token_list(tokens)
    wr.add_token_types([gguf.TokenType.NORMAL] * len(tokens))
    wr.add_token_merges(merges)
    wr.add_bos_token_id(50256)
    wr.add_eos_token_id(50256)

    def put(name, arr, matrix=False):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if not matrix or qtype == gguf.GGMLQuantizationType.F32:
            wr.add_tensor(name, arr)
        elif qtype == gguf.GGMLQuantizationType.F16:
            wr.add_tensor(name, arr.astype(np.float16))
        else:
            wr.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)

    if llama:
        def interleave(m, n_head):  # rows of each head: (first half, second half) pairs -> adjacent pairs
            return m.reshape(n_head, 2, m.shape[0] // n_head // 2, *m.shape[1:]).swapaxes(1, 2).reshape(m.shape)
        put("token_embd.weight", w["model.embed_tokens.weight"], matrix=True)
        put("output_norm.weight", w["model.norm.weight"])
        for l in range(L):
            p = f"model.layers.{l}."
            put(f"blk.{l}.attn_norm.weight", w[p + "input_layernorm.weight"])
            put(f"blk.{l}.attn_q.weight", interleave(w[p + "self_attn.q_proj.weight"], heads), matrix=True)
            put(f"blk.{l}.attn_k.weight", interleave(w[p + "self_attn.k_proj.weight"], kv), matrix=True)
            put(f"blk.{l}.attn_v.weight", w[p + "self_attn.v_proj.weight"], matrix=True)
            put(f"blk.{l}.attn_output.weight", w[p + "self_attn.o_proj.weight"], matrix=True)
            put(f"blk.{l}.ffn_norm.weight", w[p + "post_attention_layernorm.weight"])
            for hf_name, gg in (("gate_proj", "ffn_gate"), ("up_proj", "ffn_up"), ("down_proj", "ffn_down")):
                put(f"blk.{l}.{gg}.weight", w[p + "mlp." + hf_name + ".weight"], matrix=True)
    else:
        p = "transformer." if "transformer.wte.weight" in w else ""
        put("token_embd.weight", w[p + "wte.weight"], matrix=True)
        put("position_embd.weight", w[p + "wpe.weight"])
        put("output_norm.weight", w[p + "ln_f.weight"])
        put("output_norm.bias", w[p + "ln_f.bias"])
        names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm",
                 "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
        for l in range(L):
            for hf_name, gg in names.items():
                src = f"{p}h.{l}.{hf_name}"
                conv1d = not hf_name.startswith("ln")
                put(f"blk.{l}.{gg}.weight", w[src + ".weight"].T if conv1d else w[src + ".weight"], matrix=conv1d)
                put(f"blk.{l}.{gg}.bias", w[src + ".bias"])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def versions():
    import importlib.metadata as md
    out = {}
    for pkg in ("ctranslate2", "llama-cpp-python", "gguf", "transformers"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    try:
        import llama_cpp
        out["llama.cpp system info"] = llama_cpp.llama_print_system_info().decode().strip()
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        out["llama.cpp system info"] = f"unavailable: {e}"
    return out


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def run_ct2(model, compute_type, task):
    import ctranslate2
    gen = ctranslate2.Generator(model, device="cpu", compute_type=compute_type, intra_threads=task["threads"],
                                inter_threads=1)
    vocab_path = os.path.join(model, "vocabulary.json")
    if os.path.exists(vocab_path):
        vocab = json.load(open(vocab_path))
    else:
        vocab = [l.rstrip("\n") for l in open(os.path.join(model, "vocabulary.txt"), encoding="utf-8")]

    def toks(ids):
        return [vocab[i] for i in ids]

    def generate(prompts, n):
        return gen.generate_batch([toks(p) for p in prompts], max_length=n, min_length=n, beam_size=1,
                                  sampling_topk=1, include_prompt_in_result=False)

    res = {"check_ids": generate([task["check"]], task["check_new"])[0].sequences_ids[0],
           "decode_ms": {}, "prefill_ms": {}}
    for b, prompts in task["decode"].items():
        generate(prompts, 2)  # warm-up
        res["decode_ms"][b] = []
        for _ in range(task["repeat"]):
            t1, _ = timed(lambda: generate(prompts, 1))
            tn, _ = timed(lambda: generate(prompts, task["new"]))
            res["decode_ms"][b].append((tn - t1) / (task["new"] - 1) * 1e3)
    for n, ids in task["prefill"].items():
        generate([ids], 1)
        res["prefill_ms"][n] = [timed(lambda: generate([ids], 1))[0] * 1e3 for _ in range(task["repeat"])]
    return res


def run_ct2_batch(model, compute_type, job):
    """JOB.json: {"threads", "max_batch_size", "prompts": [[ids]], "outputs": [n]}. The requests go to
    one generate_batch in their order; CTranslate2 sorts them by prompt length and runs chunks of
    max_batch_size one after the other, each chunk's rows leaving it as they finish. Greedy, no end
    token (end_token=[]): a request stops when its callback has seen its output length (the callback
    returns True), so each makes exactly its tokens. Result: {"start": perf_counter at the call,
    "end": at its return, "tokens": [[perf_counter of each token] per request], "made": [tokens of
    each result], "peak_rss_bytes": this process's}."""
    import ctranslate2
    gen = ctranslate2.Generator(model, device="cpu", compute_type=compute_type, intra_threads=job["threads"],
                                inter_threads=1)
    vocab_path = os.path.join(model, "vocabulary.json")
    vocab = json.load(open(vocab_path)) if os.path.exists(vocab_path) else \
        [l.rstrip("\n") for l in open(os.path.join(model, "vocabulary.txt"), encoding="utf-8")]
    prompts = [[vocab[i] for i in p] for p in job["prompts"]]
    outputs = job["outputs"]
    times = [[] for _ in prompts]

    def on_token(step):
        t = times[step.batch_id]
        t.append(time.perf_counter())
        return len(t) >= outputs[step.batch_id]

    start = time.perf_counter()
    res = gen.generate_batch(prompts, max_batch_size=job["max_batch_size"], beam_size=1, sampling_topk=1,
                             max_length=max(outputs), end_token=[], include_prompt_in_result=False, callback=on_token)
    end = time.perf_counter()
    import resource
    return {"start": start, "end": end, "tokens": times, "made": [len(r.sequences_ids[0]) for r in res],
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def run_llama(model, task):
    import ctypes
    import llama_cpp as ll
    ll.llama_backend_init()
    mp = ll.llama_model_default_params()
    mdl = ll.llama_model_load_from_file(model.encode(), mp)
    if not mdl:
        raise SystemExit(f"llama.cpp cannot load {model}")
    max_batch = max(int(b) for b in task["decode"]) if task["decode"] else 1
    longest = max([len(v) for v in task["prefill"].values()] + [len(task["check"]) + task["check_new"]])
    per_seq = max(longest, max((len(p[0]) for p in task["decode"].values()), default=0) + task["new"]) + 8

    def context(n_seq):
        cp = ll.llama_context_default_params()
        cp.n_ctx = per_seq * n_seq
        cp.n_batch = cp.n_ubatch = 512
        cp.n_seq_max = n_seq
        cp.n_threads = cp.n_threads_batch = task["threads"]
        ctx = ll.llama_init_from_model(mdl, cp)
        if not ctx:
            raise SystemExit(f"llama.cpp: no context of {cp.n_ctx} for {n_seq} sequences")
        return ctx

    batch = ll.llama_batch_init(max(512, max_batch), 0, max_batch)

    def decode(ctx, items):
        """One llama_decode of items (token, pos, seq), logits for every item (<= 512 items)."""
        batch.n_tokens = len(items)
        for i, (tok, pos, seq) in enumerate(items):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = tok, pos, 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = True
        if ll.llama_decode(ctx, batch) != 0:
            raise SystemExit("llama_decode failed")

    def argmax(ctx, i):
        p = ll.llama_get_logits_ith(ctx, i)
        return int(np.argmax(np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)),
                                                   shape=(task["vocab"],))))

    def clear(ctx):
        ll.llama_memory_clear(ll.llama_get_memory(ctx), True)

    def prefill_then_steps(ctx, prompts, steps):
        """Prompts (one sequence each) at once, then `steps` greedy steps of one token per sequence.
        Returns (seconds of the steps, new ids per sequence)."""
        clear(ctx)
        items = [(t, p, s) for s, pr in enumerate(prompts) for p, t in enumerate(pr)]
        # one logits row per sequence: each prompt's last token
        batch_logits = {}
        for c0 in range(0, len(items), 512):
            chunk = items[c0:c0 + 512]
            batch.n_tokens = len(chunk)
            for i, (tok, pos, seq) in enumerate(chunk):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = tok, pos, 1
                batch.seq_id[i][0] = seq
                last = pos == len(prompts[seq]) - 1
                batch.logits[i] = last
                if last:
                    batch_logits[seq] = i
            if ll.llama_decode(ctx, batch) != 0:
                raise SystemExit("llama_decode failed")
            for seq, i in list(batch_logits.items()):
                if isinstance(i, int):
                    batch_logits[seq] = ("id", argmax(ctx, i))
        nxt = [batch_logits[s][1] for s in range(len(prompts))]
        out = [[t] for t in nxt]
        t0 = time.perf_counter()
        for step in range(steps):
            decode(ctx, [(nxt[s], len(prompts[s]) + step, s) for s in range(len(prompts))])
            nxt = [argmax(ctx, s) for s in range(len(prompts))]
            for s in range(len(prompts)):
                out[s].append(nxt[s])
        return time.perf_counter() - t0, out

    res = {"decode_ms": {}, "prefill_ms": {}, "isa": ll.llama_print_system_info().decode().strip()}
    ctx1 = context(1)
    res["check_ids"] = prefill_then_steps(ctx1, [task["check"]], task["check_new"] - 1)[1][0]
    for n, ids in task["prefill"].items():
        prefill_then_steps(ctx1, [ids], 0)  # warm-up
        res["prefill_ms"][n] = [timed(lambda: prefill_then_steps(ctx1, [ids], 0))[0] * 1e3
                                for _ in range(task["repeat"])]
    ll.llama_free(ctx1)
    for b, prompts in task["decode"].items():
        ctx = context(len(prompts))
        prefill_then_steps(ctx, prompts, 2)
        res["decode_ms"][b] = [prefill_then_steps(ctx, prompts, task["new"] - 1)[0] / (task["new"] - 1) * 1e3
                               for _ in range(task["repeat"])]
        ll.llama_free(ctx)
    ll.llama_batch_free(batch)
    ll.llama_model_free(mdl)
    return res


def main():
    cmd = sys.argv[1]
    if cmd == "make-hf":
        make_hf(sys.argv[2], json.loads(sys.argv[3]))
    elif cmd == "ct2-convert":
        ct2_convert(sys.argv[2], sys.argv[3])
    elif cmd == "gguf":
        (quantize_gguf if sys.argv[4] in LLAMA_FTYPES else write_gguf)(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "gguf-bytes":
        print(json.dumps(gguf_bytes(sys.argv[2])))
    elif cmd == "versions":
        print(json.dumps(versions()))
    elif cmd == "ct2-batch":
        print(json.dumps(run_ct2_batch(sys.argv[2], sys.argv[3], json.load(open(sys.argv[4])))))
    elif cmd in ("ct2", "llama"):
        task = json.load(open(sys.argv[4]))
        res = run_ct2(sys.argv[2], sys.argv[3], task) if cmd == "ct2" else run_llama(sys.argv[2], task)
        print(json.dumps(res))
    else:
        raise SystemExit(f"peer_engines.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
