#!/usr/bin/python3
"""`ftx inspect` of Megatron Core's torch_dist checkpoints (the committed fixtures of
tests/fixtures/mcore, written by megatron-core): the iteration folder, the .nemo that holds one in
model_weights/ and its extracted folder list every tensor (a split tensor chunk by chunk, with
--stats summing to the same totals as the legacy layout's shards); a .distcp file alone gets a
one-line error naming the folder to inspect.

Usage: mcore_inspect_test.py list
Environment: FTX_BIN, FTX_FIXTURES (engine/ and convert/ fixtures), FTX_SOURCE_DIR.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/e2e: e2e_util
from e2e_util import check, error_lines, extracted, finish, ftx  # noqa: E402

SRC = os.environ["FTX_SOURCE_DIR"]
MCORE = os.path.join(SRC, "tests", "fixtures", "mcore")


def abs_sum(*args):
    """Sum of inspect --stats --json's abs_sum over the tensors (TransformerEngine's _extra_state
    bytes left out), or None when inspect failed."""
    r = ftx("inspect", "--stats", "--json", *args)
    if r.returncode != 0:
        return None
    rows = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]
    return sum(j["abs_sum"] for j in rows if "_extra_state" not in j["name"])


def inspect_lines(*args):
    r = ftx("inspect", *args)
    return r, [ln.split("\t") for ln in r.stdout.splitlines() if ln.strip()]


def test_list(tmp):
    it = "iter_0000010"
    for model in ("classic", "modern"):
        # Every layout holds the same weights (tests/fixtures/mcore/SOURCE.md): the TP 1 legacy
        # shard's total is what every torch_dist folder must list, each element once.
        want = abs_sum(os.path.join(MCORE, model, "megatron", "tp1pp1", "legacy", it, "mp_rank_00", "model_optim_rng.pt"))
        for layout in ("tp1pp1", "tp2pp1", "tp2pp2"):
            dist = os.path.join(MCORE, model, "megatron", layout, "dist", it)
            r, rows = inspect_lines(dist)
            names = [row[0] for row in rows]
            check(r.returncode == 0 and any(n.startswith("embedding.word_embeddings.weight") for n in names)
                  and any(n.startswith("decoder.layers.") for n in names),
                  f"inspect {model}/{layout} dist: {r.returncode} {r.stderr.strip()!r} {names[:4]}")
            got = abs_sum(dist)
            check(want is not None and got is not None and abs(got - want) <= 1e-9 * want,
                  f"inspect --stats {model}/{layout} dist: abs_sum {got}, the legacy shard's {want}")
            # A .distcp shard alone: where to look instead.
            distcp = sorted(f for f in os.listdir(dist) if f.endswith(".distcp"))[0]
            r = ftx("inspect", os.path.join(dist, distcp))
            errs = error_lines(r)
            check(r.returncode == 1 and len(errs) == 1 and "a shard of a torch_dist checkpoint" in errs[0]
                  and f"ftx inspect {dist}" in errs[0], f"inspect a .distcp: {r.returncode} {r.stderr.strip()!r}")
    # The distributed .nemo, as an archive and extracted: the tensors of model_weights/.
    nemo = os.path.join(MCORE, "modern", "nemo", "tp2pp1_dist.nemo")
    r, rows = inspect_lines(nemo)
    names = [row[0] for row in rows]
    check(r.returncode == 0 and any(n.startswith("model_weights/model.decoder.layers.") for n in names)
          and any(n.startswith("model_weights/model.embedding.word_embeddings.weight") for n in names),
          f"inspect a dist .nemo: {r.returncode} {r.stderr.strip()!r} {names[:4]}")
    stage = extracted(nemo, os.path.join(tmp, "nemo"))
    r2, rows2 = inspect_lines(stage)
    check(r2.returncode == 0 and [row[0] for row in rows2] == names,
          f"inspect the extracted .nemo lists the same: {r2.returncode} {r2.stderr.strip()!r}")
    r, _ = inspect_lines("--stats", nemo)
    check(r.returncode == 0 and "sum=" in r.stdout, f"inspect --stats of a dist .nemo: {r.stderr.strip()!r}")


def main():
    what = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        {"list": test_list}[what](tmp)
    finish(f"mcore_inspect_test {what}")


if __name__ == "__main__":
    main()
