"""The kernels' throughput on one core: MinHash with its roofline (the shingle hash alone), and
the verification's Jaccard.

Usage: python scripts/bench_kernel.py [CORPUS_DIR] [--part minhash|jaccard|all]
(default ../shared/data/20news, all)

MinHash: char 24-grams, 260 hashes (NeMo Curator's). For each of 32- and 64-bit prints MB/s of
UTF-8 text (best of 3 after a warm-up call) for the full kernel and for the shingle-hash pass
alone (MurmurHash3 of every 24-character window as the kernel hashes them, ``shingle_hashes``,
no permutations): no MinHash kernel that hashes every window can beat the second figure, so the
ratio is the kernel's roofline fraction.

Jaccard: ``jaccard_indexed`` (the verification kernel) of as many random pairs as there are
documents, ordered by their first document as a partition's edges are, at threshold 0.8, for char
24-grams and word 5-grams; MB/s of the pairs' text (both documents of each pair counted). The
part uses nothing newer than that function, so it runs against an older tree for a side by side.
"""

import argparse
import time

import numpy as np
from numba import njit

from curate.backend import text_buffers
from curate.io import read_documents
from curate.kernels.jaccard import jaccard_indexed
from curate.kernels.minhash import minhash, permutations


def best_seconds(fn, repeats=3):
    fn()  # compile / warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_minhash(offsets, data) -> None:
    from curate.kernels.shingles import shingle_hashes, window_scratch

    @njit(nogil=True)
    def hash_windows_only(offsets, data, seed, width, wide):
        acc = np.uint64(0)  # folded so the hashes are not optimised away
        longest = 0
        for i in range(offsets.shape[0] - 1):
            longest = max(longest, offsets[i + 1] - offsets[i])
        scratch, out = window_scratch(longest), np.empty(longest + 1, dtype=np.uint64)
        for i in range(offsets.shape[0] - 1):
            for k in range(shingle_hashes(data, offsets[i], offsets[i + 1], width, False, seed, wide, scratch, out)):
                acc ^= out[k]
        return acc

    mb = len(data) / 1e6
    for bits in (32, 64):
        a, b = permutations(260, 42, bits)
        kernel = mb / best_seconds(lambda a=a, b=b: minhash(offsets, data, 42, a, b, 24))
        roof = mb / best_seconds(lambda bits=bits: hash_windows_only(offsets, data, np.uint64(42), 24, bits == 64))
        print(
            f"{bits}-bit: kernel {kernel:.1f} MB/s, shingle hash alone {roof:.1f} MB/s, fraction {kernel / roof:.2f} ({mb:.1f} MB)"
        )


def bench_jaccard(offsets, data) -> None:
    n = len(offsets) - 1
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, n, n), rng.integers(0, n, n)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    mb = ((offsets[x + 1] - offsets[x]).sum() + (offsets[y + 1] - offsets[y]).sum()) / 1e6
    for label, width, words in (("char 24-grams", 24, False), ("word 5-grams", 5, True)):
        seconds = best_seconds(lambda w=width, v=words: jaccard_indexed(offsets, data, x, y, w, v, at_least=0.8))
        print(f"jaccard {label}: {mb / seconds:.1f} MB/s ({n} pairs, {mb:.1f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", default="../shared/data/20news")
    parser.add_argument("--part", choices=("minhash", "jaccard", "all"), default="all")
    args = parser.parse_args()
    offsets, data = text_buffers(read_documents(args.corpus).compute()["text"])
    if args.part in ("minhash", "all"):
        bench_minhash(offsets, data)
    if args.part in ("jaccard", "all"):
        bench_jaccard(offsets, data)


if __name__ == "__main__":
    main()
