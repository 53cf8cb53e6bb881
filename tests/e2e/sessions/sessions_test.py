#!/usr/bin/python3
"""Interactive sessions (issue 16), end to end on the engine fixtures.

Usage: sessions_test.py {rounds|rounds_tp|S1_prefix_order|errors|resume|chat_pipe|chat_tty|chat_newlines|
                         chat_keys|chat_full|D13_chat_template}
  rounds:     sessions of several rounds, interleaved, at batch size 2 (so idle sessions lose their
              caches and run their context again): every round's tokens equal one fresh request
              over the concatenated context [context_1, generated_1, ..., context_k], for GPT-2,
              NeoX and BLOOM, greedy, seeded top-p and beam 3; with --memory-len the sessions go
              on past the memory.
  rounds_tp:  the same under `mpirun -np 2` on the 2-gpu folders.
  S1_prefix_order: sessions whose first rounds share prefix-cache blocks still run their rounds in
              input order (the trial report's S-1), at several block sizes, batching modes, budgets.
  errors:     a round beyond --session-len, a round with more new tokens than --memory-len,
              session_end without a session, an unknown chat command: one-line errors naming the
              session or the line.
  resume:     a session job killed part way and resumed gives the uninterrupted file (the resumed
              sessions' contexts are rebuilt from the kept results).
  chat_pipe:  `ftx chat` in a pipe prints, per line, the text `ftx generate` gives that round of a
              session; /reset starts a new session; /quit ends.
  chat_tty:   `ftx chat` in a real terminal (tmux: keys sent, the pane read): two rounds, /reset,
              /quit, the same text as in the pipe.
  chat_newlines: in a pipe, one line per round even when the answer has line breaks.
  chat_keys:  on a terminal (tmux): Ctrl-C stops the answer and the chat goes on, Ctrl-C while typing
              drops the line, Up recalls earlier lines, Ctrl-D ends.
  chat_full:  on a terminal (tmux): a line beyond the model's positions, and a full context, are
              refused and the chat goes on (/reset starts over).
  The tty parts exit 77 (skipped) without tmux.
  D13_chat_template: a tokenizer folder with a chat_template: not applied, and said on stderr.
Environment: FTX_BIN, FTX_FIXTURES.
"""
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
import e2e_util  # noqa: E402
from e2e_util import check, check_killed_and_resumed, finish, ftx, mpirun, write  # noqa: E402

FTX = os.environ["FTX_BIN"]
ENGINE = os.path.join(os.environ["FTX_FIXTURES"], "engine")
BPE = os.path.join(ENGINE, "gpt2_bpe", "1-gpu")


def generate(model, lines, tmp, extra=(), mpi=0):
    path = write(os.path.join(tmp, "in.jsonl"), "".join(json.dumps(l) + "\n" for l in lines))
    extra = list(extra) if "--max-new-tokens" in extra else ["--max-new-tokens", "5", *extra]
    cmd = (mpirun(mpi) if mpi else []) + [FTX, "generate", "-m", model, "--prompts", path, "--output", "-",
                                                 "--quiet", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, r.stderr
    return [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")], r.stderr


def session_script(seed, params, vocab=290):
    """Three sessions of 3-4 rounds each, interleaved; rounds of random ids (below `vocab`) and lengths."""
    rng = random.Random(seed)
    order = ["a", "b", "a", "c", "b", "a", "c", "b", "c", "a", "b"]
    lines = []
    for s in order:
        lines.append(dict(params, session=s, ids=[rng.randrange(1, vocab) for _ in range(rng.randint(1, 6))],
                          max_new_tokens=rng.randint(2, 7)))
    lines[-1]["session_end"] = True
    return lines


def check_rounds(model_dir, tmp, mpi=0, extra=(), label="", vocab=290, scripts=None):
    """Each round's session fields follow the input order and its tokens equal a fresh request over
    the session's whole context. scripts: [(mode, lines)], by default three interleaved sessions
    greedy, with seeded top-p and with beam 3."""
    if scripts is None:
        scripts = [(mode, session_script(len(mode), params, vocab))
                   for mode, params in [("greedy", {}), ("top-p", {"top_p": 0.9, "seed": 5}), ("beam 3", {"beam_width": 3})]]
    for mode, lines in scripts:
        got, err = generate(model_dir, lines, tmp, ["--batch-size", "2", *extra], mpi)
        if not check(got is not None, f"{label} {mode}: {err}"):
            continue
        contexts, rounds = {}, {}
        fresh_lines = []
        for line, out in zip(lines, got):
            s = line["session"]
            ctx = contexts.get(s, []) + line["ids"]
            rounds[s] = rounds.get(s, 0) + 1
            check(out.get("session") == s and out.get("round") == rounds[s] and out.get("context_length") ==
                  len(contexts.get(s, [])), f"{label} {mode}: session fields of {out}")
            fresh = {k: v for k, v in line.items() if k not in ("session", "session_end")}
            fresh["ids"] = ctx
            fresh_lines.append(fresh)
            contexts[s] = ctx + out["output_ids"]
        fresh, err = generate(model_dir, fresh_lines, tmp, ["--batch-size", "1", *extra], mpi)
        if not check(fresh is not None, f"{label} {mode} fresh: {err}"):
            continue
        for i, (a, b) in enumerate(zip(got, fresh)):
            check(a["output_ids"] == b["output_ids"],
                  f"{label} {mode}: round {i} ({lines[i]['session']}) {a['output_ids']} != fresh {b['output_ids']}")
            if "beams" in b:
                check([x["output_ids"] for x in a["beams"]] == [x["output_ids"] for x in b["beams"]],
                      f"{label} {mode}: round {i} beams differ")


def test_rounds(tmp):
    for m in ["gpt2", "gptneox", "bloom"]:
        check_rounds(os.path.join(ENGINE, m, "1-gpu"), tmp, label=m)
    # A circular cache: sessions go on past the memory (the numerics are checked against a windowed
    # float64 reference in engine_session_test); results equal the memory-less run while the
    # context fits, and differ once it does not.
    lines = [{"session": "s", "ids": [5, 6, 7, 8, 9, 10], "max_new_tokens": 6} for _ in range(5)]
    m = os.path.join(ENGINE, "gptneox", "1-gpu")
    ring, err = generate(m, lines, tmp, ["--memory-len", "16"])
    full, _ = generate(m, lines, tmp)
    if check(ring is not None, f"--memory-len: {err}"):
        check(ring[0]["output_ids"] == full[0]["output_ids"], "--memory-len: round 1 fits the memory")
        check(ring[-1]["context_length"] == 48, f"--memory-len: the session goes on ({ring[-1]})")
        check(any(a["output_ids"] != b["output_ids"] for a, b in zip(ring[3:], full[3:])),
              "--memory-len: later rounds see only the memory")


def shared_prefix_sessions(shared, vocab, seed):
    """Two sessions of two rounds, then a third of three, whose first rounds start with the same
    `shared` tokens (a common system prompt); the report's trigger put each session's rounds
    together in the file, the second session's last."""
    rng = random.Random(seed)
    system = [rng.randrange(1, vocab) for _ in range(shared)]
    lines = []
    for s, rounds in (("a", 2), ("b", 2), ("c", 3)):
        lines.append({"session": s, "ids": system + [rng.randrange(1, vocab) for _ in range(3)], "max_new_tokens": 5})
        for _ in range(rounds - 1):
            lines.append({"session": s, "ids": [rng.randrange(1, vocab) for _ in range(2)], "max_new_tokens": 5})
    return lines


def test_S1_prefix_order(tmp):
    """S-1: sessions whose first rounds share KV blocks run their rounds in input order (a round
    deferred a step for a block another newcomer computes holds its session's later rounds back),
    at block sizes 4, 16 and 64 sharing 1 to 3 blocks, continuous and static, with and without a
    KV-cache budget; tests/unit/scheduler_session_order_test.cc covers the same at the scheduler."""
    neox = os.path.join(ENGINE, "gptneox", "1-gpu")
    for bs, shared in [(4, 5), (16, 40), (64, 70)]:
        lines = shared_prefix_sessions(shared, 290, bs)
        # A budget of the longest session's blocks and two more (a block holds K and V of 2 layers of
        # 64 floats per token: 1 KiB), so that idle sessions give theirs back.
        longest = max(sum(len(l["ids"]) + l["max_new_tokens"] for l in lines if l["session"] == s) for s in "abc")
        budget = f"{(-(-longest // bs) + 2) * bs}K"
        for extra in ([], ["--batching", "static"], ["--kv-cache-memory", budget]):
            check_rounds(neox, tmp, extra=["--tokens-per-block", str(bs), *extra],
                         label=f"S-1 block size {bs} {' '.join(extra)}", scripts=[("greedy", lines)])
    # The report's case: default settings, a 77-token system prompt, GPT-2's vocabulary.
    check_rounds(BPE, tmp, label="S-1 defaults", scripts=[("greedy", shared_prefix_sessions(77, 50000, 1))])


def test_rounds_tp(tmp):
    for m in ["gpt2", "gptneox", "bloom"]:
        check_rounds(os.path.join(ENGINE, m, "2-gpu"), tmp, mpi=2, label=f"{m} TP 2")


def test_errors(tmp):
    m = os.path.join(ENGINE, "gpt2", "1-gpu")

    def expect(name, lines, extra, code, needle):
        got, err = generate(m, lines, tmp, extra)
        msgs = [l for l in err.splitlines() if l.strip()]
        check(got is None and len(msgs) == 1 and needle in msgs[0], f"{name}: {msgs!r} (wanted {needle!r})")

    long = [{"session": "talk", "ids": [1, 2, 3, 4], "max_new_tokens": 5}] * 3
    expect("--session-len", long, ["--session-len", "20"], 1,
           "request 3 (session \"talk\"): the session would hold 27 tokens (18 so far, 4 new, 5 to generate), "
           "more than --session-len 20")
    expect("--memory-len", [{"session": "m", "ids": list(range(1, 12)), "max_new_tokens": 2}], ["--memory-len", "8"],
           1, "request 1 (session \"m\"): 11 new tokens exceed --memory-len 8")
    expect("session_end alone", [{"ids": [1], "session_end": True}], [], 1,
           "line 1 (prompt 1): \"session_end\" without a \"session\"")
    expect("empty session", [{"ids": [1], "session": ""}], [], 1, "\"session\" is empty")
    r = subprocess.run([FTX, "chat", "-m", BPE, "--max-new-tokens", "2", "--quiet"], input="Hi\n/frobnicate\n/quit\n",
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and r.stderr.strip() == "ftx: error: <stdin>: line 2: unknown command '/frobnicate' "
          "(/reset starts over, /quit ends; // sends a line starting with /)", f"unknown chat command: {r.stderr!r}")


def test_resume(tmp):
    rng = random.Random(3)
    lines = []
    for i in range(4000):
        lines.append({"session": f"s{rng.randrange(300)}", "ids": [rng.randrange(1, 290) for _ in range(2)],
                      "max_new_tokens": 3})
    path = write(os.path.join(tmp, "sessions.jsonl"), "".join(json.dumps(l) + "\n" for l in lines))
    base = [FTX, "generate", "-m", os.path.join(ENGINE, "gptneox", "1-gpu"), "--prompts", path, "--max-new-tokens", "3",
            "--batch-size", "16", "--threads", "1", "--quiet"]
    ref = os.path.join(tmp, "ref.jsonl")
    r = subprocess.run(base + ["--output", ref], capture_output=True, text=True, timeout=600)
    if not check(r.returncode == 0, f"uninterrupted: {r.stderr}"):
        return
    check_killed_and_resumed(base, os.path.join(tmp, "out.jsonl"), ref, 60000, 4000)


CHAT_LINES = ["Hello world, this is", "The quick brown fox", "/reset", "Once upon a time"]


def expected_chat_text(tmp):
    """What ftx generate gives for the chat's rounds: one session per /reset."""
    lines, session = [], 1
    for l in CHAT_LINES:
        if l == "/reset":
            session += 1
            continue
        lines.append({"session": f"chat-{session}", "text": l, "max_new_tokens": 6})
    got, err = generate(BPE, lines, tmp, ["--max-new-tokens", "6"])
    check(got is not None, f"generate for the chat reference: {err}")
    return [g["text"] for g in got or []]


def test_chat_pipe(tmp):
    want = expected_chat_text(tmp)
    r = subprocess.run([FTX, "chat", "-m", BPE, "--max-new-tokens", "6"], input="\n".join(CHAT_LINES + ["/quit"]) + "\n",
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"chat in a pipe: {r.stderr}")
    check(r.stdout.split("\n")[:-1] == want, f"chat text {r.stdout.splitlines()!r} != generate's {want!r}")
    stats = [l for l in r.stderr.splitlines() if l.startswith("[round")]
    check(len(stats) == 3 and "round 2: 6 tokens" in stats[1] and "context 11 tokens" in stats[1]
          and "round 1:" in stats[2] and "context 0 tokens" in stats[2], f"per-round statistics: {stats}")
    check(all("tokens/s" in s and "first token" in s for s in stats), "tokens/s and first token per round")


def test_chat_tty(tmp):
    if not shutil.which("tmux"):
        print("SKIP: tmux is not installed")
        sys.exit(77)
    want = expected_chat_text(tmp)
    name = f"ftxchat{os.getpid()}"
    done = os.path.join(tmp, "exit_status")
    cmd = f"{FTX} chat -m {BPE} --max-new-tokens 6; echo $? > {done}; sleep 30"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "200", "-y", "50", cmd], check=True)
    try:
        def pane():
            return subprocess.run(["tmux", "capture-pane", "-p", "-t", name, "-S", "-100"], capture_output=True,
                                  text=True).stdout

        def wait_for(pred, what, timeout=30):
            return e2e_util.wait_for(pred, "tty: " + what, lambda: "pane:\n" + pane(), timeout)

        def send(line):
            subprocess.run(["tmux", "send-keys", "-t", name, "-l", line], check=True)
            subprocess.run(["tmux", "send-keys", "-t", name, "Enter"], check=True)

        wait_for(lambda: pane().startswith(">"), "the prompt")
        rounds = 0
        for line in CHAT_LINES:
            send(line)
            if line != "/reset":
                rounds += 1
                wait_for(lambda: pane().count("[round") >= rounds, f"round {rounds}")
        send("/quit")
        wait_for(lambda: os.path.exists(done), "chat to exit")
        text = pane()
        check(os.path.exists(done) and open(done).read().strip() == "0", f"tty: exit status; pane:\n{text}")
        for w in want:
            check(w.strip() in text, f"tty: {w!r} not on the screen:\n{text}")
        check(text.count("> ") >= 4, f"tty: a prompt per line:\n{text}")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_D13_chat_template_is_not_applied_and_said(tmp):
    """D13: a chat_template in the tokenizer folder's tokenizer_config.json is not applied (the
    answers are those of the same folder without one) and ftx chat says so in one stderr line at the
    start, also with --quiet; a folder without one gets no note."""
    outs = {}
    for name, config in (("plain", {"eos_token": "<|endoftext|>"}),
                         ("template", {"eos_token": "<|endoftext|>", "chat_template":
                                       "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"})):
        tok = os.path.join(tmp, name)
        os.makedirs(tok)
        for f in ("vocab.json", "merges.txt"):
            shutil.copy(os.path.join(BPE, f), tok)
        write(os.path.join(tok, "tokenizer_config.json"), json.dumps(config))
        r = subprocess.run([FTX, "chat", "-m", BPE, "--tokenizer", tok, "--max-new-tokens", "4", "--quiet"],
                           input="Hello world, this is\n/quit\n", capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"D13 {name}: {r.stderr}")
        outs[name] = r
    check(outs["plain"].stderr == "", f"D13: no template, no note: {outs['plain'].stderr!r}")
    note = outs["template"].stderr.splitlines()
    check(len(note) == 1 and note[0].startswith("ftx chat: note: " + os.path.join(tmp, "template", "tokenizer_config.json")
                                                + " has a chat template, which ftx chat does not apply"),
          f"D13: one note naming the file: {outs['template'].stderr!r}")
    check(outs["template"].stdout == outs["plain"].stdout and outs["plain"].stdout.strip(),
          f"D13: the template changes nothing: {outs['template'].stdout!r} vs {outs['plain'].stdout!r}")


def newline_model(tmp):
    """gpt2_bpe whose every answer is line breaks: the final layernorm outputs its bias, which is
    GPT-2's "\\n" row of the (tied) embedding scaled up, so token 198 wins every step."""
    d = os.path.join(tmp, "newlines", "1-gpu")
    shutil.copytree(BPE, d)
    H = 32
    wte = open(os.path.join(d, "model.wte.bin"), "rb").read()
    row = struct.unpack(f"<{H}e", wte[198 * H * 2:199 * H * 2])
    write(os.path.join(d, "model.final_layernorm.weight.bin"), struct.pack(f"<{H}e", *[0.0] * H), "wb")
    write(os.path.join(d, "model.final_layernorm.bias.bin"), struct.pack(f"<{H}e", *[x * 50 for x in row]), "wb")
    os.remove(os.path.join(d, "manifest.json")) if os.path.exists(os.path.join(d, "manifest.json")) else None
    return d


def test_chat_newlines(tmp):
    model = newline_model(tmp)
    lines = ["Hello", "/reset", "Again"]
    r = ftx("chat", "-m", model, "--max-new-tokens", "5", "--quiet", input="\n".join(lines) + "\n")
    out = r.stdout.split("\n")
    check(r.returncode == 0 and out == ["\\n" * 5, "\\n" * 5, ""], f"one line per round: {r.returncode} {r.stdout!r} {r.stderr!r}")
    r = ftx("generate", "-m", model, "--prompts", "-", "--max-new-tokens", "5", "--output", "-", "--quiet", input="Hello\n")
    check(r.returncode == 0 and json.loads(r.stdout)["text"] == "\n" * 5, f"generate gives the same text: {r.stdout!r}")


def test_chat_keys(tmp):
    if not shutil.which("tmux"):
        print("SKIP: tmux is not installed")
        sys.exit(77)
    with e2e_util.TmuxChat(tmp, ["-m", BPE, "--max-new-tokens", "400"], "ftxnu") as t:
        pane, keys = t.pane, t.keys

        def stats():
            return t.stderr_lines("[round")

        def wait_for(pred, what, timeout=30):
            return t.wait_for(pred, what, timeout)

        wait_for(lambda: pane().startswith(">"), "the prompt")
        keys("Hello", literal=True)
        keys("Enter")
        wait_for(lambda: len(pane().split("\n")[1]) > 20, "the answer to stream")
        keys("C-c")  # stops the answer, not the chat
        wait_for(lambda: len(stats()) == 1, "round 1 to end")
        s = stats()
        check(s and "; stopped]" in s[0] and int(re.search(r": (\d+) tokens", s[0]).group(1)) < 400,
              f"Ctrl-C stopped the answer: {s}")
        wait_for(lambda: pane().rstrip().endswith(">"), "the next prompt")
        # A new session: round 1 may have run to hundreds of tokens before the Ctrl-C landed (a
        # loaded machine), and round 2's 400 more would pass the model's 512 positions.
        keys("/reset", literal=True)
        keys("Enter")
        time.sleep(0.3)
        wait_for(lambda: pane().rstrip().endswith(">"), "the prompt after /reset")
        keys("abc", literal=True)
        keys("C-c")  # drops the line being typed
        time.sleep(0.3)
        keys("Up")  # "/reset"
        keys("Up")  # "Hello", the line before it
        keys("Enter")
        wait_for(lambda: len(pane().rstrip().split("> Hello")[-1]) > 20, "round 2's answer to stream")
        keys("C-c")
        wait_for(lambda: len(stats()) == 2, "round 2 to end")
        s = stats()
        check(len(s) == 2 and "1 new" in s[1] and re.search(r"context \d+ tokens", s[1]),
              f"Up, Up recalled the one-token line 'Hello' (not 'abc', not '/reset', not escape codes): {s}")
        wait_for(lambda: pane().rstrip().endswith(">"), "the third prompt")
        keys("C-d")
        wait_for(lambda: t.exit_status() is not None, "chat to end")
        check(t.exit_status() == "0", f"Ctrl-D ends the chat with exit 0: {t.exit_status()!r}")
        check("\x1b[A" not in pane() and "^[[A" not in pane(), "no escape codes reached the screen")


def test_chat_full(tmp):
    if not shutil.which("tmux"):
        print("SKIP: tmux is not installed")
        sys.exit(77)
    with e2e_util.TmuxChat(tmp, ["-m", BPE, "--max-new-tokens", "150"], "ftxnu2") as t:
        def rounds():
            return t.stderr_lines("[round")

        def errors():
            return t.stderr_lines("ftx: error:")

        def say(text):
            t.keys(text, literal=True)
            t.keys("Enter")

        t.wait_for(lambda: t.pane().startswith(">"), "the prompt")
        say("Hello")
        t.wait_for(lambda: len(rounds()) == 1, "round 1", 60)
        # F-5: one line beyond the model's 512 positions: refused, the chat goes on.
        say("And the LORD " * 200)
        t.wait_for(lambda: len(errors()) == 1, "the refusal", 60)
        e = errors()
        check(e and "beyond the model's max_pos_seq_len 512" in e[0] and "/reset" in e[0], f"the long line: {e}")
        say("Again")
        t.wait_for(lambda: len(rounds()) == 2, "round 2 after the refusal", 60)
        check("context" in rounds()[-1] and "context 0 tokens" not in rounds()[-1],
              f"round 2 continues the session: {rounds()}")
        # F-6: the context fills up (150 new tokens a round): refused, then /reset starts over.
        for _ in range(6):
            if len(errors()) > 1:
                break
            n = len(rounds())
            say("More")
            t.wait_for(lambda: len(rounds()) > n or len(errors()) > 1, f"round {n + 1}", 60)
        e = errors()
        check(len(e) == 2 and "beyond the model's max_pos_seq_len 512" in e[1], f"the full context: {e}")
        say("/reset")
        n = len(rounds())
        say("Hello")
        t.wait_for(lambda: len(rounds()) > n, "a round after /reset", 60)
        check("context 0 tokens" in rounds()[-1], f"/reset started a new session: {rounds()[-1:]}")
        t.keys("C-d")
        t.wait_for(lambda: t.exit_status() is not None, "chat to end")
        check(t.exit_status() == "0", f"the chat ends with exit 0: {t.exit_status()!r}")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"rounds": test_rounds, "rounds_tp": test_rounds_tp, "S1_prefix_order": test_S1_prefix_order,
         "errors": test_errors, "resume": test_resume, "chat_pipe": test_chat_pipe, "chat_tty": test_chat_tty,
         "chat_newlines": test_chat_newlines, "chat_keys": test_chat_keys, "chat_full": test_chat_full,
         "D13_chat_template": test_D13_chat_template_is_not_applied_and_said}[what](tmp)
    finish(f"sessions_test {what}")


if __name__ == "__main__":
    main()
