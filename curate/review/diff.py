"""Word-level differences between two texts, to show a removed document beside its representative.

Words are runs of non-whitespace (as ``str.split`` cuts them), except that each Han, kana or
CJK-symbol character, and each Thai, Lao, Myanmar or Khmer letter with its marks, is a word of its
own: these scripts put no spaces between words, and a sentence as one word would show a
one-character edit as the whole sentence changed. Whitespace is
never compared, so a text that was only re-wrapped or re-indented has no differences. What is shown keeps each text's own
whitespace: the segments of a :class:`Diff` are slices of the texts and concatenate back to them
(less what gaps elide).

Matching is difflib's :class:`~difflib.SequenceMatcher` (Ratcliff/Obershelp "gestalt pattern
matching": the longest common block, then the same on each side of it) in two rounds, because
word by word on whole books it takes seconds to minutes:

1. On *units*: runs of words cut after a word whose CRC-32 is divisible by 8 (about 8 words a
   unit), or after 64 words. The cuts depend only on the words themselves (content-defined
   chunking, as rsync and LBFS cut files), so the same text is cut the same way whatever its
   whitespace and whatever comes before it, and an edit changes only the unit it falls in.
   Units are nearly all distinct, which is what makes SequenceMatcher fast.
2. Word by word inside each pair of differing unit runs, if the pair is small enough
   (:data:`WORD_PAIRS_MAX` word pairs); a larger pair (texts that differ throughout) is shown
   as changed as a whole.
"""

import bisect
import re
import unicodedata
import zlib
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import pairwise
from typing import Literal, NamedTuple

WORD_PAIRS_MAX = 4_000_000  # word-by-word matching of a differing run: at most this len(a) * len(b)
_UNIT_MASK = 7  # a unit ends after a word whose CRC-32 & mask == 0: 8 words a unit on average
_UNIT_MAX = 64  # words, for runs without such a word (a word repeated, say)
# CJK symbols and punctuation (not U+3000, a space), Hiragana, Katakana, CJK extension A, unified ideographs,
# compatibility ideographs, halfwidth/fullwidth forms, and the supplementary ideograph planes
CJK = "\u3001-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff"
# Thai, Lao, Myanmar and Khmer, also written without spaces between words: each letter with the
# vowel and tone marks written on it (Unicode categories Mn, Mc) is a word of its own
UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
_MARKS = "".join(
    ch
    for low, high in ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF))
    for ch in map(chr, range(low, high + 1))
    if unicodedata.category(ch) in ("Mn", "Mc")
)
_WORD = re.compile(rf"[{CJK}]|[{UNSPACED}][{_MARKS}]*|[^\s{CJK}{UNSPACED}]+")


class Segment(NamedTuple):
    """A piece of a diff: text both documents share, text where they differ, or elided common text.

    Attributes
    ----------
    kind : {"same", "changed", "gap", "rest"}
        "same": the same words in both (``a`` and ``b`` differ at most in whitespace);
        "changed": words of ``a`` not in ``b`` and words of ``b`` not in ``a`` (either may be
        empty: a pure insertion or deletion); "gap": common words not shown; "rest": the words
        after a shortened diff's end (see :func:`word_diff`), which may differ. ``a == b == ""``
        for both.
    a, b : str
        The text of the piece in each document, its whitespace included (each piece runs from
        the start of its first word to the start of the next piece's first word; the first
        piece also holds the text's leading whitespace, the last its trailing whitespace).
    skipped : int
        For a gap, the words left out (the same number on both sides); for the rest, those of
        the side with more words left. 0 otherwise.
    """

    kind: Literal["same", "changed", "gap", "rest"]
    a: str
    b: str
    skipped: int = 0


@dataclass(frozen=True)
class Diff:
    """The word-level differences of a text ``a`` from a text ``b`` (see :func:`word_diff`).

    Attributes
    ----------
    segments : list of Segment
        In text order.
    words_a, words_b : int
        Words in each text.
    changed_a, changed_b : int
        Words of ``a`` with no counterpart in ``b``, and of ``b`` with none in ``a``, among the
        words compared (all of them when ``complete``).
    complete : bool
        False if a text had more than ``max_words`` words: only the first ``max_words`` of
        each were compared, and the segments end with a "rest" segment.
    """

    segments: list[Segment]
    words_a: int
    words_b: int
    changed_a: int
    changed_b: int
    complete: bool


def word_diff(a: str, b: str, *, context: int = 20, max_chars: int = 100_000, max_words: int = 1_000_000) -> Diff:
    """Compare two texts word by word, ignoring whitespace, for display side by side.

    Parameters
    ----------
    a, b : str
        The texts, e.g. a removed document and its kept representative.
    context : int, default=20
        Words of common text shown on each side of a change, and at the start of the texts.
        A longer common run is elided to a "gap" segment where that hides more than
        ``context`` words; so a text identical to the other (as words) is its first
        ``context`` words and a gap, or a single "same" segment if it has at most
        ``2 * context`` words.
    max_chars : int, default=100_000
        About how many characters to show of each text: once either side passes this,
        the segments stop (mid-segment, at a word end) and end with a "rest" segment saying how
        many words were left out.
    max_words : int, default=1_000_000
        Compare at most the first ``max_words`` words of each text (``Diff.complete`` is
        False when that cuts a text), so time stays bounded: about 0.25 s per 100,000 words
        of near-duplicate books on one core.

    Returns
    -------
    Diff

    Raises
    ------
    ValueError
        If ``context`` is negative or ``max_chars`` / ``max_words`` is not positive.

    Notes
    -----
    The match is difflib's Ratcliff/Obershelp matching on content-defined runs of words, then
    on the words of each pair of differing runs (see the module docstring). It is not a
    minimal edit script: a word that also occurs nearby may be shown as changed.

    References
    ----------
    .. [1] Ratcliff, J. W. and Metzener, D. E. "Pattern Matching: The Gestalt Approach",
       Dr. Dobb's Journal, July 1988 (Python's ``difflib.SequenceMatcher``).
    .. [2] Muthitacharoen, A., Chen, B. and Mazières, D. "A Low-Bandwidth Network File
       System", SOSP 2001 (content-defined chunking).

    Examples
    --------
    >>> word_diff("the cat sat", "the  dog sat").segments
    [Segment(kind='same', a='the ', b='the  ', skipped=0), Segment(kind='changed', a='cat ', b='dog ', skipped=0), Segment(kind='same', a='sat', b='sat', skipped=0)]
    """
    if context < 0:
        raise ValueError(f"context must be >= 0 words, got {context}")
    if max_chars < 1 or max_words < 1:
        raise ValueError(f"max_chars and max_words must be positive, got {max_chars} and {max_words}")
    side_a, side_b = _Side(a), _Side(b)
    complete = max(len(side_a.words), len(side_b.words)) <= max_words
    words_a, words_b = side_a.words[:max_words], side_b.words[:max_words]
    blocks = _matching_blocks(words_a, words_b)
    matched = sum(size for _, _, size in blocks)
    runs = _runs(blocks, len(words_a), len(words_b))
    segments = _Writer(side_a, side_b, context, max_chars).write(runs, complete)
    return Diff(
        segments, len(side_a.words), len(side_b.words), len(words_a) - matched, len(words_b) - matched, complete
    )


class _Side:
    """One text, its words and where they start (characters)."""

    def __init__(self, text: str):
        self.text = text
        found = list(_WORD.finditer(text))
        self.words = [m[0] for m in found]
        self.starts = [m.start() for m in found]

    def cut(self, i: int) -> int:
        """Where the piece that begins with word ``i`` begins: 0 for the first, the text end past the last."""
        if i == 0:
            return 0
        return self.starts[i] if i < len(self.starts) else len(self.text)

    def piece(self, i: int, j: int) -> str:
        if not self.words:  # all whitespace: it goes with the one (changed) segment
            return self.text
        return self.text[self.cut(i) : self.cut(j)]

    def fit(self, i: int, j: int, chars: int) -> int:
        """The last ``k`` in ``[i, j]`` with ``piece(i, k)`` at most ``chars`` long (at least ``i + 1`` if ``i < j``)."""
        limit = self.cut(i) + chars
        if j == len(self.starts) and len(self.text) <= limit:
            return j
        k = bisect.bisect_right(self.starts, limit, i + 1, min(j + 1, len(self.starts))) - 1
        return max(k, min(i + 1, j))


def _matching_blocks(a: list[str], b: list[str]) -> list[tuple[int, int, int]]:
    """Common runs ``(i, j, n)``: ``a[i:i+n] == b[j:j+n]``, increasing in i and j, adjacent runs merged."""
    if a == b:
        return [(0, 0, len(a))] if a else []
    units_a, at_a = _units(a)
    units_b, at_b = _units(b)
    blocks: list[tuple[int, int, int]] = []
    i = j = 0
    for ui, uj, size in SequenceMatcher(None, units_a, units_b).get_matching_blocks():
        a0, a1, b0, b1 = at_a[i], at_a[ui], at_b[j], at_b[uj]
        if a0 < a1 and b0 < b1 and (a1 - a0) * (b1 - b0) <= WORD_PAIRS_MAX:  # a differing pair of runs
            for x, y, n in SequenceMatcher(None, a[a0:a1], b[b0:b1]).get_matching_blocks():
                blocks.append((a0 + x, b0 + y, n))
        if size:
            blocks.append((a1, b1, at_a[ui + size] - a1))
        i, j = ui + size, uj + size
    merged: list[tuple[int, int, int]] = []
    for x, y, n in blocks:
        if merged and merged[-1][0] + merged[-1][2] == x and merged[-1][1] + merged[-1][2] == y:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + n)
        elif n:
            merged.append((x, y, n))
    return merged


def _units(words: list[str]) -> tuple[list[tuple[str, ...]], list[int]]:
    """Content-defined runs of words (see the module docstring) and the word index each starts at, plus the end."""
    ends_unit = {w: zlib.crc32(w.encode("utf-8", "surrogatepass")) & _UNIT_MASK == 0 for w in set(words)}
    starts = [0]
    for k, word in enumerate(words, 1):
        if ends_unit[word] or k - starts[-1] == _UNIT_MAX:
            starts.append(k)
    if starts[-1] != len(words):
        starts.append(len(words))
    return [tuple(words[s:e]) for s, e in pairwise(starts)], starts


def _runs(blocks, n_a: int, n_b: int) -> list[tuple[str, int, int, int, int]]:
    """The word ranges ``(kind, i0, i1, j0, j1)`` of the texts, alternating "changed" and "same"."""
    runs, i, j = [], 0, 0
    for x, y, n in [*blocks, (n_a, n_b, 0)]:
        if i < x or j < y:
            runs.append(("changed", i, x, j, y))
        if n:
            runs.append(("same", x, x + n, y, y + n))
        i, j = x + n, y + n
    return runs


class _Writer:
    """Turns word ranges into segments, eliding common runs and stopping after ``max_chars``."""

    def __init__(self, a: _Side, b: _Side, context: int, max_chars: int):
        self.a, self.b, self.context, self.max_chars = a, b, context, max_chars
        self.segments: list[Segment] = []
        self.shown = [0, 0]  # characters
        self.done = [0, 0]  # words shown or elided

    def write(self, runs, complete: bool) -> list[Segment]:
        if not runs and (self.a.text or self.b.text):  # no words at all: the whitespace is the text
            return [Segment("same", self.a.text, self.b.text)]
        for index, (kind, i0, i1, j0, j1) in enumerate(runs):
            if kind == "changed":
                full = self.add("changed", i0, i1, j0, j1)
            else:
                head = self.context  # after a change, or the text's start (so a reader sees how it begins)
                tail = self.context if index < len(runs) - 1 or not complete else 0  # before one
                full = self._same(i0, i1, j0, j1, head, tail)
            if not full:
                break
        left = max(len(self.a.words) - self.done[0], len(self.b.words) - self.done[1])
        if left:  # cut by max_chars or max_words: not known to be common
            self.segments.append(Segment("rest", "", "", left))
        return self.segments

    def _same(self, i0, i1, j0, j1, head: int, tail: int) -> bool:
        n = i1 - i0
        if n - head - tail <= self.context:  # eliding would hide little
            return self.add("same", i0, i1, j0, j1)
        if head and not self.add("same", i0, i0 + head, j0, j0 + head):
            return False
        self.segments.append(Segment("gap", "", "", n - head - tail))
        self.done = [self.done[0] + n - head - tail, self.done[1] + n - head - tail]
        return not tail or self.add("same", i1 - tail, i1, j1 - tail, j1)

    def add(self, kind: str, i0: int, i1: int, j0: int, j1: int) -> bool:
        """Append a segment, cut at the word where the characters run out; False if it was cut."""
        room_a, room_b = self.max_chars - self.shown[0], self.max_chars - self.shown[1]
        ia, jb = self.a.fit(i0, i1, room_a), self.b.fit(j0, j1, room_b)
        if kind == "same":
            ia = jb = min(ia - i0, jb - j0)
            ia, jb = i0 + ia, j0 + jb
        piece_a, piece_b = self.a.piece(i0, ia), self.b.piece(j0, jb)
        self.segments.append(Segment(kind, piece_a, piece_b))
        self.shown = [self.shown[0] + len(piece_a), self.shown[1] + len(piece_b)]
        self.done = [self.done[0] + ia - i0, self.done[1] + jb - j0]
        return ia == i1 and jb == j1 and max(self.shown) < self.max_chars
