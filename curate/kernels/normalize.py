"""Text normalisation as operations on a strings column's UTF-8 buffers.

The GPU backend normalises with :func:`map_characters` and :func:`collapse_spaces` (on cupy
arrays, one element per byte) instead of libcudf's ``translate`` and regex ``replace``, which
give each string one thread: on books (about 320 KB each) they ran at 18 MB/s on an H200, where
every step here is parallel within documents. They are written for any array module ``xp``
with numpy's interface (numpy, cupy), so the CPU tests run the code the device runs
(tests/test_normalize_device.py). The CPU backend does the same two steps in one compiled pass
over each string (:func:`map_and_collapse`). Both are checked against the Arrow operations that
define the normalisation (:func:`curate.backend.normalization_table`).

Buffers are ``(offsets (n + 1,), data uint8)`` as :func:`curate.backend.text_buffers` gives them:
``data[offsets[i]:offsets[i + 1]]`` is string ``i``, valid UTF-8 (Arrow and cudf hold no other).
"""

import numpy as np
from numba import njit

CODE_POINTS = 0x110000


def map_characters(offsets, data, target, xp):
    """Each character replaced by ``target[code point]``, or removed where that is -1.

    Characters are decoded and encoded as UTF-8 (RFC 3629): each is read where its first byte
    lies, and its new bytes are placed by a prefix sum of the new characters' lengths.

    Parameters
    ----------
    offsets : array of int (n + 1,)
        String bounds in ``data`` (need not start at 0).
    data : array of uint8
        UTF-8 bytes.
    target : array of int32 (0x110000,)
        The code point each code point becomes; -1 removes it (:func:`curate.backend.character_map`).
    xp : module
        numpy or cupy, the module of the arrays.

    Returns
    -------
    offsets, data : array of int64 (n + 1,), array of uint8
        The mapped strings, offsets from 0.
    """
    data = data[int(offsets[0]) : int(offsets[-1])]
    offsets = offsets.astype(np.int64) - offsets[0]
    starts = xp.flatnonzero((data & 0xC0) != 0x80)  # the first byte of each character
    first = data[starts].astype(np.uint32)
    size = 1 + (first >= 0xC0).astype(np.uint32) + (first >= 0xE0) + (first >= 0xF0)
    last = max(data.size - 1, 0)
    # A continuation byte's six bits (a byte past the end of the data is never used).
    follow = [data[xp.minimum(starts + k, last)].astype(np.uint32) & 0x3F for k in (1, 2, 3)]
    point = xp.where(
        size == 1,
        first,
        xp.where(
            size == 2,
            (first & 0x1F) << 6 | follow[0],
            xp.where(
                size == 3,
                (first & 0x0F) << 12 | follow[0] << 6 | follow[1],
                (first & 0x07) << 18 | follow[0] << 12 | follow[1] << 6 | follow[2],
            ),
        ),
    )
    del first, size, follow  # about 40 bytes a character at the peak: dropped as soon as done with
    mapped = target[point]
    del point
    keep = mapped >= 0
    mapped = xp.where(keep, mapped, 0).astype(np.uint32)
    out_size = xp.where(keep, 1 + (mapped >= 0x80).astype(np.int64) + (mapped >= 0x800) + (mapped >= 0x10000), 0)
    ends = xp.cumsum(out_size)
    at = ends - out_size  # where each character's bytes go
    out = xp.empty(int(ends[-1]) if ends.size else 0, dtype=np.uint8)
    lead = xp.where(
        out_size == 1,
        mapped,
        xp.where(out_size == 2, 0xC0 | mapped >> 6, xp.where(out_size == 3, 0xE0 | mapped >> 12, 0xF0 | mapped >> 18)),
    )
    out[at[keep]] = lead[keep].astype(np.uint8)
    for k in (1, 2, 3):  # the k-th continuation byte of the characters that have one
        has = out_size > k
        shift = (6 * (out_size[has] - 1 - k)).astype(np.uint32)
        out[at[has] + k] = (0x80 | (mapped[has] >> shift) & 0x3F).astype(np.uint8)
    # A string's output starts after the output of the characters before its first byte.
    before = xp.concatenate([xp.zeros(1, dtype=np.int64), ends])
    return before[xp.searchsorted(starts, offsets)], out


def collapse_spaces(offsets, data, xp):
    """Each run of spaces (U+0020) within a string replaced by one space.

    Parameters and returns as :func:`map_characters` (without ``target``); a space byte is never
    part of another character in UTF-8, so this works on bytes.
    """
    data = data[int(offsets[0]) : int(offsets[-1])]
    offsets = offsets.astype(np.int64) - offsets[0]
    space = data == 0x20
    after_space = xp.concatenate([xp.zeros(1, dtype=bool), space[:-1]])
    starts = offsets[:-1][offsets[:-1] < data.size]
    after_space[starts] = False  # the previous byte is another string's
    keep = ~(space & after_space)
    kept = xp.concatenate([xp.zeros(1, dtype=np.int64), xp.cumsum(keep)])
    return kept[offsets], data[keep]


@njit
def _decode(data, p):
    # The code point whose UTF-8 bytes start at data[p], and their number (valid UTF-8).
    b0 = np.int32(data[p])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xE0:
        return (b0 & 0x1F) << 6 | (data[p + 1] & 0x3F), 2
    if b0 < 0xF0:
        return (b0 & 0x0F) << 12 | (data[p + 1] & 0x3F) << 6 | (data[p + 2] & 0x3F), 3
    return (b0 & 0x07) << 18 | (data[p + 1] & 0x3F) << 12 | (data[p + 2] & 0x3F) << 6 | (data[p + 3] & 0x3F), 4


@njit
def _utf8_length(point):
    return 0 if point < 0 else 1 + (point >= 0x80) + (point >= 0x800) + (point >= 0x10000)


@njit(nogil=True, cache=True)
def _map_and_collapse(offsets, data, target, collapse, out_offsets, out):
    o = 0
    for i in range(offsets.shape[0] - 1):
        out_offsets[i] = o
        p, end = offsets[i], offsets[i + 1]
        after_space = False  # the last byte written for this string is a space
        while p < end:
            point, n = _decode(data, p)
            p += n
            m = target[point]
            if m < 0 or (collapse and m == 0x20 and after_space):
                continue
            after_space = m == 0x20
            size = _utf8_length(m)
            if o + size > out.shape[0]:
                return -1  # `growth` was too small: nothing written past the room
            if size == 1:
                out[o] = m
            else:
                lead = (0xC0, 0xE0, 0xF0)[size - 2]
                out[o] = lead | (m >> (6 * (size - 1)))
                for k in range(1, size):
                    out[o + k] = 0x80 | ((m >> (6 * (size - 1 - k))) & 0x3F)
            o += size
    out_offsets[offsets.shape[0] - 1] = o
    return o


def map_and_collapse(offsets, data, target, collapse: bool, growth: float):
    """:func:`map_characters` then, with ``collapse``, :func:`collapse_spaces`, in one compiled
    pass over each string (numpy arrays, on the CPU).

    Parameters
    ----------
    offsets : array of int (n + 1,)
        String bounds in ``data``.
    data : array of uint8
        UTF-8 bytes (valid UTF-8, as Arrow holds it).
    target : array of int32 (0x110000,)
        As :func:`map_characters`.
    collapse : bool
        Each run of spaces (after the map) within a string to one space.
    growth : float
        The map's largest ratio of a character's UTF-8 length after to before (1.5 for Arrow's
        lowercase, where ``Ⱥ`` becomes ``ⱥ``): the output's room is ``growth`` bytes per input byte.

    Returns
    -------
    offsets, data : array of int64 (n + 1,), array of uint8
        The normalised strings, offsets from 0.

    Raises
    ------
    ValueError
        If the strings' mapped bytes do not fit in ``growth`` times their bytes.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    # Room for the longest result rather than a pass to size it (a third of the time); pages
    # never written are never given memory.
    out = np.empty(int(np.ceil((offsets[-1] - offsets[0]) * max(growth, 1.0))), dtype=np.uint8)
    out_offsets = np.empty(len(offsets), dtype=np.int64)
    size = _map_and_collapse(offsets, data, target, collapse, out_offsets, out)
    if size < 0:
        raise ValueError(f"the map makes text more than {growth} times longer (growth)")
    return out_offsets, out[:size]


__all__ = ["CODE_POINTS", "collapse_spaces", "map_and_collapse", "map_characters"]
