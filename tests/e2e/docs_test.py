#!/usr/bin/env python3
"""Every example in README.md and docs/*.md runs as printed (issue 39).

Each fenced ```sh block is run with bash (-e, pipefail) in a folder of its page, in page order, with
`ftx` (FTX_BIN) first on PATH and the inputs the docs name (docs/converters.md, "The examples'
inputs"): hf-model (the demo's trained GPT-2, the trained_gpt2 fixture), out/1-gpu and out/2-gpu
(converted from it here, except for README.md, whose examples convert it themselves), small text
inputs, and the converter tests' tiny checkpoints of each kind. A block followed by
`<!-- docs-test: skip REASON -->` is not run (a GPU, several nodes, a Slurm cluster, minutes of
benchmarks): the reasons are printed. A command outside a ```sh block (an indented code block, or
a ```text block line that starts with `ftx `) is a failure: it would escape this test.

Usage: docs_test.py [--list]   (FTX_BIN, FTX_FIXTURES, FTX_SOURCE_DIR; --list prints the blocks)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import check, failures, finish  # noqa: E402

SRC = os.environ.get("FTX_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!-- docs-test: skip (.+?) -->\s*$")
COMMAND = re.compile(r"^\s*(ftx|mpirun|scripts/|bench/|sbatch)\b")


def pages():
    docs = os.path.join(SRC, "docs")
    return [os.path.join(SRC, "README.md")] + sorted(
        os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))


def blocks(path):
    """[(first line number, language, text, skip reason or None)] of a page, and stray commands."""
    lines = open(path, encoding="utf-8").read().splitlines()
    found, stray = [], []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            lang, start = m.group(1), i + 1
            j = start
            while j < len(lines) and not FENCE.match(lines[j]):
                j += 1
            body = lines[start:j]
            skip = None
            if j + 1 < len(lines) and SKIP.match(lines[j + 1]):
                skip = SKIP.match(lines[j + 1]).group(1)
            if lang in ("sh", "bash"):
                found.append((start, lang, "\n".join(body) + "\n", skip))
            else:
                stray += [(start + k + 1, l) for k, l in enumerate(body) if re.match(r"^\s*ftx ", l)]
            i = j + 1
            continue
        if lines[i].startswith("    ") and COMMAND.match(lines[i]):
            stray.append((i + 1, lines[i]))
        i += 1
    return found, stray


def fixture(*parts):
    return os.path.join(os.environ["FTX_FIXTURES"], *parts)


def inputs():
    """name -> what it links to, for every input the docs name."""
    return {
        "hf-model": fixture("trained", "hf"),
        "megatron-ckpt": fixture("convert", "meg_v3_tp2"),
        "model.nemo": fixture("convert", "nemo_tp2_tar", "model.nemo"),
        "mcore-ckpt": os.path.join(SRC, "tests", "fixtures", "mcore", "modern", "megatron", "tp2pp1", "dist"),
        "starcoder": fixture("convert", "hf_starcoder", "model"),
        "gpt-j": fixture("arch", "gptj", "hf"),
        "pythia": fixture("arch", "neox_tok", "hf"),
        "bloom": fixture("arch", "bloom_tok", "hf"),
        "opt": fixture("arch", "opt_pre", "hf"),
        "xglm": fixture("arch", "xglm_tok", "hf"),
        "ptuning.nemo": fixture("prompt", "classic.nemo"),
        "gpt2-tiny": fixture("engine", "gpt2", "1-gpu"),
    }


TEXT_INPUTS = {
    "prompts.txt": "In the beginning\nAnd the LORD said unto Moses,\nBlessed are the\n",
    "requests.jsonl": '{"text": "In the beginning", "top_p": 0.9, "seed": 7}\n'
                      '{"text": "And Moses said", "max_new_tokens": 8}\n'
                      '{"text": "Blessed are the", "temperature": 0}\n',
    "start_ids.csv": "818, 262, 3726\n1870, 262, 406, 1581, 35, 531\n",
    "texts.jsonl": '{"text": "In the beginning God created the heaven and the earth."}\n'
                   '{"text": "And God said, Let there be light."}\n',
}


def prepare(base, env):
    """The shared inputs, and out/ converted once."""
    for name, target in inputs().items():
        if not check(os.path.exists(target), f"input {name}: {target} is missing (its fixture did not run)"):
            continue
        os.symlink(target, os.path.join(base, name))
    for name, text in TEXT_INPUTS.items():
        with open(os.path.join(base, name), "w") as f:
            f.write(text)
    out = os.path.join(base, "shared-out")
    for g in ("1", "2"):
        r = subprocess.run([os.environ["FTX_BIN"], "convert-hf", "-i", os.path.join(base, "hf-model"), "-o", out, "-g", g,
                            "-t", "fp16", "--quiet"], capture_output=True, text=True, env=env)
        check(r.returncode == 0, f"converting hf-model for {g} rank(s): {r.stderr.strip()}")
    return out


def main():
    listing = sys.argv[1:] == ["--list"]
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(os.path.abspath(env["FTX_BIN"])) + os.pathsep + env.get("PATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    have_mpirun = shutil.which("mpirun") is not None
    tmp = tempfile.mkdtemp(prefix="ftx-docs-")
    base = os.path.join(tmp, "inputs")
    os.makedirs(base)
    shared_out = None if listing else prepare(base, env)
    ran, skipped = 0, []
    for page in pages():
        rel = os.path.relpath(page, SRC)
        found, stray = blocks(page)
        for lineno, line in stray:
            check(False, f"{rel}:{lineno}: a command outside a ```sh block, which this test would not run: {line.strip()}")
        work = os.path.join(tmp, rel.replace("/", "_"))
        os.makedirs(work)
        for name in os.listdir(base):
            if name != "shared-out":
                os.symlink(os.path.join(base, name), os.path.join(work, name))
        if rel != "README.md" and shared_out:
            os.symlink(shared_out, os.path.join(work, "out"))
        for lineno, _, text, skip in found:
            where = f"{rel}:{lineno}"
            first = text.strip().splitlines()[0] if text.strip() else ""
            if listing:
                print(f"{where}: {'SKIP (' + skip + ') ' if skip else ''}{first}")
                continue
            if skip is None and "mpirun" in text and not have_mpirun:
                skip = "no mpirun on this machine"
            if skip:
                skipped.append(f"{where} ({first}): {skip}")
                continue
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=work, env=env, capture_output=True,
                               text=True, timeout=600)
            ran += 1
            if check(r.returncode == 0, f"{where}: the block starting `{first}` exited {r.returncode}:\n"
                                        + "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])):
                print(f"ran {where}: {first}")
    if listing:
        return
    print(f"{ran} blocks ran, {len(skipped)} skipped:")
    for s in skipped:
        print("  skipped", s)
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    finish("docs examples")


if __name__ == "__main__":
    main()
