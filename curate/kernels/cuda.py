"""CUDA kernels for what cudf has no exact equivalent of, compiled by ``numba.cuda`` from the
same Python source as the CPU kernels.

The device functions (MurmurHash3, shingle windows, the Mersenne reduction) are the ``py_func``
of the ``@njit`` functions in :mod:`curate.kernels.murmur`, :mod:`curate.kernels.shingles` and
:mod:`curate.kernels.minhash`, recompiled for the GPU with their helpers swapped for the GPU
versions: one source, two targets, so the GPU cannot drift from the CPU kernels that the
golden-value tests pin. Without a GPU, CI runs these kernels under numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) and compiles them with numba-cuda's typing to check that no value
is typed as a float: the simulator runs Python on numpy scalars, so it cannot show the
conversions compiled code makes (a uint64 meeting an int64 is unified to float64, which rounded
64-bit signatures on the first H200 run). Keep every integer expression in one unsigned type.

Kernels are cached on disk (``cache=True``, next to this file or in numba's user cache folder),
as the CPU kernels are: every run starts new Dask worker processes, which otherwise compile each
kernel again (seconds each; the GPU tests that compile most took 29–36 s on the H200).

Arrays may be numpy (copied to the device) or anything with ``__cuda_array_interface__``
(cupy, cudf buffers, numba device arrays: used in place). Results are numba device arrays;
``cupy.asarray`` wraps one without a copy, ``.copy_to_host()`` brings it to numpy.
"""

import types

import numpy as np
from numba import cuda

from curate.kernels import minhash, murmur, shingles
from curate.kernels.jaccard import checked_pairs, tile_order

_M32 = np.uint64(0xFFFFFFFF)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_BLOCK_1D = 256
_BLOCK_2D = (16, 16)
# Shingle slots (text bytes) per block of the min-reduction: 16 KiB of shared memory.
SEGMENT = 2048
# Text bytes whose shingle sets jaccard_cuda holds at once: about 4 GB of device memory at its peak.
TEXT_BUDGET = 1 << 26


def _device_function(cpu_function, namespace: dict):
    """``cpu_function``'s Python source compiled for CUDA, its globals overridden by ``namespace``."""
    src = cpu_function.py_func
    clone = types.FunctionType(
        src.__code__,
        {**src.__globals__, **namespace},
        src.__name__,
        src.__defaults__,
        src.__closure__,
    )
    return cuda.jit(device=True)(clone)


_DEVICE: dict = {}
for _module, _names in (
    (
        murmur,
        (
            "_rotl32",
            "_rotl64",
            "_load",
            "_fmix32",
            "_fmix64",
            "_k32",
            "_round32",
            "_k1_64",
            "_k2_64",
            "_round64",
            "_final64",
            "murmur3_32",
            "murmur3_64",
        ),
    ),
    (
        shingles,
        (
            "_is_continuation",
            "_is_space",
            "_next_char",
            "_skip_space",
            "_skip_word",
            "window_at",
        ),
    ),
    (minhash, ("mod_mersenne61",)),
):
    for _name in _names:  # helpers first, so each function sees the GPU versions of its callees
        _DEVICE[_name] = _device_function(getattr(_module, _name), _DEVICE)
murmur3_32, murmur3_64 = _DEVICE["murmur3_32"], _DEVICE["murmur3_64"]
window_at, mod_mersenne61 = _DEVICE["window_at"], _DEVICE["mod_mersenne61"]


def _to_device(array):
    if hasattr(array, "__cuda_array_interface__"):
        return cuda.as_cuda_array(array)
    return cuda.to_device(np.ascontiguousarray(array))


def _blocks(n: int, block: int) -> int:
    return max(1, -(-n // block))


@cuda.jit(cache=True)
def _band_kernel(sig_bytes, num_bands, band_bytes, out):
    i, k = cuda.grid(2)
    if i < sig_bytes.shape[0] and k < num_bands:
        out[i, k] = murmur3_64(sig_bytes[i], k * band_bytes, (k + 1) * band_bytes, k)


def band_buckets_cuda(sig_bytes, num_bands: int, band_bytes: int):
    """Bucket ids on the GPU; equal to :func:`curate.kernels.lsh.band_buckets`.

    Parameters
    ----------
    sig_bytes : array of shape (n_docs, num_perm * itemsize), dtype uint8
        The signatures' little-endian bytes (a ``view(uint8)`` of a C-contiguous signature array).
    num_bands : int
    band_bytes : int
        ``rows_per_band * itemsize``.

    Returns
    -------
    numba device array of shape (n_docs, num_bands), dtype uint64
    """
    sig_bytes = _to_device(sig_bytes)
    out = cuda.device_array((sig_bytes.shape[0], num_bands), dtype=np.uint64)
    grid = (_blocks(sig_bytes.shape[0], _BLOCK_2D[0]), _blocks(num_bands, _BLOCK_2D[1]))
    _band_kernel[grid, _BLOCK_2D](sig_bytes, num_bands, band_bytes, out)
    return out


@cuda.jit(device=True)
def _doc_of(offsets, pos):
    # The document holding byte `pos` (offsets[0] <= pos < offsets[-1]): the last d with
    # offsets[d] <= pos, so an empty document, which holds no byte, is never the answer.
    lo = 0
    hi = offsets.shape[0] - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offsets[mid] <= pos:
            lo = mid
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def _window_of_byte(offsets, data, p, width, words):
    # The shingle that starts at byte p of the batch, as (lo, hi) byte offsets; lo == hi where none does.
    pos = offsets[0] + p
    d = _doc_of(offsets, pos)
    return window_at(data, offsets[d], pos, offsets[d + 1], width, words)


@cuda.jit(cache=True)
def _fill_kernel(out, counts, fill):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = fill
        if j == 0:
            counts[i] = 0


@cuda.jit(cache=True)
def _shingle_hash_kernel(offsets, data, n_bytes, seed, width, words, wide, hashes):
    # Pass 1, one thread per byte of the batch: the hash of the shingle that starts at that
    # byte, 0 where none does (libcudf reserves 0, so no shingle hashes to it).
    p = cuda.grid(1)
    if p >= n_bytes:
        return
    lo, hi = _window_of_byte(offsets, data, p, width, words)
    h = np.uint64(0)
    if lo < hi:
        h = max(murmur3_64(data, lo, hi, seed) if wide else murmur3_32(data, lo, hi, seed), np.uint64(1))
    hashes[p] = h


@cuda.jit(cache=True)
def _min_kernel(offsets, hashes, n_bytes, a, b, wide, out, counts):
    # Pass 2, one block per SEGMENT bytes of the batch, one thread per permutation: each
    # document's part of the segment is reduced from shared memory (every thread reads the same
    # slot, a broadcast), then merged into the document's row with an atomic min. A long
    # document spans many blocks; a segment may hold many short documents.
    seg = cuda.shared.array(SEGMENT, np.uint64)
    first = cuda.blockIdx.x * SEGMENT
    last = min(first + SEGMENT, n_bytes)
    t = cuda.threadIdx.x
    for k in range(t, last - first, cuda.blockDim.x):
        seg[k] = hashes[first + k]
    cuda.syncthreads()
    base = offsets[0]
    d = _doc_of(offsets, base + first)
    while d < out.shape[0] and offsets[d] - base < last:
        lo = max(offsets[d] - base, first) - first
        hi = min(offsets[d + 1] - base, last) - first
        for j in range(t, a.shape[0], cuda.blockDim.x):
            aj = np.uint64(a[j])
            bj = np.uint64(b[j])
            m = _ALL_ONES  # above every permuted value: 32-bit ones and mod 2**61 - 1 both are smaller
            for k in range(lo, hi):
                h = seg[k]
                if h != 0:
                    x = h * aj + bj
                    m = min(m, mod_mersenne61(x) if wide else x & _M32)
            if m != _ALL_ONES:
                cuda.atomic.min(out, (d, j), m)
        if t == 0:
            n = 0
            for k in range(lo, hi):
                if seg[k] != 0:
                    n += 1
            cuda.atomic.add(counts, d, n)
        d += 1


@cuda.jit(cache=True)
def _empty_rows_kernel(out, counts):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1] and counts[i] == 0:
        out[i, j] = 0


def minhash_cuda(offsets, data, seed: int, a, b, width: int, words: bool = False):
    """MinHash signatures on the GPU; equal to :func:`curate.kernels.minhash.minhash`.

    Used where cudf's ``str.minhash`` does not compute curate's shingles: word n-grams (cudf
    has no byte-span word windows) and ``width == 1`` (libcudf requires ``width >= 2``).

    The work is spread over the bytes of the batch, not over documents, so a partition of a
    few hundred books keeps the device as busy as one of many short posts: pass 1 gives every
    byte a thread, which hashes the shingle starting there
    (:func:`curate.kernels.shingles.window_at`); pass 2 gives every ``SEGMENT`` bytes a block
    and every permutation a thread, and merges the segments of one document with atomic
    minima.

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int32 or int64
    data : array of shape (n_bytes,), dtype uint8
    seed : int
    a, b : arrays of shape (num_perm,), dtype uint32 or uint64
        Their dtype selects the 32- or 64-bit scheme.
    width : int
    words : bool, default=False

    Returns
    -------
    signatures : numba device array of shape (n_docs, num_perm), dtype of ``a``
    n_shingles : numba device array of shape (n_docs,), dtype int64

    Raises
    ------
    ValueError
        If ``a`` and ``b`` differ in shape or dtype, or the dtype is not uint32/uint64.

    Notes
    -----
    Scratch memory: 4 (32-bit) or 8 (64-bit) bytes per text byte of the batch, the shingle
    hashes of pass 1.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype or a.dtype not in (np.uint32, np.uint64):
        raise ValueError(f"a and b must be equal-length uint32 or uint64 arrays, got {a.dtype}/{b.dtype}")
    offsets, data = _to_device(offsets), _to_device(data)
    n_docs = offsets.shape[0] - 1
    wide = a.dtype == np.uint64
    out = cuda.device_array((n_docs, len(a)), dtype=a.dtype)
    counts = cuda.device_array(n_docs, dtype=np.int64)
    if n_docs == 0:
        return out, counts
    grid = (_blocks(n_docs, _BLOCK_2D[0]), _blocks(len(a), _BLOCK_2D[1]))
    _fill_kernel[grid, _BLOCK_2D](out, counts, a.dtype.type(np.iinfo(a.dtype).max))
    n_bytes = int(offsets[n_docs]) - int(offsets[0])
    if n_bytes:
        hashes = cuda.device_array(n_bytes, dtype=a.dtype)
        _shingle_hash_kernel[_blocks(n_bytes, _BLOCK_1D), _BLOCK_1D](
            offsets, data, n_bytes, np.uint64(seed), width, words, wide, hashes
        )
        threads = min(1024, 32 * _blocks(len(a), 32))  # whole warps, one thread per permutation
        _min_kernel[_blocks(n_bytes, SEGMENT), threads](
            offsets, hashes, n_bytes, cuda.to_device(a), cuda.to_device(b), wide, out, counts
        )
    _empty_rows_kernel[grid, _BLOCK_2D](out, counts)
    return out, counts


@cuda.jit(cache=True)
def _set_hash_kernel(offsets, data, n_bytes, width, words, hashes, found):
    # One thread per byte of the batch: the hash of the shingle that starts at that byte, as
    # curate.kernels.jaccard.shingle_sets hashes it (64 bits, seed 0), and whether one does
    # (every 64-bit value is a possible hash, so none is reserved for "no shingle").
    p = cuda.grid(1)
    if p >= n_bytes:
        return
    lo, hi = _window_of_byte(offsets, data, p, width, words)
    if lo < hi:
        hashes[p] = murmur3_64(data, lo, hi, np.uint64(0))
        found[p] = 1


@cuda.jit(cache=True)
def _intersect_kernel(cum, small, large, set_start, set_end, set_hashes, common):
    # One thread per member of each pair's smaller set (pair e owns threads cum[e - 1]..cum[e] - 1):
    # a binary search for it in the larger set, counted with an atomic add on a hit.
    t = cuda.grid(1)
    n = cum.shape[0]
    if n == 0 or t >= cum[n - 1]:
        return
    lo = 0
    hi = n - 1
    while lo < hi:  # the first pair with cum[e] > t
        mid = (lo + hi) // 2
        if cum[mid] > t:
            hi = mid
        else:
            lo = mid + 1
    e = lo
    s = small[e]
    value = set_hashes[set_end[s] - (cum[e] - t)]
    a = set_start[large[e]]
    b = set_end[large[e]]
    end = b
    while a < b:
        mid = (a + b) // 2
        if set_hashes[mid] < value:
            a = mid + 1
        else:
            b = mid
    if a < end and set_hashes[a] == value:
        cuda.atomic.add(common, e, 1)


def jaccard_cuda(offsets, data, x, y, width: int, words: bool = False, xp=np, budget: int = TEXT_BUDGET):
    """Jaccard similarity of documents ``x[i]`` and ``y[i]`` on the GPU; equal to
    :func:`curate.kernels.jaccard.jaccard_indexed`.

    Every document's shingle set is built once (per tile, see ``budget``): a thread per text
    byte hashes the shingle that starts there (:func:`curate.kernels.shingles.window_at`,
    MurmurHash3_x64_128's first 64 bits, seed 0, as the CPU kernel), then one sort by
    (document, hash) and a de-duplication give each document its sorted set as a slice of one
    array. Each pair then gets one thread per member of its smaller set, which binary-searches
    the larger set: an LSH star's anchor compared with a thousand members, or two books, spread
    over the device instead of one thread per pair.

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int32 or int64
        May start above 0 (a slice of a column).
    data : array, dtype uint8
        UTF-8 text buffer.
    x, y : numpy arrays of shape (n_pairs,), dtype int64
        Document numbers (``0 <= x[i], y[i] < n_docs``), on the host (tiles are found there).
    width : int
    words : bool, default=False
    xp : module, default=numpy
        The array module of the steps between kernels: ``cupy`` on a GPU; numpy under numba's
        CUDA simulator (tests), where kernels take host arrays.
    budget : int, default=64 MiB
        Text bytes whose shingle sets are held at once. Where the documents' texts pass it, they
        fall into blocks of whole documents of at most ``budget / 2`` bytes in buffer order
        (:func:`curate.kernels.jaccard.tile_order`, the CPU kernel's tiles), and the
        pairs between two blocks (a tile) are computed together from those blocks' texts alone.

    Returns
    -------
    array of shape (n_pairs,), dtype float64, of ``xp``
        Values in [0, 1]; 1.0 for two documents without shingles.

    Raises
    ------
    ValueError
        If ``x`` and ``y`` differ in length, or name a document outside the buffer.

    Notes
    -----
    Device memory: about 60 bytes per text byte at the peak (the per-byte hashes, their
    positions, the sort keys and order), of at most ``budget`` bytes (a longer document is a
    block of its own), plus about 80 bytes per pair. The second verification round's partitions
    may hold the texts of nearly every candidate (a templated corpus), whatever the input's
    partition size.
    """
    bounds = (offsets.get() if hasattr(offsets, "get") else np.asarray(offsets)).astype(np.int64)
    host_x, host_y = checked_pairs(x, y, len(bounds) - 1)
    order, tile, block = tile_order(bounds, host_x, host_y, budget)
    if block is None:  # every text within the budget: one buffer
        return _jaccard_sets(offsets, data, host_x, host_y, width, words, xp)
    first = np.searchsorted(block, np.arange(block[-1] + 2))  # each block's first document, and the end
    starts = np.flatnonzero(np.r_[True, tile[1:] != tile[:-1]]) if len(tile) else tile
    out, data = xp.empty(len(host_x), dtype=xp.float64), xp.asarray(data)
    for begin, end in zip(starts, np.r_[starts[1:], len(order)]):
        at = order[begin:end]
        a, b = divmod(int(tile[begin]), int(block[-1]) + 1)
        # The tile's documents in one buffer: block a's, then block b's (when it is another).
        (a0, a1), (b0, b1) = (first[a], first[a + 1]), (first[b], first[b + 1])
        sub_offsets, texts = bounds[a0 : a1 + 1] - bounds[a0], [data[bounds[a0] : bounds[a1]]]
        if b != a:
            sub_offsets = np.r_[sub_offsets, bounds[b0 + 1 : b1 + 1] - bounds[b0] + sub_offsets[-1]]
            texts.append(data[bounds[b0] : bounds[b1]])
        sub_x, sub_y = (np.where(v[at] < a1, v[at] - a0, v[at] - b0 + a1 - a0) for v in (host_x, host_y))
        out[xp.asarray(at)] = _jaccard_sets(sub_offsets, xp.concatenate(texts), sub_x, sub_y, width, words, xp)
    return out


def _jaccard_sets(offsets, data, x, y, width: int, words: bool, xp):
    """:func:`jaccard_cuda` of one buffer, its shingle sets built at once."""
    x, y = xp.asarray(x, dtype=xp.int64), xp.asarray(y, dtype=xp.int64)
    offsets, data = xp.asarray(offsets), xp.asarray(data)
    n_docs = len(offsets) - 1
    base = int(offsets[0])
    n_bytes = int(offsets[-1]) - base
    hashes, found = xp.zeros(n_bytes, xp.uint64), xp.zeros(n_bytes, xp.uint8)
    if n_bytes:
        # The inputs as device arrays (no copy of cupy's; the simulator would write host arrays back).
        _set_hash_kernel[_blocks(n_bytes, _BLOCK_1D), _BLOCK_1D](
            _to_device(offsets), _to_device(data), n_bytes, width, words, hashes, found
        )
    at = xp.nonzero(found)[0]
    hashes = hashes[at]
    # The document of each shingle: the last one starting at or before its byte (empty ones start where the next does).
    doc = xp.searchsorted(offsets.astype(xp.int64) - base, at, side="right") - 1
    del found, at
    # Sorted by (document, hash) with two stable radix sorts, by hash then by document: one
    # lexsort (cupy's compares the keys in a merge sort) made the device Jaccard of books 0.16 GB/s.
    by_hash = xp.argsort(hashes, kind="stable")
    order = by_hash[xp.argsort(doc.astype(xp.int32)[by_hash], kind="stable")]
    del by_hash
    hashes, doc = hashes[order], doc[order]
    del order
    first = xp.ones(len(hashes), dtype=bool)
    first[1:] = (hashes[1:] != hashes[:-1]) | (doc[1:] != doc[:-1])
    hashes, doc = hashes[first], doc[first]
    every = xp.arange(n_docs)
    set_start, set_end = xp.searchsorted(doc, every, side="left"), xp.searchsorted(doc, every, side="right")
    size = set_end - set_start
    x_smaller = size[x] <= size[y]
    small, large = xp.where(x_smaller, x, y), xp.where(x_smaller, y, x)
    cum = xp.cumsum(size[small])
    common = xp.zeros(len(x), dtype=xp.int64)
    total = int(cum[-1]) if len(x) else 0
    if total:
        _intersect_kernel[_blocks(total, _BLOCK_1D), _BLOCK_1D](cum, small, large, set_start, set_end, hashes, common)
    union = size[x] + size[y] - common
    # As the CPU kernel: int64 / int64 in float64; two empty sets are equal.
    return xp.where(union == 0, 1.0, common / xp.maximum(union, 1))
