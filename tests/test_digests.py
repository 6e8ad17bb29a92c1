"""The exact-dedup digests (curate.kernels.digests: md5, SHA-256) against a reference written with hashlib alone."""

import hashlib

import numpy as np
import pandas as pd
import pytest

from curate import backend
from curate.kernels.digests import CHUNK_BYTES, chunk_offsets, hex_digests

C = CHUNK_BYTES


ALGORITHMS = {"md5": backend.md5_hex, "sha256": backend.sha256_hex}


@pytest.fixture(params=sorted(ALGORITHMS))
def algorithm(request):
    return request.param


def reference(text: str, algorithm: str) -> str:
    """Plain digest up to C bytes; above, the digest of the hex digests of the C-byte slices, concatenated."""
    raw, h = text.encode("utf-8"), getattr(hashlib, algorithm)
    if len(raw) <= C:
        return h(raw).hexdigest()
    parts = [raw[i : i + C] for i in range(0, len(raw), C)]
    return h("".join(h(p).hexdigest() for p in parts).encode()).hexdigest()


def texts() -> list[str]:
    # Every length around one and two chunks, a 3-byte character cut by a chunk boundary, and
    # texts of several chunks; empty and short ones between them.
    cut = "a" * (C - 1) + "東" + "b" * 10  # 東 is 3 bytes: bytes C-1..C+1
    return [
        "",
        "x",
        "a" * (C - 1),
        "a" * C,
        "a" * (C + 1),
        "",
        cut,
        "é" * C,
        "z" * (2 * C),
        "z" * (2 * C + 1),
        "ab " * 9000,
        "short",
    ]


def test_short_texts_keep_their_plain_digest(algorithm):
    for text in ["", "x", "naïve café", "a" * C]:
        expected = [hashlib.new(algorithm, text.encode()).hexdigest()]
        assert ALGORITHMS[algorithm](pd.Series([text], dtype="str")).tolist() == expected


def test_digests_equal_the_hashlib_reference(algorithm):
    series = pd.Series(texts(), dtype="str")
    assert ALGORITHMS[algorithm](series).tolist() == [reference(t, algorithm) for t in texts()]


def test_long_texts_differ_by_one_byte_give_different_digests(algorithm):
    long = "q" * (3 * C)
    changed = long[: 2 * C] + "r" + long[2 * C + 1 :]
    a, b = ALGORITHMS[algorithm](pd.Series([long, changed], dtype="str")).tolist()
    assert a != b


def test_nulls_hash_as_empty_strings_and_the_index_is_kept(algorithm):
    series = pd.Series(["a" * (C + 5), None, "b"], index=[7, 3, 9], dtype="str")
    digests = ALGORITHMS[algorithm](series)
    assert digests.index.tolist() == [7, 3, 9]
    assert digests.tolist() == [
        reference("a" * (C + 5), algorithm),
        reference("", algorithm),
        reference("b", algorithm),
    ]


def test_a_slice_of_a_buffer(algorithm):
    # A partition's chunk: offsets that do not start at byte 0.
    encoded = [t.encode() for t in texts()]
    offsets = np.r_[0, np.cumsum([len(e) for e in encoded])].astype(np.int64)
    data = np.frombuffer(b"".join(encoded), np.uint8)
    assert hex_digests(offsets[4:10], data, algorithm) == [reference(t, algorithm) for t in texts()[4:9]]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_chunk_offsets_by_hand(dtype):
    offsets = np.array([10, 10, 13, 20, 21], dtype)  # lengths 0, 3, 7, 1; chunks of 3 bytes
    bounds, per_doc, first = chunk_offsets(offsets, 3)
    assert bounds.tolist() == [10, 10, 13, 16, 19, 20, 21]
    assert per_doc.tolist() == [1, 1, 3, 1] and first.tolist() == [0, 1, 2, 5]
    bounds, per_doc, first = chunk_offsets(np.array([5], dtype), 3)  # no documents
    assert bounds.tolist() == [5] and len(per_doc) == len(first) == 0
