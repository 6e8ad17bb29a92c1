"""cudf implementations of :mod:`curate.backend`'s dispatch objects, named ``<op>_cudf``.

Imported only when a cudf partition (or a cupy array) first reaches a dispatcher
(``register_lazy("cudf")``), so a CPU install never imports cudf.

Where the work happens (see the README's "GPU" section):

- on the GPU with cudf's own operation: md5 and SHA-256 (libcudf's, over the chunks of
  :mod:`curate.kernels.digests`, so long documents do not serialise them), MinHash of
  character n-grams with ``width >= 2`` (``str.minhash``, the libcudf ``nvtext::minhash`` /
  ``minhash64`` that the CPU kernel reproduces);
- on the GPU with cudf's string operations and a character map taken from the CPU path:
  lowercase, punctuation and whitespace normalisation;
- on the GPU with curate's ``numba.cuda`` kernels (:mod:`curate.kernels.cuda`): MinHash of word
  n-grams and of ``width == 1``, LSH band hashing, Jaccard verification;
- on the host, by the CPU code, after copying the partition: NFKC (cudf has none) and the greedy
  split of components (it runs only on candidate documents).
  cudf's ``str.jaccard_index`` is not used: it compares sets of whitespace-free substrings, not
  curate's shingles (word windows keep their inner whitespace; sets are of 64-bit hashes).

Each ``<op>_cudf`` takes the parameters of its ``<op>_pandas`` (tests/test_backend_dispatch.py
reads both from the source and compares them). Series that go to the host and back go through
:func:`_to_device`, which keeps nulls null.
"""

import cudf
import cupy
import numpy as np
import pandas as pd
import pylibcudf as plc
from dask_cudf.io.parquet import CudfEngine

from curate.backend import (
    band_buckets,
    character_map,
    greedy_representatives,
    greedy_representatives_pandas,
    jaccard,
    label_components,
    md5_hex,
    minhash_signatures,
    normalization_table,
    normalize_text,
    normalize_text_pandas,
    parquet_engine,
    sha256_hex,
    text_buffers,
    to_arrow,
    to_host,
)
from curate.kernels.components import components_device
from curate.kernels.cuda import band_buckets_cuda, jaccard_cuda, minhash_cuda
from curate.kernels.digests import CHUNK_BYTES, chunk_offsets
from curate.kernels.normalize import collapse_spaces, map_characters


@to_host.register((cudf.DataFrame, cudf.Series, cudf.Index))
def to_host_cudf(frame):
    """The pandas copy of a cudf object (strings become pandas' default string dtype).

    An integer or boolean column with nulls becomes ``pd.ArrowDtype``, as the CPU path reads it
    (``curate.io.read.arrow_typed``): pandas would make it float64, which rounds integers past
    2**53, so ``--keep max:FIELD`` on the host would see ties the CPU run does not.
    """
    host = frame.to_pandas()
    if isinstance(frame, cudf.DataFrame):
        for name in frame.columns:
            host[name] = _exact(frame[name], host[name])
    elif isinstance(frame, cudf.Series):
        host = _exact(frame, host)
    return host


def _exact(column: cudf.Series, host: pd.Series) -> pd.Series:
    if not (column.null_count and column.dtype.kind in "iub"):
        return host
    values = column.to_arrow()
    return pd.Series(pd.array(values, dtype=pd.ArrowDtype(values.type)), index=host.index, name=host.name)


def _to_device(host: pd.Series) -> cudf.Series:
    # Through Arrow, so a null stays null (a numpy round trip turns it into a float NaN, which
    # cudf refuses in a string column: the first H200 run).
    return cudf.from_pandas(host)


@parquet_engine.register(cudf.DataFrame)
def parquet_engine_cudf(meta: cudf.DataFrame):
    """Dask's Parquet engine for cudf partitions: dask-cudf's ``CudfEngine``."""
    return CudfEngine


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
    filled = text.fillna("")
    # to_pylibcudf unwraps the buffers without unspilling them (a spilled one has no device
    # memory to view) or keeping cuDF from spilling them later: marked exposed first, as cuDF
    # does for ``__cuda_array_interface__`` (``.values``), they are on the device and stay there.
    with filled._column.access(mode="read", scope="external"):
        column, _ = filled.to_pylibcudf()
    if column.size() == 0:
        return cupy.zeros(1, np.int64), cupy.zeros(0, np.uint8)
    offsets_child = column.children()[0]
    offsets_dtype = np.int64 if offsets_child.type().id() == plc.TypeId.INT64 else np.int32
    offsets = cupy.asarray(offsets_child.data()).view(offsets_dtype)
    offsets = offsets[column.offset() : column.offset() + column.size() + 1]
    data = cupy.asarray(column.data()).view(np.uint8)
    return offsets, data


def _strings(offsets: cupy.ndarray, chars) -> plc.Column:
    """A strings column over ``chars`` (a device buffer, not copied) cut at ``offsets`` (from 0)."""
    kind = np.int32 if int(offsets[-1]) < 2**31 else np.int64
    children = [plc.Column.from_cuda_array_interface(offsets.astype(kind))]
    return plc.Column(plc.DataType(plc.TypeId.STRING), len(offsets) - 1, chars, None, 0, 0, children)


@md5_hex.register(cudf.Series)
def md5_hex_cudf(text: cudf.Series) -> cudf.Series:
    """Hex md5 of each string's UTF-8 bytes, the digests of :func:`curate.backend.md5_hex_pandas`."""
    return _chunked_hex(text, plc.hashing.md5, 32)


@sha256_hex.register(cudf.Series)
def sha256_hex_cudf(text: cudf.Series) -> cudf.Series:
    """Hex SHA-256 of each string's UTF-8 bytes, the digests of :func:`curate.backend.sha256_hex_pandas`."""
    return _chunked_hex(text, plc.hashing.sha256, 64)


def _chunked_hex(text: cudf.Series, hash_rows, width: int) -> cudf.Series:
    # The chunked digest of curate.kernels.digests: libcudf's hash runs once over every
    # CHUNK_BYTES chunk of the texts (a strings column over the texts' own bytes), then once over
    # each long text's concatenated chunk digests (a strings column over the first digests'
    # bytes, ``width`` hex characters each); a text of one chunk keeps its chunk's digest.
    offsets, data = text_buffers(text)
    if len(offsets) == 1:
        return cudf.Series([], index=text.index, dtype="str")
    start, end = int(offsets[0]), int(offsets[-1])
    offsets = offsets.astype(np.int64) - start
    # A column needs a buffer even when every text is empty.
    chars = plc.gpumemoryview(data[start:end] if end > start else cupy.zeros(1, np.uint8))
    bounds, per_doc, first = chunk_offsets(offsets, CHUNK_BYTES, cupy)
    chunks = hash_rows(plc.Table([_strings(bounds, chars)]))
    joined = cupy.concatenate([cupy.zeros(1, np.int64), width * cupy.cumsum(per_doc)])
    of_chunks = hash_rows(plc.Table([_strings(joined, chunks.data())]))
    one_chunk = plc.copying.gather(
        plc.Table([chunks]), plc.Column.from_cuda_array_interface(first), plc.copying.OutOfBoundsPolicy.DONT_CHECK
    )
    digests = plc.copying.copy_if_else(
        of_chunks, one_chunk.columns()[0], plc.Column.from_cuda_array_interface(per_doc > 1)
    )
    result = cudf.Series.from_pylibcudf(digests)
    result.index = text.index
    return result


@normalize_text.register(cudf.Series)
def normalize_text_cudf(
    text: cudf.Series,
    *,
    lowercase: bool,
    whitespace: bool,
    punctuation: bool,
    nfkc: bool,
    format_chars: bool = False,
    accents: bool = False,
) -> cudf.Series:
    """Normalised text, the strings of :func:`curate.backend.normalize_text_pandas`; nulls stay null.

    On the device, byte by byte over the column's buffers (:mod:`curate.kernels.normalize`): the
    character map of :func:`curate.backend.normalization_table` (lowercase, punctuation, format
    characters, accents, each whitespace character to a space), one space for each run of spaces, then cudf's ``strip``
    of the characters Arrow trims. NFKC alone runs on the host (cudf has none), before the rest.
    libcudf's ``translate`` and regex ``replace`` gave each string one thread (18 MB/s on books
    on an H200); its own ``lower``, ``normalize_spaces`` and character-type filters differ from
    the CPU path (docs/decisions.md, "Normalisation on the GPU").
    """
    options = {
        "lowercase": lowercase,
        "whitespace": whitespace,
        "punctuation": punctuation,
        "format_chars": format_chars,
        "accents": accents,
    }
    table, trim = normalization_table(**options)
    if nfkc:
        off = {"lowercase": False, "whitespace": False, "punctuation": False}
        text = _to_device(normalize_text_pandas(text.to_pandas(), **off, nfkc=True))
    if not table:
        return text
    offsets, data = map_characters(*text_buffers(text), cupy.asarray(character_map(**options)), cupy)
    if whitespace:
        offsets, data = collapse_spaces(offsets, data, cupy)
    chars = plc.gpumemoryview(data if data.size else cupy.zeros(1, np.uint8))
    result = cudf.Series.from_pylibcudf(_strings(offsets, chars))
    result.index, result.name = text.index, text.name
    if text.null_count:  # text_buffers gave a null as ""
        result = result.where(text.notna().values)
    return result.str.strip(trim) if whitespace else result


@minhash_signatures.register(cudf.Series)
def minhash_signatures_cudf(text: cudf.Series, seed, a, b, width, words):
    """MinHash signatures ``(n, num_perm)`` and shingle counts ``(n,)`` as cupy arrays.

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
def band_buckets_cupy(signatures: cupy.ndarray, num_bands, rows_per_band) -> cupy.ndarray:
    """Bucket ids ``(n, num_bands)`` uint64 on the GPU; see :func:`curate.kernels.lsh.band_buckets`.

    Raises ValueError where ``num_bands * rows_per_band`` passes the signature's ``num_perm`` columns."""
    n_docs, num_perm = signatures.shape
    if num_bands * rows_per_band > num_perm:
        raise ValueError(
            f"{num_bands} bands x {rows_per_band} rows need {num_bands * rows_per_band} hashes, have {num_perm}"
        )
    sig_bytes = cupy.ascontiguousarray(signatures).view(cupy.uint8).reshape(n_docs, num_perm * signatures.itemsize)
    return cupy.asarray(band_buckets_cuda(sig_bytes, num_bands, rows_per_band * signatures.itemsize))


@jaccard.register(cudf.Series)
def jaccard_cudf(texts: cudf.Series, x, y, width, words, at_least=0.0) -> np.ndarray:
    """Jaccard similarity of ``texts[x[i]]`` and ``texts[y[i]]``, float64 ``(n,)`` numpy, computed on the device
    from the column's own buffers by :func:`curate.kernels.cuda.jaccard_cuda` (the values of
    :func:`curate.backend.jaccard_pandas`). Every value exact: ``at_least`` lets only the host's
    merge stop early (the device's threads search, they do not merge)."""
    return cupy.asnumpy(jaccard_cuda(*text_buffers(texts), x, y, width, words, xp=cupy))


@greedy_representatives.register(cudf.Series)
def greedy_representatives_cudf(
    text: cudf.Series, group_starts, threshold, width, words, known=None, fixed=None
) -> tuple[np.ndarray, np.ndarray]:
    """Representative row (int64) and similarity with it (float64) per row, ``(n,)`` numpy, computed on the host."""
    return greedy_representatives_pandas(text.to_pandas(), group_starts, threshold, width, words, known, fixed)


@label_components.register(cudf.DataFrame)
def label_components_cudf(edges: cudf.DataFrame) -> pd.DataFrame:
    """Columns ``node``, ``component`` (int64, host, as :func:`curate.backend.label_components_pandas`),
    solved on the device by cuGraph's kernel where installed (:func:`curate.kernels.components.components_device`)."""
    node, component = components_device(edges["u"].astype("int64").values, edges["v"].astype("int64").values)
    return pd.DataFrame({"node": node, "component": component})
