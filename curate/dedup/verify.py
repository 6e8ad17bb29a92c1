"""Verification: keep only candidate edges whose true Jaccard similarity reaches the threshold."""

import dask.dataframe as dd

from curate.backend import jaccard
from curate.config import FuzzyConfig
from curate.dedup.minhash import prepare_text
from curate.io.read import DOC

JACCARD = "jaccard"


def verify_edges(edges: dd.DataFrame, docs: dd.DataFrame, text_field: str, config: FuzzyConfig) -> dd.DataFrame:
    """Exact Jaccard similarity of each candidate pair's shingle sets; pairs below threshold dropped.

    :func:`score_edges`, then only the pairs at or above ``config.threshold``.

    Parameters
    ----------
    edges, docs, text_field, config
        As :func:`score_edges`.

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``u``, ``v`` (int64), ``jaccard`` (float64, >= ``config.threshold``).
    """
    scored = score_edges(edges, docs, text_field, config)
    return scored[scored[JACCARD] >= config.threshold]


def score_edges(edges: dd.DataFrame, docs: dd.DataFrame, text_field: str, config: FuzzyConfig) -> dd.DataFrame:
    """Exact Jaccard similarity of each candidate pair's shingle sets, every pair kept.

    The texts of both ends are joined onto the edges (shuffles of the documents that have an
    edge only), then :func:`curate.kernels.jaccard.jaccard_pairs` compares the shingle sets,
    with the same shingles and normalisation as the MinHash stage.

    Parameters
    ----------
    edges : dask.dataframe.DataFrame
        Columns ``u``, ``v`` (int64).
    docs : dask.dataframe.DataFrame
        Columns ``_doc`` and ``text_field``.
    text_field : str
    config : FuzzyConfig

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``u``, ``v`` (int64), ``jaccard`` (float64, in [0, 1]).
    """
    text = docs[[DOC, text_field]]
    pairs = edges.merge(text.rename(columns={DOC: "u", text_field: "_text_u"}), on="u")
    pairs = pairs.merge(text.rename(columns={DOC: "v", text_field: "_text_v"}), on="v")
    meta = {"u": "int64", "v": "int64", JACCARD: "float64"}  # built in the partitions' backend
    return pairs.map_partitions(_score, config, meta=meta)


def _score(part, config):
    # Sorted by u, the edges of one LSH star (anchor u) are adjacent and its set is built once.
    part = part.sort_values("u", kind="stable")
    similarity = jaccard(
        prepare_text(part["_text_u"], config),
        prepare_text(part["_text_v"], config),
        config.width,
        config.ngram == "word",
        x_keys=part["u"].to_numpy(),
    )
    return type(part)({"u": part["u"].to_numpy(), "v": part["v"].to_numpy(), JACCARD: similarity})
