"""MinHash signatures of documents held as Arrow-style ``(offsets, data)`` string buffers.

The scheme reproduces libcudf's ``nvtext::minhash`` (32-bit) and ``nvtext::minhash64``
(64-bit) exactly:

- every shingle (see :mod:`curate.kernels.shingles`) is hashed with MurmurHash3_x86_32
  (32-bit) or the first word of MurmurHash3_x64_128 (64-bit) with ``seed``; a hash of 0 is
  replaced by 1 (libcudf reserves 0);
- permutation ``j`` maps a shingle hash ``h`` to ``(h * a[j] + b[j]) mod 2**32`` (32-bit) or
  ``((h * a[j] + b[j]) mod 2**64) mod (2**61 - 1)`` (64-bit), and the signature keeps the minimum
  over the document's shingles;
- a document without shingles (empty) gets a signature of zeros.

References
----------
.. [1] A. Broder, "On the resemblance and containment of documents", 1997.
.. [2] libcudf ``nvtext::minhash`` / ``minhash64`` (cpp/src/text/minhash.cu), RAPIDS cudf.
"""

import numpy as np
from numba import njit

from curate.kernels.shingles import shingle_hashes, window_scratch

MERSENNE_61 = np.uint64((1 << 61) - 1)


# Shingle hashes reduced this many at a time, over every permutation: 16 KiB of uint32 (32 KiB of
# uint64) stays in the L1 cache through the permutations' passes. One pass per permutation over a
# whole book's hashes (megabytes) streamed them from memory 260 times: half the speed.
BLOCK = 4096


@njit
def _reduce32(hashes, a, b, row):
    # 32-bit lanes: (h * a + b) mod 2**32 is exactly uint32 arithmetic, so the loop over a
    # block of shingle hashes is a min-reduction that vectorises.
    row[:] = np.uint32(0xFFFFFFFF)
    for first in range(0, hashes.shape[0], BLOCK):
        block = hashes[first : first + BLOCK]
        for j in range(a.shape[0]):
            aj, bj = a[j], b[j]
            m = np.uint32(0xFFFFFFFF)
            for k in range(block.shape[0]):
                m = min(m, np.uint32(block[k] * aj + bj))
            row[j] = min(row[j], m)


@njit
def mod_mersenne61(x):
    """``x mod (2**61 - 1)`` of a uint64 ``x``, without a division (shared with the CUDA kernel)."""
    # x = hi * 2**61 + lo, and 2**61 = 1 there; then r < 2 * (2**61 - 1), and min(r, r - P)
    # (wrapping) subtracts P only if r >= P.
    r = (x & MERSENNE_61) + (x >> np.uint64(61))
    return min(r, r - MERSENNE_61)


@njit
def _reduce64(hashes, a, b, row):
    row[:] = np.uint64(0xFFFFFFFFFFFFFFFF)
    for first in range(0, hashes.shape[0], BLOCK):
        block = hashes[first : first + BLOCK]
        for j in range(a.shape[0]):
            aj, bj = a[j], b[j]
            m = np.uint64(0xFFFFFFFFFFFFFFFF)
            for k in range(block.shape[0]):
                m = min(m, mod_mersenne61(block[k] * aj + bj))
            row[j] = min(row[j], m)


@njit(nogil=True, cache=True)
def _minhash(offsets, data, seed, a, b, width, words, scratch, out, counts):
    # Two passes per document, as libcudf: hash every shingle into a scratch buffer, then one
    # min-reduction per permutation over that buffer. The output dtype picks the scheme; it is
    # part of the compiled signature, so the branches on `wide` are resolved at compile time.
    wide = out.itemsize == 8
    longest = len(scratch[0]) - 1
    # At most one shingle per byte. Separate uint32 storage keeps the 32-bit reduction narrow.
    hashes64 = np.empty(longest + 1, dtype=np.uint64)
    hashes32 = np.empty(0 if wide else longest + 1, dtype=np.uint32)
    for i in range(offsets.shape[0] - 1):
        n = shingle_hashes(data, offsets[i], offsets[i + 1], width, words, seed, wide, scratch, hashes64)
        counts[i] = n
        if n == 0:
            out[i, :] = 0
        elif wide:
            for k in range(n):
                hashes64[k] = max(hashes64[k], np.uint64(1))  # libcudf reserves 0
            _reduce64(hashes64[:n], a, b, out[i])
        else:
            for k in range(n):
                hashes32[k] = np.uint32(max(hashes64[k], np.uint64(1)))
            _reduce32(hashes32[:n], a, b, out[i])


def minhash(offsets, data, seed, a, b, width, words=False):
    """MinHash signatures of every document in a string buffer.

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int64
        Document ``i`` is ``data[offsets[i]:offsets[i + 1]]``.
    data : array of shape (n_bytes,), dtype uint8
        UTF-8 text.
    seed : int
        MurmurHash3 seed, 0 <= seed < 2**32.
    a, b : array of shape (num_perm,), dtype uint32 or uint64
        Permutation parameters; their dtype selects the 32- or 64-bit scheme.
    width : int
        Characters (or words) per shingle, >= 1.
    words : bool, default=False
        Word n-grams instead of character n-grams.

    Returns
    -------
    signatures : array of shape (n_docs, num_perm), dtype of ``a``
    n_shingles : array of shape (n_docs,), dtype int64
        Shingles hashed per document (0 for a document without shingles).

    Raises
    ------
    ValueError
        If ``a`` and ``b`` differ in shape or dtype, or the dtype is not uint32/uint64.
    """
    if a.shape != b.shape or a.dtype != b.dtype or a.dtype not in (np.uint32, np.uint64):
        raise ValueError(f"a and b must be equal-length uint32 or uint64 arrays, got {a.dtype}/{b.dtype}")
    n_docs = len(offsets) - 1
    out = np.empty((n_docs, len(a)), dtype=a.dtype)
    counts = np.empty(n_docs, dtype=np.int64)
    longest = int(np.diff(offsets).max()) if n_docs else 0
    _minhash(offsets, data, np.uint64(seed), a, b, width, words, window_scratch(longest), out, counts)
    return out, counts


def permutations(num_perm: int, seed: int, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Permutation parameters ``(a, b)`` drawn from ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    num_perm : int
        Number of permutations (signature length).
    seed : int
    bits : {32, 64}

    Returns
    -------
    a, b : arrays of shape (num_perm,), dtype uint32 (bits=32) or uint64 (bits=64)
        ``a`` in ``[1, m)``, ``b`` in ``[0, m)`` with ``m = 2**32`` or ``2**61 - 1``, the
        ranges datatrove and NeMo Curator draw from.

    Raises
    ------
    ValueError
        If ``bits`` is not 32 or 64.
    """
    if bits not in (32, 64):
        raise ValueError(f"bits must be 32 or 64, got {bits}")
    rng = np.random.default_rng(seed)
    high = (1 << 32) if bits == 32 else int(MERSENNE_61)
    dtype = np.uint32 if bits == 32 else np.uint64
    a = rng.integers(1, high, size=num_perm, dtype=np.uint64).astype(dtype)
    b = rng.integers(0, high, size=num_perm, dtype=np.uint64).astype(dtype)
    return a, b
