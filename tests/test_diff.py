"""word_diff: exact segments on small texts, elision, limits, and invariants on random and real texts."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curate.io import read_records
from curate.review.diff import _WORD, Diff, Segment, word_diff
from curate.review.inspect import differing, jaccard_text
from tests.conftest import shared_corpus

SAME, CHANGED = "same", "changed"


def gap(n: int) -> Segment:
    return Segment("gap", "", "", n)


def rest(n: int) -> Segment:
    return Segment("rest", "", "", n)


def wordlist(text: str) -> list[str]:
    """The words word_diff compares: runs of non-whitespace, each Han or kana character one word,
    each Thai, Lao, Myanmar or Khmer letter with its marks one word."""
    return _WORD.findall(text)


def numbered(n: int) -> list[str]:
    return [f"w{i}" for i in range(n)]


@pytest.mark.parametrize(
    ("a", "b", "segments"),
    [
        ("a b c", "a b x c", [(SAME, "a b ", "a b "), (CHANGED, "", "x "), (SAME, "c", "c")]),  # insert
        ("a b x c", "a b c", [(SAME, "a b ", "a b "), (CHANGED, "x ", ""), (SAME, "c", "c")]),  # delete
        ("one two three", "one 2 three", [(SAME, "one ", "one "), (CHANGED, "two ", "2 "), (SAME, "three", "three")]),
        ("a b c", "x y", [(CHANGED, "a b c", "x y")]),
        ("a b", "a b c d", [(SAME, "a b", "a b "), (CHANGED, "", "c d")]),  # at the end
        ("x a b", "a b", [(CHANGED, "x ", ""), (SAME, "a b", "a b")]),  # at the start
        ("a  b\nc\n", "a b c", [(SAME, "a  b\nc\n", "a b c")]),  # re-wrapped: no change
        ("  lead b\n", "lead c", [(SAME, "  lead ", "lead "), (CHANGED, "b\n", "c")]),  # own whitespace kept
        ("", "x y", [(CHANGED, "", "x y")]),
        ("x y", "", [(CHANGED, "x y", "")]),
        ("x y", " \n", [(CHANGED, "x y", " \n")]),
        ("", "", []),
        (" \t", "\n", [(SAME, " \t", "\n")]),  # no words on either side
        (
            "naïve café 日本語 🙂",
            "naive café 日本語 🙂",
            [(CHANGED, "naïve ", "naive "), (SAME, "café 日本語 🙂", "café 日本語 🙂")],
        ),
        ("α\u00a0β γ", "α β γ", [(SAME, "α\u00a0β γ", "α β γ")]),  # a no-break space is whitespace too
        # Chinese and Japanese have no spaces between words: each Han or kana character is a word
        # (a sentence was one word, and one character edited showed it all as changed)
        (
            "今天天气很好。",
            "今天天气不好。",
            [(SAME, "今天天气", "今天天气"), (CHANGED, "很", "不"), (SAME, "好。", "好。")],
        ),
        (
            "東京abc駅です",
            "東京abd駅です",
            [(SAME, "東京", "東京"), (CHANGED, "abc", "abd"), (SAME, "駅です", "駅です")],
        ),
        ("中\u3000文", "中文", [(SAME, "中\u3000文", "中文")]),  # the ideographic space is whitespace
        # Thai, Lao, Myanmar and Khmer have none either: each letter with its vowel and tone marks
        # is a word (the sentence was one word, changed as a whole)
        (
            "แมวนั่งบนเสื่อ",
            "แมวนอนบนเสื่อ",
            [(SAME, "แมว", "แมว"), (CHANGED, "นั่ง", "นอน"), (SAME, "บนเสื่อ", "บนเสื่อ")],
        ),
        (
            "ខ្ញុំស្រលាញ់អ្នក",
            "ខ្ញុំស្រលាញ់គាត់",
            [(SAME, "ខ្ញុំស្រលាញ់", "ខ្ញុំស្រលាញ់"), (CHANGED, "អ្នក", "គាត់")],
        ),
    ],
)
def test_exact_segments(a, b, segments):
    diff = word_diff(a, b)
    assert diff.segments == [Segment(*s) for s in segments]
    assert (diff.words_a, diff.words_b) == (len(wordlist(a)), len(wordlist(b)))
    assert diff.changed_a == sum(len(wordlist(s.a)) for s in diff.segments if s.kind == CHANGED)
    assert diff.changed_b == sum(len(wordlist(s.b)) for s in diff.segments if s.kind == CHANGED)
    assert diff.complete


def test_counts():
    diff = word_diff("the quick brown fox jumps", "the slow brown dog fox leaps high")
    assert diff == Diff(
        [
            Segment(SAME, "the ", "the "),
            Segment(CHANGED, "quick ", "slow "),
            Segment(SAME, "brown ", "brown "),
            Segment(CHANGED, "", "dog "),
            Segment(SAME, "fox ", "fox "),
            Segment(CHANGED, "jumps", "leaps high"),
        ],
        words_a=5,
        words_b=7,
        changed_a=2,
        changed_b=4,
        complete=True,
    )


def test_differing_words_in_a_headline():
    assert differing(word_diff("the quick fox", "the slow fox")) == "1 of 3 words differ (1 of 3 in the kept)"
    # An exact group of empty (or whitespace-only) texts read "0 of 0 words differ (0 of 0 in the kept)".
    assert differing(word_diff("", "")) == differing(word_diff(" \n", "\t")) == "no words on either side"
    # Only the first words compared (two books of 26 million words): "1 of 26,146,646 words
    # differ" read as the whole texts' count, where they differed in 20 places.
    a, b = " ".join(numbered(10)), " ".join(numbered(10)).replace("w1 ", "x ").replace("w8", "y")
    assert differing(word_diff(a, b, max_words=4)) == (
        "only the first words compared: 1 differ there (1 in the kept), of 10 words (10 in the kept)"
    )


def test_a_jaccard_below_1_never_reads_1():
    # Two books differing in 20 places of 26 million words: "Jaccard 1.000", as identical copies.
    assert [jaccard_text(j) for j in (0.8, 0.87465, 0.9995, 0.999993, 0.9999996, 1.0)] == [
        "0.800",
        "0.875",
        "0.999500",
        "0.999993",
        "0.999999",
        "1.000",
    ]


def test_identical_texts_show_their_start():
    text = " ".join(numbered(30))
    start = "w0 w1 w2 w3 w4 "
    assert word_diff(text, text, context=5).segments == [Segment(SAME, start, start), gap(25)]
    assert word_diff(text, text.replace(" ", "\n"), context=5).segments == [
        Segment(SAME, start, start.replace(" ", "\n")),
        gap(25),
    ]
    assert word_diff(text, text, context=15).segments == [
        Segment(SAME, text, text)
    ]  # eliding would hide no more than 15
    assert word_diff(text, text, context=0).segments == [gap(30)]


def test_common_runs_elided_to_context():
    words = numbered(40)
    a = " ".join(words)
    b = " ".join(words[:15] + ["X"] + words[16:27] + ["Y"] + words[28:])
    assert word_diff(a, b, context=3).segments == [
        Segment(SAME, "w0 w1 w2 ", "w0 w1 w2 "),  # the start of the texts
        gap(9),  # before the first change: only its context is shown
        Segment(SAME, "w12 w13 w14 ", "w12 w13 w14 "),
        Segment(CHANGED, "w15 ", "X "),
        Segment(SAME, "w16 w17 w18 ", "w16 w17 w18 "),
        gap(5),  # 11 words between the changes: 3 of context each side, 5 elided
        Segment(SAME, "w24 w25 w26 ", "w24 w25 w26 "),
        Segment(CHANGED, "w27 ", "Y "),
        Segment(SAME, "w28 w29 w30 ", "w28 w29 w30 "),
        gap(9),
    ]
    # A run that would hide no more than `context` words is shown whole.
    middle = " ".join(words[16:27]) + " "
    assert word_diff(a, b, context=4).segments[4:6] == [Segment(SAME, middle, middle), Segment(CHANGED, "w27 ", "Y ")]
    assert word_diff(a, b, context=0).segments == [
        gap(15),
        Segment(CHANGED, "w15 ", "X "),
        gap(11),
        Segment(CHANGED, "w27 ", "Y "),
        gap(12),
    ]


def test_max_words_compares_a_prefix():
    a, b = "a b c d e f", "a b c d x f g"
    first = word_diff(a, b, max_words=3)
    assert first == Diff([Segment(SAME, "a b c ", "a b c "), rest(4)], 6, 7, 0, 0, complete=False)
    five = word_diff(a, b, max_words=5)
    assert five == Diff(
        [Segment(SAME, "a b c d ", "a b c d "), Segment(CHANGED, "e ", "x "), rest(2)], 6, 7, 1, 1, complete=False
    )
    assert word_diff(a, b, max_words=7).complete


def test_max_chars_stops_at_a_word_end():
    diff = word_diff("alpha beta gamma delta epsilon", "alpha beta gamma delta zeta", max_chars=12)
    assert diff.segments == [Segment(SAME, "alpha beta ", "alpha beta "), rest(3)]  # "epsilon"/"zeta" among them
    assert (diff.changed_a, diff.changed_b, diff.complete) == (1, 1, True)  # counts cover the whole texts
    # One side long: it is cut, the other shown whole; the rest counts the side with more left.
    diff = word_diff("a b", "a " + " ".join(numbered(100)), max_chars=10)
    assert diff.segments == [Segment(SAME, "a ", "a "), Segment(CHANGED, "b", "w0 w1 "), rest(98)]  # 2 + 6 chars of b
    # A word longer than max_chars is still shown.
    assert word_diff("supercalifragilistic x", "y", max_chars=5).segments == [
        Segment(CHANGED, "supercalifragilistic ", "y"),
        rest(1),
    ]


def test_bad_arguments():
    with pytest.raises(ValueError, match="context must be >= 0"):
        word_diff("a", "b", context=-1)
    with pytest.raises(ValueError, match="max_chars and max_words must be positive"):
        word_diff("a", "b", max_words=0)
    with pytest.raises(ValueError, match="max_chars and max_words must be positive"):
        word_diff("a", "b", max_chars=0)


def check_words(text: str, segments: list[Segment], side: str) -> int:
    """The words of one side of the segments, gaps counted, are the text's words in order; returns those accounted for."""
    words, at = wordlist(text), 0
    for seg in segments:
        if seg.kind == "gap":
            at += seg.skipped
            continue
        piece = wordlist(getattr(seg, side))
        assert piece == words[at : at + len(piece)]
        at += len(piece)
    return at


texts = st.lists(
    st.sampled_from(
        [
            "a",
            "b",
            "c",
            "dd",
            "é",
            "🙂",
            " ",
            "  ",
            "\n",
            "\t",
            "\x1c",
            "\u00a0",
            "\u2028",
            "\u200b",
            "中",
            "文",
            "\u3000",
        ]
    ),
    max_size=600,
).map("".join)  # past 200 words: autojunk


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.integers(0, 6), st.integers(1, 60))
def test_segments_account_for_every_word(a, b, context, max_chars):
    whole = word_diff(a, b, context=1000, max_chars=10**6)
    assert "".join(s.a for s in whole.segments) == a and "".join(s.b for s in whole.segments) == b
    assert all(wordlist(s.a) == wordlist(s.b) for s in whole.segments if s.kind == SAME)
    assert whole.changed_a == sum(len(wordlist(s.a)) for s in whole.segments if s.kind == CHANGED)
    assert whole.changed_b == sum(len(wordlist(s.b)) for s in whole.segments if s.kind == CHANGED)
    assert len(wordlist(a)) - whole.changed_a == len(wordlist(b)) - whole.changed_b  # matched words pair up
    short = word_diff(a, b, context=context, max_chars=max_chars)
    assert (short.changed_a, short.changed_b) == (whole.changed_a, whole.changed_b)
    body = short.segments
    if body and body[-1].kind == "rest":  # the words after max_chars (a gap elides common words only)
        body = body[:-1]
        left = (len(wordlist(a)) - check_words(a, body, "a"), len(wordlist(b)) - check_words(b, body, "b"))
        assert max(left) == short.segments[-1].skipped
    else:
        assert check_words(a, body, "a") == len(wordlist(a)) and check_words(b, body, "b") == len(wordlist(b))
    # A gap hides common words only: the reader is told they are identical (the end of a
    # shortened diff was a gap too, "132 identical words" over two changes).
    words_a, words_b, at_a, at_b = wordlist(a), wordlist(b), 0, 0
    for seg in body:
        n_a, n_b = (seg.skipped, seg.skipped) if seg.kind == "gap" else (len(wordlist(seg.a)), len(wordlist(seg.b)))
        if seg.kind == "gap":
            assert words_a[at_a : at_a + n_a] == words_b[at_b : at_b + n_b]
        at_a, at_b = at_a + n_a, at_b + n_b
    for side in "ab":
        pieces = [getattr(s, side) for s in body if getattr(s, side)]
        assert (
            sum(map(len, pieces)) <= max_chars or len(wordlist(pieces[-1])) <= 1
        )  # over only by one long word (or whitespace)


def test_book_with_known_edits():
    record = read_records(str(shared_corpus("gutenberg")), [0])[0]  # A Garland for Girls, 410 KB
    words = record["text"].split()
    rng = random.Random(7)
    edited = sorted(rng.sample(range(len(words)), 300))
    new = list(words)
    for k in edited:
        new[k] = f"EDIT{k}"
    diff = word_diff(
        record["text"], "\n".join(" ".join(new[i : i + 9]) for i in range(0, len(new), 9)), context=2, max_chars=10**7
    )
    assert (diff.words_a, diff.changed_a, diff.changed_b, diff.complete) == (len(words), 300, 300, True)
    changes = [s for s in diff.segments if s.kind == CHANGED]
    assert [w for s in changes for w in s.b.split()] == [f"EDIT{k}" for k in edited]
    assert [w for s in changes for w in s.a.split()] == [words[k] for k in edited]
