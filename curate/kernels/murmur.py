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


@njit(inline="always")
def _rotl32(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M32


@njit(inline="always")
def _rotl64(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(inline="always")
def _load(data, pos, nbytes):
    """Little-endian unsigned integer from ``nbytes`` (<= 8) bytes at ``data[pos]``."""
    k = np.uint64(0)
    for i in range(nbytes - 1, -1, -1):
        k = (k << np.uint64(8)) | np.uint64(data[pos + i])
    return k


@njit(inline="always")
def _fmix64(k):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit(inline="always")
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
        k = _load(data, pos, 4)
        k = (k * _C1_32) & _M32
        k = _rotl32(k, 15)
        k = (k * _C2_32) & _M32
        h ^= k
        h = _rotl32(h, 13)
        h = (h * np.uint64(5) + np.uint64(0xE6546B64)) & _M32
        pos += 4
    tail = n & 3
    if tail:
        k = _load(data, pos, tail)
        k = (k * _C1_32) & _M32
        k = _rotl32(k, 15)
        k = (k * _C2_32) & _M32
        h ^= k
    h ^= np.uint64(n)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    h ^= h >> np.uint64(16)
    return h


@njit(inline="always")
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
        k1 = _load(data, pos, 8)
        k2 = _load(data, pos + 8, 8)
        k1 *= _C1_64
        k1 = _rotl64(k1, 31)
        k1 *= _C2_64
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 += h2
        h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
        k2 *= _C2_64
        k2 = _rotl64(k2, 33)
        k2 *= _C1_64
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 += h1
        h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
        pos += 16
    tail = n & 15
    if tail > 8:
        k2 = _load(data, pos + 8, tail - 8)
        k2 *= _C2_64
        k2 = _rotl64(k2, 33)
        k2 *= _C1_64
        h2 ^= k2
    if tail > 0:
        k1 = _load(data, pos, min(tail, 8))
        k1 *= _C1_64
        k1 = _rotl64(k1, 31)
        k1 *= _C2_64
        h1 ^= k1
    h1 ^= np.uint64(n)
    h2 ^= np.uint64(n)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    return h1
