"""Memory pressure: runs of ``curate dedup`` with and without worker memory limits, side by side.

For each corpus, runs the CLI once per memory limit (each run in its own process, 2 workers) and
prints, from ``summary.json``: documents, removed, wall time, peak RSS of the client and of the
largest worker, bytes spilled to ``--local-directory``, and whether ``removed.parquet``,
``duplicates.parquet`` and ``deduplicated/`` are byte-identical to the first run's.

Usage: python scripts/bench_memory.py CORPUS [CORPUS ...] [--limits auto,1GB] [--work /tmp/curate-mem]
(make a large corpus with ``scripts/make_edited_corpus.py``).
"""

import argparse
import filecmp
import json
import subprocess
import sys
import time
from pathlib import Path


def same_outputs(a: Path, b: Path) -> bool:
    files = ["removed.parquet", "duplicates.parquet"]
    parts = sorted(p.name for p in (a / "deduplicated").iterdir())
    if parts != sorted(p.name for p in (b / "deduplicated").iterdir()):
        return False
    files += [f"deduplicated/{name}" for name in parts]
    return all(filecmp.cmp(a / f, b / f, shallow=False) for f in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+")
    parser.add_argument("--limits", default="auto,1GB", help="comma-separated --memory-limit values")
    parser.add_argument("--work", default="/tmp/curate-mem", type=Path)
    args = parser.parse_args()
    print(
        "| corpus | memory limit | docs | removed | wall s | client peak GB | largest worker peak GB | spilled GB | identical |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for corpus in args.corpora:
        first = None
        for limit in args.limits.split(","):
            out = args.work / f"{Path(corpus).name}-{limit}"
            command = [
                sys.executable,
                "-m",
                "curate",
                "dedup",
                corpus,
                "-o",
                str(out),
                "--overwrite",
                "--no-progress",
                "--n-workers",
                "2",
                "--memory-limit",
                limit,
                "--local-directory",
                str(args.work / "scratch"),
            ]
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - started
            summary = json.loads((out / "summary.json").read_text())
            peak, counts = summary["peak_rss_bytes"], summary["counts"]
            identical = "-" if first is None else ("yes" if same_outputs(first, out) else "NO")
            first = first or out
            print(
                f"| {Path(corpus).name} | {limit} | {counts['input']['documents']:,} | {counts['output']['removed']:,} | {wall:.0f} | "
                f"{peak['client'] / 1e9:.2f} | {max(peak['workers'].values()) / 1e9:.2f} | {summary['spilled_bytes'] / 1e9:.2f} | {identical} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
