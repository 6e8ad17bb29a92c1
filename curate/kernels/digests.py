"""The exact-dedup digests (md5, SHA-256): the plain digest of a short text, the digest of the
digests of fixed-size chunks of a long one.

A hash is sequential over a message, so a device that gives each document one thread waits on
its longest document (md5: 0.29 GB/s on books against 1.7 GB/s on short posts, on an H200).
Cutting long documents into ``chunk_bytes`` chunks lets every chunk be hashed at once; the
document's digest is then the digest of its chunks' hex digests, concatenated in order. A text of
at most ``chunk_bytes`` bytes (one chunk) keeps its plain digest. Both backends compute the same
digests: hashlib here, libcudf's md5 / sha256 over the same chunks on the GPU
(:mod:`curate.backend_cudf`), with the chunk boundaries of :func:`chunk_offsets` on both. A
collision of two chunked digests needs a collision of the hash itself, in a chunk or in the
concatenation.

References
----------
.. [1] R. Rivest, "The MD5 Message-Digest Algorithm", RFC 1321, 1992.
.. [2] NIST, "Secure Hash Standard (SHS)", FIPS 180-4, 2015 (SHA-256).
"""

import hashlib

import numpy as np

CHUNK_BYTES = 4096


def chunk_offsets(offsets, chunk_bytes: int, xp=np):
    """Cut every document into chunks of ``chunk_bytes`` bytes (the last one shorter).

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int32 or int64
        Document ``i`` is ``data[offsets[i]:offsets[i + 1]]``.
    chunk_bytes : int
        Bytes per chunk, >= 1.
    xp : module, default=numpy
        The array module of ``offsets`` (numpy, or cupy for device arrays).

    Returns
    -------
    bounds : array of shape (n_chunks + 1,), dtype int64
        Chunk ``k`` is ``data[bounds[k]:bounds[k + 1]]``; the chunks of a document follow each
        other, and an empty document has one empty chunk.
    per_doc : array of shape (n_docs,), dtype int64
        Chunks of each document, at least 1.
    first : array of shape (n_docs,), dtype int64
        Index of each document's first chunk.
    """
    offsets = offsets.astype(xp.int64)
    per_doc = xp.maximum(1, -(-(offsets[1:] - offsets[:-1]) // chunk_bytes))
    first = xp.cumsum(per_doc) - per_doc
    chunk = xp.arange(int(per_doc.sum()), dtype=xp.int64)
    doc = xp.searchsorted(first, chunk, side="right") - 1
    starts = offsets[:-1][doc] + (chunk - first[doc]) * chunk_bytes
    return xp.concatenate([starts, offsets[-1:]]), per_doc, first


def hex_digests(offsets: np.ndarray, data: np.ndarray, algorithm: str, chunk_bytes: int = CHUNK_BYTES) -> list[str]:
    """Hex digest of every document (see the module docstring), computed with hashlib.

    Parameters
    ----------
    offsets : array of shape (n_docs + 1,), dtype int32 or int64
    data : array of shape (n_bytes,), dtype uint8
        UTF-8 text.
    algorithm : {"md5", "sha256"}
        A :func:`hashlib.new` name.
    chunk_bytes : int, default=CHUNK_BYTES
        Bytes per chunk (4096); a document longer than this gets the digest of its chunks' digests.

    Returns
    -------
    list of str
        Lowercase hex digests (32 characters for md5, 64 for SHA-256), one per document.

    Raises
    ------
    ValueError
        If ``algorithm`` is not a hash that :func:`hashlib.new` knows.
    """
    bounds, per_doc, first = chunk_offsets(offsets, chunk_bytes)
    view = memoryview(data)
    bounds = bounds.tolist()
    chunks = [hashlib.new(algorithm, view[lo:hi]).hexdigest() for lo, hi in zip(bounds[:-1], bounds[1:])]
    return [
        chunks[f] if n == 1 else hashlib.new(algorithm, "".join(chunks[f : f + n]).encode("ascii")).hexdigest()
        for f, n in zip(first.tolist(), per_doc.tolist())
    ]
