"""MinHash kernel throughput on one core: MB/s of UTF-8 text, 260 hashes, char 24-grams.

Usage: python scripts/bench_kernel.py [CORPUS_DIR]   (default ../shared/data/20news)
Prints the best of 3 timed runs after a warm-up (compilation) call, for 32- and 64-bit.
"""

import sys
import time

from curate.backend import text_buffers
from curate.io import read_documents
from curate.kernels.minhash import minhash, permutations


def main(corpus: str) -> None:
    offsets, data = text_buffers(read_documents(corpus).compute()["text"])
    for bits in (32, 64):
        a, b = permutations(260, 42, bits)
        minhash(offsets[:11], data, 42, a, b, 24)  # compile
        times = []
        for _ in range(3):
            start = time.perf_counter()
            minhash(offsets, data, 42, a, b, 24)
            times.append(time.perf_counter() - start)
        print(f"{bits}-bit: {len(data) / 1e6 / min(times):.1f} MB/s ({len(data) / 1e6:.1f} MB, best of 3)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/20news")
