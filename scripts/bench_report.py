"""How long `curate report` and `curate inspect` take on a finished run, and what they read.

Usage:

    python scripts/bench_report.py OUT [--rounds 5]

Each round runs, as a user would (a new process each, start-up included), `curate report OUT`
and `curate inspect OUT --sample 20`, one after the other. Reported: the median wall time
(seconds) and the largest peak RSS (bytes, the process's own, from ``os.wait4``) of each, and the size of what the run holds next to
what they read: the input files (their texts are read only where a shown document lies) and
the two Parquet tables.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(command: list[str]) -> tuple[float, int]:
    """Wall time (s) and peak RSS (bytes) of a child process."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage
    seconds = time.perf_counter() - start
    if status:
        raise RuntimeError(f"{' '.join(command)} failed ({status})")
    return seconds, usage.ru_maxrss * 1024  # KiB on Linux


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="output folder of a curate dedup run")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    curate = [sys.executable, "-m", "curate"]
    commands = {
        "report": [*curate, "report", str(args.out)],
        "inspect --sample 20": [*curate, "inspect", str(args.out), "--sample", "20"],
    }
    results = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, command in commands.items():
            results[name].append(timed(command))
    summary = json.loads((args.out / "summary.json").read_text())
    inputs = sum(f["size"] for f in summary["input_files"])
    tables = sum((args.out / name).stat().st_size for name in ("removed.parquet", "duplicates.parquet"))
    print(
        f"{args.out}: {summary['counts']['input']['documents']:,} documents, {summary['counts']['output']['removed']:,} removed; "
        f"input files {inputs / 1e6:,.1f} MB, removed + duplicates tables {tables / 1e3:,.1f} KB"
    )
    print("| command | median s | runs (s) | peak RSS GB |")
    print("|---|---:|---|---:|")
    for name, runs in results.items():
        seconds = [s for s, _ in runs]
        print(
            f"| `curate {name}` | {statistics.median(seconds):.2f} | {', '.join(f'{s:.2f}' for s in seconds)} | {max(r for _, r in runs) / 1e9:.2f} |"
        )


if __name__ == "__main__":
    main()
