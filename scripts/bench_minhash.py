"""MinHash signature throughput, one core, curate against its peers on the same real text.

Usage (peers from ``pip install '.[bench]'``; a missing peer is reported and skipped):

    python scripts/bench_minhash.py [--corpus ../shared/data/20news] [--sample-mb 4] [--repeats 5]

Settings: (a) NeMo Curator's, character 24-grams and 260 hashes; (b) FineWeb's, word 5-grams
and 112 hashes (14 bands x 8). Every tool gets the same documents (the first ``--sample-mb`` MB
of text) and builds its shingles the way it expects them, so shingling counts for everyone:
datasketch ``MinHash.update_batch`` and rensa ``RMinHash.update`` get the shingle strings,
datatrove's ``MinhashDedupSignature`` its own ``get_shingles`` (text simplification, spaCy word
tokens, xxhash) then ``get_signature``; it has no character n-grams, so it runs only in (b).
Repetitions are interleaved (each round runs every tool once); the table gives the median
MB/s of UTF-8 text and documents/s, and curate's speed as a multiple of each peer's.
"""

import argparse
import statistics
import tempfile
import time

import numpy as np

from curate.backend import text_buffers
from curate.io import read_documents
from curate.kernels.minhash import minhash, permutations

SETTINGS = {"a: char 24-gram, 260 hashes": (24, False, 260), "b: word 5-gram, 112 hashes": (5, True, 112)}


def char_shingles(text, width):
    return [text[i : i + width] for i in range(max(1, len(text) - width + 1))] if text else []


def word_shingles(text, width):
    words = text.split()
    return [" ".join(words[i : i + width]) for i in range(max(1, len(words) - width + 1))] if words else []


def tools(width, words, n_hashes):
    """name -> function(texts) computing every signature; None where the peer is unavailable."""
    shingles = word_shingles if words else char_shingles
    a, b = permutations(n_hashes, 42, 32)

    def curate(texts):
        offsets, data = text_buffers(texts)
        minhash(offsets, data, 42, a, b, width, words)

    found = {"curate": curate}
    try:
        from datasketch import MinHash

        def datasketch(texts):
            for text in texts:
                MinHash(num_perm=n_hashes, seed=42).update_batch([s.encode() for s in shingles(text, width)])

        found["datasketch"] = datasketch
    except ImportError:
        found["datasketch"] = None
    try:
        from rensa import RMinHash

        def rensa(texts):
            for text in texts:
                RMinHash(num_perm=n_hashes, seed=42).update(shingles(text, width))

        found["rensa"] = rensa
    except ImportError:
        found["rensa"] = None
    if words:
        try:
            from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature

            step = MinhashDedupSignature(
                tempfile.mkdtemp(), MinhashConfig(n_grams=width, num_buckets=14, hashes_per_bucket=8)
            )

            def datatrove(texts):
                for text in texts:
                    step.get_signature(step.get_shingles(text))

            found["datatrove"] = datatrove
        except ImportError:
            found["datatrove"] = None
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="../shared/data/20news")
    parser.add_argument("--sample-mb", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    texts = read_documents(args.corpus).compute()["text"]
    sizes = np.cumsum(texts.str.encode("utf-8").str.len().to_numpy())
    texts = texts.iloc[: max(1, int(np.searchsorted(sizes, args.sample_mb * 1e6)))].reset_index(drop=True)
    mb = texts.str.encode("utf-8").str.len().sum() / 1e6
    print(f"{args.corpus}: {len(texts)} documents, {mb:.2f} MB of text, median of {args.repeats}, one core\n")
    for setting, params in SETTINGS.items():
        candidates = tools(*params)
        runnable = {name: fn for name, fn in candidates.items() if fn is not None}
        for fn in runnable.values():
            fn(texts.iloc[:20])  # warm up (numba compilation, imports)
        seconds = {name: [] for name in runnable}
        for _ in range(args.repeats):
            for name, fn in runnable.items():
                start = time.perf_counter()
                fn(texts)
                seconds[name].append(time.perf_counter() - start)
        base = statistics.median(seconds["curate"])
        print(f"setting {setting}")
        print(f"  {'tool':<11} {'MB/s':>9} {'docs/s':>10} {'curate is':>10}")
        for name in candidates:
            if name not in runnable:
                print(f"  {name:<11} {'not installed':>31}")
                continue
            median = statistics.median(seconds[name])
            print(f"  {name:<11} {mb / median:9.2f} {len(texts) / median:10.0f} {median / base:9.1f}x")
        print()


if __name__ == "__main__":
    main()
