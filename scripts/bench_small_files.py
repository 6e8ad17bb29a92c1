"""Many small files against the same documents in one file: `curate dedup` end to end.

Usage:

    python scripts/bench_small_files.py --corpus ../shared/data/20news --files 400 1500 [--compress] [--override]

For each N, the first N documents of the corpus are written once as N JSONL files of one
document each (``doc-NNNNN.jsonl``, gzip with ``--compress``) and once as one file, then
``curate dedup`` (a fresh process, 2 workers of 1 thread) runs on each, one after the other, so
the ratio is measured under the same load. ``--override`` also runs the N files with
``--files-per-partition 1`` (one partition per file, the planning before issue 16).
Prints wall time, the partitions and each stage's seconds from ``summary.json``.
"""

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from curate.io import read_documents


def dedup(inputs: str, out: Path, *extra: str) -> tuple[float, dict]:
    command = [
        sys.executable,
        "-m",
        "curate",
        "dedup",
        inputs,
        "-o",
        str(out),
        "--overwrite",
        "--no-progress",
        "--n-workers",
        "2",
        "--threads-per-worker",
        "1",
        *extra,
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, json.loads((out / "summary.json").read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--files", type=int, nargs="+", default=[400])
    parser.add_argument("--compress", action="store_true", help="gzip each small file")
    parser.add_argument("--override", action="store_true", help="also run with --files-per-partition 1")
    args = parser.parse_args()
    docs = read_documents(args.corpus).head(max(args.files), npartitions=-1)
    lines = [
        json.dumps({"id": i, "text": t}, ensure_ascii=False).encode() + b"\n" for i, t in zip(docs["id"], docs["text"])
    ]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in args.files:
            many, one = work / f"many-{n}", work / f"one-{n}"
            many.mkdir()
            one.mkdir()
            for i, line in enumerate(lines[:n]):
                name = many / f"doc-{i:05}.jsonl"
                if args.compress:
                    Path(f"{name}.gz").write_bytes(gzip.compress(line))
                else:
                    name.write_bytes(line)
            (one / "all.jsonl").write_bytes(b"".join(lines[:n]))
            runs = [("one file", str(one), ()), (f"{n} files", str(many), ())]
            if args.override:
                runs.append((f"{n} files, --files-per-partition 1", str(many), ("--files-per-partition", "1")))
            results = {}
            for label, inputs, extra in runs:
                wall, summary = dedup(inputs, work / "out", *extra)
                results[label] = wall
                stages = ", ".join(f"{k} {v:.1f}" for k, v in summary["seconds"].items() if k != "total")
                print(
                    f"{label}: {wall:.1f} s wall, {summary['counts']['input']['partitions']} partition(s), "
                    f"{summary['counts']['output']['kept']} kept; stages (s): {stages}",
                    flush=True,
                )
            print(f"N = {n}: {n} files / one file = {results[f'{n} files'] / results['one file']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
