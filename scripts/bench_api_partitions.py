"""What a partition costs in the Python API: ``curate.deduplicate`` of one frame cut into N partitions.

Usage:

    python scripts/bench_api_partitions.py [--partitions 2 64] [--rounds 3] [--data ../shared/data]

20 Newsgroups (its 3 shards, 18,846 posts, 36 MB of text) as one pandas frame, given to
``curate.deduplicate`` as ``dd.from_pandas(frame, npartitions=N)`` for each N in turn, round
after round, on one ``LocalCluster`` of 2 single-threaded worker processes (P2P shuffles), as
a training pipeline would call it. Prints, per N, the median wall seconds of
``deduplicate(...).compute()`` (graph building included) and the extra seconds per partition
against the first N; the kept and removed counts must agree across N.
"""

import argparse
import gzip
import json
import statistics
import time
from pathlib import Path

import dask.dataframe as dd
import pandas as pd
from distributed import Client, LocalCluster

import curate

ROOT = Path(__file__).resolve().parents[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", nargs="+", type=int, default=[2, 64])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    rows = [
        json.loads(line)
        for shard in sorted((args.data / "20news").glob("*.jsonl.gz"))
        for line in gzip.decompress(shard.read_bytes()).splitlines()
    ]
    frame = pd.DataFrame(rows)[["id", "text"]]
    seconds, counts = {n: [] for n in args.partitions}, {}
    env = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, env=env) as cluster:
        with Client(cluster):
            for _ in range(args.rounds):
                for n in args.partitions:
                    started = time.perf_counter()
                    kept, removed, _ = curate.deduplicate(dd.from_pandas(frame, npartitions=n)).compute()
                    seconds[n].append(time.perf_counter() - started)
                    counts[n] = (len(kept), len(removed))
    first = args.partitions[0]
    for n in args.partitions:
        median = statistics.median(seconds[n])
        extra = (median - statistics.median(seconds[first])) / (n - first) if n != first else 0.0
        print(
            f"{n} partitions: {median:.1f} s (median of {args.rounds}), +{extra:.2f} s per partition; "
            f"kept {counts[n][0]:,}, removed {counts[n][1]:,}"
        )
    if len(set(counts.values())) > 1:
        raise SystemExit(f"the counts differ between partitionings: {counts}")


if __name__ == "__main__":
    main()
