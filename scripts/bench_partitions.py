"""What a partition costs: `curate dedup` on one corpus cut into more and more partitions.

Usage:

    python scripts/bench_partitions.py [--old REV] [--blocksizes 64MB 2MB 500KB] [--rounds 3] [--data ../shared/data]

20 Newsgroups (its 3 shards decompressed into one 38.8 MB JSONL file, so that ``--blocksize``
cuts it) is deduplicated at each block size by the code at ``--old`` (a detached git worktree
on ``PYTHONPATH``, as in ``scripts/bench_api.py``) and by this checkout, alternately, each as a
fresh ``curate dedup`` process (2 single-threaded workers by default on these machines). Prints,
per block size, the partitions, the median of ``summary.json``'s total seconds (read to write)
for each, their ratio, and this checkout's extra seconds per partition against the first block
size. The outputs of old and new are compared byte for byte (``removed.parquet``,
``duplicates.parquet``, the kept lines).
"""

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_api import ROOT, checkout, environment


def dedup(tree: Path, corpus: Path, out: Path, blocksize: str) -> tuple[float, int]:
    command = [sys.executable, "-c", "from curate.cli import main; main()", "dedup", str(corpus), "-o", str(out)]
    command += ["--blocksize", blocksize, "--overwrite", "--no-progress"]
    subprocess.run(command, env=environment(tree), cwd=tree, capture_output=True, check=True)
    summary = json.loads((out / "summary.json").read_text())
    return summary["seconds"]["total"], summary["counts"]["input"]["partitions"]


def outputs(out: Path) -> tuple[bytes, ...]:
    kept = b"".join(p.read_bytes() for p in sorted((out / "deduplicated").iterdir()))
    return (out / "removed.parquet").read_bytes(), (out / "duplicates.parquet").read_bytes(), kept


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default="9a2642f", help="the revision before align shuffled with the run's method")
    parser.add_argument("--blocksizes", nargs="+", default=["64MB", "2MB", "500KB"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        corpus = scratch / "20news.jsonl"
        with corpus.open("wb") as f:
            for shard in sorted((args.data / "20news").glob("*.jsonl.gz")):
                f.write(gzip.decompress(shard.read_bytes()))
        trees = {"old": checkout(args.old, scratch), "new": ROOT}
        first = None
        try:
            for blocksize in args.blocksizes:
                seconds, parts = {name: [] for name in trees}, {}
                for _ in range(args.rounds):
                    for name, tree in trees.items():
                        total, parts[name] = dedup(tree, corpus, scratch / f"out-{name}", blocksize)
                        seconds[name].append(total)
                same = outputs(scratch / "out-old") == outputs(scratch / "out-new")
                old, new = (statistics.median(seconds[name]) for name in trees)
                line = f"--blocksize {blocksize}: {parts['new']} partitions, old {old:.1f} s, new {new:.1f} s, new/old {new / old:.2f}"
                if first is None:
                    first = (parts["new"], new)
                elif parts["new"] > first[0]:
                    line += f", +{(new - first[1]) / (parts['new'] - first[0]):.2f} s per partition"
                print(f"{line}; outputs {'identical' if same else 'DIFFER'}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees["old"])], check=False)


if __name__ == "__main__":
    main()
