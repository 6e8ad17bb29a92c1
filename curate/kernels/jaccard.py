"""Exact Jaccard similarity of documents' shingle sets.

Each shingle is identified by the first 64 bits of its MurmurHash3_x64_128 (seed 0), so two
distinct shingles are confused with probability about 2**-64 per pair of shingles; the sets
are sorted and de-duplicated, then intersected by a merge.

``J(A, B) = |A ∩ B| / |A ∪ B|``; two documents without shingles have ``J = 1`` (identical
empty sets), a document without shingles and one with shingles have ``J = 0``.
"""

import numpy as np
from numba import njit

from curate.kernels.murmur import murmur3_64
from curate.kernels.shingles import count_windows, first_window, next_window


@njit(nogil=True, cache=True)
def shingle_set(data, start, end, width, words):
    """Sorted unique 64-bit shingle hashes of ``data[start:end]`` (array, dtype uint64)."""
    out = np.empty(count_windows(data, start, end, width, words), dtype=np.uint64)
    lo, hi = first_window(data, start, end, width, words)
    n = 0
    while lo < hi:
        out[n] = murmur3_64(data, lo, hi, 0)
        n += 1
        lo, hi = next_window(data, lo, hi, end, words)
    return np.unique(out)


@njit(inline="always")
def jaccard_sorted(x, y):
    """Jaccard similarity of two sorted arrays of unique values (both empty: 1.0), by one merge."""
    if len(x) == 0 and len(y) == 0:
        return 1.0
    i = 0
    j = 0
    common = 0
    while i < len(x) and j < len(y):
        if x[i] == y[j]:
            common += 1
            i += 1
            j += 1
        elif x[i] < y[j]:
            i += 1
        else:
            j += 1
    return common / (len(x) + len(y) - common)


@njit(nogil=True, cache=True)
def _jaccard_pairs(offsets_x, data_x, offsets_y, data_y, width, words, x_keys, out):
    x = np.empty(0, dtype=np.uint64)
    for i in range(len(out)):
        if i == 0 or x_keys[i] != x_keys[i - 1]:
            x = shingle_set(data_x, offsets_x[i], offsets_x[i + 1], width, words)
        y = shingle_set(data_y, offsets_y[i], offsets_y[i + 1], width, words)
        out[i] = jaccard_sorted(x, y)


def jaccard_pairs(offsets_x, data_x, offsets_y, data_y, width, words=False, x_keys=None):
    """Jaccard similarity of document ``i`` of buffer x with document ``i`` of buffer y.

    Parameters
    ----------
    offsets_x, offsets_y : arrays of shape (n_pairs + 1,), dtype int64
    data_x, data_y : arrays, dtype uint8
        UTF-8 text buffers.
    width : int
        Characters (or words) per shingle.
    words : bool, default=False
    x_keys : array of shape (n_pairs,), dtype int64, optional
        Which document each x is: where ``x_keys[i] == x_keys[i - 1]`` the x document is the
        same and its shingle set is reused, not rebuilt. Sorting pairs by x (an LSH star's
        anchor is the x of all its edges) turns that into one set per anchor.

    Returns
    -------
    array of shape (n_pairs,), dtype float64
        Values in [0, 1].

    Raises
    ------
    ValueError
        If the two buffers, or ``x_keys``, hold different numbers of documents.
    """
    n = len(offsets_x) - 1
    if len(offsets_y) - 1 != n or (x_keys is not None and len(x_keys) != n):
        raise ValueError(f"buffers hold {n} and {len(offsets_y) - 1} documents" + ("" if x_keys is None else f", x_keys {len(x_keys)}"))
    keys = np.arange(n, dtype=np.int64) if x_keys is None else np.asarray(x_keys, dtype=np.int64)
    out = np.empty(n, dtype=np.float64)
    _jaccard_pairs(offsets_x, data_x, offsets_y, data_y, width, words, keys, out)
    return out


@njit(nogil=True, cache=True)
def _greedy(offsets, data, group_starts, threshold, width, words, rep, similarity):
    for g in range(len(group_starts) - 1):
        lo, hi = group_starts[g], group_starts[g + 1]
        sets = [shingle_set(data, offsets[k], offsets[k + 1], width, words) for k in range(lo, hi)]
        for k in range(lo, hi):
            rep[k] = -1
        for r in range(lo, hi):
            if rep[r] != -1:
                continue
            rep[r] = r
            similarity[r] = 1.0
            for k in range(r + 1, hi):
                if rep[k] == -1:
                    s = jaccard_sorted(sets[k - lo], sets[r - lo])
                    if s >= threshold:
                        rep[k] = r
                        similarity[k] = s


def greedy_representatives(offsets, data, group_starts, threshold, width, words=False):
    """Split groups of candidate duplicates so every member is similar to its representative.

    Within each group (rows ``group_starts[g]:group_starts[g + 1]``, already sorted best first by
    the keep policy) the first unassigned row becomes a representative and takes every later
    unassigned row whose Jaccard similarity with it is ``>= threshold``; repeat until every row
    is assigned. So a removed document is always within ``threshold`` of its (kept)
    representative, even when the group came from a chain A~B~C with ``J(A, C) < threshold``.

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int64
    data : array, dtype uint8
    group_starts : array of shape (n_groups + 1,), dtype int64
        Row where each group starts, then ``n_docs``.
    threshold : float
    width : int
    words : bool, default=False

    Returns
    -------
    rep : array of shape (n_docs,), dtype int64
        Row index of each row's representative (a representative points to itself).
    similarity : array of shape (n_docs,), dtype float64
        Jaccard similarity of each row with its representative (1.0 for a representative).
    """
    rep = np.empty(len(offsets) - 1, dtype=np.int64)
    similarity = np.empty(len(offsets) - 1, dtype=np.float64)
    _greedy(offsets, data, group_starts, threshold, width, words, rep, similarity)
    return rep, similarity
