"""Run by tests/test_cuda_kernels.py under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set
before numba is imported, in a process of its own so the setting does not leak into other tests).

Every numba.cuda kernel of curate.kernels.cuda against its CPU kernel, on the project's fixture
plus non-ASCII and edge-case texts. Prints one line per case; any mismatch raises.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.kernels import cuda as gpu
from curate.kernels import lsh, minhash

FIXTURE = Path(__file__).parent / "data" / "docs.jsonl"
EXTRA = [
    "Ünïcödé façade — naïve café, déjà vu; Straße größer",  # 2-byte UTF-8
    "東京は日本の首都です。大阪は二番目に大きい都市です。",  # 3-byte UTF-8, no spaces
    "emoji 😀😃😄 mixed 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 text",  # 4-byte UTF-8
    "ab",  # shorter than the window
    "   ",  # whitespace only: no word shingle
    "\tword\n\nsplit \x0b by\r odd  spaces ",
]


def buffers(texts):
    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.r_[0, np.cumsum([len(e) for e in encoded])].astype(np.int64)
    return offsets, np.frombuffer(b"".join(encoded), dtype=np.uint8)


def main():
    # `--device` runs the same checks on a real GPU (tests/test_gpu.py).
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or "--device" in sys.argv, (
        "run with NUMBA_ENABLE_CUDASIM=1"
    )
    texts = [
        json.loads(line)["text"] for line in FIXTURE.read_text().splitlines()
    ] + EXTRA
    offsets, data = buffers(texts)
    # A slice that does not start at byte 0, as a chunk of a partition is.
    sliced = offsets[3:12]
    for bits in (32, 64):
        a, b = minhash.permutations(8, 42, bits)
        for words, width in ((False, 5), (False, 1), (False, 24), (True, 1), (True, 3)):
            for name, offs in (("all", offsets), ("slice", sliced)):
                expected, expected_counts = minhash.minhash(
                    offs, data, 42, a, b, width, words
                )
                signatures, counts = gpu.minhash_cuda(
                    offs, data, 42, a, b, width, words
                )
                assert np.array_equal(signatures.copy_to_host(), expected), (
                    bits,
                    words,
                    width,
                    name,
                )
                assert np.array_equal(counts.copy_to_host(), expected_counts), (
                    bits,
                    words,
                    width,
                    name,
                )
                print(
                    f"minhash bits={bits} words={words} width={width} {name}: {len(offs) - 1} docs equal"
                )
        signatures, _ = minhash.minhash(offsets, data, 42, a, b, 5)
        for num_bands, rows in ((4, 2), (2, 3), (1, 8)):
            sig_bytes = signatures.view(np.uint8).reshape(len(signatures), -1)
            got = gpu.band_buckets_cuda(
                sig_bytes, num_bands, rows * signatures.itemsize
            ).copy_to_host()
            assert np.array_equal(got, lsh.band_buckets(signatures, num_bands, rows)), (
                bits,
                num_bands,
                rows,
            )
            print(f"band_buckets bits={bits} bands={num_bands}x{rows}: equal")
    empty, _ = gpu.minhash_cuda(
        np.zeros(1, np.int64), np.zeros(0, np.uint8), 0, a, b, 5
    )
    assert empty.shape == (0, 8)
    print("ok")


if __name__ == "__main__":
    main()
