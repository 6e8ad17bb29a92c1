"""End-to-end scaling: wall time and peak memory of ``curate dedup`` on growing corpus slices.

Usage:

    python scripts/bench_scaling.py [--corpus ../shared/data/gutenberg] [--sizes 25,50,100,200,450]
                                    [--plot docs/img/scaling.png]

Each slice is the corpus's first documents up to SIZE MB of text, written as uncompressed
JSONL to a scratch folder (not timed). ``curate dedup`` then runs as a fresh process with its
embedded cluster of 2 single-threaded workers. Reported: process wall time, the pipeline's own
total (``summary.json``, without interpreter and cluster start-up), peak RSS summed over the
client and workers, and the exponent k of a least-squares fit time ~ size^k.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from curate.io import read_documents


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="../shared/data/gutenberg")
    parser.add_argument("--sizes", default="25,50,100,200,450")
    parser.add_argument("--plot", default="docs/img/scaling.png")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    docs = read_documents(args.corpus).compute().drop(columns="_doc")
    cumulative = np.cumsum(docs.text.str.encode("utf-8").str.len().to_numpy()) / 1e6
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for size in sizes:
            count = min(len(docs), int(np.searchsorted(cumulative, size)) + 1)
            mb = cumulative[count - 1]
            folder = Path(scratch) / f"slice-{size:g}"
            folder.mkdir()
            docs.iloc[:count].to_json(folder / "part.jsonl", orient="records", lines=True, force_ascii=False)
            out = Path(scratch) / f"out-{size:g}"
            command = [
                sys.executable,
                "-m",
                "curate",
                "dedup",
                str(folder),
                "-o",
                str(out),
                "--no-progress",
                "--n-workers",
                "2",
                "--threads-per-worker",
                "1",
            ]
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - start
            summary = json.loads((out / "summary.json").read_text())
            rows.append((mb, count, wall, summary["seconds"]["total"], summary["peak_rss_bytes"]["total"] / 1e9))
            print(
                f"{mb:7.1f} MB {count:6d} docs  wall {wall:6.1f} s  pipeline {rows[-1][3]:6.1f} s  peak RSS {rows[-1][4]:.2f} GB",
                flush=True,
            )
    mb, _, wall, pipeline, rss = map(np.array, zip(*rows))
    exponent = np.polyfit(np.log(mb), np.log(pipeline), 1)[0]
    large = mb >= 100  # where fixed costs (cluster start, compilation checks) no longer dominate
    upper = np.polyfit(np.log(mb[large]), np.log(pipeline[large]), 1)[0] if large.sum() >= 2 else float("nan")
    print(f"fitted exponent of pipeline time vs size: {exponent:.2f} (all sizes), {upper:.2f} (>= 100 MB)")
    plot(mb, wall, pipeline, rss, exponent, args.plot)


def plot(mb, wall, pipeline, rss, exponent, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.loglog(mb, pipeline, "o-", label=f"pipeline (time ~ size^{exponent:.2f})")
    left.loglog(mb, wall, "s--", label="process wall time")
    left.set_xticks(mb, [f"{m:.0f}" for m in mb])
    left.minorticks_off()
    left.set_xlabel("text (MB)")
    left.set_ylabel("seconds")
    left.legend()
    left.grid(True, which="both", alpha=0.3)
    right.plot(mb, rss, "o-")
    right.set_xlabel("text (MB)")
    right.set_ylabel("peak RSS, all processes (GB)")
    right.set_ylim(bottom=0)
    right.grid(True, alpha=0.3)
    fig.suptitle("curate dedup, 2 workers, gutenberg slices")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
