#!/usr/bin/python3
"""End-to-end checks of `ftx tokenize` (run by ctest, see tokenize.cmake).

  tokenize_test.py gpt2           LAMBADA + seeded fuzz strings: ids equal the Python reference
                                   (gpt2_bpe_reference.py), and --decode gives every text back
  tokenize_test.py errors         exit codes and messages for bad folders, lines and ids
  tokenize_test.py sentencepiece  models trained here with spm_train: ids equal `spm_encode
                                   --output_format=id`, text equals `spm_decode --input_format=id`,
                                   and both equal transformers' LlamaTokenizer (legacy, no BOS/EOS:
                                   NeMo's SentencePieceTokenizer) where transformers reads the text
                                   alike (no special-token spellings; no unknown piece for decode)

Environment: FTX_BIN, FTX_SOURCE_DIR, FTX_FIXTURES (as ctest sets them).
"""
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts", "fixtures"))
import gpt2_bpe_reference  # noqa: E402

FTX = os.environ["FTX_BIN"]
SRC = os.environ["FTX_SOURCE_DIR"]
WORK = os.path.join(os.environ["FTX_FIXTURES"], "tokenize")
GPT2 = os.path.join(SRC, "data", "gpt2")
LAMBADA = os.path.join(SRC, "data", "lambada", "lambada_test.jsonl")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def require_spm_tools(*tools):
    """Fails unless sentencepiece's command-line tools and Python module are there. scripts/setup
    installs them (Debian's `sentencepiece` and `python3-sentencepiece`): a machine without them
    is set up wrong, and a check that skipped or passed there would hide it."""
    missing = [t for t in tools if not shutil.which(t)]
    try:
        import sentencepiece  # noqa: F401
    except ImportError:
        missing.append("the Python module sentencepiece")
    if missing:
        fail("%s not found: scripts/setup installs them (Debian packages `sentencepiece`, `python3-sentencepiece`)"
             % ", ".join(missing))


def write_jsonl(path, key, values):
    with open(path, "w", encoding="utf-8") as f:
        for v in values:
            f.write(json.dumps({key: v}, ensure_ascii=False) + "\n")


def read_jsonl(path, key):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)[key] for line in f]


def ftx(*args, stdin=None):
    return subprocess.run([FTX, "tokenize", *args], input=stdin, capture_output=True)


def ftx_ok(*args, stdin=None):
    r = ftx(*args, stdin=stdin)
    if r.returncode != 0:
        fail("ftx tokenize %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr.decode(errors="replace")))
    return r


def compare(what, texts, got, expected):
    if len(got) != len(expected):
        fail("%s: %d output lines, expected %d" % (what, len(got), len(expected)))
    bad = [i for i in range(len(expected)) if got[i] != expected[i]]
    for i in bad[:5]:
        print("  line %d: text %r\n    ftx:      %s\n    expected: %s" % (i + 1, texts[i][:200], got[i], expected[i]))
    if bad:
        fail("%s: %d of %d lines differ" % (what, len(bad), len(expected)))
    print("%s: %d lines identical" % (what, len(expected)))


def check_gpt2():
    os.makedirs(WORK, exist_ok=True)
    lambada = read_jsonl(LAMBADA, "text")
    fuzz = gpt2_bpe_reference.fuzz_strings(seed=20240601, count=500)
    texts = lambada + fuzz
    texts_path = os.path.join(WORK, "gpt2_texts.jsonl")
    ids_path = os.path.join(WORK, "gpt2_ids.jsonl")
    back_path = os.path.join(WORK, "gpt2_decoded.jsonl")
    write_jsonl(texts_path, "text", texts)

    ref = gpt2_bpe_reference.Encoder(GPT2)
    expected = [ref.encode(t) for t in texts]
    if sum(len(e) for e in expected[: len(lambada)]) != 430230:
        fail("reference gives %d LAMBADA tokens, data/lambada/SOURCE.md says 430230"
             % sum(len(e) for e in expected[: len(lambada)]))

    ftx_ok("--tokenizer", GPT2, "--input", texts_path, "--output", ids_path, "--force", "--quiet")
    got = read_jsonl(ids_path, "ids")
    compare("encode LAMBADA (5153 texts)", texts, got[: len(lambada)], expected[: len(lambada)])
    compare("encode fuzz (500 strings)", fuzz, got[len(lambada):], expected[len(lambada):])

    ftx_ok("--tokenizer", GPT2, "--decode", "--input", ids_path, "--output", back_path, "--force", "--quiet")
    compare("decode round trip", texts, read_jsonl(back_path, "text"), texts)

    # Standard input and output, and the summary line on stderr.
    sample = "".join(json.dumps({"text": t}) + "\n" for t in texts[:50]).encode()
    r = ftx_ok("--tokenizer", GPT2, stdin=sample)
    got = [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()]
    compare("encode via stdin/stdout", texts[:50], got, expected[:50])
    if b"50 lines" not in r.stderr:
        fail("no summary line on stderr: %r" % r.stderr)


def expect_error(what, args, stdin, code, *needles):
    r = ftx(*args, stdin=stdin)
    err = r.stderr.decode(errors="replace")
    if (r.returncode != code) if code is not None else r.returncode in (0, 1):
        fail("%s: exit code %d, expected %d (stderr: %s)" % (what, r.returncode, code, err))
    for n in needles:
        if n not in err:
            fail("%s: stderr %r does not contain %r" % (what, err, n))
    if code == 1 and (not err.startswith("ftx: error: ") or err.count("\n") != 1):
        fail("%s: expected one 'ftx: error:' line, got %r" % (what, err))
    print("%s: exit %d, %s" % (what, r.returncode, err.strip()))


def check_errors():
    os.makedirs(WORK, exist_ok=True)
    missing = os.path.join(WORK, "no_such_folder")
    expect_error("missing folder", ["--tokenizer", missing], b"", 1, missing, "no such tokenizer folder")
    empty = os.path.join(WORK, "empty_folder")
    os.makedirs(empty, exist_ok=True)
    expect_error("empty folder", ["--tokenizer", empty], b"", 1, empty, "vocab.json + merges.txt", "tokenizer.model")

    bad = os.path.join(WORK, "malformed.jsonl")
    with open(bad, "w") as f:
        f.write('{"text": "fine"}\n{"text": "also fine"}\n{"text": "broken\n{"text": "never read"}\n')
    out = os.path.join(WORK, "malformed_out.jsonl")
    if os.path.exists(out):
        os.remove(out)
    expect_error("malformed JSON line", ["--tokenizer", GPT2, "--input", bad, "--output", out], b"", 1,
                 bad + ": line 3: not valid JSON")
    if os.path.exists(out) or os.path.exists(out + ".tmp"):
        fail("a failed run left %s behind" % out)
    expect_error("malformed line on stdin", ["--tokenizer", GPT2], b'{"text": "a"}\nhello\n', 1,
                 "<stdin>: line 2: not a JSON line")
    expect_error("wrong key", ["--tokenizer", GPT2], b'{"ids": [1]}\n', 1, "line 1: expected an object like")
    expect_error("id out of range", ["--tokenizer", GPT2, "--decode"], b'{"ids": [1]}\n{"ids": [464, 50257]}\n', 1,
                 "line 2", "token id 50257")
    expect_error("negative id", ["--tokenizer", GPT2, "--decode"], b'{"ids": [-1]}\n', 1, "token id -1")
    # A usage error: CLI11's exit code (cmd/main.cc decides it), anything but 0 and 1.
    expect_error("no --tokenizer", [], b"", None, "--tokenizer")
    expect_error("missing input file", ["--tokenizer", GPT2, "--input", missing + ".jsonl"], b"", 1,
                 missing + ".jsonl")


def compare_with_llama_tokenizer(name, model, texts, got_ids, got_text):
    """NeMo's SentencePieceTokenizer is sentencepiece's encode/decode with no ids added; in
    transformers that is LlamaTokenizer with legacy=True and neither BOS nor EOS. Texts holding a
    special token's spelling ("<s>", "</s>", "<unk>") are left out: transformers cuts those out of
    the text as special tokens, where NeMo and ftx tokenize the raw text."""
    import transformers
    tok = transformers.LlamaTokenizer(vocab_file=model, legacy=True, add_bos_token=False, add_eos_token=False)
    rows = [i for i, t in enumerate(texts) if not any(s in t for s in tok.all_special_tokens)]
    want = [tok(texts[i], add_special_tokens=False)["input_ids"] for i in rows]
    what = "sentencepiece %s vs transformers %s LlamaTokenizer(legacy)" % (name, transformers.__version__)
    compare(what + " encode", [texts[i] for i in rows], [got_ids[i] for i in rows], want)
    # Decoding where no piece is unknown (transformers writes "<unk>", sentencepiece " \u2047 ").
    rows = [i for i, w in zip(rows, want) if tok.unk_token_id not in w]
    compare(what + " decode", [texts[i] for i in rows], [got_text[i] for i in rows],
            [tok.decode(got_ids[i]) for i in rows])


def check_sentencepiece():
    require_spm_tools("spm_train", "spm_encode", "spm_decode")
    work = os.path.join(WORK, "spm")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(99)
    lambada = [t.replace("\n", " ") for t in read_jsonl(LAMBADA, "text")]
    corpus = lambada[:3000] + ["Grüße aus Köln, 東京と大阪, Привет мир, γειά σου, 123 456 7890" for _ in range(20)]
    corpus_path = os.path.join(work, "corpus.txt")
    with open(corpus_path, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus) + "\n")
    # Held-out texts, plus characters the models never saw (unknown pieces / byte fallback).
    extra = ["Grüße 東京 ∑ 😀 tab\there", "  leading and trailing  ", "x", "ÀÉÎÕÜ ﬁ ① ｆｕｌｌ", "<unk> <s> </s>"]
    texts = lambada[4000:4300] + extra + [
        "".join(rng.choice("abc xyz,.'ÄÖ東😀") for _ in range(rng.randint(1, 40))) for _ in range(50)]

    # Two kinds: unigram (SentencePiece's default) and BPE with byte fallback (as NeMo GPT-Next).
    models = {
        "unigram": ["--model_type=unigram", "--vocab_size=800"],
        "bpe_byte_fallback": ["--model_type=bpe", "--vocab_size=1000", "--byte_fallback=true"],
    }
    for name, opts in models.items():
        folder = os.path.join(work, name)
        os.makedirs(folder, exist_ok=True)
        subprocess.run(["spm_train", "--input=" + corpus_path, "--model_prefix=" + os.path.join(folder, "tokenizer"),
                        "--character_coverage=0.9995", "--num_threads=1", "--minloglevel=2", *opts],
                       check=True, capture_output=True)
        lines_path = os.path.join(work, name + "_lines.txt")
        with open(lines_path, "w", encoding="utf-8") as f:
            f.write("\n".join(texts) + "\n")
        model = os.path.join(folder, "tokenizer.model")
        r = subprocess.run(["spm_encode", "--model=" + model, "--output_format=id", "--input=" + lines_path],
                           check=True, capture_output=True)
        expected = [[int(x) for x in line.split()] for line in r.stdout.decode().split("\n")[: len(texts)]]

        texts_path = os.path.join(work, name + "_texts.jsonl")
        ids_path = os.path.join(work, name + "_ids.jsonl")
        back_path = os.path.join(work, name + "_decoded.jsonl")
        write_jsonl(texts_path, "text", texts)
        ftx_ok("--tokenizer", folder, "--input", texts_path, "--output", ids_path, "--force", "--quiet")
        compare("sentencepiece %s encode vs spm_encode" % name, texts, read_jsonl(ids_path, "ids"), expected)

        ids_txt = os.path.join(work, name + "_ids.txt")
        with open(ids_txt, "w") as f:
            f.write("\n".join(" ".join(map(str, e)) for e in expected) + "\n")
        r = subprocess.run(["spm_decode", "--model=" + model, "--input_format=id", "--input=" + ids_txt],
                           check=True, capture_output=True)
        expected_text = r.stdout.decode("utf-8").split("\n")[: len(texts)]
        ftx_ok("--tokenizer", folder, "--decode", "--input", ids_path, "--output", back_path, "--force", "--quiet")
        compare("sentencepiece %s decode vs spm_decode" % name, texts, read_jsonl(back_path, "text"), expected_text)

        compare_with_llama_tokenizer(name, model, texts, read_jsonl(ids_path, "ids"), read_jsonl(back_path, "text"))

        # A NeMo-style prefixed name is found too, and ids past the vocabulary are an error.
        nemo = os.path.join(work, name + "_nemo")
        os.makedirs(nemo, exist_ok=True)
        shutil.copy(model, os.path.join(nemo, "a1b2c3_tokenizer.model"))
        r = ftx_ok("--tokenizer", nemo, "--input", texts_path, "--quiet")
        if [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] != expected:
            fail("prefixed model name gives different ids")
        expect_error("sentencepiece id out of range", ["--tokenizer", folder, "--decode"], b'{"ids": [5, 100000]}\n',
                     1, "token id 100000")

        # A tokenizer.json of a kind ftx does not read beside the model: tokenizer.model's ids (spm's),
        # with one warning that names the json file and the model file it reads instead.
        both = os.path.join(work, name + "_unigram_json")
        os.makedirs(both, exist_ok=True)
        shutil.copy(model, os.path.join(both, "tokenizer.model"))
        with open(os.path.join(both, "tokenizer.json"), "w") as f:
            json.dump({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}, f)
        r = ftx_ok("--tokenizer", both, "--input", texts_path, "--quiet")
        if [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] != expected:
            fail("tokenizer.model beside an unread tokenizer.json gives other ids than spm_encode")
        warn = [line for line in r.stderr.decode().splitlines() if line.startswith("ftx: warning: ")]
        if len(warn) != 1 or os.path.join(both, "tokenizer.json") not in warn[0] or \
                "reading " + os.path.join(both, "tokenizer.model") + " instead" not in warn[0]:
            fail("no single warning naming tokenizer.json and tokenizer.model: %r" % r.stderr.decode())


if __name__ == "__main__":
    {"gpt2": check_gpt2, "errors": check_errors, "sentencepiece": check_sentencepiece}[sys.argv[1]]()
    print("OK")
