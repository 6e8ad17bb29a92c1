"""Seconds numba takes to compile each CPU kernel on its first call, with an empty cache.

Usage: python scripts/bench_compile.py

A user's first run, and every fresh environment (a container, a CI job, a new node), compiles
the kernels it calls before using them; later runs load them from numba's cache beside the code.
This runs each kernel once on a few tiny documents in this process, with ``NUMBA_CACHE_DIR`` set
to a new empty folder (removed after), and prints the seconds of each first call and their sum:
MinHash at 32 and 64 bits, LSH bands, verification's Jaccard (stopping early at a threshold, and
exact), the greedy split (its first comparisons and the split of the rows left) and the JSONL
nesting check. A kernel called by an earlier one (the shingle hashes, by MinHash) counts in the
first. Run it with ``PYTHONPATH`` set to two checkouts in turn to compare them.
"""

import os
import shutil
import tempfile
import time

CACHE = tempfile.mkdtemp(prefix="numba-cache-")
os.environ["NUMBA_CACHE_DIR"] = CACHE  # before numba is imported

import numpy as np  # noqa: E402

from curate.kernels.jaccard import greedy_representatives, jaccard_indexed  # noqa: E402
from curate.kernels.lsh import band_buckets  # noqa: E402
from curate.kernels.minhash import minhash, permutations  # noqa: E402
from curate.kernels.nesting import nested_deeper  # noqa: E402


def main() -> None:
    texts = [b"abcdefghijklmnopqrstuvwxyz0123"] * 2 + [b"zyxwvutsrqponmlkjihgfedcba9876"] * 2
    offsets = np.array([0, 30, 60, 90, 120], dtype=np.int64)
    data = np.frombuffer(b"".join(texts), dtype=np.uint8)
    one, two = np.array([0]), np.array([1])
    calls = {
        "minhash 32-bit": lambda: minhash(offsets, data, 0, *permutations(4, 1, 32), 5),
        "minhash 64-bit": lambda: minhash(offsets, data, 0, *permutations(4, 1, 64), 5),
        "lsh bands": lambda: band_buckets(minhash(offsets, data, 0, *permutations(4, 1, 32), 5)[0], 2, 2),
        "jaccard, at least 0.8": lambda: jaccard_indexed(offsets, data, one, two, 5, at_least=0.8),
        "jaccard, exact": lambda: jaccard_indexed(offsets, data, one, two, 5),
        # one group: rows 0-1 alike, rows 2-3 alike but not like row 0, so both steps run
        "greedy split": lambda: greedy_representatives(offsets, data, np.array([0, 4]), 0.8, 5),
        "nesting check": lambda: nested_deeper(data, np.array([0]), np.array([30]), 1),
    }
    total = 0.0
    try:
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            seconds = time.perf_counter() - start
            total += seconds
            print(f"{name:24} {seconds:6.2f} s")
        print(f"{'all':24} {total:6.2f} s")
    finally:
        shutil.rmtree(CACHE, ignore_errors=True)


if __name__ == "__main__":
    main()
