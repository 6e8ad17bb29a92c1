"""A new dump deduplicated against a published corpus (``--reference``), side by side.

Usage:

    python scripts/bench_reference.py --corpus ../shared/data/20news [--rounds 3]

The corpus's files but the last are the published corpus, the last file is the new dump (20
Newsgroups: 17,036 published documents, 1,810 new). Each round runs ``curate dedup`` (a fresh
process each) four ways, one after the other, so that they share the machine's load: the new
dump alone, the new dump ``--reference`` the published files, both as inputs (the
published documents then may be removed and are written again), and an empty dump
``--reference`` the published files. Prints each run's pipeline seconds (``summary.json``),
candidate pairs and removals, then the medians.
"""

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def dedup(out: Path, *args: str) -> dict:
    command = [sys.executable, "-m", "curate", "dedup", *args, "-o", str(out), "--overwrite", "--no-progress"]
    subprocess.run(command, check=True, capture_output=True)
    return json.loads((out / "summary.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    files = sorted(p for p in args.corpus.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz", ".jsonl.zst")))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        published, new, empty = tmp / "published", tmp / "new", tmp / "empty"
        for folder, chosen in ((published, files[:-1]), (new, files[-1:])):
            folder.mkdir()
            for path in chosen:
                shutil.copy(path, folder / path.name)
        empty.mkdir()
        with gzip.open(empty / "week.jsonl.gz", "wt"):
            pass
        runs = {
            "new alone": [str(new)],
            "new --reference published": [str(new), "--reference", str(published)],
            "published and new as inputs": [str(published), str(new)],
            "empty --reference published": [str(empty), "--reference", str(published)],
        }
        dedup(tmp / "warm", *runs["new alone"])  # the kernels compiled once, before the timings
        seconds = {name: [] for name in runs}
        for round_ in range(args.rounds):
            for name, given in runs.items():
                summary = dedup(tmp / "out", *given)
                counts = summary["counts"]
                seconds[name].append(summary["seconds"]["total"])
                pairs = counts.get("fuzzy", {}).get("candidate_edges")
                print(
                    f"round {round_ + 1} {name}: {seconds[name][-1]:.2f} s, {pairs} candidate pairs, {counts['output']}"
                )
        for name, values in seconds.items():
            print(f"median {name}: {statistics.median(values):.2f} s")


if __name__ == "__main__":
    main()
