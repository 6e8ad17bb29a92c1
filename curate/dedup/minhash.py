"""MinHash + LSH banding stage: documents in, ``(bucket, document)`` pairs out."""

import dask.dataframe as dd
import numpy as np

from curate.backend import band_buckets, minhash_signatures
from curate.config import FuzzyConfig
from curate.dedup.text import prepare_text
from curate.kernels.minhash import permutations
from curate.schema import DOC

BUCKET = "_bucket"
# The (docs, num_perm) signature block held at once, in bytes: 32,263 documents at the default
# 260 32-bit values. A count of documents instead let --num-perm 10000 hold 1.3 GB twice over
# (a user's trial: workers of 5 GB at 95 % on the Bible verses).
_CHUNK_BYTES = 32 << 20


def lsh_buckets(docs: dd.DataFrame, text_field: str, config: FuzzyConfig) -> dd.DataFrame:
    """LSH bucket of every band of every document's MinHash signature.

    Signatures follow libcudf's ``nvtext::minhash`` scheme (see :mod:`curate.kernels.minhash`)
    with ``config.num_hashes`` permutations drawn from ``config.seed``; band ``k`` of a signature
    is hashed to a 64-bit bucket id (see :mod:`curate.kernels.lsh`). Documents without shingles
    (empty text) are left out: they are exact duplicates of each other, found by exact dedup.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        Columns ``_doc`` (int64) and ``text_field`` (string).
    text_field : str
    config : FuzzyConfig

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``_bucket`` (uint64) and ``_doc`` (int64); ``num_bands`` rows per document.
    """
    a, b = permutations(config.num_hashes, config.seed, config.hash_bits)
    meta = {BUCKET: "uint64", DOC: "int64"}  # a description: Dask builds it in the partitions' backend
    return docs[[DOC, text_field]].map_partitions(
        _partition_buckets, text_field, config, a, b, meta=meta, clear_divisions=True
    )


def _partition_buckets(part, text_field, config, a, b):
    text = prepare_text(part[text_field], config)
    keys = part[DOC].values  # numpy for pandas, cupy for cudf: stays where the signatures are
    buckets, owners = [], []
    step = chunk_docs(config)
    for start in range(0, len(part), step):
        chunk = slice(start, start + step)
        signatures, n_shingles = minhash_signatures(
            text.iloc[chunk], config.seed, a, b, config.width, config.ngram == "word"
        )
        has = n_shingles > 0
        buckets.append(band_buckets(signatures[has], config.num_bands, config.rows_per_band).ravel())
        owners.append(np.repeat(keys[chunk][has], config.num_bands))
    if not buckets:  # empty partition
        buckets, owners = [np.array([], np.uint64)], [np.array([], np.int64)]
    return type(part)({BUCKET: np.concatenate(buckets), DOC: np.concatenate(owners)})


def chunk_docs(config: FuzzyConfig) -> int:
    """Documents whose signatures are computed at once: :data:`_CHUNK_BYTES` of them (at least one)."""
    return max(1, _CHUNK_BYTES // (config.num_hashes * config.hash_bits // 8))
