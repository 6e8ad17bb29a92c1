"""What verification costs: curate with and without it, runs interleaved, medians.

Usage:

    python scripts/bench_verify.py [--corpora 20news,enron_spam,reuters,bible/verses]
                                   [--threshold 0.8] [--rounds 5] [--data ../shared/data]

Each round runs, on each corpus, the default (bands chosen for the threshold, verified), the
same bands without verification, and NeMo Curator's 20 x 13 with and without verification,
one after the other, so that a change in machine load hits all four alike. Reported: the
median pipeline total (``summary.json``: read to write, no cluster start-up) of each and the
ratio of the default to the unverified runs. One cluster of 2 single-threaded worker
processes; a first small run compiles the kernels in the workers.
"""

import argparse
import logging
import statistics
import tempfile
from pathlib import Path

from curate.cluster import connect
from curate.config import ClusterConfig, FuzzyConfig, RunConfig
from curate.pipeline import dedup


def variants(threshold: float) -> dict[str, FuzzyConfig]:
    default = FuzzyConfig(threshold=threshold)
    bands = {"num_bands": default.num_bands, "rows_per_band": default.rows_per_band}
    nemo = {"num_bands": 20, "rows_per_band": 13}
    return {
        f"verified {default.num_bands}x{default.rows_per_band} (default)": default,
        f"unverified {default.num_bands}x{default.rows_per_band}": FuzzyConfig(
            threshold=threshold, verify=False, **bands
        ),
        "verified 20x13": FuzzyConfig(threshold=threshold, **nemo),
        "unverified 20x13": FuzzyConfig(threshold=threshold, verify=False, **nemo),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", default="20news,enron_spam,reuters,bible/verses")
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()
    logging.getLogger("distributed").setLevel(logging.ERROR)
    configs = variants(args.threshold)
    names = list(configs)
    with connect(ClusterConfig(n_workers=2, threads_per_worker=1)), tempfile.TemporaryDirectory() as scratch:
        out = str(Path(scratch) / "out")
        dedup([str(args.data / "reuters")], out, RunConfig(), overwrite=True)  # compile, warm the disk cache
        print(f"threshold {args.threshold}, median of {args.rounds} interleaved runs, seconds")
        print(f"| corpus | {' | '.join(names)} | default / unverified same bands | default / unverified 20x13 |")
        print("|---|" + "---:|" * (len(names) + 2))
        for corpus in args.corpora.split(","):
            seconds = {name: [] for name in names}
            for _ in range(args.rounds):
                for name in names:
                    summary = dedup([str(args.data / corpus)], out, RunConfig(fuzzy=configs[name]), overwrite=True)
                    seconds[name].append(summary["seconds"]["total"])
            median = [statistics.median(seconds[name]) for name in names]
            cells = " | ".join(f"{m:.1f}" for m in median)
            print(f"| {corpus} | {cells} | {median[0] / median[1]:.2f} | {median[0] / median[3]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
