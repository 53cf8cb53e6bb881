#!/usr/bin/env python3
"""README.md, docs/*.md and man/*.1 against what ftx does (issue 39; user trial cases D8, D12).

examples: every fenced ```sh block of README.md and docs/*.md is run with bash (-e, pipefail), the
  pages in order (README.md first) in ONE folder, as a reader pasting them would, with `ftx`
  (FTX_BIN) first on PATH and the inputs the docs name (docs/converters.md, "The examples'
  inputs"): hf-model (the demo's trained GPT-2, the trained_gpt2 fixture), out/1-gpu and out/2-gpu
  (converted from it here), small text inputs, and the converter tests' tiny checkpoints of each
  kind. A block followed by `<!-- docs-test: skip REASON -->` is not run (a GPU, several nodes, a
  Slurm cluster, minutes of benchmarks): the reasons are printed. A command outside a ```sh block
  (an indented code block, or a ```text block line that starts with `ftx `) is a failure: it would
  escape this test.
pages: the names every block writes (skipped blocks too: -o, --output, --save-act-ranges, --json,
  `> FILE`, cp's target, gemm-tune's default gemm_config.in) begin with their page's name
  (`readme-`, `converters-`, ...), as docs/converters.md promises, so that no page writes over an
  input or another page's output (D8); docs/converters.md's list of convert-hf's architectures names
  every one ftx-convert-hf(1) has a config.json section for (D10).
help: every flag and alias `ftx --help` and `ftx SUB --help` print is in man/ftx.1 and
  man/ftx-SUB.1, and every subcommand has its page, which does not list itself under SEE ALSO (D12).

Usage: docs_test.py [examples|pages|help|--list]   (default examples; FTX_BIN, FTX_FIXTURES,
       FTX_SOURCE_DIR; --list prints the blocks)
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, failures, finish  # noqa: E402

SRC = os.environ.get("FTX_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!-- docs-test: skip (.+?) -->\s*$")
COMMAND = re.compile(r"^\s*([A-Z_]+=\S*\s+)*(ftx|mpirun|scripts/|bench/|sbatch)\b")  # after VAR=value too


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
        "gptj-step": os.path.join(SRC, "tests", "fixtures", "mesh_jax", "step_7"),
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


# Inputs the pages copy with `cp -r` and then write into: a real folder, as a reader's would be (cp -r
# copies a link as a link, and the pages would write into the shared fixture).
COPIED = ("gpt2-tiny",)


def prepare(base, env):
    """The inputs, out/ converted once."""
    for name, target in inputs().items():
        if not check(os.path.exists(target), f"input {name}: {target} is missing (its fixture did not run)"):
            continue
        if name in COPIED:
            shutil.copytree(target, os.path.join(base, name))
        else:
            os.symlink(target, os.path.join(base, name))
    for name, text in TEXT_INPUTS.items():
        with open(os.path.join(base, name), "w") as f:
            f.write(text)
    for g in ("1", "2"):
        r = subprocess.run([os.environ["FTX_BIN"], "convert-hf", "-i", os.path.join(base, "hf-model"), "-o",
                            os.path.join(base, "out"), "-g", g, "-t", "fp16", "--quiet"], capture_output=True, text=True,
                           env=env)
        check(r.returncode == 0, f"converting hf-model for {g} rank(s): {r.stderr.strip()}")


def test_examples(listing):
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(os.path.abspath(env["FTX_BIN"])) + os.pathsep + env.get("PATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    have_mpirun = shutil.which("mpirun") is not None
    tmp = None if listing else tempfile.mkdtemp(prefix="ftx-docs-")
    work = None if listing else os.path.join(tmp, "work")
    if not listing:
        os.makedirs(work)
        prepare(work, env)
    ran, skipped = 0, []
    for page in pages():
        rel = os.path.relpath(page, SRC)
        found, stray = blocks(page)
        for lineno, line in stray:
            check(False, f"{rel}:{lineno}: a command outside a ```sh block, which this test would not run: {line.strip()}")
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
    print(f"{ran} blocks ran, {len(skipped)} skipped, every page in one folder:")
    for s in skipped:
        print("  skipped", s)
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)


# Flags whose value is a file or folder the command writes (ftx's, in the forms the pages use), and
# those of one subcommand only (inspect's --json is a switch).
OUTPUT_FLAGS = ("-o", "--output", "--out-dir", "--saved-dir", "--save-act-ranges")
SUBCOMMAND_OUTPUT_FLAGS = {"prompt-convert": ("--json",)}


def written(text):
    """The names (first path component) the commands of a block write."""
    names = []
    for line in text.replace("\\\n", " ").splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split, lex.commenters = True, "#"
        words, command = list(lex), []
        for w in words + [";"]:
            if w not in ("|", "||", "&&", ";"):
                command.append(w)
                continue
            given = None
            flags = OUTPUT_FLAGS + sum((f for c, f in SUBCOMMAND_OUTPUT_FLAGS.items() if c in command), ())
            for i, a in enumerate(command[:-1]):
                if a in flags or a in (">", ">>"):
                    given = command[i + 1]
                    names.append(given)
            if command[:1] == ["cp"]:
                names.append(command[-1])
            if "gemm-tune" in command and given is None:
                names.append("gemm_config.in")  # its default output, in the working folder
            command = []
    return [n.split("/")[0] for n in names if n not in ("-", "/dev/null")]


def prefix(page):
    stem = os.path.splitext(os.path.basename(page))[0]
    return "readme-" if stem == "README" else stem + "-"


def test_D8_pages_write_no_shared_output_name():
    taken = set(inputs()) | set(TEXT_INPUTS) | {"out"}
    writers = {}
    for page in pages():
        rel = os.path.relpath(page, SRC)
        for lineno, _, text, _ in blocks(page)[0]:
            for name in written(text):
                check(name not in taken, f"{rel}:{lineno}: writes {name}, one of the examples' inputs")
                check(name.startswith(prefix(page)),
                      f"{rel}:{lineno}: writes {name}, which does not begin with the page's {prefix(page)}")
                other = writers.setdefault(name, rel)
                check(other == rel, f"{rel}:{lineno}: writes {name}, as {other} does")
    print(f"{len(writers)} output names written by the pages: {', '.join(sorted(writers))}")


def test_D10_converters_page_names_every_architecture():
    man = open(os.path.join(SRC, "man", "ftx-convert-hf.1"), encoding="utf-8").read()
    archs = [a for a in re.findall(r"^\.SS (\S+)$", man, re.M)]
    page = open(os.path.join(SRC, "docs", "converters.md"), encoding="utf-8").read()
    m = re.search(r"`convert-hf` HuggingFace\s+folders \(([^)]*)\)", page)
    if not check(m is not None, "docs/converters.md: no \"`convert-hf` HuggingFace folders (...)\" list"):
        return
    listed = set(re.findall(r"[a-z0-9_]+", m.group(1)))
    missing = [a for a in archs if a not in listed]
    check(len(archs) >= 10 and not missing, f"docs/converters.md's convert-hf list lacks {missing} (of {archs})")
    print(f"docs/converters.md lists convert-hf's {len(archs)} architectures: {', '.join(archs)}")


def help_options(args):
    """The flags and aliases `ftx ARGS --help` prints in its Options (CLI11: `  -o,--out,--alias TYPE  text`),
    and the subcommands it lists."""
    r = subprocess.run([os.environ["FTX_BIN"], *args, "--help"], capture_output=True, text=True)
    check(r.returncode == 0, f"ftx {' '.join(args)} --help exited {r.returncode}: {r.stderr.strip()}")
    flags, subs, section = [], [], None
    for line in r.stdout.splitlines():
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        m = re.match(r"^  (\S+)", line)
        if m and section == "Options":
            flags += [f for f in m.group(1).split(",") if f.startswith("-")]
        elif m and section == "Subcommands":
            subs.append(m.group(1))
    return flags, subs


def man_text(name):
    """man/NAME.1 with roff's escaped dashes and font changes undone, or None."""
    path = os.path.join(SRC, "man", name + ".1")
    if not os.path.exists(path):
        return None
    return re.sub(r"\\f[BIRP]", "", open(path, encoding="utf-8").read().replace("\\-", "-"))


def test_D12_every_help_flag_is_in_the_man_page():
    top, subs = help_options([])
    check(len(subs) >= 12, f"ftx --help lists {subs}")
    pages = {"ftx": top}
    for sub in subs:
        pages["ftx-" + sub] = help_options([sub])[0]
    for name, flags in pages.items():
        man = man_text(name)
        if not check(man is not None, f"man/{name}.1 is missing"):
            continue
        # --help itself is CLI11's on every subcommand; the pages leave it out.
        missing = [f for f in flags if f not in ("-h", "--help") and
                   not re.search(r"(?<![\w-])" + re.escape(f) + r"(?![\w-])", man)]
        check(not missing, f"man/{name}.1 lacks {', '.join(missing)}, which `{name.replace('-', ' ', 1)} --help` lists")
        see_also = man[man.find(".SH SEE ALSO"):] if ".SH SEE ALSO" in man else ""
        check(see_also != "", f"man/{name}.1 has no SEE ALSO")
        check(not re.search(r"(?<![\w-])" + re.escape(name) + r"\s*\(1\)", see_also),
              f"man/{name}.1's SEE ALSO lists the page itself")
        for ref in re.findall(r"(?<![\w-])(ftx(?:-[a-z-]+)?)\s*\(1\)", see_also):
            check(ref in pages, f"man/{name}.1's SEE ALSO lists {ref}(1), which is no page of a subcommand")
        print(f"man/{name}.1: the {len(flags)} flags and aliases of --help")
    extra = sorted(set(os.path.splitext(n)[0] for n in os.listdir(os.path.join(SRC, "man"))) - set(pages))
    check(not extra, f"man pages of no subcommand: {extra}")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "examples"
    if mode in ("examples", "--list"):
        test_examples(mode == "--list")
        if mode == "--list":
            return
    elif mode == "pages":
        test_D8_pages_write_no_shared_output_name()
        test_D10_converters_page_names_every_architecture()
    elif mode == "help":
        test_D12_every_help_flag_is_in_the_man_page()
    else:
        sys.exit(__doc__)
    finish(f"docs {mode}")


if __name__ == "__main__":
    main()
