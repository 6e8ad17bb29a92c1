"""CUDA kernels for what cudf has no exact equivalent of, compiled by ``numba.cuda`` from the
same Python source as the CPU kernels.

The device functions (MurmurHash3, shingle windows) are the ``py_func`` of the ``@njit``
functions in :mod:`curate.kernels.murmur` and :mod:`curate.kernels.shingles`, recompiled for the
GPU with their helpers swapped for the GPU versions: one source, two targets, so the GPU cannot
drift from the CPU kernels that the golden-value tests pin. Without a GPU these kernels run under
numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which is how CI tests them.

Arrays may be numpy (copied to the device) or anything with ``__cuda_array_interface__``
(cupy, cudf buffers, numba device arrays: used in place). Results are numba device arrays;
``cupy.asarray`` wraps one without a copy, ``.copy_to_host()`` brings it to numpy.
"""

import types

import numpy as np
from numba import cuda

from curate.kernels import murmur, shingles
from curate.kernels.minhash import MERSENNE_61

_M32 = np.uint64(0xFFFFFFFF)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_BLOCK_1D = 128
_BLOCK_2D = (16, 16)


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
    (murmur, ("_rotl32", "_rotl64", "_load", "_fmix64", "murmur3_32", "murmur3_64")),
    (
        shingles,
        (
            "_is_continuation",
            "_is_space",
            "_next_char",
            "_skip_space",
            "_skip_word",
            "first_window",
            "next_window",
        ),
    ),
):
    for (
        _name
    ) in _names:  # helpers first, so each function sees the GPU versions of its callees
        _DEVICE[_name] = _device_function(getattr(_module, _name), _DEVICE)
murmur3_32, murmur3_64 = _DEVICE["murmur3_32"], _DEVICE["murmur3_64"]
first_window, next_window = _DEVICE["first_window"], _DEVICE["next_window"]


def _to_device(array):
    if hasattr(array, "__cuda_array_interface__"):
        return cuda.as_cuda_array(array)
    return cuda.to_device(np.ascontiguousarray(array))


def _blocks(n: int, block: int) -> int:
    return max(1, -(-n // block))


@cuda.jit
def _band_kernel(sig_bytes, num_bands, band_bytes, out):
    i, k = cuda.grid(2)
    if i < sig_bytes.shape[0] and k < num_bands:
        out[i, k] = murmur3_64(sig_bytes[i], k * band_bytes, (k + 1) * band_bytes, k)


def band_buckets_cuda(sig_bytes, num_bands: int, band_bytes: int):
    """Bucket ids on the GPU; equal to :func:`curate.kernels.lsh.band_buckets`.

    Parameters
    ----------
    sig_bytes : array of shape (n_docs, n_hashes * itemsize), dtype uint8
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


@cuda.jit
def _shingle_hash_kernel(offsets, data, seed, width, words, wide, hashes, counts):
    # Pass 1, one thread per document: hash every shingle into the document's slice of
    # `hashes` (a document has at most one shingle per byte, so its byte range fits).
    i = cuda.grid(1)
    if i >= counts.shape[0]:
        return
    base = offsets[i] - offsets[0]
    end = offsets[i + 1]
    lo, hi = first_window(data, offsets[i], end, width, words)
    n = 0
    while lo < hi:
        h = murmur3_64(data, lo, hi, seed) if wide else murmur3_32(data, lo, hi, seed)
        hashes[base + n] = max(h, np.uint64(1))  # libcudf reserves 0
        n += 1
        lo, hi = next_window(data, lo, hi, end, words)
    counts[i] = n


@cuda.jit
def _min_reduce_kernel(offsets, hashes, counts, a, b, wide, out):
    # Pass 2, one thread per (document, permutation): the same arithmetic as the CPU kernel.
    i, j = cuda.grid(2)
    if i >= out.shape[0] or j >= out.shape[1]:
        return
    n = counts[i]
    base = offsets[i] - offsets[0]
    aj = np.uint64(a[j])
    bj = np.uint64(b[j])
    m = _ALL_ONES
    for k in range(n):
        x = hashes[base + k] * aj + bj
        if wide:
            r = (x & MERSENNE_61) + (x >> np.uint64(61))
            v = min(r, r - MERSENNE_61)
        else:
            v = x & _M32
        m = min(m, v)
    out[i, j] = m if n > 0 else 0


def minhash_cuda(offsets, data, seed: int, a, b, width: int, words: bool = False):
    """MinHash signatures on the GPU; equal to :func:`curate.kernels.minhash.minhash`.

    Used where cudf's ``str.minhash`` does not compute curate's shingles: word n-grams (cudf
    has no byte-span word windows) and ``width == 1`` (libcudf requires ``width >= 2``).

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int32 or int64
    data : array of shape (n_bytes,), dtype uint8
    seed : int
    a, b : arrays of shape (n_hashes,), dtype uint32 or uint64
        Their dtype selects the 32- or 64-bit scheme.
    width : int
    words : bool, default=False

    Returns
    -------
    signatures : numba device array of shape (n_docs, n_hashes), dtype of ``a``
    n_shingles : numba device array of shape (n_docs,), dtype int64

    Notes
    -----
    Scratch memory: 8 bytes per text byte of the batch (the shingle hashes of pass 1).
    """
    a, b = np.asarray(a), np.asarray(b)
    if (
        a.shape != b.shape
        or a.dtype != b.dtype
        or a.dtype not in (np.uint32, np.uint64)
    ):
        raise ValueError(
            f"a and b must be equal-length uint32 or uint64 arrays, got {a.dtype}/{b.dtype}"
        )
    offsets, data = _to_device(offsets), _to_device(data)
    n_docs = offsets.shape[0] - 1
    wide = a.dtype == np.uint64
    hashes = cuda.device_array(
        max(1, int(offsets[n_docs]) - int(offsets[0])), dtype=np.uint64
    )
    counts = cuda.device_array(n_docs, dtype=np.int64)
    out = cuda.device_array((n_docs, len(a)), dtype=a.dtype)
    if n_docs == 0:
        return out, counts
    _shingle_hash_kernel[_blocks(n_docs, _BLOCK_1D), _BLOCK_1D](
        offsets, data, np.uint64(seed), width, words, wide, hashes, counts
    )
    grid = (_blocks(n_docs, _BLOCK_2D[0]), _blocks(len(a), _BLOCK_2D[1]))
    _min_reduce_kernel[grid, _BLOCK_2D](
        offsets, hashes, counts, cuda.to_device(a), cuda.to_device(b), wide, out
    )
    return out, counts
