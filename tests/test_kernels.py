"""The numba kernels against libcudf's documented values and the plain-Python reference."""

import itertools
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from numba import njit

import curate.kernels.jaccard
from curate import backend
from curate.kernels.jaccard import (
    greedy_representatives,
    jaccard_at_least,
    jaccard_indexed,
    jaccard_sorted,
    overlap_needed,
    shingle_sets,
)
from curate.kernels.lsh import band_buckets
from curate.kernels.minhash import BLOCK, MERSENNE_61, minhash, permutations
from curate.kernels.murmur import (
    little_endian_words,
    murmur3_32,
    murmur3_32_at,
    murmur3_32_run,
    murmur3_64,
    murmur3_64_at,
    murmur3_64_run,
)
from curate.kernels.nesting import nested_deeper
from curate.kernels.shingles import (
    RUN,
    char_starts,
    first_window,
    next_window,
    shingle_hashes,
    window_at,
    window_scratch,
    word_bounds,
)

try:  # tests/ is on sys.path under pytest's default (prepend) import mode
    import reference as ref
except ImportError:  # pragma: no cover
    from tests import reference as ref

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1
M61 = (1 << 61) - 1

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# helpers


@njit
def _k32(data, start, end, seed):
    return murmur3_32(data, start, end, seed)


@njit
def _k64(data, start, end, seed):
    return murmur3_64(data, start, end, seed)


def kernel_m32(data: bytes, seed: int = 0) -> int:
    return int(_k32(np.frombuffer(data, dtype=np.uint8), 0, len(data), seed))


def kernel_m64(data: bytes, seed: int = 0) -> int:
    return int(_k64(np.frombuffer(data, dtype=np.uint8), 0, len(data), seed))


def buffers(texts):
    """(offsets, data) of a list of str, through the backend's text_buffers."""
    return backend.text_buffers(pd.Series(texts, dtype="str"))


def raw_buffers(docs: list[bytes]):
    """(offsets, data) of raw byte strings (not necessarily UTF-8)."""
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(d) for d in docs])
    return offsets, np.frombuffer(b"".join(docs), dtype=np.uint8).copy()


def u32(xs):
    return np.array(xs, dtype=np.uint32)


def u64(xs):
    return np.array(xs, dtype=np.uint64)


def ref_minhash(bits):
    return ref.minhash32 if bits == 32 else ref.minhash64


# ---------------------------------------------------------------------------------------------
# libcudf golden values (cpp/tests/text/minhash_tests.cpp, python/cudf tests)


def test_libcudf_minhash32_golden():
    sig, n = minhash(*buffers(["this is my", "favorite book"]), 0, u32([1, 2, 3]), u32([4, 5, 6]), 5)
    assert sig.dtype == np.uint32
    assert sig.tolist() == [[1305480171, 462824409, 74608232], [32665388, 65330773, 97996158]]
    assert n.tolist() == [6, 9]


def test_libcudf_minhash64_golden():
    texts = ["this is my", "favorite book", "to read"]
    sig, n = minhash(*buffers(texts), 0, u64([2, 3]), u64([5, 6]), 5)
    assert sig.dtype == np.uint64
    assert sig.tolist() == [
        [172452388517576012, 316595762085180527],
        [71427536958126239, 58787297728258215],
        [423885828176437114, 1140588505926961370],
    ]
    assert n.tolist() == [6, 9, 3]


def test_reference_reproduces_libcudf_golden():
    assert [ref.minhash32(t, 0, [1, 2, 3], [4, 5, 6], 5) for t in ["this is my", "favorite book"]] == [
        [1305480171, 462824409, 74608232],
        [32665388, 65330773, 97996158],
    ]
    assert [ref.minhash64(t, 0, [2, 3], [5, 6], 5) for t in ["this is my", "favorite book", "to read"]] == [
        [172452388517576012, 316595762085180527],
        [71427536958126239, 58787297728258215],
        [423885828176437114, 1140588505926961370],
    ]


def test_libcudf_abcdefg_window_hashes():
    expected = [3902511862, 570445242, 4202475763]
    assert ref.char_shingles("abcdefg", 5) == [b"abcde", b"bcdef", b"cdefg"]
    assert [ref.murmur3_x86_32(s, 0) for s in ref.char_shingles("abcdefg", 5)] == expected
    data = np.frombuffer(b"abcdefg", dtype=np.uint8)
    assert [int(_k32(data, i, i + 5, 0)) for i in range(3)] == expected
    sig, n = minhash(*buffers(["abcdefg"]), 0, u32([1]), u32([0]), 5)
    assert sig.tolist() == [[min(expected)]] and n.tolist() == [3]


# ---------------------------------------------------------------------------------------------
# MurmurHash3 test vectors (SMHasher / the widely published ones; also equal to the `mmh3` package)

X86_32_VECTORS = [
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"a", 0x9747B28C, 0x7FA09EA6),
    (b"aa", 0x9747B28C, 0x5D211726),
    (b"aaa", 0x9747B28C, 0x283E0130),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"abc", 0x9747B28C, 0xC84A62DD),
    (b"abcd", 0x9747B28C, 0xF0478627),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
    (b"The quick brown fox jumps over the lazy dog", 0, 0x2E4FF723),
]

# first 64-bit word of MurmurHash3_x64_128; lengths 0, 1, 8, 9 (tail > 8), 15, 16 (one block,
# no tail), 17 (block + 1-byte tail), 43
X64_VECTORS = [
    (b"", 0, 0),
    (b"a", 0, 0x85555565F6597889),
    (b"abc", 0, 0xB4963F3F3FAD7867),
    (b"hello", 0, 0xCBD8A7B341BD9B02),
    (b"0123456789abcdef", 0, 0x4BE06D94CF4AD1A7),
    (b"0123456789abcdefg", 0, 0x8E32612DAA45F9DE),
    (b"The quick brown fox jumps over the lazy dog", 0, 0xE34BBC7BBC071B6C),
]


@pytest.mark.parametrize("data,seed,expected", X86_32_VECTORS)
def test_murmur3_x86_32_vectors(data, seed, expected):
    assert ref.murmur3_x86_32(data, seed) == expected
    assert kernel_m32(data, seed) == expected


@pytest.mark.parametrize("data,seed,expected", X64_VECTORS)
def test_murmur3_x64_128_vectors(data, seed, expected):
    assert ref.murmur3_x64_128_first(data, seed) == expected
    assert kernel_m64(data, seed) == expected


@SETTINGS
@given(st.binary(max_size=70), st.integers(0, M32))
def test_murmur3_random(data, seed):
    assert kernel_m32(data, seed) == ref.murmur3_x86_32(data, seed)
    assert kernel_m64(data, seed) == ref.murmur3_x64_128_first(data, seed)


@njit
def _hash_at(data, end, pos, n, seed, wide):
    # The window data[pos:pos + n] of the text data[:end], hashed from its little-endian words.
    words = np.empty(end, dtype=np.uint64)
    little_endian_words(data, 0, end, words)
    return murmur3_64_at(words, pos, n, seed) if wide else murmur3_32_at(words, pos, n, seed)


@njit
def _hash_run(data, n, seed, wide):
    # Every window of n bytes of data, hashed together.
    words = np.empty(len(data), dtype=np.uint64)
    little_endian_words(data, 0, len(data), words)
    out, spare = np.empty(len(data) - n + 1, dtype=np.uint64), np.empty(len(data) - n + 1, dtype=np.uint64)
    if wide:
        murmur3_64_run(words, len(out), n, seed, out, spare)
    else:
        murmur3_32_run(words, len(out), n, seed, out, np.empty(len(out), dtype=np.uint32))
    return out


def test_murmur3_every_length_and_offset():
    """Lengths 0..40 (every tail of both variants), several seeds, ranges not at 0; and the same
    hashes from little-endian words, for a window that ends where the text ends (its words padded
    with zeros) and one that ends before it (the bytes after it masked off), and for every window
    of a length hashed together."""
    rng = np.random.default_rng(7)
    buf = rng.integers(0, 256, size=64, dtype=np.uint8)
    raw = buf.tobytes()
    for seed in (0, 1, 0x9747B28C, M32):
        for n in range(41):
            for pos in (0, 3, 64 - n):
                piece = raw[pos : pos + n]
                expected = ref.murmur3_x86_32(piece, seed), ref.murmur3_x64_128_first(piece, seed)
                assert (int(_k32(buf, pos, pos + n, seed)), int(_k64(buf, pos, pos + n, seed))) == expected
                for end in (pos + n, 64):
                    got = int(_hash_at(buf, end, pos, n, seed, False)), int(_hash_at(buf, end, pos, n, seed, True))
                    assert got == expected, (seed, n, pos, end)
            if n:
                for wide, hash_of in ((False, ref.murmur3_x86_32), (True, ref.murmur3_x64_128_first)):
                    expected = [hash_of(raw[i : i + n], seed) for i in range(64 - n + 1)]
                    assert _hash_run(buf, n, seed, wide).tolist() == expected, (seed, n, wide)


# ---------------------------------------------------------------------------------------------
# hash value 0 -> 1 (inputs built by inverting MurmurHash3 so the hash is exactly 0)


def _rotr(x, r, bits):
    mask = (1 << bits) - 1
    return ((x >> r) | (x << (bits - r))) & mask


def _zero_hash_x86_32() -> bytes:
    """4 bytes whose MurmurHash3_x86_32 with seed 0 is 0 (fmix32(0) == 0, so aim h ^ len == 0)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    # h = rotl(0 ^ k', 13) * 5 + 0xE6546B64 must equal 4
    km = _rotr(((4 - 0xE6546B64) * pow(5, -1, 1 << 32)) & M32, 13, 32)
    k = (_rotr((km * pow(c2, -1, 1 << 32)) & M32, 15, 32) * pow(c1, -1, 1 << 32)) & M32
    return k.to_bytes(4, "little")


def _zero_hash_x64_128() -> bytes:
    """16 bytes whose MurmurHash3_x64_128 first word with seed 0 is 0 (h1 = h2 = 16 before finalisation)."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    inv5 = pow(5, -1, 1 << 64)
    # h1 = (rotl(0 ^ k1', 27) + 0) * 5 + 0x52DCE729 == 16
    k1m = _rotr(((16 - 0x52DCE729) * inv5) & M64, 27, 64)
    k1 = (_rotr((k1m * pow(c2, -1, 1 << 64)) & M64, 31, 64) * pow(c1, -1, 1 << 64)) & M64
    # h2 = (rotl(0 ^ k2', 31) + h1) * 5 + 0x38495AB5 == 16, with h1 == 16
    k2m = _rotr(((16 - 0x38495AB5) * inv5 - 16) & M64, 31, 64)
    k2 = (_rotr((k2m * pow(c1, -1, 1 << 64)) & M64, 33, 64) * pow(c2, -1, 1 << 64)) & M64
    return k1.to_bytes(8, "little") + k2.to_bytes(8, "little")


def test_zero_hash_is_replaced_by_one():
    z32, z64 = _zero_hash_x86_32(), _zero_hash_x64_128()
    assert ref.murmur3_x86_32(z32, 0) == 0 and kernel_m32(z32, 0) == 0
    assert ref.murmur3_x64_128_first(z64, 0) == 0 and kernel_m64(z64, 0) == 0
    # width >= byte count: each document is a single shingle, the whole (non-UTF-8) byte range
    sig, n = minhash(*raw_buffers([z32, b"", z32]), 0, u32([1, 3, M32]), u32([0, 5, 0]), 32)
    assert n.tolist() == [1, 0, 1]
    assert sig.tolist() == [[1, 8, M32], [0, 0, 0], [1, 8, M32]]
    sig, n = minhash(*raw_buffers([z64, b"", z64]), 0, u64([1, 3, M61 - 1]), u64([0, 5, 0]), 32)
    assert n.tolist() == [1, 0, 1]
    assert sig.tolist() == [[1, 8, M61 - 1], [0, 0, 0], [1, 8, M61 - 1]]


def test_minhash64_mersenne_boundaries():
    """h == 1 exactly (the zero-hash shingle), so h*a + b hits the edges of the reduction."""
    z64 = _zero_hash_x64_128()
    b = [M61 - 1, M61, M61 + 1, 2 * M61, 2 * M61 - 1, M64 - 1, M64, 0]
    a = [1] * len(b)
    expected = [((aj + bj) & M64) % M61 for aj, bj in zip(a, b)]
    assert expected == [0, 1, 2, 1, 0, 7, 0, 1]
    sig, _ = minhash(*raw_buffers([z64]), 0, u64(a), u64(b), 32)
    assert sig.tolist() == [expected]


def test_minhash64_reduces_mod_mersenne61_after_wrapping():
    """((h*a + b) mod 2**64) mod (2**61 - 1): the wrap to 64 bits happens before the Mersenne reduction."""
    a = [M61 - 1, (1 << 63) + 12345, 2**62 + 1]
    b = [M61 - 2, 2**61 - 7, 0]
    texts = ["a", "hello world", "Ünïcödé ✓ 😀 text with several windows"]
    sig, _ = minhash(*buffers(texts), 42, u64(a), u64(b), 4)
    expected = [ref.minhash64(t, 42, a, b, 4) for t in texts]
    assert sig.tolist() == expected
    assert int(sig.max()) < M61
    # the single-shingle case by hand
    h = ref.murmur3_x64_128_first(b"a", 42) or 1
    assert sig[0].tolist() == [((h * aj + bj) & M64) % M61 for aj, bj in zip(a, b)]
    assert sig[0].tolist() != [(h * aj + bj) % M61 for aj, bj in zip(a, b)]


# ---------------------------------------------------------------------------------------------
# signatures against the reference (hypothesis)

PIECES = [
    " ",
    "   ",
    "\t",
    "\n",
    "\x0b",
    "\x0c",
    "\r",
    "\x1c",
    "\x85",
    "\u00a0",
    "\u2003",
    "\u3000",
    "a",
    "b",
    "ab",
    "the",
    "é",
    "ß",
    "Ω",
    "中",
    "文",
    "😀",
    "👍🏽",
    "\U0010ffff",
    "\x00",
    ".",
]
texts_st = st.lists(st.one_of(st.sampled_from(PIECES), st.characters(codec="utf-8")), max_size=40).map("".join)
small_texts_st = st.lists(st.sampled_from(["a", "b", "é", "😀", " ", "\t", "ab", "ba"]), max_size=25).map("".join)
width_st = st.one_of(st.integers(1, 5), st.integers(1, 30))


@st.composite
def perm_st(draw, bits):
    n = draw(st.integers(1, 5))
    if draw(st.booleans()):
        return permutations(n, draw(st.integers(0, 2**32)), bits)
    high = M32 if bits == 32 else M61 - 1
    a = draw(st.lists(st.integers(1, high), min_size=n, max_size=n))
    b = draw(st.lists(st.integers(0, high), min_size=n, max_size=n))
    dtype = np.uint32 if bits == 32 else np.uint64
    return np.array(a, dtype=dtype), np.array(b, dtype=dtype)


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("words", [False, True], ids=["chars", "words"])
@SETTINGS
@given(data=st.data())
def test_minhash_matches_reference(bits, words, data):
    texts = data.draw(
        st.lists(st.one_of(texts_st, st.sampled_from(["", "x", "é", "😀", "  "])), min_size=1, max_size=6)
    )
    width = data.draw(width_st)
    seed = data.draw(st.integers(0, M32))
    a, b = data.draw(perm_st(bits))
    offsets, buf = buffers(texts)
    sig, n = minhash(offsets, buf, seed, a, b, width, words)
    assert sig.dtype == a.dtype and sig.shape == (len(texts), len(a))
    fn = ref_minhash(bits)
    assert sig.tolist() == [fn(t, seed, a.tolist(), b.tolist(), width, words) for t in texts]
    assert n.tolist() == [len(ref.shingles(t, width, words)) for t in texts]
    # documents that do not start at byte 0 of the buffer
    sig1, n1 = minhash(offsets[1:], buf, seed, a, b, width, words)
    assert np.array_equal(sig1, sig[1:]) and np.array_equal(n1, n[1:])


@pytest.mark.parametrize("bits", [32, 64])
def test_minhash_of_documents_longer_than_a_block_matches_reference(bits):
    # The reduction takes BLOCK shingle hashes at a time over every permutation: each
    # permutation's minimum must be the least over all blocks, wherever it falls.
    rng = np.random.default_rng(bits)
    texts = ["".join(rng.choice(list("abcdeé😀 \n"), size=size)) for size in (BLOCK - 1, BLOCK + 23, 3 * BLOCK + 17)]
    a, b = permutations(16, 7, bits)
    sig, n = minhash(*buffers(texts), 7, a, b, 5)
    assert n.tolist() == [BLOCK - 5, BLOCK + 19, 3 * BLOCK + 13]
    assert sig.tolist() == [ref_minhash(bits)(t, 7, a.tolist(), b.tolist(), 5) for t in texts]


@SETTINGS
@given(texts_st, width_st, st.booleans())
def test_kernel_shingles_match_reference(text, width, words):
    from curate.kernels.shingles import shingle_spans

    assert shingle_spans(text, width, words) == ref.shingles(text, width, words)


@njit
def _spans_by_position(data, start, end, width, words):
    out = []
    for pos in range(start, end):
        lo, hi = window_at(data, start, pos, end, width, words)
        if lo < hi:
            out.append((lo, hi))
    return out


@SETTINGS
@given(texts_st, width_st, st.booleans())
def test_window_at_finds_the_reference_shingles_byte_by_byte(text, width, words):
    # What the GPU kernel's threads do, one byte each: a document placed inside a larger buffer.
    raw = text.encode("utf-8")
    data = np.frombuffer(b"x y" + raw + b" z", np.uint8)
    spans = _spans_by_position(data, 3, 3 + len(raw), width, words) if raw else []
    assert [data[lo:hi].tobytes() for lo, hi in spans] == ref.shingles(text, width, words)


def test_reference_shingles_by_hand():
    assert ref.char_shingles("", 3) == []
    assert ref.char_shingles("ab", 3) == [b"ab"]
    assert ref.char_shingles("abc", 3) == [b"abc"]
    assert ref.char_shingles("aéc😀", 2) == ["aé".encode(), "éc".encode(), "c😀".encode()]
    assert ref.word_shingles("", 2) == []
    assert ref.word_shingles(" \t\x0b\r\n ", 1) == []
    assert ref.word_shingles("  one  ", 3) == [b"one"]
    assert ref.word_shingles(" a  b\tc\u00a0d ", 2) == [b"a  b", "b\tc\u00a0d".encode()]
    assert ref.word_shingles("a b c", 1) == [b"a", b"b", b"c"]


def test_minhash_word_mode_by_hand():
    a, b = u32([1, 7]), u32([0, 11])
    texts = ["  one   two\tthree  ", "one two", "\t \n", "", "one\u3000two"]
    sig, n = minhash(*buffers(texts), 3, a, b, 2, True)
    assert n.tolist() == [2, 1, 0, 0, 1]
    h = [ref.murmur3_x86_32(s, 3) or 1 for s in [b"one   two", b"two\tthree", b"one two", "one\u3000two".encode()]]
    assert sig[0].tolist() == [min(h[0], h[1]), min((7 * h[0] + 11) & M32, (7 * h[1] + 11) & M32)]
    assert sig[1].tolist() == [h[2], (7 * h[2] + 11) & M32]
    assert sig[2].tolist() == [0, 0] and sig[3].tolist() == [0, 0]
    assert sig[4].tolist() == [h[3], (7 * h[3] + 11) & M32]


@pytest.mark.parametrize("bits", [32, 64])
def test_short_strings_distinct_and_empty_zero(bits):
    alphabet = "abcdefghi"
    short = [x + y + z for x in alphabet for y in alphabet for z in "xyz"][:200]
    assert len(set(short)) == 200
    a, b = permutations(4, 1, bits)
    texts = short + ["", "", ""]
    sig, n = minhash(*buffers(texts), 0, a, b, 24)
    assert len({tuple(r) for r in sig[:200].tolist()}) == 200
    assert (sig[:200] != 0).all()
    assert n.tolist() == [1] * 200 + [0, 0, 0]
    assert (sig[200:] == 0).all()
    fn = ref_minhash(bits)
    assert sig[:5].tolist() == [fn(t, 0, a.tolist(), b.tolist(), 24) for t in short[:5]]
    # word mode: fewer words than the width is one shingle; whitespace only is empty
    sig, n = minhash(*buffers(["a b", "b a", " ", "\t\n", "a  b"]), 0, a, b, 5, True)
    assert n.tolist() == [1, 1, 0, 0, 1]
    assert len({tuple(r) for r in sig[[0, 1, 4]].tolist()}) == 3
    assert (sig[2:4] == 0).all()


def test_minhash_rejects_bad_parameters():
    offsets, buf = buffers(["abc"])
    with pytest.raises(ValueError):
        minhash(offsets, buf, 0, u32([1, 2]), u32([1]), 3)
    with pytest.raises(ValueError):
        minhash(offsets, buf, 0, u32([1]), u64([1]), 3)
    with pytest.raises(ValueError):
        minhash(offsets, buf, 0, np.array([1], np.int64), np.array([1], np.int64), 3)
    with pytest.raises(ValueError):
        permutations(3, 0, 16)


@pytest.mark.parametrize("bits", [32, 64])
def test_permutations_ranges(bits):
    a, b = permutations(500, 123, bits)
    high = 1 << 32 if bits == 32 else M61
    assert a.dtype == (np.uint32 if bits == 32 else np.uint64) and a.shape == b.shape == (500,)
    assert int(a.min()) >= 1 and int(a.max()) < high and int(b.max()) < high
    a2, b2 = permutations(500, 123, bits)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)
    assert not np.array_equal(a, permutations(500, 124, bits)[0])
    assert int(MERSENNE_61) == M61


@njit
def _walked_windows(data, width, words=False):
    lo, hi = first_window(data, 0, len(data), width, words)
    out = []
    while lo < hi:
        out.append((lo, hi - lo))
        lo, hi = next_window(data, lo, hi, len(data), words)
    return out


@njit
def _char_windows(data, width):
    lo = np.empty(len(data) + 1, dtype=np.int64)
    chars = char_starts(data, 0, len(data), lo)
    count = 0 if chars == 0 else max(chars - width + 1, 1)
    return [(lo[k], lo[min(k + width, chars)] - lo[k]) for k in range(count)]


@njit
def _word_windows(data, width, bounds):
    n_words = word_bounds(data, 0, len(data), bounds)
    count = 0 if n_words == 0 else max(n_words - width + 1, 1)
    return [(bounds[2 * k], bounds[2 * min(k + width, n_words) - 1] - bounds[2 * k]) for k in range(count)]


@njit
def _shingle_hashes(data, width, words, seed, wide):
    out = np.empty(len(data), dtype=np.uint64)
    n = shingle_hashes(data, 0, len(data), width, words, np.uint64(seed), wide, window_scratch(len(data)), out)
    return out[:n]


# Text mostly in ASCII, a multi-byte character now and then: most character shingles are
# `width` bytes, hashed together, and the others one by one.
mostly_ascii_st = st.lists(st.sampled_from(list("abcdefgh ijk.") * 6 + ["é", "😀", "東", "\t"]), max_size=120).map(
    "".join
)


@SETTINGS
@given(st.one_of(texts_st, small_texts_st, mostly_ascii_st).map(str.encode), width_st)
@example(b"\x80\x80abc\xc3", 2)  # not UTF-8: a continuation byte first, a lead byte last
@example(b"\x80", 1)
def test_char_windows_are_the_walks_windows(text, width):
    data = np.frombuffer(text, dtype=np.uint8)
    assert _char_windows(data, width) == _walked_windows(data, width)


@SETTINGS
@given(
    st.one_of(texts_st, small_texts_st, st.binary(max_size=40), st.text(" \t\n\x0b\x0c\rab\x85", max_size=30)), width_st
)
@example(" a  bb\t", 1)
@example("a a a ", 2)
def test_word_bounds_give_the_walks_windows(text, width):
    data = np.frombuffer(text.encode() if isinstance(text, str) else text, dtype=np.uint8)
    # As many entries as word_bounds may write, then guards it must leave alone.
    room = np.full(len(data) + 2 + 8, -7, dtype=np.int64)
    assert _word_windows(data, width, room[: len(data) + 2]) == _walked_windows(data, width, True)
    assert (room[len(data) + 2 :] == -7).all()


@SETTINGS
@given(st.one_of(texts_st, small_texts_st, mostly_ascii_st), width_st, st.booleans(), st.sampled_from([0, 7, M32]))
def test_shingle_hashes_are_the_references_hashes(text, width, words, seed):
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    shingles = ref.shingles(text, width, words)
    for wide, hash_of in ((False, ref.murmur3_x86_32), (True, ref.murmur3_x64_128_first)):
        got = _shingle_hashes(data, width, words, seed, wide)
        assert got.tolist() == [hash_of(s, seed) for s in shingles], wide


@pytest.mark.parametrize("width", [1, 2, 5, 24])
def test_shingle_hashes_of_long_texts_across_runs(width):
    # Windows of `width` bytes are hashed RUN at a time and copied in stretches between the
    # characters of several bytes: those characters placed at and around the runs' edges (and
    # at random), in texts several runs long, of ASCII or of nothing else.
    rng = np.random.default_rng(width)
    texts = []
    for density in (0.002, 0.05):
        chars = list("".join(rng.choice(list("abcdefgh ijk."), size=3 * RUN + 100)))
        for i in [RUN - 2 * width, RUN - width, RUN - 1, RUN, 2 * RUN - width + 1, 2 * RUN + 3]:
            chars[i] = "é"
        for i in np.flatnonzero(rng.random(len(chars)) < density):
            chars[i] = rng.choice(["é", "😀", "東"])
        texts.append("".join(chars))
    texts.append("".join(rng.choice(list("abcdefgh ijk."), size=2 * RUN + 5)))
    for text in texts:
        data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        shingles = ref.shingles(text, width, False)
        for wide, hash_of in ((False, ref.murmur3_x86_32), (True, ref.murmur3_x64_128_first)):
            got = _shingle_hashes(data, width, False, 7, wide)
            assert got.tolist() == [hash_of(s, 7) for s in shingles], wide


def test_shingle_hashes_is_compiled_once(tmp_path):
    # MinHash at 32 and 64 bits, verification's sets and the greedy split's call
    # shingle_hashes with one signature: a literal True among the arguments was a type of its
    # own, and compiled it (seconds, in every new environment) a second time. A process of its
    # own, so that no test's call adds a signature, with a cache of its own: code loaded from a
    # cache links its callees without them (no signature at all).
    code = """
import numpy as np, pandas as pd
from curate import backend
from curate.kernels.jaccard import greedy_representatives, jaccard_indexed
from curate.kernels.minhash import minhash, permutations
from curate.kernels.shingles import shingle_hashes
offsets, data = backend.text_buffers(pd.Series(["some text of words", "other text of words"], dtype="str"))
for bits in (32, 64):
    minhash(offsets, data, 0, *permutations(4, 1, bits), 5)
jaccard_indexed(offsets, data, np.array([0]), np.array([1]), 5, at_least=0.5)
greedy_representatives(offsets, data, np.array([0, 2]), 0.99, 5)
print(len(shingle_hashes.signatures))
"""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-1] == "1"


@pytest.mark.parametrize(
    "text",
    [
        "abcdefghij" * 30,  # ASCII: every window together
        "abcdefghij" * 15 + "é" + "abcdefghij" * 15,  # together, and the windows holding é one by one
        "éèêë" * 60,  # none of width bytes: one by one
        "東京は日本の首都です" * 20,
        "a" * 300,  # one distinct shingle
        ("abcdefghij" * 30 + "é") * 25,  # windows together in four runs, é's on their edges
    ],
)
def test_shingle_hashes_of_long_texts(text):
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    for width in (1, 5, 24):
        for wide, hash_of in ((False, ref.murmur3_x86_32), (True, ref.murmur3_x64_128_first)):
            got = _shingle_hashes(data, width, False, 3, wide)
            assert got.tolist() == [hash_of(s, 3) for s in ref.shingles(text, width)], (width, wide)


def test_shingle_sets_are_each_documents_distinct_shingle_hashes():
    # Sets above and below NUMPY_SORT (sorted by numpy or in numba), empty ones, and documents
    # picked out of order and twice: each is the distinct 64-bit hashes of its document's
    # shingles (shingle_hashes, seed 0: tested against the reference above), in increasing order.
    rng = np.random.default_rng(3)
    words = ["".join(rng.choice(list("abcdefgé"), rng.integers(1, 8))) for _ in range(400)]
    texts = [" ".join(rng.choice(words, n)) for n in (0, 3, 60, 400, 3000, 1)] + ["", "x" * 5000]
    offsets, data = buffers(texts)
    # In a buffer of another call's sets, left there (with room: the hashes a view of it; the
    # documents named twice need more), or one too small (a new array).
    buffers_ = [None, shingle_sets(offsets, data, 3)[1].base, np.zeros(10, np.uint64)]
    for docs, buffer in itertools.product((None, [4, 0, 7, 4, 2, 1]), buffers_):
        for width, as_words in ((5, False), (24, False), (2, True)):
            set_offsets, hashes = shingle_sets(offsets, data, width, as_words, docs, buffer)
            picked = range(len(texts)) if docs is None else docs
            assert len(set_offsets) == len(picked) + 1 and set_offsets[-1] == len(hashes)
            room = sum(offsets[d + 1] - offsets[d] for d in picked)  # one hash per text byte at most
            assert (buffer is not None and np.shares_memory(hashes, buffer)) == (
                buffer is not None and len(buffer) >= room
            )
            for i, d in enumerate(picked):
                expected = np.unique(_shingle_hashes(data[offsets[d] : offsets[d + 1]], width, as_words, 0, True))
                assert np.array_equal(hashes[set_offsets[i] : set_offsets[i + 1]], expected), (docs, width, d)
    assert np.diff(shingle_sets(offsets, data, 5)[0])[4] > 1024  # the numpy path was taken


# ---------------------------------------------------------------------------------------------
# Jaccard


def pair_jaccard(xs, ys, width, words=False, budget=1 << 25):
    """jaccard_indexed of pairs (xs[i], ys[i]), their texts in one buffer."""
    n = len(xs)
    return jaccard_indexed(*buffers(list(xs) + list(ys)), np.arange(n), np.arange(n, 2 * n), width, words, budget)


@SETTINGS
@given(
    st.lists(
        st.tuples(st.one_of(small_texts_st, texts_st), st.one_of(small_texts_st, texts_st)), min_size=1, max_size=6
    ),
    width_st,
    st.booleans(),
)
def test_jaccard_matches_reference(pairs, width, words):
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    got = pair_jaccard(xs, ys, width, words)
    expected = [ref.jaccard(x, y, width, words) for x, y in pairs]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@SETTINGS
@given(st.lists(st.one_of(small_texts_st, texts_st), min_size=1, max_size=8), st.data(), width_st, st.integers(0, 200))
def test_jaccard_indexed_shares_sets_across_pairs_and_chunks(texts, data, width, budget):
    # Documents in many pairs, in any order, with budgets that cut the pairs into chunks of one
    # pair up to all of them: every value is the reference's.
    pick = st.integers(0, len(texts) - 1)
    x = data.draw(st.lists(pick, min_size=1, max_size=20))
    y = data.draw(st.lists(pick, min_size=len(x), max_size=len(x)))
    got = jaccard_indexed(*buffers(texts), np.array(x), np.array(y), width, False, budget)
    expected = [ref.jaccard(texts[i], texts[j], width) for i, j in zip(x, y)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@njit
def _at_least(x, y, threshold):
    return jaccard_at_least(x, y, threshold)


@njit
def _exact(x, y):
    return jaccard_sorted(x, y)


@njit
def _needed(total, threshold):
    return overlap_needed(total, threshold)


def sets_sharing(common, only_x, only_y, seed=0, shared_last=False):
    """Two sorted uint64 arrays with ``common`` values in both; with ``shared_last``, every
    unshared value sorts before the shared ones (the merge meets all its misses first)."""
    values = np.sort(np.random.default_rng(seed).choice(1 << 40, common + only_x + only_y, replace=False)).astype(
        np.uint64
    )
    if shared_last:
        shared, own = values[only_x + only_y :], values[: only_x + only_y]
    else:
        shared, own = values[:common], values[common:]
    return np.sort(np.r_[shared, own[:only_x]]), np.sort(np.r_[shared, own[only_x:]])


def test_overlap_needed_is_the_least_count_that_reaches_the_threshold():
    for threshold in (0.01, 0.1, 0.5, 2 / 3, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1.0):
        for total in range(0, 400):
            reach = [c for c in range(total // 2 + 1) if c / (total - c) >= threshold] if total else [0]
            # none reaches (an odd total at threshold 1): more than the smaller set can share
            assert _needed(total, threshold) == (reach[0] if reach else (total + 1) // 2), (threshold, total)
    assert _needed(10, 0.0) == 0


@SETTINGS
@given(
    st.integers(0, 400),
    st.integers(0, 200),
    st.integers(0, 200),
    st.floats(0.01, 1.0),
    st.booleans(),
    st.integers(0, 9),
)
def test_jaccard_at_least_is_exact_at_the_threshold_and_an_upper_bound_below(common, only_x, only_y, t, last, seed):
    x, y = sets_sharing(common, only_x, only_y, seed, last)
    exact, got = _exact(x, y), _at_least(x, y, t)
    if exact >= t:
        assert got == exact
    else:
        assert exact <= got < t


def test_jaccard_at_least_keeps_every_pair_exactly_at_its_threshold():
    # The threshold is the pair's own similarity, and every unshared value comes first: the
    # merge meets all its misses before any shared value, and must still not stop.
    for nx in range(1, 200, 13):
        for ny in range(1, 200, 11):
            for common in range(0, min(nx, ny) + 1, 3):
                x, y = sets_sharing(common, nx - common, ny - common, nx * ny, shared_last=True)
                exact = _exact(x, y)
                if exact > 0:
                    assert _at_least(x, y, exact) == exact, (nx, ny, common)
                    above = np.nextafter(exact, 2)  # the next float: the pair fails, by a bound below it
                    assert exact <= _at_least(x, y, above) < above


def test_jaccard_indexed_at_least():
    # The pipeline's path: values at or above at_least are the reference's, the others fall below it.
    texts = ["the quick brown fox jumps over the lazy dog " * 3, "the quick brown fox jumps over the lazy cat " * 3]
    texts += [t.replace("quick", "slow") for t in texts] + ["nothing alike here", ""]
    x, y = np.repeat(np.arange(6), 6), np.tile(np.arange(6), 6)
    exact = jaccard_indexed(*buffers(texts), x, y, 5)
    assert np.array_equal(exact, [ref.jaccard(texts[i], texts[j], 5) for i, j in zip(x, y)])
    for t in (0.3, 0.5, 0.8, 1.0):
        got = jaccard_indexed(*buffers(texts), x, y, 5, at_least=t)
        assert np.array_equal(got[exact >= t], exact[exact >= t]) and (got[exact < t] < t).all()
        assert (got >= exact).all()


def test_jaccard_indexed_builds_each_set_once_per_tile_or_in_the_given_order(monkeypatch):
    # 60 documents of 100 bytes in blocks of 1,000 (budget 2,000): 6 blocks. Every pair of
    # them, in random order (as a member round's pairs reach a partition): a set is built at
    # most once per tile its document is in (6), not once per chunk of a few pairs (~3,000 in all).
    import curate.kernels.jaccard as kernel

    built, calls = [], []  # sets built by each jaccard_indexed call, by each shingle_sets call
    original = kernel.shingle_sets

    def counted(offsets, data, width, words, docs, buffer=None):
        calls.append(len(docs))
        return original(offsets, data, width, words, docs, buffer)

    def jaccard_indexed(*args, **kwargs):
        calls.clear()
        similarity = kernel.jaccard_indexed(*args, **kwargs)
        built.append(sum(calls))
        return similarity

    monkeypatch.setattr(kernel, "shingle_sets", counted)
    rng = np.random.default_rng(0)
    texts = ["".join(rng.choice(list("abcd"), 100)) for _ in range(60)]
    x, y = np.triu_indices(60, 1)
    order = rng.permutation(len(x))
    got = jaccard_indexed(*buffers(texts), x[order], y[order], 3, budget=2000)
    assert np.array_equal(got, [ref.jaccard(texts[i], texts[j], 3) for i, j in zip(x[order], y[order])])
    assert built[0] <= 6 * 60
    # Texts that fit in one block keep the given order: one chunk, each set built once.
    jaccard_indexed(*buffers(texts), x[order], y[order], 3, budget=12_000)
    assert built[1] == 60
    # Blocks that the budget does not divide evenly (an odd budget, documents of 100 to 999
    # bytes straddling where a block of budget / 2 bytes would end): still once per tile.
    # Blocks were cut where a text started, so a block could hold more than budget / 2 and a
    # tile take several chunks, each building its sets again (55 per document at budget 1,999
    # for documents of 10 bytes).
    texts = ["".join(rng.choice(list("abcdefgh"), rng.integers(100, 1000))) for _ in range(120)]
    budget = sum(len(t) for t in texts) // 4 + 1
    blocks, held = 1, 0  # whole documents, at most budget // 2 bytes a block
    for size in map(len, texts):
        blocks, held = (blocks + 1, size) if held and held + size > budget // 2 else (blocks, held + size)
    x, y = np.triu_indices(120, 1)
    order = rng.permutation(len(x))
    got = jaccard_indexed(*buffers(texts), x[order], y[order], 4, budget=budget)
    assert np.array_equal(got, [ref.jaccard(texts[i], texts[j], 4) for i, j in zip(x[order], y[order])])
    assert 8 <= blocks <= 10 and built[2] <= blocks * 120
    # LSH stars in the stage's order (by anchor), their members all over the buffer: 12 anchors
    # (documents 0-11) with 4 members each (12 + a, 24 + a, 36 + a, 48 + a), 60 documents of 100
    # bytes, 6 blocks. Tiles built each anchor's set once per block its members lie in (96 sets
    # in all); in the given order four whole stars fill a chunk: each set once.
    texts = ["".join(rng.choice(list("abcd"), 100)) for _ in range(60)]
    x, y = np.repeat(np.arange(12), 4), (np.arange(12)[:, None] + [12, 24, 36, 48]).ravel()
    got = jaccard_indexed(*buffers(texts), x, y, 3, budget=2000)
    assert np.array_equal(got, [ref.jaccard(texts[i], texts[j], 3) for i, j in zip(x, y)])
    assert built[3] == 60


def test_jaccard_by_hand():
    xs = ["the cat sat", "abcdef", "", "", "   ", "aaaa", "abcab"]
    ys = ["the cat sat", "uvwxyz", "", "abc", "\t", "aa", "abcabcab"]
    got = pair_jaccard(xs, ys, 2)
    # "aaaa" -> {aa}, "aa" -> {aa}; "abcab" -> {ab, bc, ca}, "abcabcab" -> same set
    assert got[0] == 1.0 and got[1] == 0.0 and got[2] == 1.0 and got[3] == 0.0
    assert got[5] == 1.0 and got[6] == 1.0
    # "   " -> {"  "} (2 windows, same bytes) vs "\t" -> {"\t"}: disjoint
    assert got[4] == 0.0
    words = pair_jaccard(["a b c d", "a b", " ", "x y"], ["b c d e", "a  b", "", "x y"], 1, True)
    assert words.tolist() == [3 / 5, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="differ in length"):
        jaccard_indexed(*buffers(["a", "b"]), np.array([0, 1]), np.array([0]), 2)
    with pytest.raises(ValueError, match=r"in \[0, 2\)"):
        jaccard_indexed(*buffers(["a", "b"]), np.array([0]), np.array([2]), 2)


# ---------------------------------------------------------------------------------------------
# greedy representatives


def test_greedy_representatives_chain():
    # word 1-grams: A={1,2,3,4}, B={2,3,4,5}, C={3,4,5,6}: J(A,B) = J(B,C) = 3/5, J(A,C) = 2/6
    A, B, C = "w1 w2 w3 w4", "w2 w3 w4 w5", "w3 w4 w5 w6"
    assert ref.jaccard(A, B, 1, True) == 0.6 and ref.jaccard(B, C, 1, True) == 0.6
    assert ref.jaccard(A, C, 1, True) == pytest.approx(1 / 3)
    texts = [
        "x",
        "x",  # group 0: identical pair
        A,
        B,
        C,  # group 1: chain A~B~C, A !~ C
        A,  # group 2: a lone copy of A (must not join group 1)
        C,
        B,
        A,  # group 3: the chain the other way round
        "",
        "",  # group 4: two empty documents (J = 1)
    ]
    starts = np.array([0, 2, 5, 6, 9, 11], dtype=np.int64)
    rep, similarity = greedy_representatives(*buffers(texts), starts, 0.5, 1, True)
    assert rep.dtype == np.int64 and similarity.dtype == np.float64
    assert rep.tolist() == [0, 0, 2, 2, 4, 5, 6, 6, 8, 9, 9]
    # each row's similarity with its representative: B joins A at 3/5, C~B joins C at 3/5
    assert similarity.tolist() == [1, 1, 1, 0.6, 1, 1, 1, 0.6, 1, 1, 1]
    # threshold is inclusive (J(A,B) == 0.6 exactly) and above it nothing merges
    assert greedy_representatives(*buffers([A, B, C]), np.array([0, 3]), 0.6, 1, True)[0].tolist() == [0, 0, 2]
    assert greedy_representatives(*buffers([A, B, C]), np.array([0, 3]), 0.61, 1, True)[0].tolist() == [0, 1, 2]
    # a low threshold takes the whole chain to its first row
    rep, similarity = greedy_representatives(*buffers([A, B, C]), np.array([0, 3]), 0.3, 1, True)
    assert rep.tolist() == [0, 0, 0] and similarity.tolist() == pytest.approx([1, 0.6, 1 / 3])
    # one group per row: every row is its own representative; empty groups are allowed
    assert greedy_representatives(*buffers([A, A, A]), np.array([0, 1, 2, 3]), 0.5, 1, True)[0].tolist() == [0, 1, 2]
    assert greedy_representatives(*buffers([A, A]), np.array([0, 0, 2, 2]), 0.5, 1, True)[0].tolist() == [0, 0]


def _greedy_by_hand(texts, starts, threshold, width, words, fixed=None):
    """greedy_representatives by its definition: each representative compared with every later
    row, except the ``fixed`` ones (never taken)."""
    rep, similarity = [-1] * len(texts), [0.0] * len(texts)
    fixed = [False] * len(texts) if fixed is None else list(fixed)
    for lo, hi in zip(starts[:-1], starts[1:]):
        for r in range(lo, hi):
            if rep[r] == -1:
                rep[r], similarity[r] = r, 1.0
                for k in range(r + 1, hi):
                    if fixed[k] or rep[k] != -1:
                        continue
                    if (s := ref.jaccard(texts[k], texts[r], width, words)) >= threshold:
                        rep[k], similarity[k] = r, s
    return rep, similarity


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.text("ab c", max_size=14), min_size=1, max_size=30),
    st.data(),
    st.sampled_from([0.05, 1 / 3, 0.5, 0.6, 0.75, 0.8, 0.9, 1.0]),
    st.integers(1, 3),
    st.booleans(),
)
def test_greedy_representatives_compare_only_prefix_sharing_rows_and_miss_none(texts, data, threshold, width, words):
    # A chain of 8,000 near duplicates took 158 s: each representative was compared with every
    # row left, n² / 6 comparisons; now only rows sharing a prefix shingle, with the same result.
    # Budgets of a few bytes split the rows left into batches (a group each, or a few).
    cuts = sorted(data.draw(st.sets(st.integers(1, len(texts) - 1), max_size=4))) if len(texts) > 1 else []
    starts = np.array([0, *cuts, len(texts)], dtype=np.int64)
    budget = data.draw(st.sampled_from([1, 30, 1 << 25]))
    rep, similarity = greedy_representatives(*buffers(texts), starts, threshold, width, words, budget=budget)
    assert (rep.tolist(), similarity.tolist()) == _greedy_by_hand(texts, starts.tolist(), threshold, width, words)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.text("ab c", max_size=14), min_size=1, max_size=30),
    st.data(),
    st.sampled_from([1 / 3, 0.5, 0.8, 1.0]),
    st.integers(1, 3),
    st.booleans(),
)
def test_greedy_representatives_with_known_similarities_and_fixed_rows_give_the_same_groups(
    texts, data, threshold, width, words
):
    # The verified edges give some rows' similarity with their group's first row: taken as known,
    # the groups and similarities are those found by comparing every row. Fixed rows (curate
    # dedup --reference: a published document, never removed, even as the copy of another one;
    # without them the first row took every copy, the second published one too), anywhere in a
    # group (the pipeline sorts them first), are never taken.
    cuts = sorted(data.draw(st.sets(st.integers(1, len(texts) - 1), max_size=4))) if len(texts) > 1 else []
    starts = [0, *cuts, len(texts)]
    known = np.full(len(texts), np.nan)
    for lo, hi in zip(starts[:-1], starts[1:]):
        for k in range(lo + 1, hi):
            if data.draw(st.booleans()):
                known[k] = ref.jaccard(texts[k], texts[lo], width, words)
    fixed = data.draw(st.none() | st.lists(st.booleans(), min_size=len(texts), max_size=len(texts)).map(np.array))
    budget = data.draw(st.sampled_from([1, 30, 1 << 25]))
    rep, similarity = greedy_representatives(
        *buffers(texts), np.array(starts), threshold, width, words, known=known, budget=budget, fixed=fixed
    )
    assert (rep.tolist(), similarity.tolist()) == _greedy_by_hand(texts, starts, threshold, width, words, fixed)
    if fixed is not None:
        assert (rep[fixed] == np.flatnonzero(fixed)).all()


def test_greedy_representatives_fixed_copies_stay():
    texts = ["alpha beta gamma", "alpha beta gamma", "alpha beta gamma", "delta"]
    fixed = np.array([True, True, False, False])
    rep, _ = greedy_representatives(*buffers(texts), np.array([0, 4]), 0.8, 1, True, fixed=fixed)
    assert rep.tolist() == [0, 1, 0, 3]
    with pytest.raises(ValueError, match="fixed has 2 values for 4 documents"):
        greedy_representatives(*buffers(texts), np.array([0, 4]), 0.8, 1, True, fixed=fixed[:2])


def test_greedy_representatives_take_a_known_similarity_as_given():
    # Unrelated texts, but the edges say both rows match the first: nothing is compared again.
    texts = ["alpha beta", "gamma delta", "epsilon zeta"]
    known = np.array([np.nan, 0.9, 0.85])
    rep, similarity = greedy_representatives(*buffers(texts), np.array([0, 3]), 0.8, 1, True, known=known)
    assert rep.tolist() == [0, 0, 0] and similarity.tolist() == [1.0, 0.9, 0.85]
    # Only the second known: the third is compared with the first, and fails.
    known[2] = np.nan
    rep, similarity = greedy_representatives(*buffers(texts), np.array([0, 3]), 0.8, 1, True, known=known)
    assert rep.tolist() == [0, 0, 2] and similarity.tolist() == [1.0, 0.9, 1.0]
    with pytest.raises(ValueError, match="known has 2 values for 3 documents"):
        greedy_representatives(*buffers(texts), np.array([0, 3]), 0.8, 1, True, known=known[:2])


@pytest.mark.parametrize("budget, batches", [(700, [600] * 5), (250, [300] * 10), (1 << 25, [3000])])
def test_greedy_representatives_batches_hold_at_most_the_budget(monkeypatch, budget, batches):
    # A batch took its last group whole where the budget cut it, and so passed the budget by up
    # to that group's bytes (a book and its copy: sets of 6.52 MB of text at a budget of 6.25).
    # 10 groups of 3 rows of 100 bytes: batches of whole groups, a group alone where it is larger.
    texts = [f"{i:02d} {'ab' if i % 3 else 'cd'} " * 10 + "x" * 40 for i in range(30)]
    starts = np.arange(0, 31, 3)
    needs, real = [], curate.kernels.jaccard.sets_buffer

    def recording(offsets, docs, buffer):
        needs.append(int((offsets[docs + 1] - offsets[docs]).sum()))
        return real(offsets, docs, buffer)

    monkeypatch.setattr(curate.kernels.jaccard, "sets_buffer", recording)
    rep, similarity = greedy_representatives(*buffers(texts), starts, 0.5, 3, False, budget=budget)
    assert {len(t) for t in texts} == {100} and needs == batches
    assert (rep.tolist(), similarity.tolist()) == _greedy_by_hand(texts, starts.tolist(), 0.5, 3, False)


# ---------------------------------------------------------------------------------------------
# LSH banding


def _ref_buckets(sig, num_bands, rows):
    le = sig.astype(sig.dtype.newbyteorder("<"))
    return [
        [ref.murmur3_x64_128_first(le[i, k * rows : (k + 1) * rows].tobytes(), k) for k in range(num_bands)]
        for i in range(sig.shape[0])
    ]


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_band_buckets(dtype):
    rng = np.random.default_rng(3)
    sig = rng.integers(0, 1 << 32 if dtype == np.uint32 else M61, size=(6, 11), dtype=np.uint64).astype(dtype)
    sig[1, :4] = sig[0, :4]  # rows 0 and 1 share bands 0 and 1
    sig[2, :] = 9  # same values in every band
    out = band_buckets(sig, 3, 3)  # 3 bands x 3 rows, columns 9 and 10 ignored
    assert out.shape == (6, 3) and out.dtype == np.uint64
    assert out.tolist() == _ref_buckets(sig, 3, 3)
    assert out[0, 0] == out[1, 0]
    assert out[0, 2] != out[1, 2]
    assert len(set(out[2].tolist())) == 3  # equal bands, different band index -> different buckets
    # trailing columns do not matter
    sig2 = sig.copy()
    sig2[:, 9:] = 0
    assert np.array_equal(band_buckets(sig2, 3, 3), out)
    # non-contiguous input
    wide = np.zeros((6, 22), dtype=dtype)
    wide[:, ::2] = sig
    assert np.array_equal(band_buckets(wide[:, ::2], 3, 3), out)
    assert np.array_equal(band_buckets(np.asfortranarray(sig), 3, 3), out)
    with pytest.raises(ValueError):
        band_buckets(sig, 4, 3)


def test_band_bucket_is_murmur_of_band_bytes_by_hand():
    sig = np.array([[1, 2, 3, 4]], dtype=np.uint32)
    out = band_buckets(sig, 2, 2)
    assert int(out[0, 0]) == ref.murmur3_x64_128_first(b"\x01\x00\x00\x00\x02\x00\x00\x00", 0)
    assert int(out[0, 1]) == ref.murmur3_x64_128_first(b"\x03\x00\x00\x00\x04\x00\x00\x00", 1)
    sig = np.array([[5, 5]], dtype=np.uint64)
    out = band_buckets(sig, 2, 1)
    five = (5).to_bytes(8, "little")
    assert out.tolist() == [[ref.murmur3_x64_128_first(five, 0), ref.murmur3_x64_128_first(five, 1)]]
    assert out[0, 0] != out[0, 1]


def test_band_buckets_no_documents():
    out = band_buckets(np.zeros((0, 8), dtype=np.uint32), 2, 4)
    assert out.shape == (0, 2) and out.dtype == np.uint64


# ---------------------------------------------------------------------------------------------
# text normalisation

OFF = dict(lowercase=False, whitespace=False, punctuation=False, nfkc=False, format_chars=False, accents=False)


def _norm(texts, index=None, **on):
    s = pd.Series(texts, index=index, dtype="str")
    out = backend.normalize_text(s, **{**OFF, **on})
    assert list(out.index) == list(s.index)
    assert out.dtype == s.dtype
    return out.tolist()


def test_normalize_nothing():
    assert _norm(["  Ａ ﬁ,  B\t"]) == ["  Ａ ﬁ,  B\t"]


def test_normalize_lowercase():
    assert _norm(["Hello WORLD", "ÀÉÎ ΣΑΣ Ω", "ẞ x"], lowercase=True) == ["hello world", "àéî σασ ω", "ß x"]


def test_normalize_whitespace():
    assert _norm(["  a\t\tb\n\nc  d \r\n", "x", "   ", ""], whitespace=True) == ["a b c d", "x", "", ""]


def test_normalize_punctuation():
    texts = ['Hello, World! (it\'s) "q" a-b ¿qué? «x» 1.5; a_b {c}']
    assert _norm(texts, punctuation=True) == ["Hello World its q ab qué x 15 ab c"]


def test_normalize_format_characters():
    # Zero-width spaces and joiners, soft hyphens, BOMs and direction marks (Cf), which NFKC
    # keeps: a crawl's copy with them sprinkled in shared almost no shingle with its original
    # (Jaccard 0.003-0.009 in a user's trial), whatever else was normalised.
    texts = ["zero\u200bwidth joi\u200dner soft\u00adhyphen \ufeffbom \u200eltr", "a \u200b b", "\u2060"]
    assert _norm(texts, format_chars=True) == ["zerowidth joiner softhyphen bom ltr", "a  b", ""]
    assert _norm(texts, format_chars=True, whitespace=True) == ["zerowidth joiner softhyphen bom ltr", "a b", ""]
    assert _norm(texts, nfkc=True) == texts  # NFKC alone keeps them
    assert _norm(["e\u0301\u200b"], format_chars=True) == ["e\u0301"]  # combining marks (Mn) are not Cf


def test_normalize_accents():
    # Copies without their diacritics were never found (German 0.35, French 0.24-0.40, Greek and
    # Vietnamese 0.00, Arabic without its vowel marks 0.006 in a user's trial, every flag on).
    composed = ["Crème brûlée à São Paulo", "Ελληνικά: ή ό ώ", "Tiếng Việt", "كَتَبَ", "İstanbul"]
    assert _norm(composed, accents=True) == [
        "Creme brulee a Sao Paulo",
        "Ελληνικα: η ο ω",
        "Tieng Viet",
        "كتب",
        "Istanbul",
    ]
    decomposed = [unicodedata.normalize("NFD", t) for t in composed]
    assert decomposed != composed and _norm(decomposed, accents=True) == _norm(composed, accents=True)
    # Whole where the decomposition holds more than one letter: a Hangul syllable, a Bengali two-part vowel.
    assert _norm(["한국어", "\u09cb"], accents=True) == ["한국어", "\u09cb"]
    # No other flag strips them (İ left out: Arrow lower-cases it to i, Python to i and a dot).
    assert _norm(composed[:4], nfkc=True, lowercase=True) == [t.lower() for t in composed[:4]]


def test_normalize_nfkc():
    assert _norm(["ﬁne", "ＡＢＣ１", "x²", "①", "e\u0301"], nfkc=True) == ["fine", "ABC1", "x2", "1", "é"]


def test_normalize_all():
    texts = ["  ﬁ, Ａb!  C\t", "The  Quick.\n\nBrown—fox…", "ＨＥＬＬＯ\u3000ｗｏｒｌｄ"]
    assert _norm(texts, lowercase=True, whitespace=True, punctuation=True, nfkc=True) == [
        "fi ab c",
        "the quick brownfox",
        "hello world",
    ]


def test_normalize_keeps_values_with_any_index():
    # a partition after filtering: index labels are not 0..n-1
    assert _norm(["A", "B", "C"], index=[2, 0, 7], lowercase=True) == ["a", "b", "c"]


def test_normalize_whitespace_unicode():
    assert _norm(["a\x0bb\u00a0c\u3000d\u2003e"], whitespace=True) == ["a b c d e"]


def test_normalize_whitespace_is_one_set_inside_and_at_the_ends():
    # U+001C-U+001F and U+0085 were trimmed at the ends but kept between words: two texts that
    # differed only in where such a character sat got different shingles. Whitespace is what
    # str.isspace says, everywhere.
    points = [c for c in range(0x3000 + 1) if not 0xD800 <= c < 0xE000]
    inside = _norm([f"a{chr(c)}b" for c in points], whitespace=True)
    ends = _norm([f"{chr(c)}a{chr(c)}" for c in points], whitespace=True)
    assert [c for c, t in zip(points, inside) if t == "a b"] == [c for c in points if chr(c).isspace()]
    assert [c for c, t in zip(points, ends) if t == "a"] == [c for c in points if chr(c).isspace()]


@SETTINGS
@given(st.lists(texts_st, min_size=1, max_size=4), width_st, st.booleans())
def test_shingle_sets_are_the_hashes_of_the_reference_shingles(texts, width, words):
    set_offsets, hashes = shingle_sets(*buffers(texts), width, words)
    for i, text in enumerate(texts):
        expected = sorted({ref.murmur3_x64_128_first(s) for s in ref.shingles(text, width, words)})
        assert hashes[set_offsets[i] : set_offsets[i + 1]].tolist() == expected


def _depth_reference(line: bytes) -> int:
    """The deepest nesting of [ and { outside JSON strings, byte by byte."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in line:
        if in_string:
            escaped, in_string = (False, True) if escaped else (byte == 92, byte != 34)
        elif byte == 34:
            in_string = True
        elif byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(["[", "]", "{", "}", '"', "\\", "a", " ", '"[{', '\\"', '\\\\"', '"]}"']), max_size=80
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 6),
)
@example([["[", "[", "{"], ['"', "[[[", '"']], 2)
def test_nesting_check_is_the_byte_by_byte_depth_outside_strings(lines, limit):
    # Brackets inside strings, escaped quotes and runs of backslashes, lines of exactly `limit`
    # brackets; the lines lie in one buffer, as the reader's block.
    texts = ["".join(tokens).encode() for tokens in lines]
    buf = np.frombuffer(b"\n".join(texts), dtype=np.uint8)
    starts = np.cumsum([0] + [len(t) + 1 for t in texts[:-1]]).astype(np.int64)
    ends = starts + np.array([len(t) for t in texts], dtype=np.int64)
    expected = [_depth_reference(t) > limit for t in texts]
    assert nested_deeper(buf, starts, ends, limit).tolist() == expected


def test_kernels_are_cached_in_a_temporary_folder_where_numba_has_no_writable_place(tmp_path):
    # A read-only install run by a user without a home (a container's --user, HOME=/) stopped
    # every command as a kernel module was imported: "RuntimeError: cannot cache function
    # '_deepest': no locator available". Here both of numba's places are under a regular file,
    # which no folder can be made in (root writes anywhere else).
    blocked = tmp_path / "file"
    blocked.write_text("")
    module = tmp_path / "module"
    module.mkdir()
    (module / "__pycache__").write_text("")  # a file: numba cannot cache beside the module either
    (module / "cached.py").write_text("from numba import njit\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x\n")
    script = (
        "import os, sys, tempfile\n"
        "from curate.kernels import cache_fallback\n"
        f"folder = cache_fallback({str(blocked / 'kernels')!r})\n"
        "assert folder == os.path.join(tempfile.gettempdir(), f'curate-numba-cache-{os.getuid()}'), folder\n"
        "assert os.environ['NUMBA_CACHE_DIR'] == folder\n"
        f"sys.path.insert(0, {str(module)!r})\n"
        "import cached\n"
        "print(cached.twice(21), cached.twice.stats.cache_misses or cached.twice.stats.cache_hits)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env |= {"XDG_CACHE_HOME": str(blocked / "cache"), "HOME": str(blocked)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "42"
    # Where numba has a place, or NUMBA_CACHE_DIR is set, nothing changes.
    from curate.kernels import cache_fallback

    environ = {}
    assert cache_fallback(str(tmp_path / "kernels"), environ) is None and environ == {}
    assert cache_fallback(str(blocked / "kernels"), {"NUMBA_CACHE_DIR": str(tmp_path)}) is None
