"""The GPU backend's normalisation recipe gives the CPU path's strings, checked on the CPU.

``normalize_text_cudf`` runs cudf's ``translate`` with :func:`curate.backend.normalization_table`,
a regex replace of space runs and ``strip``. Here the same recipe runs with Python's ``str``
operations, whose semantics those cudf operations share (a character map where ``""`` removes,
character-set strip), against :func:`curate.backend.normalize_text_pandas` on real text, on
every code point and on random mixes of the characters that matter. That cudf's operations give
the Python ones' strings is checked on the device (tests/test_gpu.py).
"""

import itertools
import json
import random
import re

import pandas as pd
import pytest

from curate import backend
from tests.conftest import FIXTURES, SHARED
from tests.cuda_simulator_check import EXTRA

OPTIONS = [
    dict(zip(("lowercase", "whitespace", "punctuation", "nfkc"), bits))
    for bits in itertools.product((False, True), repeat=4)
]
ALL_POINTS = [chr(c) for c in itertools.chain(range(0xD800), range(0xE000, 0x110000))]


def libcudf_translate(text: str, table: dict) -> str:
    """libcudf's ``translate`` (cpp/src/strings/translate.cu): Python's, except that a NUL no
    entry names is counted in the output's size but never written, so the string loses it and
    ends in a byte never written (here "?")."""
    return text.translate(table).replace("\x00", "") + "?" * text.count("\x00") if table else text


def device_recipe(texts: list[str], *, lowercase, whitespace, punctuation, nfkc) -> list[str]:
    """What normalize_text_cudf does, with Python's str operations in place of cudf's."""
    options = {"lowercase": lowercase, "whitespace": whitespace, "punctuation": punctuation}
    table, trim = backend.normalization_table(**options)
    if table and any("\x00" in t for t in texts):  # the partition on the host
        return cpu(texts, **options, nfkc=nfkc)
    if nfkc:  # on the host in both backends
        texts = backend.normalize_text(
            pd.Series(texts, dtype="str"), lowercase=False, whitespace=False, punctuation=False, nfkc=True
        ).tolist()
    texts = [libcudf_translate(t, table) for t in texts]
    if whitespace:
        texts = [re.sub(" +", " ", t).strip(trim) for t in texts]
    return texts


def cpu(texts: list[str], **options) -> list[str]:
    return backend.normalize_text(pd.Series(texts, dtype="str"), **options).tolist()


def real_texts() -> list[str]:
    texts = [json.loads(line)["text"] for line in (FIXTURES / "docs.jsonl").read_text().splitlines()]
    shard = SHARED / "20news" / "part-00000.jsonl.gz"
    if shard.exists():
        texts += pd.read_json(shard, lines=True, nrows=3000, dtype=False)["text"].tolist()
    return texts + EXTRA


def mixes(n: int, seed: int = 0) -> list[str]:
    """Random strings of the characters the map changes, the trim characters, and ordinary text."""
    table, trim = backend.normalization_table(lowercase=True, whitespace=True, punctuation=True)
    pool = list(map(chr, table)) + list(trim) * 20 + list("aZ 9ΣσςİıẞßǅﬁＡ\u0301😀東") * 10
    rng = random.Random(seed)
    return ["".join(rng.choices(pool, k=rng.randint(0, 40))) for _ in range(n)]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "+".join(k for k, v in o.items() if v) or "none")
def test_recipe_equals_cpu_on_real_text_and_mixes(options):
    texts = real_texts() + mixes(3000)
    assert device_recipe(texts, **options) == cpu(texts, **options)


@pytest.mark.parametrize("options", OPTIONS[:8], ids=lambda o: "+".join(k for k, v in o.items() if v) or "none")
def test_recipe_equals_cpu_on_every_code_point(options):
    # Each code point alone, between letters, and all of them in order in one text (every
    # neighbour pair of the code space), so a context the map ignores would show.
    texts = ALL_POINTS[::7] + [f"a{c}b" for c in ALL_POINTS[::5]] + ["".join(ALL_POINTS)]
    assert device_recipe(texts, **options) == cpu(texts, **options)


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
    # libcudf's translate drops a NUL (the first H200-less review, reading translate.cu): a
    # partition holding one takes the host path, the others the device's.
    texts = ["a\x00B,  c", "Nothing odd"]
    for options in OPTIONS:
        expected = cpu(texts, **options)
        assert device_recipe(texts, **options) == expected and "\x00" in expected[0]
        assert device_recipe(texts[1:], **options) == expected[1:]


def test_no_option_no_table():
    assert backend.normalization_table(lowercase=False, whitespace=False, punctuation=False) == ({}, "")
