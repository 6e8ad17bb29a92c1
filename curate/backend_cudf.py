"""cudf implementations of :mod:`curate.backend`'s dispatch objects, named ``<op>_cudf``.

Imported only when a cudf partition (or a cupy array) first reaches a dispatcher
(``register_lazy("cudf")``), so a CPU install never imports cudf.

Where the work happens (see the README's "GPU" section):

- on the GPU with cudf's own operation: md5 (``hash_values(method="md5")``), MinHash of
  character n-grams with ``width >= 2`` (``str.minhash``, the libcudf ``nvtext::minhash`` /
  ``minhash64`` that the CPU kernel reproduces);
- on the GPU with curate's ``numba.cuda`` kernels (:mod:`curate.kernels.cuda`): MinHash of word
  n-grams and of ``width == 1``, LSH band hashing;
- on the host, by the CPU kernels, after copying the partition: text normalisation (cudf has no
  NFKC and its case mapping is not Arrow's), Jaccard verification and the greedy split of
  components (they need per-document shingle sets; they run only on candidate documents).
  cudf's ``str.jaccard_index`` is not used: it compares sets of whitespace-free substrings, not
  curate's shingles (word windows keep their inner whitespace; sets are of 64-bit hashes).
"""

import cudf
import cupy
import numpy as np
import pylibcudf as plc

from curate.backend import (
    band_buckets,
    greedy_representatives,
    greedy_representatives_pandas,
    jaccard,
    jaccard_pandas,
    md5_hex,
    minhash_signatures,
    normalize_text,
    normalize_text_pandas,
    text_buffers,
    to_arrow,
    to_host,
)
from curate.kernels.cuda import band_buckets_cuda, minhash_cuda


@to_host.register((cudf.DataFrame, cudf.Series, cudf.Index))
def to_host_cudf(frame):
    """The pandas copy of a cudf object (strings become pandas' default string dtype)."""
    return frame.to_pandas()


@to_arrow.register(cudf.DataFrame)
def to_arrow_cudf(frame: cudf.DataFrame, schema=None):
    """Arrow table of a partition (cast to ``schema`` if given), without its index or pandas metadata."""
    table = frame.to_arrow(preserve_index=False).replace_schema_metadata(None)
    return table if schema is None else table.cast(schema)


@text_buffers.register(cudf.Series)
def text_buffers_cudf(text: cudf.Series) -> tuple[cupy.ndarray, cupy.ndarray]:
    """UTF-8 buffers of a string series on the device: ``(offsets (n + 1,), data uint8)``.

    Zero-copy views of the strings column (``Series.to_pylibcudf``); nulls become empty strings
    first. Offsets are int32 or int64, as the column holds them, and index into ``data``.
    """
    column, _ = text.fillna("").to_pylibcudf()
    if column.size() == 0:
        return cupy.zeros(1, np.int64), cupy.zeros(0, np.uint8)
    offsets_child = column.children()[0]
    offsets_dtype = (
        np.int64 if offsets_child.type().id() == plc.TypeId.INT64 else np.int32
    )
    offsets = cupy.asarray(offsets_child.data()).view(offsets_dtype)
    offsets = offsets[column.offset() : column.offset() + column.size() + 1]
    data = cupy.asarray(column.data()).view(np.uint8)
    return offsets, data


@md5_hex.register(cudf.Series)
def md5_hex_cudf(text: cudf.Series) -> cudf.Series:
    """Hex md5 digest of each string's UTF-8 bytes (the digests of :func:`curate.backend.md5_hex_pandas`)."""
    return text.fillna("").hash_values(method="md5")


@normalize_text.register(cudf.Series)
def normalize_text_cudf(text: cudf.Series, **options) -> cudf.Series:
    """Normalised text, computed on the host by :func:`curate.backend.normalize_text_pandas`."""
    normalised = normalize_text_pandas(text.to_pandas(), **options)
    return cudf.Series(normalised.to_numpy(), index=text.index, dtype="str")


@minhash_signatures.register(cudf.Series)
def minhash_signatures_cudf(text: cudf.Series, seed, a, b, width, words):
    """MinHash signatures ``(n, n_hashes)`` and shingle counts ``(n,)`` as cupy arrays.

    Equal to the CPU kernel's. Character n-grams of ``width >= 2`` use cudf's ``str.minhash``
    (uint32 ``a``/``b`` select MurmurHash3_x86_32, uint64 the 64-bit scheme); the rest use
    :func:`curate.kernels.cuda.minhash_cuda`.
    """
    if words or width < 2:
        signatures, counts = minhash_cuda(*text_buffers(text), seed, a, b, width, words)
        return cupy.asarray(signatures), cupy.asarray(counts)
    text = text.fillna("")
    hashes = text.str.minhash(seed, a=cudf.Series(a), b=cudf.Series(b), width=width)
    signatures = hashes.list.leaves.values.reshape(len(text), len(a))
    chars = text.str.len().values.astype(np.int64)
    # One shingle per window of `width` characters; a shorter, non-empty text is one shingle.
    counts = cupy.where(chars == 0, 0, cupy.maximum(chars - width + 1, 1))
    # libcudf's value for an empty string is not specified; the CPU kernel writes zeros.
    signatures[chars == 0] = 0
    return signatures, counts


@band_buckets.register(cupy.ndarray)
def band_buckets_cupy(
    signatures: cupy.ndarray, num_bands, rows_per_band
) -> cupy.ndarray:
    """Bucket ids ``(n, num_bands)`` uint64 on the GPU; see :func:`curate.kernels.lsh.band_buckets`."""
    n_docs, n_hashes = signatures.shape
    if num_bands * rows_per_band > n_hashes:
        raise ValueError(
            f"{num_bands} bands x {rows_per_band} rows need {num_bands * rows_per_band} hashes, have {n_hashes}"
        )
    sig_bytes = (
        cupy.ascontiguousarray(signatures)
        .view(cupy.uint8)
        .reshape(n_docs, n_hashes * signatures.itemsize)
    )
    return cupy.asarray(
        band_buckets_cuda(sig_bytes, num_bands, rows_per_band * signatures.itemsize)
    )


@jaccard.register(cudf.Series)
def jaccard_cudf(x: cudf.Series, y: cudf.Series, width, words) -> np.ndarray:
    """Jaccard similarity of ``x[i]`` and ``y[i]``, float64 ``(n,)`` numpy, computed on the host."""
    return jaccard_pandas(x.to_pandas(), y.to_pandas(), width, words)


@greedy_representatives.register(cudf.Series)
def greedy_representatives_cudf(
    text: cudf.Series, group_starts, threshold, width, words
) -> tuple[np.ndarray, np.ndarray]:
    """Representative row (int64) and similarity with it (float64) per row, ``(n,)`` numpy, computed on the host."""
    return greedy_representatives_pandas(
        text.to_pandas(), group_starts, threshold, width, words
    )
