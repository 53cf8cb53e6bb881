#!/usr/bin/env python3
"""`ftx rouge` and `ftx eval-summarize` (issue 49) against Google's rouge_score (pinned in
scripts/requirements/rouge.txt; what Hugging Face evaluate's "rouge" and so TensorRT-LLM's
summarize.py run), with its defaults: no stemmer, ROUGE-Lsum's sentences split on newlines.

 * rouge: several hundred summary/reference pairs (case, punctuation, numbers, repeated words,
   non-ASCII letters, empty texts, multi-line texts, cut and re-lined LAMBADA passages, random code
   points) give rouge_score's precision, recall and F-measure of ROUGE-1, -2, -L and -Lsum to 1e-12,
   and the printed means are theirs x 100;
 * eval-summarize on a tiny random GPT-2 with GPT-2's tokenizer (scripts/make_tiny_gpt2.py,
   converted by `ftx convert-hf`): every row's rouge equals rouge_score on its summary and reference;
   the summary is what `ftx generate` makes from summarize.py's prompt built here in Python
   ((article + " TL;DR: ").strip().replace(" n't", "n't"), GPT-2 BPE by an independent Python
   encoder, cut to --max-input-length ids); batch size 1, TP 2 and PP 2 give the same rows; a
   killed run's --resume gives the uninterrupted run's file; the threshold's exit status (strictly
   above passes, as summarize.py's assert); --output - writes the rows alone on standard output;
   other field names by flag; bad data leaves no output behind.
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

from rouge_score import rouge_scorer, tokenize

SRC = os.environ["FTX_SOURCE_DIR"]
OUT = os.path.join(os.environ["FTX_FIXTURES"], "summarize")
PY = os.environ.get("FTX_TORCH_PYTHON", "/usr/bin/python3")
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
sys.path.insert(0, os.path.join(SRC, "scripts", "fixtures"))
from e2e_util import check, finish, ftx, one_line_error, run_ftx, write  # noqa: E402
from gpt2_bpe_reference import Encoder  # noqa: E402

TYPES = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
SCORER = rouge_scorer.RougeScorer(TYPES, use_stemmer=False)
MAX_INPUT, MAX_NEW = 40, 12


def close(a, b):
    return abs(a - b) <= 1e-12


def jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


def read_rows(path):
    return [json.loads(ln) for ln in open(path)]


def info_means(text):
    """The "[INFO] rouge1: X" lines as {name: X}."""
    out = {}
    for ln in text.splitlines():
        for t in TYPES:
            if ln.startswith(f"[INFO] {t}: "):
                out[t] = float(ln.split(": ", 1)[1])
    return out


def check_means(tag, text, rows):
    got = info_means(text)
    for t in TYPES:
        want = sum(r[t] for r in rows) / len(rows) * 100
        check(t in got and abs(got[t] - want) <= 1e-9, f"{tag}: printed {t} {got.get(t)} != {want}")


def text_pairs():
    rng = random.Random(49)
    words = ["the", "The", "THE", "cat", "cat's", "sat", "on", "mat", "U.S.", "3", "42", "3.14", "don't", "n't",
             "co-op", "e-mail", "a", "a", "a", "an", "of", "\u0130stanbul", "\u212aelvin", "na\u00efve", "caf\u00e9",
             "\U0001F600", "\u2014", "...", "!!", "(", ")", "\"quoted\"", "x2", "2x", "MiXeD", "Zo\u00eb", "\u00dcber"]
    pairs = [("", ""), ("", "a reference"), ("a summary", ""), ("!!! ...", "a b"), ("The cat.", "the CAT"),
             ("a a a a", "a"), ("a", "a a a a"), ("one\ntwo\nthree", "three two one"),
             ("the cat sat on the mat\nthe dog", "the cat\nsat on\nthe mat"), ("a b\nb", "b a"),
             ("\n\n", "x"), ("x\n", "\nx"), ("w1 w2 w3 w4 w5", "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5"),
             ("\u0130\u0130", "i i"), ("\u212a", "k"), ("It's 3:45 p.m.", "its 3 45 pm"), ("a\r\nb", "a b")]
    for _ in range(400):
        def text():
            n = rng.choice([0, 1, 2, 5, 10, 20, 35])
            toks = [rng.choice(words) for _ in range(n)]
            seps = [rng.choice([" ", " ", " ", "\n", ", ", ". ", "  "]) for _ in range(n)]
            return "".join(t + s for t, s in zip(toks, seps)).strip(" ")
        s, r = text(), text()
        if rng.random() < 0.15:
            s = r.replace("\n", " ")  # the same words, other sentences
        pairs.append((s, r))
    # Long texts (LAMBADA's passages, cut, with newlines and upper case put in), and random code points.
    texts = [json.loads(ln)["text"] for ln in open(os.path.join(SRC, "data", "lambada", "lambada_test.jsonl"))]

    def mangle(t):
        w = t.split(" ")
        if rng.random() < 0.5:
            w = w[:rng.randint(0, len(w))]
        out = "".join(x + rng.choice([" ", " ", " ", "\n", " \n ", ""]) for x in w)
        return out.upper() if rng.random() < 0.3 else out
    for _ in range(150):
        a = rng.choice(texts)
        pairs.append((mangle(a), mangle(a if rng.random() < 0.5 else rng.choice(texts))))
    for _ in range(100):
        pairs.append(tuple("".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0xa0, 0x2fff), 0x130, 0x212a, 10]))
                                   for _ in range(rng.randint(0, 60))) for _ in range(2)))
    return pairs


def test_rouge_command(tmp):
    pairs = text_pairs()
    data = jsonl(os.path.join(tmp, "pairs.jsonl"), [{"summary": s, "reference": r} for s, r in pairs])
    out = os.path.join(tmp, "scores.jsonl")
    r = ftx("rouge", "--data", data, "--output", out, "--force")
    if not check(r.returncode == 0, f"ftx rouge: {r.stderr.strip()}"):
        return
    rows = read_rows(out)
    check(len(rows) == len(pairs), f"ftx rouge: {len(rows)} rows for {len(pairs)} pairs")
    bad = 0
    for row, (s, ref) in zip(rows, pairs):
        want = SCORER.score(ref, s)
        for t in TYPES:
            w = want[t]
            ok = (close(row[t], w.fmeasure) and close(row[t + "_precision"], w.precision)
                  and close(row[t + "_recall"], w.recall))
            if not ok and bad < 10:
                check(False, f"ftx rouge #{row['index']} {t}: {row[t + '_precision']}, {row[t + '_recall']}, {row[t]}"
                             f" != rouge_score's {w} for summary {s!r}, reference {ref!r}")
            bad += not ok
    check(bad == 0, f"ftx rouge: {bad} scores differ from rouge_score's")
    check_means("ftx rouge", r.stdout, rows)
    print(f"ftx rouge: {len(pairs)} pairs x 4 ROUGEs x (P, R, F) compared with rouge_score")


def articles():
    base = ["The city council met on Tuesday to discuss the new budget.",
            "Officials said the plan would n't raise taxes, but critics did n't agree.",
            "More than 3,000 people attended the rally in the U.S. capital.",
            "\u0130stanbul's mayor spoke about transport, housing and the 2024 elections.",
            "Police say the suspect, 42, was arrested after a brief chase."]
    rng = random.Random(7)
    out = []
    for i in range(9):
        n = [1, 2, 4, 8][i % 4]  # the longer ones lose the suffix to the cut, as in summarize.py
        art = " ".join(rng.choice(base) for _ in range(n))
        if i == 3:
            art = "  \n" + art + "  \n"
        ref = "\n".join(rng.choice(base) for _ in range(1 + i % 3))
        out.append({"article": art, "highlights": ref})
    out.append({"article": "", "highlights": "Nothing happened."})
    return out


def prompt_ids(enc, article):
    return enc.encode((article + " TL;DR: ").strip().replace(" n't", "n't"))[:MAX_INPUT]


def check_rows(tag, rows, examples):
    if not check(len(rows) == len(examples), f"{tag}: {len(rows)} rows for {len(examples)} examples"):
        return
    for i, (row, ex) in enumerate(zip(rows, examples)):
        check(list(row) == ["index", "summary", "reference"] + TYPES, f"{tag} #{i}: fields {list(row)}")
        check(row["index"] == i and row["reference"] == ex["highlights"], f"{tag} #{i}: index or reference")
        want = SCORER.score(row["reference"], row["summary"])
        for t in TYPES:
            check(close(row[t], want[t].fmeasure) and 0 <= row[t] <= 1,
                  f"{tag} #{i} {t}: {row[t]} != rouge_score's {want[t].fmeasure} ({row['summary']!r})")


def test_eval_summarize(tmp):
    hf = os.path.join(OUT, "hf")
    subprocess.run([PY, os.path.join(SRC, "scripts", "make_tiny_gpt2.py"), hf, "--layers", "2", "--hidden", "32",
                    "--heads", "4", "--positions", "64", "--seed", "49"], check=True, capture_output=True)
    for tp in (1, 2):
        r = ftx("convert-hf", "-i", hf, "-o", os.path.join(OUT, "ft"), "-g", str(tp), "--force", "--quiet")
        assert r.returncode == 0, r.stderr
    model = os.path.join(OUT, "ft", "1-gpu")
    examples = articles()
    data = jsonl(os.path.join(tmp, "cnn.jsonl"), examples)
    flags = ["--max-input-length", str(MAX_INPUT), "--max-new-tokens", str(MAX_NEW)]
    out = os.path.join(tmp, "out.jsonl")
    r = ftx("eval-summarize", "-m", model, "--data", data, "--output", out, "--force", "--batch-size", "4", *flags)
    if not check(r.returncode == 0, f"eval-summarize: {r.stderr.strip()}"):
        return
    rows = read_rows(out)
    check_rows("eval-summarize", rows, examples)
    check_means("eval-summarize", r.stdout, rows)
    check("eval-summarize: 10/10 examples" in r.stderr, f"progress on stderr: {r.stderr!r}")

    # The prompt: summarize.py's text, tokenized and cut here, decoded by ftx generate.
    enc = Encoder(os.path.join(SRC, "data", "gpt2"))
    ids = [prompt_ids(enc, ex["article"]) for ex in examples]
    check(any(len(x) == MAX_INPUT for x in ids) and any(len(x) < MAX_INPUT for x in ids), "some prompts are cut")
    prompts = jsonl(os.path.join(tmp, "prompts.jsonl"), [{"ids": x} for x in ids])
    gen = os.path.join(tmp, "gen.jsonl")
    r = ftx("generate", "-m", model, "--prompts", prompts, "--output", gen, "--force", "--max-new-tokens", str(MAX_NEW))
    if check(r.returncode == 0, f"generate: {r.stderr.strip()}"):
        for i, (row, g) in enumerate(zip(rows, read_rows(gen))):
            check(row["summary"] == g["text"], f"summary #{i} {row['summary']!r} != generate's {g['text']!r} "
                                              f"from summarize.py's prompt")

    # The same rows one request at a time, and at TP 2 and PP 2 under mpirun.
    one = os.path.join(tmp, "one.jsonl")
    r = ftx("eval-summarize", "-m", model, "--data", data, "--output", one, "--force", "--batch-size", "1",
            "--batching", "static", "-q", *flags)
    check(r.returncode == 0 and open(one).read() == open(out).read() and r.stderr == "",
          f"batch size 1: {r.stderr.strip()}")
    tp2 = os.path.join(tmp, "tp2.jsonl")
    r = run_ftx(["eval-summarize", "-m", os.path.join(OUT, "ft", "2-gpu"), "--tokenizer", hf, "--data", data,
                 "--output", tp2, "--force", "-q", *flags], mpi=2, timeout=600)
    check(r.returncode == 0 and os.path.exists(tp2) and open(tp2).read() == open(out).read(),
          f"TP 2: {r.stderr.strip()[-2000:]}")
    pp2 = os.path.join(tmp, "pp2.jsonl")
    r = run_ftx(["eval-summarize", "-m", model, "--pipeline-para-size", "2", "--data", data, "--output", pp2, "--force",
                 "-q", *flags], mpi=2, timeout=600)
    check(r.returncode == 0 and os.path.exists(pp2) and open(pp2).read() == open(out).read(),
          f"PP 2: {r.stderr.strip()[-2000:]}")

    # References that share words with the summaries, so that every ROUGE is far from 0; other
    # field names by flag; the threshold: strictly above passes.
    rng = random.Random(3)
    ex2 = []
    for row in rows:
        words = row["summary"].split()
        rng.shuffle(words)
        ex2.append({"text": "ignored", "doc": examples[row["index"]]["article"],
                    "gold": " ".join(words[:6]) + "\n" + " ".join(words[4:]) + " extra words"})
    data2 = jsonl(os.path.join(tmp, "other_keys.jsonl"), ex2)
    out2 = os.path.join(tmp, "out2.jsonl")
    base2 = ["eval-summarize", "-m", model, "--data", data2, "--input-key", "doc", "--output-key", "gold", "-q", *flags]
    r = ftx(*base2, "--output", out2, "--force", "--rouge1-threshold", "-1")
    if check(r.returncode == 0, f"other keys: {r.stderr.strip()}"):
        rows2 = read_rows(out2)
        check_rows("other keys", rows2, [{"highlights": e["gold"]} for e in ex2])
        check([x["summary"] for x in rows2] == [x["summary"] for x in rows], "other keys: the same summaries")
        scored = [x["rouge1"] for x in rows2 if tokenize.tokenize(x["summary"], None)]
        check(scored and min(scored) > 0.2, f"other keys: ROUGE-1 far from 0: {scored}")
        mean1 = info_means(r.stdout)["rouge1"]
        r = ftx(*base2, "--output", out2, "--force", "--rouge1-threshold", repr(mean1))
        one_line_error("threshold equal to rouge1", r, 1, "is not above --rouge1-threshold")
        check(len(read_rows(out2)) == len(ex2), "below the threshold: the rows are still written")
        r = ftx(*base2, "--output", out2, "--force", "--rouge1-threshold", repr(mean1 - 1e-9))
        check(r.returncode == 0, f"threshold just below: {r.stderr.strip()}")

    # --output -: the rows alone on standard output, the summary lines on standard error.
    r = ftx("eval-summarize", "-m", model, "--data", data, "--output", "-", "-q", "--max-examples", "3", *flags)
    check(r.returncode == 0 and [json.loads(x) for x in r.stdout.splitlines()] == rows[:3]
          and "[INFO] rouge1: " in r.stderr, f"--output -: {r.stdout!r} {r.stderr!r}")

    # A run killed part way: --resume keeps its rows (checked against the data) and the means count them.
    many = jsonl(os.path.join(tmp, "many.jsonl"), [examples[i % len(examples)] for i in range(40)])
    base = [os.environ["FTX_BIN"], "eval-summarize", "-m", model, "--data", many, "--batch-size", "1", "-q", *flags]
    ref = os.path.join(tmp, "many_ref.jsonl")
    r = ftx(*base[1:], "--output", ref, "--force")
    killed = os.path.join(tmp, "many_killed.jsonl")
    for leftover in (killed, killed + ".partial", killed + ".partial.index"):
        if os.path.exists(leftover):
            os.remove(leftover)
    p = subprocess.Popen(base + ["--output", killed], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(killed + ".partial") and os.path.getsize(killed + ".partial") > 600:
            p.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    p.communicate()
    kept = sum(1 for _ in open(killed + ".partial")) if os.path.exists(killed + ".partial") else 0
    check(0 < kept < 40, f"killed part way: {kept} rows kept")
    r = subprocess.run(base + ["--output", killed, "--resume"], capture_output=True, text=True, timeout=600)
    check(r.returncode == 0 and open(killed).read() == open(ref).read(),
          f"resumed file differs from the uninterrupted run: {r.stderr.strip()}")
    if r.returncode == 0:
        check_means("resumed", r.stdout, read_rows(ref))
        check(f", {kept} resumed" in r.stdout, f"resumed: {r.stdout!r}")

    # Bad data: one line of error, no output and no .partial left.
    bad = os.path.join(tmp, "bad.jsonl")
    for name, lines, needle in [("malformed", [json.dumps(examples[0]), "{oops"], "line 2: malformed JSON"),
                                ("no field", [json.dumps({"article": "x"})], "line 1: no \"highlights\" field"),
                                ("not a string", [json.dumps({"article": 3, "highlights": "y"})], "not a string"),
                                ("empty", [], "no examples")]:
        write(bad, "".join(ln + "\n" for ln in lines))
        o = os.path.join(tmp, f"bad_{name.replace(' ', '_')}.jsonl")
        r = ftx("eval-summarize", "-m", model, "--data", bad, "--output", o, *flags)
        one_line_error(f"bad data ({name})", r, 1, bad, needle)
        check(not os.path.exists(o) and not os.path.exists(o + ".partial"), f"bad data ({name}): output left behind")
    r = ftx("eval-summarize", "-m", model, "--data", data, "--output", out, *flags)
    one_line_error("existing output", r, 1, "--force")
    r = ftx("eval-summarize", "-m", model, "--data", data, "--output", os.path.join(tmp, "x.jsonl"),
            "--max-input-length", "0")
    one_line_error("--max-input-length 0", r, 2, "--max-input-length")
    r = ftx("eval-summarize", "-m", model, "--data", data, "--output", os.path.join(tmp, "x.jsonl"),
            "--max-input-length", "60", "--max-new-tokens", "10")
    one_line_error("beyond the position table", r, 1, ": example ", "max_pos_seq_len 64")
    check(not os.path.exists(os.path.join(tmp, "x.jsonl.partial")), "position error: .partial left behind")
    print(f"eval-summarize: {len(examples)} examples checked against rouge_score and generate")


def main():
    tmp = os.path.join(OUT, "tmp")
    os.makedirs(tmp, exist_ok=True)
    test_rouge_command(tmp)
    test_eval_summarize(tmp)
    finish("summarize")


if __name__ == "__main__":
    main()
