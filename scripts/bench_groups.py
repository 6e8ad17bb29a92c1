"""The ``groups`` stage's kernel, ``greedy_representatives``, on one connected component of n documents.

Usage:

    python scripts/bench_groups.py [--sizes 1000 2000 4000 8000] [--rounds 3]

Two shapes of component, built here from one random text (seeded, so every run builds the same):

- ``chain``: document i is characters ``[51 i, 51 i + 1000)`` of the text, so neighbours are at
  Jaccard about 0.90 (character 24-grams) and documents three apart under 0.8: LSH joins the
  whole chain into one component, and each representative keeps about two documents.
- ``giant``: n copies of one 1,500-character text, each with 1 to 3 words replaced: one
  representative keeps nearly all.

Prints the median seconds of ``greedy_representatives(..., threshold=0.8, width=24)`` per shape
and size (compilation excluded) and how many representatives it chose. Run it with
``PYTHONPATH`` set to two checkouts in turn to compare them.
"""

import argparse
import random
import statistics
import string
import time

import numpy as np

from curate.kernels.jaccard import greedy_representatives


def buffers(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [t.encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in encoded])
    return offsets, np.frombuffer(b"".join(encoded), dtype=np.uint8)


def corpus(shape: str, n: int) -> list[str]:
    rng = random.Random(1)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    if shape == "chain":
        text = " ".join(rng.choice(words) for _ in range((n * 51 + 1000) // 5 + 100))
        return [text[i * 51 : i * 51 + 1000] for i in range(n)]
    base = [rng.choice(words) for _ in range(260)]
    copies = []
    for _ in range(n):
        copy = list(base)
        for _ in range(rng.randint(1, 3)):
            copy[rng.randrange(len(copy))] = rng.choice(words)
        copies.append(" ".join(copy))
    return copies


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # compile: the first row's comparisons, then the split of the rows it did not take
    greedy_representatives(*buffers(["a b c", "x y z", "x y z"]), np.array([0, 3]), 0.8, 24)
    print("shape  documents  seconds  representatives")
    for shape in ("chain", "giant"):
        for n in args.sizes:
            offsets, data = buffers(corpus(shape, n))
            times = []
            for _ in range(args.rounds):
                start = time.perf_counter()
                rep, _ = greedy_representatives(offsets, data, np.array([0, n]), 0.8, 24)
                times.append(time.perf_counter() - start)
            print(f"{shape:5}  {n:9,}  {statistics.median(times):7.3f}  {len(set(rep.tolist())):15,}")


if __name__ == "__main__":
    main()
