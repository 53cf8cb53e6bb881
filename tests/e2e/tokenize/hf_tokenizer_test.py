#!/usr/bin/python3
"""End-to-end checks of `ftx tokenize` on HuggingFace tokenizer.json files and XGLM's tokenizer
(run by ctest, see hf_tokenizer.cmake).

  hf_tokenizer_test.py  neox|bloom|prefix   the tokenizer.json fixtures of hf_tokenizer_reference.py:
        ids of all LAMBADA texts + seeded fuzz strings + hand-picked hard strings equal the Python
        reference's and those of HuggingFace `tokenizers` itself (transformers' PreTrainedTokenizerFast
        on the same file), and `--decode` gives the reference's and tokenizers' decoding back
  hf_tokenizer_test.py  trained             byte-level BPE tokenizer.json files trained here by
        `tokenizers` (BpeTrainer, 1000 tokens) with GPT-NeoX's and BLOOM's normalizer, pre-tokenizer
        and decoder: ftx's ids of every LAMBADA text and the fuzz strings equal transformers'
        GPTNeoXTokenizerFast / BloomTokenizerFast, and the decodings equal theirs
  hf_tokenizer_test.py  modern              tokenizer.json files trained here by `tokenizers` with Llama 3's
        and Qwen2's published settings (Split with their regex, then ByteLevel without its regex;
        Llama 3's ignore_merges, Qwen2's NFC), and a SentencePiece BPE model with Llama 2's /
        Mistral's (byte_fallback, split_digits, identity normalization) saved as tokenizer.model:
        ftx's ids of every LAMBADA text, the fuzz strings and texts in other scripts, emoji, digits
        and runs of whitespace equal transformers' PreTrainedTokenizerFast / sentencepiece's, and
        the decodings equal theirs
  hf_tokenizer_test.py  llama               Llama 2-style tokenizer folders made by transformers from a
        SentencePiece model trained here (saved by LlamaTokenizer with legacy false and true; with a
        tokenizer_config.json without `legacy`; and with LlamaTokenizerFast's tokenizer.json beside
        it): K2, special tokens typed in the text give LlamaTokenizer's ids with tokenizer.model
        (and the bare model, as NeMo's, sentencepiece's); K3, a folder with tokenizer.json gives
        AutoTokenizer's (fast) ids and decodings, tokenizer.model named alone LlamaTokenizer's
  hf_tokenizer_test.py  pipelines           I46: the folders of scripts/fixtures/make_tokenizer_pipelines.py
        (Gemma's, Phi-3's, Phi-4-mini's and Qwen3's pipelines on small vocabularies): ftx's ids and
        decodings of texts in other scripts, emoji, white space runs, digits, contractions, unknown
        characters and added tokens in the text equal `tokenizers`' on tokenizer.json, and on Gemma's
        tokenizer.model transformers' GemmaTokenizer's (folder) and sentencepiece's (model alone)
  hf_tokenizer_test.py  xglm                a SentencePiece BPE model trained here with spm_train and
        saved as sentencepiece.bpe.model: ids equal python3-sentencepiece's ids moved to fairseq's
        order as HF XGLMTokenizer defines it (spm 0 -> 3, p -> p + 1), decoding equals
        sentencepiece's decoding, and special / made-up ids decode as documented; and the ids equal
        transformers' XGLMTokenizer's (add_special_tokens=False) on every text without a special
        token's spelling (transformers cuts "<s>", "</s>", "<unk>"... out of the text as special
        tokens; ftx tokenizes raw text, as FT's and sentencepiece's encoders do), the decodings on
        those without an unknown piece (transformers decodes id 3 as "<unk>", ftx as sentencepiece)

Run by the pinned test venv (scripts/pyenv test: transformers, tokenizers).

Environment: FTX_BIN, FTX_SOURCE_DIR, FTX_FIXTURES (as ctest sets them).
"""
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts", "fixtures"))
import gpt2_bpe_reference  # noqa: E402  (its fuzz strings)
import hf_tokenizer_reference as ref  # noqa: E402

FTX = os.environ["FTX_BIN"]
SRC = os.environ["FTX_SOURCE_DIR"]
# One folder per check: ctest runs the checks in parallel, and each writes the shared fixtures.
WORK = os.path.join(os.environ["FTX_FIXTURES"], "tokenize_hf", sys.argv[1] if len(sys.argv) > 1 else "")
LAMBADA = os.path.join(SRC, "data", "lambada", "lambada_test.jsonl")


from tokenize_test import fail, read_jsonl, require_spm_tools, write_jsonl  # noqa: E402  (shared helpers)


def ftx_ok(*args, stdin=None):
    r = subprocess.run([FTX, "tokenize", *args], input=stdin, capture_output=True)
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


def encode_decode(name, folder, texts, expected_ids, expected_text):
    """ftx's ids and decodings of `texts`, compared with the expected ones; returns both."""
    texts_path = os.path.join(WORK, name + "_texts.jsonl")
    ids_path = os.path.join(WORK, name + "_ids.jsonl")
    back_path = os.path.join(WORK, name + "_decoded.jsonl")
    write_jsonl(texts_path, "text", texts)
    r = ftx_ok("--tokenizer", folder, "--input", texts_path, "--output", ids_path, "--force")
    print(r.stderr.decode().strip())
    got_ids = read_jsonl(ids_path, "ids")
    compare("%s encode" % name, texts, got_ids, expected_ids)
    ftx_ok("--tokenizer", folder, "--decode", "--input", ids_path, "--output", back_path, "--force", "--quiet")
    got_text = read_jsonl(back_path, "text")
    compare("%s decode" % name, texts, got_text, expected_text)
    return got_ids, got_text


def hf_fast(tokenizer_json, cls="PreTrainedTokenizerFast"):
    """transformers' fast tokenizer class `cls` on a tokenizer.json file."""
    import transformers
    return getattr(transformers, cls)(tokenizer_file=tokenizer_json)


def compare_with_hf(name, tok, texts, got_ids, got_text, decode_if=lambda ids: True):
    """ftx's ids and decodings against a transformers tokenizer's (no special tokens added); the
    decodings of the texts whose ids pass `decode_if`."""
    import transformers
    want = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    compare("%s encode vs transformers %s %s" % (name, transformers.__version__, type(tok).__name__),
            texts, got_ids, want)
    rows = [i for i, w in enumerate(want) if decode_if(w)]
    compare("%s decode vs transformers (%d texts)" % (name, len(rows)), [texts[i] for i in rows],
            [got_text[i] for i in rows], [tok.decode(want[i], clean_up_tokenization_spaces=False) for i in rows])


def check_tokenizer_json(name):
    ref.make_fixtures(os.path.join(SRC, "data", "gpt2"), WORK)
    folder = os.path.join(WORK, name)
    lambada = read_jsonl(LAMBADA, "text")
    fuzz = gpt2_bpe_reference.fuzz_strings(seed=20240923, count=500)
    texts = lambada + fuzz + ref.extra_strings()
    reference = ref.HfBpe(os.path.join(folder, "tokenizer.json"))
    expected = [reference.encode(t) for t in texts]
    decoded = [reference.decode(e).decode("utf-8", "replace") for e in expected]
    print("%s: reference gives %d tokens for the %d LAMBADA texts" %
          (name, sum(len(e) for e in expected[: len(lambada)]), len(lambada)))
    got_ids, got_text = encode_decode("hf_" + name, folder, texts, expected, decoded)
    compare_with_hf("hf_" + name, hf_fast(os.path.join(folder, "tokenizer.json")), texts, got_ids, got_text)
    # The file itself, not its folder, works too.
    r = ftx_ok("--tokenizer", os.path.join(folder, "tokenizer.json"), "--quiet",
               stdin="".join(json.dumps({"text": t}) + "\n" for t in texts[:20]).encode())
    compare("%s via the file's path" % name, texts[:20],
            [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()], expected[:20])


def train_tokenizer_json(style, corpus, path):
    """A byte-level BPE tokenizer.json trained by `tokenizers` in GPT-NeoX's or BLOOM's style."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    if style == "neox":
        specials = ["<|endoftext|>", "<|padding|>"]
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        specials = ["<unk>", "<s>", "</s>", "<pad>"]
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(ref.BLOOM_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok.save(path)


# The Split patterns of Llama 3's and Qwen2's tokenizer.json (Qwen2 takes digits one at a time).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
MODERN_TEXTS = ["Grüße aus Köln, 東京と大阪, Привет мир, مرحبا بالعالم, नमस्ते दुनिया, ελληνικά",
                "😀👍🏽 family 👨\u200d👩\u200d👧 flags 🇫🇷🇩🇪", "12345678901 3.14159 1,000,000 ٣٤٥ ①②",
                "tabs\t\tand\n\n\nnewlines   and    spaces\u00a0nbsp\u2003em \u000b vt \u0085 nel \u3000 ideo",
                "I'M he'S you'RE they'Ll 'd", "   leading and trailing   ", "\r\n\r\nwindows\r\nlines", "x",
                "mixed123abc456 a1b2c3 ... !!! ??? ---", "ﬁ ligature \u00c5 A\u030a (NFC and NFD)"]


def train_modern(style, corpus, path):
    """tokenizer.json trained by `tokenizers` with Llama 3's or Qwen2's published settings."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    pattern = LLAMA3_PATTERN if style == "llama3" else QWEN2_PATTERN
    tok = Tokenizer(models.BPE(ignore_merges=style == "llama3"))
    if style == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = (["<|begin_of_text|>", "<|end_of_text|>"] if style == "llama3"
                else ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok.save(path)


def check_modern():
    lambada = read_jsonl(LAMBADA, "text")
    texts = lambada + gpt2_bpe_reference.fuzz_strings(seed=20251127, count=500) + ref.extra_strings() + MODERN_TEXTS
    for style in ("llama3", "qwen2"):
        folder = os.path.join(WORK, style)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "tokenizer.json")
        train_modern(style, lambada[:2000] + MODERN_TEXTS * 5, path)
        tok = hf_fast(path)
        want = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        print("%s: tokenizers-trained, %d tokens for the %d LAMBADA texts" %
              (style, sum(len(w) for w in want[: len(lambada)]), len(lambada)))
        encode_decode("modern_" + style, folder, texts, want,
                      [tok.decode(w, clean_up_tokenization_spaces=False) for w in want])
    check_llama2_sentencepiece(lambada, texts)


def check_llama2_sentencepiece(lambada, texts):
    """Llama 2's / Mistral's SentencePiece settings: BPE, byte_fallback (unknown characters as
    <0xNN> byte pieces), split_digits, identity normalization, whitespace kept as it is."""
    require_spm_tools("spm_train")
    import sentencepiece as spm
    folder = os.path.join(WORK, "llama2")
    os.makedirs(folder, exist_ok=True)
    corpus_path = os.path.join(WORK, "llama2_corpus.txt")
    with open(corpus_path, "w", encoding="utf-8") as f:
        f.write("\n".join(t.replace("\n", " ") for t in lambada[:2000]) + "\n")
    subprocess.run(["spm_train", "--input=" + corpus_path, "--model_prefix=" + os.path.join(folder, "tokenizer"),
                    "--model_type=bpe", "--vocab_size=800", "--byte_fallback=true", "--split_digits=true",
                    "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
                    "--allow_whitespace_only_pieces=true", "--character_coverage=0.99995", "--num_threads=1",
                    "--unk_id=0", "--bos_id=1", "--eos_id=2", "--pad_id=-1", "--minloglevel=2"],
                   check=True, capture_output=True)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    want = [sp.encode(t) for t in texts]
    if not any(any(sp.id_to_piece(i).startswith("<0x") for i in w) for w in want):
        fail("llama2: no text used a byte-fallback piece; the check would not cover them")
    print("llama2: sentencepiece %s, %d tokens for the %d LAMBADA texts" %
          (spm.__version__, sum(len(w) for w in want[: len(lambada)]), len(lambada)))
    encode_decode("modern_llama2", folder, texts, want, [sp.decode(w) for w in want])


# Texts for Llama 2's / Mistral's tokenizers: special tokens at the start, middle and end, adjacent,
# with spaces on either side, leading spaces and runs of them, "▁" typed in the text, and the
# user trial's kinds of text (unicode, tabs, code).
LLAMA_TEXTS = [
    "<s>[INST] hi [/INST]", "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nhello [/INST] Sure.</s><s>[INST] again [/INST]",
    "<s> literal special </s>", "<s>", "</s>", "<unk>", "<s><s></s>", "<s> </s>", "a</s>b", "a </s> b", "a  </s>  b",
    "</s>  b", "hi <s>", "hi<s>", " <s> ", "  <s>x", "<s>\n x", "\t<s>\t", "<s>▁x", "x<unk>y", "<unk> x", "<s ></s",
    "<<s>>", "</s></s>  </s>", " leading space", "   ", " ", "", "trailing space ", "▁", "▁▁x", "hi ▁there", "a ▁ b",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber 123 456 7890 \u4f60\u597d \U0001F600",
    "tabs\tand\n\nnewlines   and    spaces", "def f(x):\n    return x * 2\n", "ж<s>ж", "\U0001F600</s>\U0001F600",
]
# The corpus the test SentencePiece models are trained on (few enough pieces that byte fallback,
# <0xNN>, is used for much of the unicode above).
LLAMA_CORPUS = ["In the beginning God created the heaven and the earth.",
                "And the earth was without form, and void; and darkness was upon the face of the deep.",
                "The quick brown fox jumps over the lazy dog. Hello world, hello tokens!",
                "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber 123 456 7890 \u4f60\u597d",
                "def f(x):\n    return x * 2\n", "[INST] hi [/INST] <<SYS>> Sure."] * 20


def train_llama_spm(folder, corpus):
    """A SentencePiece BPE model with Llama 2's / Mistral's settings (byte_fallback, split_digits,
    identity normalization, white space kept), saved as folder/tokenizer.model."""
    import sentencepiece as spm
    os.makedirs(folder, exist_ok=True)
    corpus_path = os.path.join(folder, "corpus.txt")
    with open(corpus_path, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus) + "\n")
    spm.SentencePieceTrainer.train(input=corpus_path, model_prefix=os.path.join(folder, "tokenizer"), vocab_size=400,
                                   model_type="bpe", byte_fallback=True, character_coverage=1.0, bos_id=1, eos_id=2,
                                   unk_id=0, pad_id=-1, normalization_rule_name="identity",
                                   remove_extra_whitespaces=False, split_digits=True, allow_whitespace_only_pieces=True,
                                   num_threads=1, minloglevel=2)
    for name in ("corpus.txt", "tokenizer.vocab"):
        os.remove(os.path.join(folder, name))


def llama_folders():
    """Llama 2-style tokenizer folders as HF repos ship them, made by transformers itself:
    {name: (folder, slow tokenizer, fast tokenizer or None)}. `bare`: tokenizer.model alone (slow
    tokenizer None: not a HF folder); `nolegacykey`: with a tokenizer_config.json that does not set
    legacy; `nonlegacy` / `legacy`: LlamaTokenizer(legacy=False / True).save_pretrained
    (tokenizer.model, tokenizer_config.json, special_tokens_map.json); `*_fast`: the same plus the
    tokenizer.json of LlamaTokenizerFast (converted from the slow one) beside it."""
    from transformers import AutoTokenizer, LlamaTokenizer, LlamaTokenizerFast
    base = os.path.join(WORK, "spm")
    train_llama_spm(base, LLAMA_CORPUS)
    model = os.path.join(base, "tokenizer.model")
    out = {"bare": (base, None, None)}
    nokey = os.path.join(WORK, "nolegacykey")
    os.makedirs(nokey, exist_ok=True)
    shutil.copy(model, nokey)
    with open(os.path.join(nokey, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer"}, f)
    out["nolegacykey"] = (nokey, LlamaTokenizer.from_pretrained(nokey), None)
    for legacy in (False, True):
        name = "legacy" if legacy else "nonlegacy"
        slow_dir, fast_dir = os.path.join(WORK, name), os.path.join(WORK, name + "_fast")
        LlamaTokenizer(vocab_file=model, legacy=legacy).save_pretrained(slow_dir)
        LlamaTokenizerFast.from_pretrained(slow_dir).save_pretrained(fast_dir)
        out[name] = (slow_dir, LlamaTokenizer.from_pretrained(slow_dir), None)
        fast = AutoTokenizer.from_pretrained(fast_dir)
        if not fast.is_fast or not os.path.exists(os.path.join(fast_dir, "tokenizer.model")):
            fail("%s: expected a fast tokenizer and tokenizer.model in %s" % (name, fast_dir))
        out[name + "_fast"] = (fast_dir, LlamaTokenizer.from_pretrained(fast_dir), fast)
    return out


def test_K2_special_tokens_in_text_as_LlamaTokenizer(folders, texts):
    """K2: with tokenizer.model in a HF folder, <s>, </s> and <unk> typed in the text are their ids,
    and the text around them is encoded as transformers' slow LlamaTokenizer does (legacy false,
    true and not set); decoding is SentencePiece's. A bare tokenizer.model (NeMo's) stays
    sentencepiece's own encoding, special-token spellings and all."""
    import sentencepiece as spm
    for name in ("bare", "nolegacykey", "nonlegacy", "legacy"):
        folder, slow, _ = folders[name]
        sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
        if slow is None:
            want = [sp.encode(t) for t in texts]
        else:
            want = [slow(t, add_special_tokens=False)["input_ids"] for t in texts]
            if not any(1 in w and 2 in w for w in want):
                fail("K2 %s: no text has both <s> and </s>; the check would not cover them" % name)
        encode_decode("K2_" + name, folder, texts, want, [sp.decode(w) for w in want])
        r = ftx_ok("--tokenizer", folder, stdin=b'{"text": "x"}\n')
        if b"(sentencepiece," not in r.stderr:
            fail("K2 %s: expected the sentencepiece tokenizer, got %r" % (name, r.stderr))
        print("K2 %s: %d texts equal %s" % (name, len(texts), "sentencepiece's own ids" if slow is None else
              "transformers %s LlamaTokenizer (legacy=%s)" % (__import__("transformers").__version__, slow.legacy)))


def test_K3_tokenizer_json_before_tokenizer_model(folders, texts):
    """K3: a folder with tokenizer.json and tokenizer.model gives AutoTokenizer's (fast) ids, which
    differ from the slow tokenizer's on leading spaces; tokenizer.model named alone still gives the
    slow tokenizer's."""
    import sentencepiece as spm
    for name in ("nonlegacy_fast", "legacy_fast"):
        folder, slow, fast = folders[name]
        want = [fast(t, add_special_tokens=False)["input_ids"] for t in texts]
        got_ids, got_text = encode_decode("K3_" + name, folder, texts, want,
                                          [fast.decode(w, clean_up_tokenization_spaces=False) for w in want])
        r = ftx_ok("--tokenizer", folder, stdin=b'{"text": "x"}\n')
        if b"(hf-sentencepiece-bpe," not in r.stderr or b"tokenizer.json" not in r.stderr:
            fail("K3 %s: expected tokenizer.json's SentencePiece-style BPE, got %r" % (name, r.stderr))
        slow_want = [slow(t, add_special_tokens=False)["input_ids"] for t in texts]
        differ = [t for t, w, s in zip(texts, want, slow_want) if w != s]
        if name == "nonlegacy_fast" and not {" leading space", "   "} <= set(differ):
            fail("K3 %s: the fast and slow tokenizers were expected to differ on leading spaces: %r" % (name, differ))
        sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
        encode_decode("K3_" + name + "_model", os.path.join(folder, "tokenizer.model"), texts, slow_want,
                      [sp.decode(w) for w in slow_want])
        print("K3 %s: %d texts equal AutoTokenizer (%s); %d of them differ from LlamaTokenizer's, which "
              "tokenizer.model alone gives" % (name, len(texts), type(fast).__name__, len(differ)))


def check_llama():
    if importlib.util.find_spec("google.protobuf") is None:
        fail("protobuf not installed (transformers needs it to read tokenizer.model): the test venv pins it "
             "(scripts/requirements/test.txt, scripts/pyenv test)")
    lambada = read_jsonl(LAMBADA, "text")
    rng = random.Random(11)
    fuzz = []
    for _ in range(300):  # text pieces with special tokens and spaces between them
        parts = [rng.choice(["<s>", "</s>", "<unk>", " ", "  ", "\n", "▁", "hi", " the", "ж", "x y", "[INST]"])
                 for _ in range(rng.randint(1, 8))]
        fuzz.append("".join(parts))
    texts = LLAMA_TEXTS + lambada[:300] + fuzz + gpt2_bpe_reference.fuzz_strings(seed=20261128, count=200)
    folders = llama_folders()
    test_K2_special_tokens_in_text_as_LlamaTokenizer(folders, texts)
    test_K3_tokenizer_json_before_tokenizer_model(folders, texts)


# I46: texts for Gemma's, Phi-3's, Phi-4-mini's and Qwen3's pipelines: other scripts, emoji (ZWJ
# sequences, skin tones, flags), runs of white space at the start, middle and end, digit runs,
# contractions in both cases, text no small vocabulary has (byte fallback), and each family's
# special / added tokens inside text, beside spaces and newlines (Phi-3's eat the white space after
# them; a token of another family is plain text).
I46_TEXTS = [
    "東京と大阪に行きました。 你好，世界！ 한국어 텍스트", "Привет, мир! Съешь же ещё этих мягких булок.",
    "مرحبا بالعالم، كيف حالك؟ ١٢٣", "नमस्ते दुनिया, आप कैसे हैं? क्षत्रिय", "ελληνικά Ἀθῆναι ქართული ᚠᚢᚦ",
    "👨\u200d👩\u200d👧\u200d👦 family, 👩🏽\u200d💻 coder, 👍🏻👍🏼👍🏽👍🏾👍🏿, 🏳️\u200d🌈 🇫🇷🇯🇵, ❤️\u200d🔥 ✊🏿",
    "😀", "a😀b", "🧑\u200d🤝\u200d🧑", "  two", "   three", "\tleading tab", "\n\nleading newlines",
    "trailing spaces   ", "trailing newline\n", "trailing tab\t", "a  b   c    d     e", "tabs\t\t\tin\tthe middle",
    "line\nbreaks\n\n\nand\r\nCRLF\r\n", " \n \n ", "   ", " ", "\t", "\n", "", "x",
    "\u00a0nbsp\u2003em\u3000ideo \u000b\u0085 ",
    "1 12 123 1234 12345 123456 1234567890123", "3.14159 1,000,000 2026-11-29 0x1F 1e-10", "٣٤٥ ①② ⅷ ½",
    "I'm you're he's we've they'll she'd I'M YOU'RE HE'S WE'VE THEY'LL SHE'D don't DON'T",
    "'s 't 're 's's 'S' 'tis", "café naïve résumé Å A\u030a ﬁ", "e\u0301 vs é (NFC)",
    "\U0001F9EC\U0001FAE0 \U00010348 \u2fd5 \ue000 \U000F0000 \u0378", "\x01\x02\x7f control",
    "zero\u200bwidth\u200djoiner",
    "<start_of_turn>user\nHello there<end_of_turn>\n<start_of_turn>model\nHi!<end_of_turn>\n",
    "<start_of_turn> spaced <end_of_turn>  ", "text<start_of_turn><end_of_turn>text", "<bos><eos><pad><unk><mask>",
    "a\n\nb\n\n\nc\n\n\n\nd", "\u2581\u2581 typed \u2581 marks \u2581\u2581\u2581", "<table><h1>Title</h1></table>",
    "[@BOS@] <unused0><unused1>",
    "<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n4<|end|>\n<|endoftext|>", "<|user|>   spaces eaten<|end|>  \n  x",
    "<|system|>\tsys\t<|end|>\t\t<|user|>\u3000wide", "<|endoftext|>  kept <|endoftext|>", "a<|user|>b<|assistant|>",
    "<|user|>", "<|end|>   ", "  <|user|>", "<s>hi</s> <s>", "<unk>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    "<think>\n\n</think>\n\nHello!<|im_end|>", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "<think>x</think>",
    "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>", "<|fim_prefix|>def f(<|fim_suffix|>)<|fim_middle|>",
    "<|system|>You are Phi.<|end|><|user|>Hi<|end|><|assistant|><|tool_call|>[]<|/tool_call|>", "<|tag|><|tool|>",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n", "https://example.com/a/b?c=d&e=f#g path/to/file",
    "!!! ??? ... --- *** /// \\\\ \"\"\" ''", "MixedCASEWords camelCase snake_case kebab-case HTTPServer",
]

# The fixture folders of make_tokenizer_pipelines.py, each with an added token some text's ids
# must hold (so the check covers added tokens).
I46_FAMILIES = {"gemma": "<start_of_turn>", "phi3": "<|assistant|>", "phi4mini": "<|tool_call|>", "qwen3": "<think>"}


def i46_texts():
    lambada = read_jsonl(LAMBADA, "text")
    rng = random.Random(46)
    parts = ["<start_of_turn>", "<end_of_turn>", "<|user|>", "<|end|>", "<|endoftext|>", "<|im_start|>", "<think>",
             "</think>", "<|tool|>", " ", "  ", "\n", "\t", "\n\n", "hi", " the", "ж", "東京", "😀", "👍🏽", "12345",
             "I'm", "\u2581", "<bos>", "\u00a0"]
    mixed = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 10))) for _ in range(300)]
    return I46_TEXTS + lambada[:400] + mixed + gpt2_bpe_reference.fuzz_strings(seed=20261129, count=300)


def test_I46_tokenizer_json(family, folder, texts):
    """ftx's ids and decodings on the folder (tokenizer.json chosen) equal `tokenizers`' own on
    the same file (no special tokens added, none skipped in decoding)."""
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    probe = tok.token_to_id(I46_FAMILIES[family])
    if not any(probe in w for w in want):
        fail("I46 %s: no text has %s; the check would not cover added tokens" % (family, I46_FAMILIES[family]))
    back = [tok.decode(w, skip_special_tokens=False) for w in want]
    encode_decode("I46_" + family, folder, texts, want, back)
    print("I46 %s: %d texts equal tokenizers %s (tokenizer.json); %d of them decode back to the text itself" %
          (family, len(texts), tokenizers.__version__, sum(1 for t, b in zip(texts, back) if t == b)))


def test_I46_gemma_tokenizer_model(folder, texts):
    """Gemma's tokenizer.model: in its HF folder (tokenizer_config.json beside it, also with a
    `legacy`: false that GemmaTokenizer ignores), ftx's ids equal transformers' slow GemmaTokenizer's
    (added tokens cut out of the text, the rest SentencePiece's, no dummy prefix); alone,
    sentencepiece's own; decodings sentencepiece's."""
    import sentencepiece as spm
    from transformers import GemmaTokenizer
    model = os.path.join(folder, "tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=model)
    slow = GemmaTokenizer.from_pretrained(folder)
    want = [slow(t, add_special_tokens=False)["input_ids"] for t in texts]
    if not any(any(sp.id_to_piece(i).startswith("<0x") for i in w) for w in want):
        fail("I46 gemma: no text used a byte-fallback piece")
    encode_decode("I46_gemma_model", model, texts, want, [sp.decode(w) for w in want])
    # GemmaTokenizer takes no `legacy` (LlamaTokenizer's): a config that sets it changes nothing.
    legacy = os.path.join(WORK, "gemma_legacy_false")
    os.makedirs(legacy, exist_ok=True)
    shutil.copy(model, legacy)
    with open(os.path.join(folder, "tokenizer_config.json")) as f:
        config = json.load(f)
    config.update(legacy=False, add_prefix_space=True)
    with open(os.path.join(legacy, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)
    if [GemmaTokenizer.from_pretrained(legacy)(t, add_special_tokens=False)["input_ids"] for t in texts] != want:
        fail("I46 gemma: GemmaTokenizer was expected to ignore legacy / add_prefix_space")
    encode_decode("I46_gemma_legacy_false", os.path.join(legacy, "tokenizer.model"), texts, want,
                  [sp.decode(w) for w in want])
    bare = os.path.join(WORK, "gemma_bare")
    os.makedirs(bare, exist_ok=True)
    shutil.copy(model, bare)
    want = [sp.encode(t) for t in texts]
    encode_decode("I46_gemma_bare", bare, texts, want, [sp.decode(w) for w in want])
    print("I46 gemma: tokenizer.model: %d texts equal GemmaTokenizer (slow) in its folder and sentencepiece %s "
          "alone" % (len(texts), spm.__version__))


def test_I46_phi3_tokenizer_model(folder, texts):
    """Phi-3's tokenizer.model named alone (its folder's tokenizer_config.json with legacy: false
    and the rstrip added tokens past the model's pieces): ftx's ids equal transformers' slow
    LlamaTokenizer's, decodings sentencepiece's with the added tokens' content between."""
    import sentencepiece as spm
    from transformers import LlamaTokenizer
    slow = LlamaTokenizer.from_pretrained(folder)
    if slow.legacy:
        fail("I46 phi3: the fixture's tokenizer_config.json was expected to say legacy: false")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    n = sp.get_piece_size()
    want = [slow(t, add_special_tokens=False)["input_ids"] for t in texts]

    def decode(ids):  # sentencepiece's runs, an added token past the model as its content
        out, run = "", []
        for i in ids:
            if i < n:
                run.append(i)
            else:
                out, run = out + sp.decode(run) + slow.convert_ids_to_tokens(i), []
        return out + sp.decode(run)
    encode_decode("I46_phi3_model", os.path.join(folder, "tokenizer.model"), texts, want, [decode(w) for w in want])
    print("I46 phi3: tokenizer.model: %d texts equal LlamaTokenizer (slow, legacy false)" % len(texts))


def test_I46_added_token_flags(base, texts):
    """lstrip, rstrip and single_word as tokenizers reads them (Phi-3's rstrip tokens are in the
    phi3 check): Qwen3's tokenizer.json with <|im_start|> lstrip, <|im_end|> lstrip and rstrip,
    <think> single_word, <|endoftext|> all three, against tokenizers."""
    import tokenizers
    with open(os.path.join(base, "qwen3", "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    flags = {"<|im_start|>": ("lstrip",), "<|im_end|>": ("lstrip", "rstrip"), "<think>": ("single_word",),
             "<|endoftext|>": ("lstrip", "rstrip", "single_word")}
    for t in doc["added_tokens"]:
        for f in flags.get(t["content"], ()):
            t[f] = True
    folder = os.path.join(WORK, "flags")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    plain = tokenizers.Tokenizer.from_file(os.path.join(base, "qwen3", "tokenizer.json"))
    want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    changed = sum(1 for t, w in zip(texts, want) if w != plain.encode(t, add_special_tokens=False).ids)
    if changed < 20:
        fail("I46 flags: only %d texts change with the flags; the check would not cover them" % changed)
    encode_decode("I46_flags", folder, texts, want, [tok.decode(w, skip_special_tokens=False) for w in want])
    print("I46 flags: %d texts equal tokenizers, %d of them changed by the flags" % (len(texts), changed))


def test_I46_split_behaviors(base, texts):
    """Split's behaviors and invert, against tokenizers: a String pattern with all five behaviors,
    inverted or not (Gemma's is " " MergedWithPrevious, which its Replace normalizer leaves nothing
    to match, so here Gemma's tokenizer.json without its normalizer: the spaces stay and are split
    on); and Phi-4-mini's regex with Removed and invert: true (how tiktoken-style conversions such as
    GPT-4o's write it), MergedWithNext and Contiguous."""
    import tokenizers
    variants = []
    with open(os.path.join(base, "gemma", "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    doc["normalizer"] = None
    for behavior in ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
        for invert in (False, True):
            doc["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": behavior, "invert": invert}
            variants.append(("string_%s_%s" % (behavior, invert), json.loads(json.dumps(doc))))
    with open(os.path.join(base, "phi4mini", "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    for behavior, invert in (("Removed", True), ("MergedWithNext", False), ("Contiguous", True)):
        doc["pre_tokenizer"]["pretokenizers"][0].update(behavior=behavior, invert=invert)
        variants.append(("regex_%s_%s" % (behavior, invert), json.loads(json.dumps(doc))))
    for name, variant in variants:
        folder = os.path.join(WORK, "split_" + name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(variant, f, ensure_ascii=False)
        tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        encode_decode("I46_split_" + name, folder, texts, want, [tok.decode(w, skip_special_tokens=False) for w in want])
    print("I46 Split: %d variants equal tokenizers" % len(variants))

def check_pipelines():
    """I46: Gemma's, Phi-3's, Phi-4-mini's and Qwen3's tokenizer pipelines (the fixtures of
    scripts/fixtures/make_tokenizer_pipelines.py, made by the ctest fixture tok_pipelines_fx); every
    family is checked before the test fails."""
    require_spm_tools()
    base = os.path.join(os.environ["FTX_FIXTURES"], "tokenizer_pipelines")
    texts = i46_texts()
    failed = []
    checks = [(f + " tokenizer.json", test_I46_tokenizer_json, (f, os.path.join(base, f), texts)) for f in I46_FAMILIES]
    checks.append(("gemma tokenizer.model", test_I46_gemma_tokenizer_model, (os.path.join(base, "gemma"), texts)))
    checks.append(("phi3 tokenizer.model", test_I46_phi3_tokenizer_model, (os.path.join(base, "phi3"), texts)))
    checks.append(("Split behaviors", test_I46_split_behaviors, (base, texts)))
    checks.append(("added token flags", test_I46_added_token_flags, (base, texts)))
    for name, check, args in checks:
        try:
            check(*args)
        except SystemExit:
            failed.append(name)
    if failed:
        fail("I46: ftx differs on " + ", ".join(failed))


def check_trained():
    lambada = read_jsonl(LAMBADA, "text")
    texts = lambada + gpt2_bpe_reference.fuzz_strings(seed=20250101, count=500) + ref.extra_strings()
    for style, cls in (("neox", "GPTNeoXTokenizerFast"), ("bloom", "BloomTokenizerFast")):
        folder = os.path.join(WORK, style)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "tokenizer.json")
        train_tokenizer_json(style, lambada[:2000], path)
        tok = hf_fast(path, cls)
        want = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        print("%s: tokenizers-trained, %d tokens for the %d LAMBADA texts" %
              (style, sum(len(w) for w in want[: len(lambada)]), len(lambada)))
        encode_decode("trained_" + style, folder, texts, want,
                      [tok.decode(w, clean_up_tokenization_spaces=False) for w in want])


def check_xglm():
    require_spm_tools("spm_train")
    import sentencepiece as spm
    folder = os.path.join(WORK, "xglm")
    os.makedirs(folder, exist_ok=True)
    lambada = [t.replace("\n", " ") for t in read_jsonl(LAMBADA, "text")]
    corpus_path = os.path.join(WORK, "xglm_corpus.txt")
    with open(corpus_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lambada[:2000] + ["Grüße aus Köln, 東京と大阪, Привет мир"] * 10) + "\n")
    # fairseq's spm models are BPE with <unk>=0 <s>=1 </s>=2 (spm_train's defaults).
    subprocess.run(["spm_train", "--input=" + corpus_path, "--model_prefix=" + os.path.join(folder, "sentencepiece.bpe"),
                    "--model_type=bpe", "--vocab_size=700", "--character_coverage=0.9995", "--num_threads=1",
                    "--minloglevel=2"], check=True, capture_output=True)
    model = os.path.join(folder, "sentencepiece.bpe.model")
    sp = spm.SentencePieceProcessor(model_file=model)
    n = sp.get_piece_size()

    # HF XGLMTokenizer: fairseq_offset = 1; "<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3;
    # _convert_token_to_id returns spm_id + fairseq_offset if spm_id else unk_token_id.
    def to_model(spm_ids):
        return [p + 1 if p else 3 for p in spm_ids]

    rng = random.Random(5)
    texts = lambada[3000:3500] + ["Grüße 東京 ∑ 😀 tab\there", "  leading and trailing  ", "x", "ÀÉÎ ﬁ ①",
                                  "<unk> <s> </s> <madeupword0>"]
    texts += ["".join(rng.choice("abc xyz,.'ÄÖ東😀\t") for _ in range(rng.randint(1, 40))) for _ in range(50)]
    expected = [to_model(sp.encode(t)) for t in texts]
    decoded = [sp.decode(sp.encode(t)) for t in texts]
    if not any(3 in e for e in expected):
        fail("no text has an unknown piece; the check of id 3 would be empty")
    got_ids, got_text = encode_decode("xglm", folder, texts, expected, decoded)
    from transformers import XGLMTokenizer
    hf = XGLMTokenizer(vocab_file=model)
    plain = [i for i, t in enumerate(texts) if not any(s in t for s in hf.all_special_tokens)]
    # Decoding is compared where no piece is unknown: transformers writes id 3 as "<unk>", ftx as
    # sentencepiece's own decoder does (" \u2047 "), checked above.
    compare_with_hf("xglm (%d texts without special-token spellings)" % len(plain), hf,
                    [texts[i] for i in plain], [got_ids[i] for i in plain], [got_text[i] for i in plain],
                    decode_if=lambda ids: 3 not in ids)

    # Special and made-up ids: no text; <unk> (3) is sentencepiece's unknown surface.
    ids = [[0, 1, 2], [n + 1, n + 7], [3], [0] + expected[0] + [2]]
    r = ftx_ok("--tokenizer", folder, "--decode", "--quiet",
               stdin="".join(json.dumps({"ids": i}) + "\n" for i in ids).encode())
    got = [json.loads(line)["text"] for line in r.stdout.decode().splitlines()]
    compare("xglm special ids", [str(i) for i in ids], got, ["", "", sp.decode([0]), decoded[0]])
    r = subprocess.run([FTX, "tokenize", "--tokenizer", folder, "--decode", "--quiet"],
                       input=json.dumps({"ids": [n + 8]}).encode() + b"\n", capture_output=True)
    if r.returncode != 1 or ("token id %d" % (n + 8)).encode() not in r.stderr:
        fail("id %d (past the made-up words) was not refused: %r" % (n + 8, r.stderr))
    print("xglm: vocabulary of %d pieces -> %d ids; id %d refused" % (n, n + 8, n + 8))


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    what = sys.argv[1]
    if what == "xglm":
        check_xglm()
    elif what == "trained":
        check_trained()
    elif what == "modern":
        check_modern()
    elif what == "llama":
        check_llama()
    elif what == "pipelines":
        check_pipelines()
    else:
        check_tokenizer_json(what)
    print("OK")
