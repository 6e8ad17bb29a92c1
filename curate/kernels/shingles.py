"""Shingle windows over one UTF-8 document held as a byte range of a flat buffer.

A shingle is a byte range ``[lo, hi)`` of the document:

- character n-grams (``words=False``): ``width`` consecutive Unicode characters, stepping one
  character at a time, exactly as libcudf's ``nvtext::minhash`` cuts its windows: a document
  with fewer than ``width`` characters is one shingle (the whole document);
- word n-grams (``words=True``): ``width`` consecutive words (maximal runs of bytes that are not
  ASCII whitespace), the bytes between them included, stepping one word at a time; a document
  with fewer than ``width`` words is one shingle from its first to its last word.

An empty document (or, for words, one with no word) has no shingle: ``first_window`` returns
``lo == hi == end``.

References
----------
.. [1] A. Broder, S. Glassman, M. Manasse, G. Zweig, "Syntactic clustering of the Web",
   WWW 1997 (w-shingling).
.. [2] libcudf ``nvtext::minhash`` (cpp/src/text/minhash.cu), RAPIDS cudf: the character windows.
"""

import numpy as np
from numba import njit

from curate.kernels.murmur import little_endian_words, murmur3_32_at, murmur3_32_run, murmur3_64_at, murmur3_64_run


@njit
def _is_continuation(byte):
    return (byte & 0xC0) == 0x80


@njit
def _is_space(byte):
    return byte == 32 or (9 <= byte <= 13)


@njit
def _next_char(data, pos, end):
    pos += 1
    while pos < end and _is_continuation(data[pos]):
        pos += 1
    return pos


@njit
def _skip_space(data, pos, end):
    while pos < end and _is_space(data[pos]):
        pos += 1
    return pos


@njit
def _skip_word(data, pos, end):
    while pos < end and not _is_space(data[pos]):
        pos += 1
    return pos


@njit
def first_window(data, start, end, width, words):
    """First shingle ``(lo, hi)`` of ``data[start:end]``; ``lo == hi == end`` when there is none."""
    if words:
        lo = _skip_space(data, start, end)
        if lo == end:
            return end, end
        hi = _skip_word(data, lo, end)
        for _ in range(width - 1):
            nxt = _skip_space(data, hi, end)
            if nxt == end:
                break
            hi = _skip_word(data, nxt, end)
        return lo, hi
    if start == end:
        return end, end
    hi = start
    for _ in range(width):
        if hi == end:
            break
        hi = _next_char(data, hi, end)
    return start, hi


@njit
def next_window(data, lo, hi, end, words):
    """Shingle after ``(lo, hi)``; ``lo == hi == end`` when ``(lo, hi)`` was the last."""
    if words:
        nxt = _skip_space(data, hi, end)
        if nxt == end:
            return end, end
        lo = _skip_space(data, _skip_word(data, lo, end), end)
        return lo, _skip_word(data, nxt, end)
    if hi == end:
        return end, end
    return _next_char(data, lo, end), _next_char(data, hi, end)


@njit
def window_at(data, start, pos, end, width, words):
    """The shingle of ``data[start:end]`` that starts at byte ``pos``, as ``(lo, hi)``; ``(pos, pos)`` when none does.

    Every shingle that :func:`first_window` / :func:`next_window` enumerate starts at a different
    byte, so testing each byte of a document with this function finds the same shingles with no
    walk from the start: the GPU kernel gives each byte its own thread (long documents would
    leave the device idle with one thread each).
    """
    if words:
        # A word starts here: a non-space byte at the start or after a space.
        if _is_space(data[pos]) or (pos > start and not _is_space(data[pos - 1])):
            return pos, pos
        hi = _skip_word(data, pos, end)
        n = 1
        while n < width:
            nxt = _skip_space(data, hi, end)
            if nxt == end:
                break
            hi = _skip_word(data, nxt, end)
            n += 1
        # Fewer than `width` words left: only the first word starts a (shorter) shingle.
        if n < width and _skip_space(data, start, end) != pos:
            return pos, pos
        return pos, hi
    if pos > start and _is_continuation(data[pos]):
        return pos, pos
    hi = pos
    n = 0
    while n < width and hi < end:
        hi = _next_char(data, hi, end)
        n += 1
    # Fewer than `width` characters left: only the document's start begins a (shorter) shingle.
    if n < width and pos != start:
        return pos, pos
    return pos, hi


@njit
def char_starts(data, start, end, lo):
    """The first byte of each character of ``data[start:end]``, as an offset from ``start``, in
    ``lo[:chars]``, and ``lo[chars] = end - start``; returns ``chars``.

    Character shingle ``k`` of :func:`first_window` / :func:`next_window` is then the bytes from
    ``lo[k]`` to ``lo[min(k + width, chars)]`` (``max(chars - width + 1, 1)`` shingles, none
    where ``chars == 0``): found without their walk, at eight times its speed. ``lo`` is an int64
    array of at least ``end - start + 1`` entries; ``start`` counts as a character's first byte
    whatever it holds, as in the walk.
    """
    chars = 0
    for i in range(start, end):  # branch-free: every byte written, the count moved on a first byte
        lo[chars] = i - start
        chars += (i == start) | ((data[i] & 0xC0) != 0x80)
    lo[chars] = end - start
    return chars


@njit
def word_bounds(data, start, end, bounds):
    """The words of ``data[start:end]`` (maximal runs of bytes that are not ASCII whitespace):
    word ``i`` is the bytes from ``bounds[2 * i]`` to ``bounds[2 * i + 1]``, offsets from
    ``start``; returns the number of words.

    Word shingle ``k`` of :func:`first_window` / :func:`next_window` is then the bytes from the
    start of word ``k`` to the end of word ``min(k + width, words) - 1`` (``max(words - width +
    1, 1)`` shingles, none where ``words == 0``): found without their walk, which reads each byte
    twice and branches on it. ``bounds`` is an int64 array of at least ``end - start + 2`` entries.
    """
    starts = ends = 0
    space = True  # before the first byte
    for i in range(start, end):  # branch-free: both slots written, the counts moved at a bound
        was, space = space, _is_space(data[i])
        bounds[2 * starts] = i - start
        starts += was and not space
        bounds[2 * ends + 1] = i - start
        ends += space and not was
    bounds[2 * ends + 1] = end - start
    return starts


# Windows of `width` bytes hashed together at most this many at a time: their state (two uint64
# lanes each) stays in the L1 cache, and the scratch does not grow with the document.
RUN = 2048


@njit(cache=True)
def window_scratch(longest):
    """Scratch arrays for :func:`shingle_hashes` on documents of at most ``longest`` bytes (a tuple):
    16 bytes per byte of the longest document and 40 KiB."""
    return (
        np.empty(longest + 2, np.int64),
        np.empty(longest + 1, np.uint64),
        np.empty(RUN, np.uint64),
        np.empty(RUN, np.uint64),
        np.empty(RUN, np.uint32),
    )


@njit(inline="always")  # per window: see curate.kernels.murmur
def _hash_at(text_words, pos, n, seed, wide):
    if wide:
        return murmur3_64_at(text_words, pos, n, seed)
    return murmur3_32_at(text_words, pos, n, seed)


@njit
def _stretch(lo, k, chars, width, before):
    """Past the last shingle of a stretch from shingle ``k`` of shingles ``width`` bytes long, one
    byte apart, starting before byte ``before`` (``lo``, ``chars``: :func:`char_starts`; ``k``
    is not past the last shingle); ``k`` where shingle ``k`` is longer than ``width`` bytes."""
    # lo[i] - i, the bytes before character i less i, never decreases; it is the same at k and
    # at k + width only if the characters between are one byte each. A binary search finds the
    # last character up to which it is: the shingles ending by it are the stretch.
    d = lo[k] - k
    last, end = k + width, min(k + before - lo[k] - 1 + width, chars)
    if last > chars or lo[last] - last != d:
        return k
    while last < end:
        mid = (last + end + 1) // 2
        if lo[mid] - mid == d:
            last = mid
        else:
            end = mid - 1
    return last - width + 1


@njit(nogil=True, cache=True)
def shingle_hashes(data, start, end, width, words, seed, wide, scratch, out):
    """MurmurHash3 of every shingle of ``data[start:end]``, in the order of :func:`first_window` /
    :func:`next_window`.

    The hash :func:`curate.kernels.murmur.murmur3_64` (``wide``) or ``murmur3_32`` gives each
    window, with ``seed``. Character shingles are found by :func:`char_starts`, word shingles
    by :func:`word_bounds`. Where at least half the windows of ``width`` bytes are character
    shingles (text mostly in ASCII), all those windows are hashed together, :data:`RUN` at a time
    (:func:`curate.kernels.murmur.murmur3_64_run`, ``murmur3_32_run``: vectorised), copied in
    stretches, and the other shingles hashed one by one; word shingles, and text mostly outside
    ASCII, one by one.

    Parameters
    ----------
    data : array, dtype uint8
    start, end : int
        The document's byte range.
    width : int
        Characters (or words) per shingle.
    words : bool
    seed : uint64
    wide : bool
        64-bit hashes (else 32-bit ones, held in uint64).
    scratch : tuple
        :func:`window_scratch` for at least ``end - start`` bytes.
    out : array, dtype uint64
        At least ``end - start`` entries (at most one shingle starts at each byte).

    Returns
    -------
    int
        Shingles hashed, into ``out[:count]``.
    """
    lo, text_words, run, spare, lanes = scratch
    little_endian_words(data, start, end, text_words)
    if words:
        n_words = word_bounds(data, start, end, lo)
        count = 0 if n_words == 0 else max(n_words - width + 1, 1)
        for k in range(count):  # from the start of word k to the end of word k + width - 1
            a, b = lo[2 * k], lo[2 * min(k + width, n_words) - 1]
            out[k] = _hash_at(text_words, a, b - a, seed, wide)
        return count
    chars = char_starts(data, start, end, lo)
    if chars == 0:
        return 0
    count = max(chars - width + 1, 1)
    runs = end - start - width + 1  # windows of `width` bytes, one at each byte
    full = 0
    for k in range(count):
        full += lo[min(k + width, chars)] - lo[k] == width
    k = 0
    if runs > 0 and 2 * full >= runs:
        for first in range(0, runs, RUN):
            m = min(RUN, runs - first)
            # all k are taken: a shingle of `width` characters starts by byte `runs - 1`
            if wide:
                murmur3_64_run(text_words[first:], m, width, seed, run, spare)
            else:
                murmur3_32_run(text_words[first:], m, width, seed, run, lanes)
            while k < count and lo[k] < first + m:
                to = _stretch(lo, k, chars, width, first + m)
                if to > k:  # windows of `width` bytes, one byte apart (text in ASCII): copied
                    shift = lo[k] - first - k
                    for j in range(k, to):
                        out[j] = run[j + shift]
                    k = to
                else:
                    out[k] = _hash_at(text_words, lo[k], lo[min(k + width, chars)] - lo[k], seed, wide)
                    k += 1
    for j in range(k, count):
        out[j] = _hash_at(text_words, lo[j], lo[min(j + width, chars)] - lo[j], seed, wide)
    return count


def shingle_spans(text: str, width: int, words: bool) -> list[bytes]:
    """The shingles of one document as byte strings (pure Python helper for tests and debugging).

    Parameters
    ----------
    text : str
    width : int
        Characters (or words) per shingle, >= 1.
    words : bool
        Word n-grams instead of character n-grams.

    Returns
    -------
    list of bytes
        In document order, repeats kept.
    """
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    out = []
    lo, hi = first_window(data, 0, len(data), width, words)
    while lo < hi:
        out.append(data[lo:hi].tobytes())
        lo, hi = next_window(data, lo, hi, len(data), words)
    return out
