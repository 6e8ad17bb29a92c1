"""MurmurHash3 over byte ranges of a flat ``uint8`` buffer, compiled with numba.

Two variants, bit-for-bit equal to Austin Appleby's reference ``MurmurHash3_x86_32`` and
the first 64-bit word of ``MurmurHash3_x64_128`` (the ones libcudf uses for
``nvtext::minhash`` / ``minhash64``). All arithmetic is done on ``uint64`` and masked where the
reference works on 32 bits, because numba widens 32-bit integer arithmetic to 64 bits.

References
----------
.. [1] A. Appleby, "SMHasher / MurmurHash3", https://github.com/aappleby/smhasher
"""

import numpy as np
from numba import njit

_M32 = np.uint64(0xFFFFFFFF)
_C1_32 = np.uint64(0xCC9E2D51)
_C2_32 = np.uint64(0x1B873593)
_C1_64 = np.uint64(0x87C37B91114253D5)
_C2_64 = np.uint64(0x4CF5AD432745937F)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)

# Plain @njit: LLVM inlines these small functions into their callers anyway. Numba's own
# inlining (inline="always", at the level of its IR) is kept for the two hashes of one window
# below, which shingle_hashes calls per window: about 15% of its speed on books. Elsewhere it
# cost compile time (MinHash at 32 and 64 bits compiled in 6.1 s with it on every helper, 4.9 s
# now: scripts/bench_compile.py) and bought no speed.


@njit
def _rotl32(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


@njit
def _rotl64(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit
def _load(data, pos, nbytes):
    """Little-endian unsigned integer from ``nbytes`` (<= 8) bytes at ``data[pos]``."""
    k = np.uint64(0)
    for i in range(nbytes - 1, -1, -1):
        k = (k << np.uint64(8)) | np.uint64(data[pos + i])
    return k


@njit
def _fmix32(h):
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    h ^= h >> np.uint64(16)
    return h


@njit
def _fmix64(k):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit
def _k32(k):
    # A block (or the tail) of MurmurHash3_x86_32, before it enters the state.
    k = (k * _C1_32) & _M32
    k = _rotl32(k, 15)
    return (k * _C2_32) & _M32


@njit
def _round32(h, k):
    h ^= _k32(k)
    h = _rotl32(h, 13)
    return (h * np.uint64(5) + np.uint64(0xE6546B64)) & _M32


@njit
def _k1_64(k1):
    # The first lane's block (or tail) of MurmurHash3_x64_128, before it enters h1.
    k1 *= _C1_64
    k1 = _rotl64(k1, 31)
    return k1 * _C2_64


@njit
def _k2_64(k2):
    k2 *= _C2_64
    k2 = _rotl64(k2, 33)
    return k2 * _C1_64


@njit
def _round64(h1, h2, k1, k2):
    # One 16-byte block of MurmurHash3_x64_128: the state (h1, h2) after it.
    h1 ^= _k1_64(k1)
    h1 = _rotl64(h1, 27)
    h1 += h2
    h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
    h2 ^= _k2_64(k2)
    h2 = _rotl64(h2, 31)
    h2 += h1
    h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
    return h1, h2


@njit
def _final64(h1, h2, n):
    h1 ^= np.uint64(n)
    h2 ^= np.uint64(n)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    return h1 + h2


@njit
def murmur3_32(data, start, end, seed):
    """MurmurHash3_x86_32 of ``data[start:end]``.

    Parameters
    ----------
    data : array of shape (n_bytes,), dtype uint8
    start, end : int
        Byte range, ``0 <= start <= end <= n_bytes``.
    seed : int
        Hash seed, taken modulo 2**32.

    Returns
    -------
    numpy.uint64
        The 32-bit hash, held in a uint64.
    """
    h = np.uint64(seed) & _M32
    n = end - start
    pos = start
    for _ in range(n // 4):
        h = _round32(h, _load(data, pos, 4))
        pos += 4
    tail = n & 3
    if tail:
        h ^= _k32(_load(data, pos, tail))
    return _fmix32(h ^ np.uint64(n))


@njit
def murmur3_64(data, start, end, seed):
    """First 64-bit word of MurmurHash3_x64_128 of ``data[start:end]``.

    Parameters
    ----------
    data : array of shape (n_bytes,), dtype uint8
    start, end : int
        Byte range.
    seed : int
        Hash seed (both 64-bit lanes start from it, as in libcudf).

    Returns
    -------
    numpy.uint64
    """
    h1 = np.uint64(seed)
    h2 = np.uint64(seed)
    n = end - start
    pos = start
    for _ in range(n // 16):
        h1, h2 = _round64(h1, h2, _load(data, pos, 8), _load(data, pos + 8, 8))
        pos += 16
    tail = n & 15
    if tail > 8:
        h2 ^= _k2_64(_load(data, pos + 8, tail - 8))
    if tail > 0:
        h1 ^= _k1_64(_load(data, pos, min(tail, 8)))
    return _final64(h1, h2, n)


# The same two hashes read from words: ``words[i]`` holds the 8 bytes from byte ``i`` of a text
# (little_endian_words), so a block is one load instead of eight, and the hashes of many windows
# of one length, computed a step at a time across all of them (murmur3_32_run, murmur3_64_run),
# compile to vector instructions: about three times the speed of a window at a time on long texts.


@njit
def little_endian_words(data, start, end, out):
    """``out[i]`` = the 8 bytes of ``data`` from ``start + i`` as a little-endian uint64, bytes at
    or past ``end`` as zeros, for ``0 <= i < end - start`` (``out``: uint64, at least that long)."""
    word = np.uint64(0)
    for i in range(end - 1, start - 1, -1):
        word = (word << np.uint64(8)) | np.uint64(data[i])
        out[i - start] = word


@njit
def _low_bytes(word, nbytes):
    # The first `nbytes` (1..8) bytes of a little-endian word.
    return word & (_ALL_ONES >> np.uint64(64 - 8 * nbytes))


@njit(inline="always")
def murmur3_32_at(words, pos, n, seed):
    """:func:`murmur3_32` of the ``n`` bytes from byte ``pos`` of the text that ``words`` holds
    (:func:`little_endian_words`; ``words`` has at least ``pos + n`` entries)."""
    h = np.uint64(seed) & _M32
    for b in range(n // 4):
        h = _round32(h, words[pos + 4 * b] & _M32)
    tail = n & 3
    if tail:
        h ^= _k32(_low_bytes(words[pos + n - tail], tail))
    return _fmix32(h ^ np.uint64(n))


@njit(inline="always")
def murmur3_64_at(words, pos, n, seed):
    """:func:`murmur3_64` of the ``n`` bytes from byte ``pos`` of the text that ``words`` holds
    (:func:`little_endian_words`; ``words`` has at least ``pos + n`` entries)."""
    h1 = np.uint64(seed)
    h2 = np.uint64(seed)
    for b in range(n // 16):
        h1, h2 = _round64(h1, h2, words[pos + 16 * b], words[pos + 16 * b + 8])
    pos += n - (n & 15)
    tail = n & 15
    if tail > 8:
        h2 ^= _k2_64(_low_bytes(words[pos + 8], tail - 8))
    if tail > 0:
        h1 ^= _k1_64(_low_bytes(words[pos], min(tail, 8)))
    return _final64(h1, h2, n)


@njit
def _rotl32_lanes(x, r):
    return np.uint32((x << np.uint32(r)) | (x >> np.uint32(32 - r)))


@njit
def _k32_lanes(k):
    return np.uint32(_rotl32_lanes(np.uint32(k * np.uint32(_C1_32)), 15) * np.uint32(_C2_32))


@njit
def murmur3_32_run(words, count, n, seed, out, lanes):
    """``out[i]`` = :func:`murmur3_32_at` ``(words, i, n, seed)`` for ``0 <= i < count``
    (``words`` has at least ``count + n - 1`` entries; ``lanes``: uint32 scratch of ``count``),
    a step at a time across the windows."""
    # The steps of _round32 and _fmix32 in uint32 arithmetic (a cast after every step): the lanes
    # are then 32 bits wide, twice as many per vector as the masked uint64 of the functions above
    # (which the CUDA kernel shares), and the rotations are one instruction each.
    for i in range(count):
        lanes[i] = np.uint32(seed)
    for b in range(n // 4):
        for i in range(count):
            h = _rotl32_lanes(lanes[i] ^ _k32_lanes(np.uint32(words[i + 4 * b])), 13)
            lanes[i] = np.uint32(h * np.uint32(5) + np.uint32(0xE6546B64))
    tail = n & 3
    for i in range(count):
        h = lanes[i]
        if tail:
            h ^= _k32_lanes(np.uint32(_low_bytes(words[i + n - tail], tail)))
        h ^= np.uint32(n)
        h ^= h >> np.uint32(16)
        h = np.uint32(h * np.uint32(0x85EBCA6B))
        h ^= h >> np.uint32(13)
        h = np.uint32(h * np.uint32(0xC2B2AE35))
        out[i] = h ^ (h >> np.uint32(16))


@njit
def murmur3_64_run(words, count, n, seed, out, h2):
    """``out[i]`` = :func:`murmur3_64_at` ``(words, i, n, seed)`` for ``0 <= i < count``
    (``words`` has at least ``count + n - 1`` entries; ``h2``: uint64 scratch of ``count``),
    a step at a time across the windows."""
    for i in range(count):
        out[i] = np.uint64(seed)
        h2[i] = np.uint64(seed)
    for b in range(n // 16):
        for i in range(count):
            out[i], h2[i] = _round64(out[i], h2[i], words[i + 16 * b], words[i + 16 * b + 8])
    pos = n - (n & 15)
    tail = n & 15
    for i in range(count):
        h1, g2 = out[i], h2[i]
        if tail > 8:
            g2 ^= _k2_64(_low_bytes(words[i + pos + 8], tail - 8))
        if tail > 0:
            h1 ^= _k1_64(_low_bytes(words[i + pos], min(tail, 8)))
        out[i] = _final64(h1, g2, n)
