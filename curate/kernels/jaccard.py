"""Exact Jaccard similarity of documents' shingle sets.

Each shingle is identified by the first 64 bits of its MurmurHash3_x64_128 (seed 0), so two
distinct shingles are confused with probability about 2**-64 per pair of shingles; the sets
are sorted and de-duplicated, then intersected by a merge.

``J(A, B) = |A ∩ B| / |A ∪ B|``; two documents without shingles have ``J = 1`` (identical
empty sets), a document without shingles and one with shingles have ``J = 0``.

References
----------
.. [1] P. Jaccard, "The distribution of the flora in the alpine zone", New Phytologist 11(2), 1912.
.. [2] A. Broder, "On the resemblance and containment of documents", 1997 (resemblance of shingle sets).
"""

import numpy as np
from numba import njit

from curate.kernels.shingles import shingle_hashes, window_scratch

# 64-bit shingle hashes for the sets. A numpy bool, not the literal True: numba types a literal
# argument apart, and would compile shingle_hashes (seconds) again beside MinHash's.
_WIDE = np.bool_(True)


# Sets of more hashes are sorted by numpy, whose sort of 64-bit integers is vectorised
# (x86-simd-sort, Highway): 3x a radix sort in numba on a book's 300,000 hashes, 2x on 5,000.
# Smaller ones in numba, where a call from Python would cost more than the sort.
NUMPY_SORT = 1024


def shingle_sets(offsets, data, width, words=False, docs=None, buffer=None):
    """Documents' shingle sets as sorted unique 64-bit hashes, in CSR form.

    A document's set: the first 64 bits of MurmurHash3_x64_128 (seed 0) of each of its shingles
    (:func:`curate.kernels.shingles.shingle_hashes`), each value once, in increasing order.

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int64
    data : array, dtype uint8
        UTF-8 text buffer.
    width : int
        Characters (or words) per shingle.
    words : bool, default=False
    docs : array of shape (k,), dtype int64, optional
        The documents whose sets to build, in this order; default all, in buffer order.
    buffer : array of dtype uint64, optional
        Where to build the sets if it has room for as many values as the documents have text
        bytes (the hashes returned are then a view of it), else a new array is made. Callers
        that build sets chunk after chunk pass one buffer to all: the fresh memory pages of a
        new array of 256 MB took Linux 0.15 to 0.6 s to hand over, where hashing the 32 MB
        of text that fill it takes 0.25 s (docs/benchmarks.md).

    Returns
    -------
    set_offsets : array of shape (k + 1,), dtype int64
        The set of ``docs[i]`` is ``hashes[set_offsets[i]:set_offsets[i + 1]]``.
    hashes : array of shape (set_offsets[-1],), dtype uint64
        Sorted and distinct within each set.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    docs = np.arange(len(offsets) - 1) if docs is None else np.asarray(docs, dtype=np.int64)
    room = np.zeros(len(docs) + 1, dtype=np.int64)  # at most one shingle per byte
    np.cumsum(offsets[docs + 1] - offsets[docs], out=room[1:])
    hashes = buffer[: room[-1]] if buffer is not None and len(buffer) >= room[-1] else np.empty(room[-1], np.uint64)
    longest = int(np.diff(room).max()) if len(docs) else 0  # here: numba took 0.4 s to compile its max
    counts = _hash_documents(offsets, data, docs, room, longest, width, words, hashes)
    for i in np.flatnonzero(counts >= NUMPY_SORT):
        hashes[room[i] : room[i] + counts[i]].sort()
    set_offsets = _distinct_runs(hashes, room, counts)
    return set_offsets, hashes[: set_offsets[-1]]


@njit(nogil=True, cache=True)
def _hash_documents(offsets, data, docs, room, longest, width, words, hashes):
    # The shingle hashes of docs[i] in hashes[room[i]:]; the sets too small for numpy's sort sorted.
    counts = np.zeros(len(docs), dtype=np.int64)
    scratch = window_scratch(longest)
    for i in range(len(docs)):
        d = docs[i]
        n = shingle_hashes(
            data, offsets[d], offsets[d + 1], width, words, np.uint64(0), _WIDE, scratch, hashes[room[i] :]
        )
        counts[i] = n
        if n < NUMPY_SORT:
            hashes[room[i] : room[i] + n].sort()
    return counts


@njit(nogil=True, cache=True)
def _distinct_runs(hashes, room, counts):
    # Each sorted run hashes[room[i]:room[i] + counts[i]] to its distinct values, packed from the
    # start (writes never pass reads: room[i] >= what is kept before it): the runs' new offsets.
    # Branch-free: every value is written, the count moves only past a new one (2.3x a test
    # and a branch that read the last value kept back from memory, docs/benchmarks.md).
    set_offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    kept = 0
    for i in range(len(counts)):
        if counts[i]:
            last = hashes[room[i]]
            hashes[kept] = last
            kept += 1
            for k in range(room[i] + 1, room[i] + counts[i]):
                value = hashes[k]
                hashes[kept] = value
                kept += value != last
                last = value
        set_offsets[i + 1] = kept
    return set_offsets


@njit
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


@njit
def overlap_needed(total, threshold):
    """Least count ``c`` of shared values with ``c / (total - c) >= threshold`` as :func:`jaccard_sorted`
    divides (``total`` = the two sets' sizes added), found in float64 arithmetic: a pair stopped
    short of it could not have reached ``threshold``, rounding included."""
    # From a step below the estimate, which rounding may put one too high.
    c = max(0, int(threshold * total / (1 + threshold)) - 1)
    while 2 * c < total and c / (total - c) < threshold:
        c += 1
    return c


@njit
def jaccard_at_least(x, y, threshold):
    """:func:`jaccard_sorted` where it is at least ``threshold``; else a number below ``threshold``,
    an upper bound of the similarity.

    The merge stops once the values left cannot bring the shared count to :func:`overlap_needed`
    (the positional bound of PPJoin: C. Xiao, W. Wang, X. Lin, J. X. Yu, "Efficient Similarity
    Joins for Near Duplicate Detection", WWW 2008): a pair at Jaccard 0.66 checked against 0.8
    stops about a third of the way. Its steps are branch-free (a comparison of two random hashes
    is a coin toss to the branch predictor) and the bound is tested every 64 of them.
    """
    nx, ny = len(x), len(y)
    if nx == 0 and ny == 0:
        return 1.0
    need = overlap_needed(nx + ny, threshold)
    i = 0
    j = 0
    common = 0
    while i < nx and j < ny:
        for _ in range(min(nx - i, ny - j, 64)):  # each step moves i or j: neither runs past its end
            a, b = x[i], y[j]
            common += a == b
            i += a <= b
            j += b <= a
        bound = common + min(nx - i, ny - j)  # if every value left on the shorter side were shared
        if bound < need:
            return bound / (nx + ny - bound)
    return common / (nx + ny - common)


@njit(nogil=True, cache=True)
def _next_chunk(offsets, x, y, tile, begin, budget, chunk, chunk_of, slot, docs):
    # The pairs from `begin` whose documents' texts sum to at most `budget` bytes (one pair at
    # least), all of one tile: returns their end and how many documents they name, those
    # documents in docs[:k] (first named first) and each one's place there in slot.
    end, size, k = begin, 0, 0
    while end < len(x):
        extra = 0
        for d in (x[end], y[end]):
            if chunk_of[d] != chunk:
                extra += offsets[d + 1] - offsets[d]
        if end > begin and (size + extra > budget or tile[end] != tile[begin]):
            break
        for d in (x[end], y[end]):
            if chunk_of[d] != chunk:
                chunk_of[d], slot[d], docs[k] = chunk, k, d
                k += 1
                size += offsets[d + 1] - offsets[d]
        end += 1
    return end, k


def chunked_bytes(offsets, x, y, tile, budget: int, limit: int | None = None) -> int:
    """Text bytes whose shingle sets :func:`jaccard_indexed` builds for the pairs ``(x[i], y[i])``
    taken in this order, in chunks of at most ``budget`` bytes that never span two tiles
    (``tile[i]``: each pair's tile, equal values together); counted only until they pass
    ``limit``, if given (a loop over chunks: a random order, with a chunk of a few pairs each, is
    given up early)."""
    chunk_of = np.full(len(offsets) - 1, -1, dtype=np.int64)
    slot, docs = np.empty_like(chunk_of), np.empty_like(chunk_of)
    begin, chunk, built = 0, 0, 0
    while begin < len(x) and (limit is None or built <= limit):
        end, k = _next_chunk(offsets, x, y, tile, begin, budget, chunk, chunk_of, slot, docs)
        built += int((offsets[docs[:k] + 1] - offsets[docs[:k]]).sum())
        begin, chunk = end, chunk + 1
    return built


@njit(nogil=True, cache=True)
def _score_pairs(set_offsets, hashes, a, b, at_least, out):
    for i in range(len(a)):
        set_a = hashes[set_offsets[a[i]] : set_offsets[a[i] + 1]]
        set_b = hashes[set_offsets[b[i]] : set_offsets[b[i] + 1]]
        out[i] = jaccard_at_least(set_a, set_b, at_least) if at_least > 0 else jaccard_sorted(set_a, set_b)


def jaccard_indexed(offsets, data, x, y, width, words=False, budget=1 << 25, at_least=0.0):
    """Jaccard similarity of documents ``x[i]`` and ``y[i]`` of one text buffer.

    Each document's shingle set is built once (per chunk of pairs; see ``budget``), however many
    pairs it is in: an LSH star's anchor is compared with all its members from one set.

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int64
    data : array, dtype uint8
        UTF-8 text buffer of the documents.
    x, y : arrays of shape (n_pairs,), dtype int64
        Document numbers (``0 <= x[i], y[i] < n_docs``).
    width : int
        Characters (or words) per shingle.
    words : bool, default=False
    budget : int, default=32 MiB
        Pairs are taken in chunks whose documents hold at most this many text bytes (at least
        one pair), which bounds the sets held at once to 8 bytes per text byte; a document in
        pairs of several chunks has its set built in each. Where the buffer holds more, its
        documents fall into blocks of whole documents holding at most ``budget / 2`` bytes (in
        buffer order) and the pairs are taken tile by tile, a tile being the pairs between two
        blocks, in their given order, and each tile in chunks of its own: a set is then built
        once per tile its document is in, at most ``k`` times for ``k`` blocks whatever the order
        of the pairs (in the given order, pairs of random documents built a set about once per
        pair). Only a document longer than ``budget / 2`` (a block of its own) may be built more
        often, its tiles taking several chunks. The pairs keep their given order instead where
        its chunks build no more text bytes than the tiles' (:func:`chunked_bytes`): order the
        pairs by ``x`` so that an LSH star's pairs fall in one chunk.
    at_least : float, default=0.0
        Where only pairs at or above a threshold matter: a pair below it gets a number below it
        (an upper bound of its similarity), found by a merge that stops early
        (:func:`jaccard_at_least`). 0: every value exact.

    Returns
    -------
    array of shape (n_pairs,), dtype float64
        Values in [0, 1].

    Raises
    ------
    ValueError
        If ``x`` and ``y`` differ in length, or name a document outside the buffer.
    """
    x, y = checked_pairs(x, y, len(offsets) - 1)
    offsets = np.asarray(offsets, dtype=np.int64)
    order, tile, block = tile_order(offsets, x, y, int(budget))
    # Tiles bound the sets built where the pairs join documents all over the buffer (a member
    # round's), but build an LSH star's anchor once per tile its members span: on an edited
    # corpus of books, star edges built 26% more text in tiles than in their given order (by
    # anchor; docs/benchmarks.md). Whichever order builds fewer bytes is taken.
    if block is not None:
        tiled = chunked_bytes(offsets, x[order], y[order], tile, int(budget))
        given = np.zeros(len(x), dtype=np.int64)  # one tile: chunks by the budget alone
        if chunked_bytes(offsets, x, y, given, int(budget), limit=tiled) <= tiled:
            order, tile = np.arange(len(x)), given
    x, y = x[order], y[order]
    out = np.empty(len(x), dtype=np.float64)
    chunk_of = np.full(len(offsets) - 1, -1, dtype=np.int64)  # the chunk whose sets hold each document
    slot, docs = np.empty_like(chunk_of), np.empty_like(chunk_of)
    begin, chunk, buffer = 0, 0, None  # one buffer for every chunk's sets (see shingle_sets)
    while begin < len(x):
        end, k = _next_chunk(offsets, x, y, tile, begin, int(budget), chunk, chunk_of, slot, docs)
        buffer = sets_buffer(offsets, docs[:k], buffer)
        set_offsets, hashes = shingle_sets(offsets, data, width, words, docs[:k], buffer)
        _score_pairs(set_offsets, hashes, slot[x[begin:end]], slot[y[begin:end]], float(at_least), out[begin:end])
        begin, chunk = end, chunk + 1
    similarity = np.empty_like(out)
    similarity[order] = out
    return similarity


def sets_buffer(offsets, docs, buffer: np.ndarray | None) -> np.ndarray:
    """``buffer`` if it has room for the shingle sets of ``docs`` (one uint64 per text byte,
    :func:`shingle_sets`), else a new uint64 array with that room."""
    need = int((offsets[docs + 1] - offsets[docs]).sum())
    return buffer if buffer is not None and len(buffer) >= need else np.empty(need, dtype=np.uint64)


def checked_pairs(x, y, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """``x`` and ``y`` as int64 numpy arrays, checked as document numbers of ``n_docs`` documents.

    Raises
    ------
    ValueError
        If ``x`` and ``y`` differ in length, or name a document outside ``[0, n_docs)``.
    """
    x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
    if len(x) != len(y):
        raise ValueError(f"x and y differ in length: {len(x)} != {len(y)}")
    if len(x) and (min(x.min(), y.min()) < 0 or max(x.max(), y.max()) >= n_docs):
        raise ValueError(f"document numbers must be in [0, {n_docs})")
    return x, y


def tile_order(offsets, x, y, budget):
    """The pairs ``(x[i], y[i])`` in tiles of at most ``budget`` text bytes (see :func:`jaccard_indexed`).

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int64
    x, y : arrays of shape (n_pairs,), dtype int64
        Document numbers.
    budget : int
        Text bytes of a tile's documents at most (two blocks of :func:`document_blocks` of at
        most ``budget // 2`` bytes; a longer document is a block of its own).

    Returns
    -------
    order : array of shape (n_pairs,), dtype int64
        The pairs by tile, stable within a tile.
    tile : array of shape (n_pairs,), dtype int64
        Each pair's tile in that order: ``low * n_blocks + high`` for its documents' blocks
        ``low <= high``.
    block : array of shape (n_docs,), dtype int64, or None
        Each document's block; None (one tile, the given order) where all the texts fit the budget.
    """
    if offsets[-1] - offsets[0] <= budget:
        return np.arange(len(x)), np.zeros(len(x), dtype=np.int64), None
    block = document_blocks(offsets, max(1, budget // 2))
    low, high = np.minimum(block[x], block[y]), np.maximum(block[x], block[y])
    tile = low * (block[-1] + 1) + high
    order = np.argsort(tile, kind="stable")
    return order, tile[order], block


@njit(cache=True)
def document_blocks(offsets, size):
    """Each document's block: runs of whole documents in buffer order holding at most ``size``
    text bytes (a longer document is a block of its own).

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int64
    size : int
        Text bytes a block holds at most (>= 1).

    Returns
    -------
    array of shape (n_docs,), dtype int64
        Block numbers from 0, non-decreasing.
    """
    block = np.empty(len(offsets) - 1, dtype=np.int64)
    current, held = 0, 0
    for d in range(len(block)):
        n = offsets[d + 1] - offsets[d]
        if held > 0 and held + n > size:
            current, held = current + 1, 0
        block[d] = current
        held += n
    return block


@njit(nogil=True, cache=True)
def _split_rest(
    set_offsets, hashes, left, group, prefix, postings, owner, bounds, threshold, rep, similarity, rows, fixed
):
    # The rows left, rows[left[i]] with the set of slot left[i], i in row order (their groups
    # numbered from 0 in group): the first becomes a representative and takes every later row of
    # its group whose similarity with it reaches `threshold`, compared only where they share a
    # shingle of its prefix (postings: each group's prefix shingles from bounds[g], sorted, with
    # owner[q] the i whose shingle postings[q] is, in row order among equals); and so on. A row
    # with fixed[i] set is never taken: it is a representative when its turn comes.
    taken = np.zeros(len(left), dtype=np.bool_)
    looked = np.full(len(left), -1, dtype=np.int64)  # the representative each row was last compared with
    for i in range(len(left)):
        if taken[i]:
            continue
        r = rows[left[i]]
        rep[r], similarity[r] = r, 1.0
        set_i = hashes[set_offsets[left[i]] : set_offsets[left[i] + 1]]
        if len(set_i) == 0:  # no shingles: J = 1 with the other empty rows only, which no prefix holds
            for k in range(i + 1, len(left)):
                if group[k] != group[i]:
                    break
                if not taken[k] and not fixed[k] and set_offsets[left[k]] == set_offsets[left[k] + 1]:
                    taken[k] = True
                    rep[rows[left[k]]], similarity[rows[left[k]]] = r, 1.0
            continue
        lo, hi = bounds[group[i]], bounds[group[i] + 1]
        for j in range(prefix[i]):
            first = lo + np.searchsorted(postings[lo:hi], set_i[j])
            last = lo + np.searchsorted(postings[lo:hi], set_i[j], side="right")
            for q in range(first, last):
                k = owner[q]
                if k > i and not taken[k] and not fixed[k] and looked[k] != i:
                    looked[k] = i
                    s = jaccard_sorted(hashes[set_offsets[left[k]] : set_offsets[left[k] + 1]], set_i)
                    if s >= threshold:
                        taken[k] = True
                        rep[rows[left[k]]], similarity[rows[left[k]]] = r, s


def greedy_representatives(
    offsets, data, group_starts, threshold, width, words=False, known=None, budget=1 << 25, fixed=None
):
    """Split groups of candidate duplicates so every member is similar to its representative.

    Within each group (rows ``group_starts[g]:group_starts[g + 1]``, already sorted best first by
    the keep policy) the first unassigned row becomes a representative and takes every later
    unassigned row whose Jaccard similarity with it is ``>= threshold``; repeat until every row
    is assigned. So a removed document is always within ``threshold`` of its (kept)
    representative, even when the group came from a chain A~B~C with ``J(A, C) < threshold``.

    The first row is compared with every other; after it, only rows that share a shingle with
    the representative's prefix are compared (prefix filtering: Chaudhuri, Ganti and Kaushik,
    "A Primitive Operator for Similarity Joins in Data Cleaning", ICDE 2006; Bayardo, Ma and
    Srikant, "Scaling Up All Pairs Similarity Search", WWW 2007). That misses no row at
    ``>= threshold``, so the result is that of comparing with every row, but a chain of n near
    duplicates (each like its neighbours only) costs about n comparisons, not n² / 6.

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int64
    data : array, dtype uint8
    group_starts : array of shape (n_groups + 1,), dtype int64
        Row where each group starts, then ``n_docs``; rows before ``group_starts[0]`` are not
        assigned (their ``rep`` and ``similarity`` are left uninitialised).
    threshold : float
        Jaccard similarity in (0, 1].
    width : int
        Characters (or words) per shingle.
    words : bool, default=False
    known : array of shape (n_docs,), dtype float64, optional
        Each row's Jaccard similarity with its group's first row where it is already known (a
        verified edge), NaN elsewhere: those rows are not compared again, so their sets are not
        built unless they are compared with another row. It must be the value
        :func:`jaccard_sorted` gives (as :func:`jaccard_indexed` and the GPU's kernel do);
        default: none known.
    budget : int, default=32 MiB
        The rows whose sets are needed (all but those known to reach ``threshold``, and first
        rows whose group has none to compare) are taken in batches of whole groups holding at
        most this many text bytes (one group at least), each batch's sets built together
        (:func:`shingle_sets`, 8 bytes per text byte at most).
    fixed : array of shape (n_docs,), dtype bool, optional
        Rows that are never taken (``curate dedup --reference``'s documents): each is a
        representative when its turn comes, and takes later rows as any other does. Default: none.

    Returns
    -------
    rep : array of shape (n_docs,), dtype int64
        Row index of each row's representative (a representative points to itself).
    similarity : array of shape (n_docs,), dtype float64
        Jaccard similarity of each row with its representative (1.0 for a representative).

    Raises
    ------
    ValueError
        If ``known`` or ``fixed`` does not hold one value per document.
    """
    offsets, starts = np.asarray(offsets, dtype=np.int64), np.asarray(group_starts, dtype=np.int64)
    rep = np.empty(len(offsets) - 1, dtype=np.int64)
    similarity = np.empty(len(offsets) - 1, dtype=np.float64)
    known = np.full(len(rep), np.nan) if known is None else np.asarray(known, dtype=np.float64)
    fixed = np.zeros(len(rep), dtype=np.bool_) if fixed is None else np.asarray(fixed, dtype=np.bool_)
    for name, values in (("known", known), ("fixed", fixed)):
        if len(values) != len(rep):
            raise ValueError(f"{name} has {len(values)} values for {len(rep)} documents")
    if len(starts) < 2:
        return rep, similarity
    rows = np.arange(starts[0], starts[-1])
    group = np.repeat(np.arange(len(starts) - 1), np.diff(starts))
    first = starts[group]
    s = np.where(rows == first, 1.0, known[rows])
    # The sets needed: rows whose similarity with their group's first row is not known, those
    # first rows, rows known to fall short (compared with other rows of their group) and fixed
    # rows (representatives of their own).
    asked = np.isnan(s) | fixed[rows]
    asks = np.zeros(len(starts) - 1, dtype=np.bool_)
    asks[group[asked]] = True
    need = asked | (s < threshold) | ((rows == first) & asks[group])
    passed = ~need  # known to reach the threshold
    rep[rows[passed]], similarity[rows[passed]] = first[passed], s[passed]
    # Those rows in batches of whole groups holding at most `budget` text bytes (one group at
    # least), each batch's sets built together.
    rows, group, first, s = rows[need], group[need], first[need], s[need]
    held = np.zeros(len(rows) + 1, dtype=np.int64)  # text bytes of the rows before each
    np.cumsum(offsets[rows + 1] - offsets[rows], out=held[1:])
    begin, buffer = 0, None  # one buffer for every batch's sets (see shingle_sets)
    while begin < len(rows):
        end = max(np.searchsorted(held, held[begin] + budget, side="right") - 1, begin + 1)
        if end < len(rows) and group[end] == group[end - 1]:
            # A group cut at the budget ends the batch before it, unless it is the batch's first
            # (over the budget alone); taken whole, it passed the budget by up to its bytes.
            cut = np.searchsorted(group, group[end - 1], side="left")
            end = cut if cut > begin else np.searchsorted(group, group[end - 1], side="right")
        batch = slice(begin, end)
        buffer = sets_buffer(offsets, rows[batch], buffer)
        _split_batch(
            offsets,
            data,
            rows[batch],
            group[batch],
            first[batch],
            s[batch],
            fixed[rows[batch]],
            threshold,
            width,
            words,
            rep,
            similarity,
            buffer,
        )
        begin = end
    return rep, similarity


def _split_batch(offsets, data, rows, group, first, s, fixed, threshold, width, words, rep, similarity, buffer):
    # Rows of whole groups (in row order) that need a set: those whose similarity s with their
    # group's first row is NaN are compared with it (a value below the threshold is only a
    # bound, jaccard_at_least: such a row is compared again below); then the rows left, by
    # prefix filtering within their group. A fixed row other than its group's first is left to
    # be a representative of its own.
    set_offsets, hashes = shingle_sets(offsets, data, width, words, rows, buffer)
    fixed = fixed & (rows != first)
    asked = np.flatnonzero(np.isnan(s) & ~fixed)
    scores = np.empty(len(asked), dtype=np.float64)
    _score_pairs(set_offsets, hashes, np.searchsorted(rows, first[asked]), asked, float(threshold), scores)
    s[asked] = scores
    passed = (s >= threshold) & ~fixed
    rep[rows[passed]], similarity[rows[passed]] = first[passed], s[passed]
    left = np.flatnonzero(~passed)
    sizes = set_offsets[left + 1] - set_offsets[left]
    # J(x, y) >= t needs |x ∩ y| >= t max(|x|, |y|), so the first |x| - ceil(t |x|) + 1 shingles
    # of x (in hash order) and those of y share one. One more than that, against rounding in
    # t |x|: a wider prefix only adds candidates.
    prefix = np.minimum(sizes, sizes - np.ceil(threshold * sizes).astype(np.int64) + 2)
    owner = np.repeat(np.arange(len(left)), prefix)  # postings: the prefix shingles, by group, hash, row
    postings = hashes[set_offsets[left[owner]] + np.arange(len(owner)) - (np.cumsum(prefix) - prefix)[owner]]
    group = group[left] - group[0]
    order = np.lexsort((owner, postings, group[owner]))
    bounds = np.searchsorted(group[owner[order]], np.arange(group[-1] + 2 if len(left) else 1))
    _split_rest(
        set_offsets,
        hashes,
        left,
        group,
        prefix,
        postings[order],
        owner[order],
        bounds,
        threshold,
        rep,
        similarity,
        rows,
        fixed[left],
    )
