"""Both backends' normalisation give the strings of the Arrow operations that define it, checked on the CPU.

The normalisation is defined by Arrow's operations (NFKC, lowercase, RE2 punctuation and
whitespace replacements, trim: ``arrow_ops`` below). Both backends apply their character map
(:func:`curate.backend.normalization_table`) instead: ``normalize_text_cudf`` runs
:func:`curate.kernels.normalize.map_characters` and ``collapse_spaces`` on cupy arrays, then
cudf's ``strip``; the CPU backend (:func:`curate.backend.normalize_text_pandas`) runs
``map_and_collapse``, compiled. Here the device's kernels run on numpy arrays (and ``strip`` is
Python's, a character-set strip as cudf's), and both are compared with ``arrow_ops`` on real
text, on every code point and on random mixes of the characters that matter. The device's run
of them is checked in tests/test_gpu.py.
"""

import itertools
import json
import random
import re

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pytest

from curate import backend
from curate.kernels import normalize
from tests.conftest import FIXTURES, SHARED
from tests.cuda_simulator_check import EXTRA

FLAGS = ("lowercase", "whitespace", "punctuation", "format_chars", "accents", "nfkc")
OPTIONS = [dict(zip(FLAGS, bits)) for bits in itertools.product((False, True), repeat=len(FLAGS))]
ALL_POINTS = [chr(c) for c in itertools.chain(range(0xD800), range(0xE000, 0x110000))]


def buffers(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A strings column's buffers, as text_buffers gives them on the device (offsets from 3, to
    check that they need not start at 0)."""
    encoded = [t.encode() for t in texts]
    offsets = 3 + np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int32)
    return offsets, np.frombuffer(b"xyz" + b"".join(encoded) + b"!", dtype=np.uint8)


def strings(offsets: np.ndarray, data: np.ndarray) -> list[str]:
    return [data[a:b].tobytes().decode() for a, b in zip(offsets[:-1], offsets[1:])]


def device_recipe(
    texts: list[str], *, lowercase, whitespace, punctuation, nfkc, format_chars=False, accents=False
) -> list[str]:
    """What normalize_text_cudf does, with the kernels on numpy and Python's strip for cudf's."""
    options = {
        "lowercase": lowercase,
        "whitespace": whitespace,
        "punctuation": punctuation,
        "format_chars": format_chars,
        "accents": accents,
    }
    table, trim = backend.normalization_table(**options)
    if nfkc:  # on the host in both backends
        texts = backend.normalize_text(
            pd.Series(texts, dtype="str"), lowercase=False, whitespace=False, punctuation=False, nfkc=True
        ).tolist()
    if not table:
        return texts
    offsets, data = normalize.map_characters(*buffers(texts), backend.character_map(**options), np)
    if whitespace:
        offsets, data = normalize.collapse_spaces(offsets, data, np)
    texts = strings(offsets, data)
    return [t.strip(trim) for t in texts] if whitespace else texts


def cpu(texts: list[str], **options) -> list[str]:
    return backend.normalize_text(pd.Series(texts, dtype="str"), **options).tolist()


def arrow_ops(
    texts: list[str], *, lowercase, whitespace, punctuation, nfkc, format_chars=False, accents=False
) -> list[str]:
    """The normalisation's definition: Arrow's operations on the strings themselves (accents: the
    character map :func:`curate.backend.accent_table`, by str.translate)."""
    arr = backend._arrow_strings(pd.Series(texts, dtype="str"))
    if nfkc:
        arr = pc.utf8_normalize(arr, "NFKC")
    arr = backend._normalize_chars(
        arr,
        lowercase=lowercase,
        whitespace=whitespace,
        punctuation=punctuation,
        format_chars=format_chars,
        accents=accents,
    )
    return (pc.utf8_trim_whitespace(arr) if whitespace else arr).to_pylist()


def real_texts() -> list[str]:
    texts = [json.loads(line)["text"] for line in (FIXTURES / "docs.jsonl").read_text().splitlines()]
    shard = SHARED / "20news" / "part-00000.jsonl.gz"
    if shard.exists():
        texts += pd.read_json(shard, lines=True, nrows=3000, dtype=False)["text"].tolist()
    return texts + EXTRA


def mixes(n: int, seed: int = 0) -> list[str]:
    """Random strings of the characters the map changes, the trim characters, and ordinary text."""
    table, trim = backend.normalization_table(
        lowercase=True, whitespace=True, punctuation=True, format_chars=True, accents=True
    )
    pool = list(map(chr, table)) + list(trim) * 20 + list("aZ 9ΣσςİıẞßǅﬁＡ\u0301😀東한ো\u09c7\u09be") * 10
    rng = random.Random(seed)
    return ["".join(rng.choices(pool, k=rng.randint(0, 40))) for _ in range(n)]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "+".join(k for k, v in o.items() if v) or "none")
def test_both_backends_equal_arrow_ops_on_real_text_and_mixes(options):
    texts = real_texts() + mixes(3000)
    expected = arrow_ops(texts, **options)
    assert cpu(texts, **options) == expected
    assert device_recipe(texts, **options) == expected


@pytest.mark.parametrize(
    "options",
    [o for o in OPTIONS if not o["lowercase"]],  # every other combination
    ids=lambda o: "+".join(k for k, v in o.items() if v) or "none",
)
def test_both_backends_equal_arrow_ops_on_every_code_point(options):
    # Each code point alone, between letters, and all of them in order in one text (every
    # neighbour pair of the code space), so a context the map ignores would show.
    texts = ALL_POINTS[::7] + [f"a{c}b" for c in ALL_POINTS[::5]] + ["".join(ALL_POINTS)]
    expected = arrow_ops(texts, **options)
    assert cpu(texts, **options) == expected
    assert device_recipe(texts, **options) == expected


def test_table_holds_what_cudf_own_operations_would_get_wrong():
    """The differences that rule out cudf's own operations (docs/decisions.md), pinned."""
    table, trim = backend.normalization_table(lowercase=True, whitespace=True, punctuation=True)
    # Arrow maps each code point to one (libcudf's lower gives "i̇", two, for İ; Python too).
    assert table[ord("İ")] == "i" and table[ord("Σ")] == "σ" and ord("ς") not in table
    # Punctuation is Unicode P*, not "neither letter, digit nor space" (which would drop $ and +).
    assert (
        table[ord(",")] == table[ord("¿")] == table[ord("…")] == "" and ord("$") not in table and ord("+") not in table
    )
    # Whitespace: RE2's \s, \v and Z*, not every byte <= 0x20 (nvtext's normalize_spaces) ...
    # ... and the separators \x1c-\x1f and NEL, which Arrow's trim takes at the ends (once kept inside).
    assert table[ord("\u3000")] == table[ord("\xa0")] == table[ord("\x0b")] == table[ord("\x1c")] == " "
    assert set("\x1c\x1d\x1e\x1f\x85 \t\u3000") <= set(trim)
    assert cpu(["\x1ca\x1cb\x85"], lowercase=False, whitespace=True, punctuation=False, nfkc=False) == ["a b"]


def test_a_nul_character_survives():
    # libcudf's translate dropped a NUL (the first H200-less review, reading translate.cu), so a
    # partition holding one went to the host; the byte kernels keep it like any character.
    texts = ["a\x00B,  c", "Nothing odd", "\x00", ""]
    for options in OPTIONS:
        expected = arrow_ops(texts, **options)
        assert cpu(texts, **options) == expected and "\x00" in expected[0]
        assert device_recipe(texts, **options) == expected


def test_kernels_on_empty_strings_and_no_strings():
    options = {"lowercase": True, "whitespace": True, "punctuation": True}
    target = backend.character_map(**options)
    for texts in ([], [""], ["", ""], ["  ", ",", " a  b "]):
        offsets, data = normalize.map_characters(*buffers(texts), target, np)
        offsets, data = normalize.collapse_spaces(offsets, data, np)
        assert strings(offsets, data) == [re.sub(" +", " ", t.replace(",", "")) for t in texts]


def test_no_option_no_table():
    assert backend.normalization_table(lowercase=False, whitespace=False, punctuation=False) == ({}, "")


def test_compiled_map_fits_text_that_grows_and_refuses_too_little_room():
    # Arrow lower-cases Ⱥ (2 bytes) to ⱥ (3): the CPU kernel's room is the map's largest growth.
    options = {"lowercase": True, "whitespace": True, "punctuation": True}
    table, _ = backend.normalization_table(**options)
    assert table[ord("Ⱥ")] == "ⱥ" and len("Ⱥ".encode()) == 2 and len("ⱥ".encode()) == 3
    texts = ["ȺȺȺ", "", "Ⱥ,  Ⱥ"]
    offsets, data = normalize.map_and_collapse(*buffers(texts), backend.character_map(**options), True, 1.5)
    assert strings(offsets, data) == ["ⱥⱥⱥ", "", "ⱥ ⱥ"]
    with pytest.raises(ValueError, match="more than 1.0 times longer"):
        normalize.map_and_collapse(*buffers(texts), backend.character_map(**options), True, 1.0)
    assert cpu(texts, **options, nfkc=False) == ["ⱥⱥⱥ", "", "ⱥ ⱥ"]
