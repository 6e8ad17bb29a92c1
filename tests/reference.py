"""Plain-Python reference implementations the numba kernels are tested against.

Written from the algorithm descriptions only (Appleby's MurmurHash3, libcudf's
``nvtext::minhash`` / ``minhash64`` scheme), for readability rather than speed; nothing here
imports the code under test.
"""

import re

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1
MERSENNE_61 = (1 << 61) - 1

# A word is a maximal run of bytes that are not ASCII whitespace (space, \t \n \v \f \r).
_WORD = re.compile(rb"[^ \t\n\v\f\r]+")


def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def _rotl64(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _fmix32(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    h ^= h >> 16
    return h


def _fmix64(k):
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    k ^= k >> 33
    return k


def murmur3_x86_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of ``data``, as an int in [0, 2**32)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & M32
    nblocks = len(data) // 4
    for i in range(nblocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * c1) & M32
        k = _rotl32(k, 15)
        k = (k * c2) & M32
        h ^= k
        h = _rotl32(h, 13)
        h = (h * 5 + 0xE6546B64) & M32
    tail = data[4 * nblocks :]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & M32
        k = _rotl32(k, 15)
        k = (k * c2) & M32
        h ^= k
    h ^= len(data)
    return _fmix32(h)


def murmur3_x64_128_first(data: bytes, seed: int = 0) -> int:
    """First 64-bit word (h1) of MurmurHash3_x64_128 of ``data``, as an int in [0, 2**64)."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed & M64
    nblocks = len(data) // 16
    for i in range(nblocks):
        k1 = int.from_bytes(data[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8 : 16 * i + 16], "little")
        k1 = (k1 * c1) & M64
        k1 = _rotl64(k1, 31)
        k1 = (k1 * c2) & M64
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 = (h1 + h2) & M64
        h1 = (h1 * 5 + 0x52DCE729) & M64
        k2 = (k2 * c2) & M64
        k2 = _rotl64(k2, 33)
        k2 = (k2 * c1) & M64
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 = (h2 + h1) & M64
        h2 = (h2 * 5 + 0x38495AB5) & M64
    tail = data[16 * nblocks :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        k2 = (k2 * c2) & M64
        k2 = _rotl64(k2, 33)
        k2 = (k2 * c1) & M64
        h2 ^= k2
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        k1 = (k1 * c1) & M64
        k1 = _rotl64(k1, 31)
        k1 = (k1 * c2) & M64
        h1 ^= k1
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    return (h1 + h2) & M64


def char_shingles(text: str, width: int) -> list[bytes]:
    """UTF-8 bytes of every window of ``width`` characters (step 1); a shorter non-empty text is one window."""
    if not text:
        return []
    if len(text) <= width:
        return [text.encode("utf-8")]
    return [text[i : i + width].encode("utf-8") for i in range(len(text) - width + 1)]


def word_shingles(text: str, width: int) -> list[bytes]:
    """Bytes from the first to the last word of every window of ``width`` words (step 1).

    Fewer words than ``width``: one window spanning all of them; no word: no shingle.
    """
    data = text.encode("utf-8")
    words = [(m.start(), m.end()) for m in _WORD.finditer(data)]
    if not words:
        return []
    n = max(len(words) - width + 1, 1)
    return [data[words[i][0] : words[min(i + width, len(words)) - 1][1]] for i in range(n)]


def shingles(text: str, width: int, words: bool = False) -> list[bytes]:
    return word_shingles(text, width) if words else char_shingles(text, width)


def minhash32(text, seed, a, b, width, words=False) -> list[int]:
    """libcudf ``nvtext::minhash`` signature of one string."""
    hashes = [murmur3_x86_32(s, seed) or 1 for s in shingles(text, width, words)]
    if not hashes:
        return [0] * len(a)
    return [min((h * aj + bj) & M32 for h in hashes) for aj, bj in zip(a, b)]


def minhash64(text, seed, a, b, width, words=False) -> list[int]:
    """libcudf ``nvtext::minhash64`` signature of one string."""
    hashes = [murmur3_x64_128_first(s, seed) or 1 for s in shingles(text, width, words)]
    if not hashes:
        return [0] * len(a)
    return [min(((h * aj + bj) & M64) % MERSENNE_61 for h in hashes) for aj, bj in zip(a, b)]


def jaccard(x: str, y: str, width: int, words: bool = False) -> float:
    """True Jaccard similarity of the two strings' sets of shingle bytes (both empty -> 1.0)."""
    sx, sy = set(shingles(x, width, words)), set(shingles(y, width, words))
    if not sx and not sy:
        return 1.0
    return len(sx & sy) / len(sx | sy)
