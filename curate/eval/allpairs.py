"""Exact all-pairs similarity join: every pair of documents whose Jaccard similarity reaches a threshold.

The ground truth that fuzzy dedup is measured against (:mod:`curate.eval.quality`). Comparing all
``n (n - 1) / 2`` pairs is out of reach for a few hundred thousand documents, so candidates
come from *prefix filtering* [1]_ [2]_, which is exact: order the shingles by increasing
document frequency and keep, for a set ``x``, its first ``|x| - ceil(t |x|) + 1`` shingles
(its prefix). If ``J(x, y) >= t`` then ``|x ∩ y| >= t |x ∪ y| >= ceil(t max(|x|, |y|))``, so
the two prefixes share at least one shingle. Candidates are also filtered by size
(``t |x| <= |y| <= |x| / t``); each surviving candidate is verified by merging the two sorted
sets, with the same float expression as curate's verification
(:mod:`curate.kernels.jaccard`), so both agree on pairs at exactly the threshold.

References
----------
.. [1] S. Chaudhuri, V. Ganti, R. Kaushik, "A primitive operator for similarity joins in data
   cleaning", ICDE 2006 (prefix filtering).
.. [2] R. Bayardo, Y. Ma, R. Srikant, "Scaling up all pairs similarity search", WWW 2007
   (AllPairs).
"""

import numpy as np
from numba import njit

from curate.kernels.jaccard import jaccard_sorted

# ceil(t * n) computed in floating point can land one above the true value (0.7 * 10 =
# 7.000000000000001); taking a hair less keeps the prefix long enough, which is always safe.
_EPS = 1e-9


@njit(nogil=True, cache=True)
def _prefix_index(offsets, tokens, n_tokens, threshold):
    """Inverted index of the prefixes: for each token, the documents (ascending) whose prefix holds it."""
    n = len(offsets) - 1
    prefix = np.empty(n, dtype=np.int64)
    postings_count = np.zeros(n_tokens + 1, dtype=np.int64)
    for x in range(n):
        size = offsets[x + 1] - offsets[x]
        prefix[x] = 0 if size == 0 else size - int(np.ceil(threshold * size - _EPS)) + 1
        for k in range(offsets[x], offsets[x] + prefix[x]):
            postings_count[tokens[k] + 1] += 1
    index_offsets = np.cumsum(postings_count)
    fill = index_offsets[:-1].copy()
    postings = np.empty(index_offsets[-1], dtype=np.int64)
    for x in range(n):
        for k in range(offsets[x], offsets[x] + prefix[x]):
            postings[fill[tokens[k]]] = x
            fill[tokens[k]] += 1
    return prefix, index_offsets, postings


@njit(nogil=True, cache=True)
def _all_pairs(offsets, tokens, n_tokens, threshold):
    n = len(offsets) - 1
    prefix, index_offsets, postings = _prefix_index(offsets, tokens, n_tokens, threshold)
    seen = np.zeros(n, dtype=np.bool_)
    touched = np.empty(n, dtype=np.int64)
    capacity = 1024
    left = np.empty(capacity, dtype=np.int64)
    right = np.empty(capacity, dtype=np.int64)
    similarity = np.empty(capacity, dtype=np.float64)
    found = 0
    for x in range(n):
        size_x = offsets[x + 1] - offsets[x]
        n_touched = 0
        for k in range(offsets[x], offsets[x] + prefix[x]):
            token = tokens[k]
            for p in range(index_offsets[token], index_offsets[token + 1]):
                y = postings[p]
                if y >= x:  # postings ascend: each pair once, from its larger document
                    break
                size_y = offsets[y + 1] - offsets[y]
                if seen[y] or size_y < threshold * size_x - _EPS or size_x < threshold * size_y - _EPS:
                    continue
                seen[y] = True
                touched[n_touched] = y
                n_touched += 1
        for c in range(n_touched):
            y = touched[c]
            seen[y] = False
            j = jaccard_sorted(tokens[offsets[x] : offsets[x + 1]], tokens[offsets[y] : offsets[y + 1]])
            if j >= threshold:
                if found == capacity:
                    capacity *= 2
                    left = np.concatenate((left, np.empty(capacity - found, dtype=np.int64)))
                    right = np.concatenate((right, np.empty(capacity - found, dtype=np.int64)))
                    similarity = np.concatenate((similarity, np.empty(capacity - found, dtype=np.float64)))
                left[found] = y
                right[found] = x
                similarity[found] = j
                found += 1
    return left[:found], right[:found], similarity[:found]


def all_pairs(set_offsets, hashes, threshold):
    """All pairs of documents whose shingle sets have Jaccard similarity ``>= threshold``.

    Exact (no pair is missed, see the module docstring). Documents without shingles take
    part in no pair.

    Parameters
    ----------
    set_offsets : array of shape (n_docs + 1,), dtype int64
    hashes : array, dtype uint64
        Sorted unique shingle hashes per document, as :func:`shingle_sets` returns them.
    threshold : float
        Jaccard similarity in ``(0, 1]``.

    Returns
    -------
    left, right : arrays of shape (n_pairs,), dtype int64
        Document indices, ``left < right``, sorted by ``right`` then in no fixed order.
    jaccard : array of shape (n_pairs,), dtype float64

    Raises
    ------
    ValueError
        If ``threshold`` is not in ``(0, 1]``.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if len(hashes) == 0:
        empty = np.array([], dtype=np.int64)
        return empty, empty.copy(), np.array([], dtype=np.float64)
    # Token ids ranked by document frequency (rarest first), so prefixes hold rare shingles
    # and the posting lists scanned are short.
    _, inverse, frequency = np.unique(hashes, return_inverse=True, return_counts=True)
    rank = np.empty(len(frequency), dtype=np.int64)
    rank[np.argsort(frequency, kind="stable")] = np.arange(len(frequency))
    sizes = np.diff(set_offsets)
    owner = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    keyed = np.sort(owner * len(frequency) + rank[inverse])  # each set sorted by rank, sets in order
    tokens = keyed - owner * len(frequency)
    return _all_pairs(set_offsets, tokens, len(frequency), float(threshold))
