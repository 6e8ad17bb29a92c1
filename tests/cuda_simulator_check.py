"""Run by tests/test_cuda_kernels.py under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set
before numba is imported, in a process of its own so the setting does not leak into other tests),
and by tests/test_gpu.py on a real device (``--device``).

Every numba.cuda kernel of curate.kernels.cuda against its CPU kernel, on the fixture's short
documents plus non-ASCII and edge-case texts and one long document. Prints one line per case; any
mismatch raises. Arguments name the parts to run (PARTS, all by default): the simulator is one
Python thread at a time, so tests/test_cuda_kernels.py runs two processes at once.

The simulator runs the kernels as Python on numpy scalars, so it cannot see how numba types the
compiled code (a uint64 meeting an int64 becomes a float64 there, not here): that is what
tests/test_cuda_kernels.py's typing check is for. What runs here is the kernels' logic: which
thread hashes which shingle, and how the blocks of a long document are merged.
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.kernels import cuda as gpu
from curate.kernels import jaccard, lsh, minhash

FIXTURE = Path(__file__).parent / "data" / "docs.jsonl"
EXTRA = [
    "Ünïcödé façade — naïve café, déjà vu; Straße größer",  # 2-byte UTF-8
    "東京は日本の首都です。大阪は二番目に大きい都市です。",  # 3-byte UTF-8, no spaces
    "emoji 😀😃😄 mixed 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 text",  # 4-byte UTF-8
    "ab",  # shorter than the window
    "",  # empty: no shingle, a row of zeros
    "   ",  # whitespace only: no word shingle
    "\tword\n\nsplit \x0b by\r odd  spaces ",
]
# The long document's words (long_document), multi-byte characters among them; tests/test_gpu.py's too.
LONG = " ".join(f"w{i % 97} Straße 東京{i % 7} 😀" if i % 5 == 0 else f"word{i % 13}" for i in range(130))
# Character widths 1, 5, 24 and every word width 1..5, at 32 and 64 bits.
SHINGLES = [(False, 1), (False, 5), (False, 24), (True, 1), (True, 2), (True, 3), (True, 4), (True, 5)]
# What a run checks (all of it by default): MinHash and bands at 32 or 64 bits, Jaccard.
PARTS = ("32", "64", "jaccard")


def long_document(segment: int) -> str:
    """LONG's words, from its start (round again as needed), to just past 3.5 segments of ``segment`` bytes."""
    words, n = LONG.split(" "), 0
    text = ""
    while len(text.encode("utf-8")) <= 7 * segment // 2:
        text = f"{text} {words[n % len(words)]}" if n else words[0]
        n += 1
    return text


def texts(segment: int) -> list[str]:
    """The fixture's short documents (an empty one first), one longer than three segments of
    ``segment`` bytes, EXTRA, and the fixture's last (empty) document."""
    fixture = [json.loads(line)["text"] for line in FIXTURE.read_text().splitlines()]
    return fixture[7:11] + [long_document(segment)] + EXTRA + fixture[5:6]


def buffers(texts):
    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.r_[0, np.cumsum([len(e) for e in encoded])].astype(np.int64)
    return offsets, np.frombuffer(b"".join(encoded), dtype=np.uint8)


def one_shared_array_per_line():
    """Make the simulator's ``cuda.shared.array`` give every thread of a launch the same array.

    numba-cuda's simulator (0.30) keeps a launch's shared arrays by calling line, looked up and
    then stored: two threads switched between the two make two arrays, and a kernel that fills
    shared memory and then reads it sees slots no thread wrote (the 64-bit MinHash check failed
    once so, under load, with equal shingle counts). ``dict.setdefault`` is one step under the GIL.
    """
    from numba.cuda.simulator import kernelapi

    racy = kernelapi.FakeCUDAShared.array

    def array(self, shape, dtype):
        if shape == 0:  # dynamic shared memory: one buffer made with the launch, no race
            return racy(self, shape, dtype)
        caller = sys._getframe(1)
        dtype = kernelapi.numpy_support.as_dtype(dtype) if isinstance(dtype, kernelapi.types.Type) else dtype
        return self._allocations.setdefault((caller.f_code.co_filename, caller.f_lineno), np.empty(shape, dtype))

    kernelapi.FakeCUDAShared.array = array


def main():
    args = sys.argv[1:]
    device = "--device" in args
    parts = [arg for arg in args if arg != "--device"] or list(PARTS)
    assert set(parts) <= set(PARTS), f"parts are {PARTS}, got {parts}"
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or device, "run with NUMBA_ENABLE_CUDASIM=1"
    if not device:
        # The simulator runs a Python thread per GPU thread, so its cost is the bytes of text:
        # small segments and blocks let short texts cross every kind of edge the kernels have
        # (each min-reduction thread still loads two slots; 2D grids have several blocks each way,
        # with threads past the array's edge in both).
        gpu.SEGMENT, gpu._BLOCK_1D, gpu._BLOCK_2D = 64, 32, (4, 3)
        one_shared_array_per_line()
        # Its block manager polls the threads in a loop that holds the GIL; a switch interval
        # shorter than the default 5 ms lets the threads it wakes from syncthreads run sooner.
        sys.setswitchinterval(5e-4)
    offsets, data = buffers(texts(gpu.SEGMENT))
    assert offsets[5] - offsets[4] > 3 * gpu.SEGMENT, "the long document must span several segments"
    edges = np.arange(gpu.SEGMENT, offsets[-1], gpu.SEGMENT)
    inside = edges[(edges > offsets[4]) & (edges < offsets[5])]
    assert ((data[inside] & 0xC0) == 0x80).any(), "a segment edge must split one of its multi-byte characters"
    # A slice that does not start at byte 0 (as a chunk of a partition), with int32 offsets.
    sliced = offsets[3:11].astype(np.int32)
    for bits in (32, 64):
        if str(bits) in parts:
            check_minhash(offsets, data, sliced, bits)
    if "jaccard" in parts:
        check_jaccard(offsets, data, sliced)
    print("ok")


def check_minhash(offsets, data, sliced, bits: int):
    """minhash_cuda and band_buckets_cuda against the CPU kernels, with ``bits``-bit hashes."""
    # Four permutations: several, and (with the simulator's blocks) not a whole number of blocks.
    a, b = minhash.permutations(4, 42, bits)
    for words, width in SHINGLES:
        cases = [("all", offsets)] + ([("slice", sliced)] if width in (3, 5) else [])
        for name, offs in cases:
            expected, expected_counts = minhash.minhash(offs.astype(np.int64), data, 42, a, b, width, words)
            signatures, counts = gpu.minhash_cuda(offs, data, 42, a, b, width, words)
            assert np.array_equal(counts.copy_to_host(), expected_counts), (bits, words, width, name)
            assert np.array_equal(signatures.copy_to_host(), expected), (bits, words, width, name)
            print(f"minhash bits={bits} words={words} width={width} {name}: {len(offs) - 1} docs equal")
    empty, _ = gpu.minhash_cuda(np.zeros(1, np.int64), np.zeros(0, np.uint8), 0, a, b, 5)
    assert empty.shape == (0, 4)
    blank, blank_counts = gpu.minhash_cuda(np.zeros(3, np.int64), np.zeros(0, np.uint8), 0, a, b, 5)
    assert not blank.copy_to_host().any() and not blank_counts.copy_to_host().any()
    signatures, _ = minhash.minhash(offsets, data, 42, *minhash.permutations(8, 42, bits), 5)
    for num_bands, rows in ((4, 2), (2, 3), (1, 8)):
        sig_bytes = signatures.view(np.uint8).reshape(len(signatures), -1)
        got = gpu.band_buckets_cuda(sig_bytes, num_bands, rows * signatures.itemsize).copy_to_host()
        assert np.array_equal(got, lsh.band_buckets(signatures, num_bands, rows)), (bits, num_bands, rows)
        print(f"band_buckets bits={bits} bands={num_bands}x{rows}: equal")


def pairs(n_docs: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """As verification makes them: sorted by x, each document with several partners and itself."""
    rng = np.random.default_rng(seed)
    x = np.repeat(np.arange(n_docs), 3)
    y = np.where(np.arange(len(x)) % 3 == 0, x, rng.integers(0, n_docs, len(x)))
    return x, y


def check_jaccard(offsets, data, sliced):
    """jaccard_cuda against the CPU kernel, with near duplicates so that values are not all 0 or 1."""
    # The Jaccard kernels have no edge inside a document (a thread per byte, then one per set
    # member), so short near duplicates do: LONG's first 16 words, 95 bytes.
    base = " ".join(LONG.split(" ")[:16])
    near = [base, base.replace("word3", "Wörd3"), base[: len(base) // 2], "ab", "ab", "", "   "]
    near_offsets, near_data = buffers(near)
    # "tiles": the whole buffer in blocks of a tenth of its bytes (the long document one of its own).
    cases = [
        ("all", offsets, data),
        ("slice", sliced, data),
        ("near", near_offsets, near_data),
        ("tiles", offsets, data),
    ]
    budgets = {"tiles": int(offsets[-1] - offsets[0]) // 5}
    for words, width in ((False, 1), (False, 5), (False, 24), (True, 1), (True, 3)):
        for name, offs, buf in cases:
            x, y = pairs(len(offs) - 1)
            if name == "near":  # every pair, both ways
                x, y = (a.ravel() for a in np.meshgrid(np.arange(len(near)), np.arange(len(near)), indexing="ij"))
            expected = jaccard.jaccard_indexed(offs.astype(np.int64), buf, x, y, width, words)
            got = gpu.jaccard_cuda(offs, buf, x, y, width, words, budget=budgets.get(name, gpu.TEXT_BUDGET))
            assert np.array_equal(got, expected), (words, width, name, got, expected)
            assert name != "near" or {0.0, 1.0} < set(expected.tolist()) and len(set(expected.tolist())) >= 4, expected
            print(f"jaccard words={words} width={width} {name}: {len(x)} pairs equal")
    none = gpu.jaccard_cuda(offsets, data, np.zeros(0, np.int64), np.zeros(0, np.int64), 5)
    assert none.shape == (0,)
    blank = gpu.jaccard_cuda(np.zeros(3, np.int64), np.zeros(0, np.uint8), np.array([0, 1]), np.array([1, 1]), 5)
    assert blank.tolist() == [1.0, 1.0]


if __name__ == "__main__":
    main()
