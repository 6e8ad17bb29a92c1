"""Buckets to candidate edges: a star from each bucket's smallest document to the others."""

import dask.dataframe as dd

from curate.dedup.minhash import BUCKET
from curate.io.read import DOC


def bucket_edges(buckets: dd.DataFrame) -> dd.DataFrame:
    """Candidate duplicate pairs from LSH buckets.

    Shuffles on the bucket id; in a bucket of ``k`` documents, links each to the bucket's
    smallest ``_doc`` (its anchor): ``k - 1`` edges instead of ``k (k - 1) / 2`` pairs, and the
    same connected components. Edges are then shuffled on ``u`` and de-duplicated.

    Parameters
    ----------
    buckets : dask.dataframe.DataFrame
        Columns ``_bucket`` (uint64), ``_doc`` (int64).

    Returns
    -------
    dask.dataframe.DataFrame
        Unique edges ``u < v`` (int64).
    """
    meta = {"u": "int64", "v": "int64"}  # a description: Dask builds it in the partitions' backend
    edges = buckets.shuffle(BUCKET).map_partitions(_stars, meta=meta)
    return edges.shuffle("u").map_partitions(lambda part: part.drop_duplicates(), meta=meta)


def _stars(part):
    anchor = part.groupby(BUCKET, sort=False)[DOC].transform("min")
    member = (part[DOC] != anchor).values
    return type(part)({"u": anchor.values[member], "v": part[DOC].values[member]})
