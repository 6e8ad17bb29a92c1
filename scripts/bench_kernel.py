"""MinHash kernel throughput on one core, and its roofline: the shingle hash alone.

Usage: python scripts/bench_kernel.py [CORPUS_DIR]   (default ../shared/data/20news)

Setting: char 24-grams, 260 hashes (NeMo Curator's). For each of 32- and 64-bit prints MB/s of
UTF-8 text (best of 3 after a warm-up call) for the full kernel and for the shingle-hash pass
alone (MurmurHash3 of every 24-character window, no permutations): no MinHash kernel that
hashes every window can beat the second figure, so the ratio is the kernel's roofline fraction.
"""

import sys
import time

import numpy as np
from numba import njit

from curate.backend import text_buffers
from curate.io import read_documents
from curate.kernels.minhash import minhash, permutations
from curate.kernels.murmur import murmur3_32, murmur3_64
from curate.kernels.shingles import first_window, next_window


@njit(nogil=True)
def hash_windows_only(offsets, data, seed, width, wide):
    acc = np.uint64(0)  # folded so the hashes are not optimised away
    for i in range(offsets.shape[0] - 1):
        lo, hi = first_window(data, offsets[i], offsets[i + 1], width, False)
        while lo < hi:
            acc ^= murmur3_64(data, lo, hi, seed) if wide else murmur3_32(data, lo, hi, seed)
            lo, hi = next_window(data, lo, hi, offsets[i + 1], False)
    return acc


def best_seconds(fn, repeats=3):
    fn()  # compile / warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(corpus: str) -> None:
    offsets, data = text_buffers(read_documents(corpus).compute()["text"])
    mb = len(data) / 1e6
    for bits in (32, 64):
        a, b = permutations(260, 42, bits)
        kernel = mb / best_seconds(lambda a=a, b=b: minhash(offsets, data, 42, a, b, 24))
        roof = mb / best_seconds(lambda bits=bits: hash_windows_only(offsets, data, np.uint64(42), 24, bits == 64))
        print(
            f"{bits}-bit: kernel {kernel:.1f} MB/s, shingle hash alone {roof:.1f} MB/s, fraction {kernel / roof:.2f} ({mb:.1f} MB)"
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/20news")
