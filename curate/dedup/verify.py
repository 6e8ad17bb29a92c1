"""Verification: keep only candidate edges whose true Jaccard similarity reaches the threshold."""

import dask.dataframe as dd
import numpy as np

from curate.backend import jaccard, to_host
from curate.config import FuzzyConfig
from curate.dedup.keys import select
from curate.dedup.text import prepare_text
from curate.schema import DOC

JACCARD = "jaccard"
PART = "_part"  # the edge partition that asks for a text


def verify_edges(edges: dd.DataFrame, docs: dd.DataFrame, text_field: str, config: FuzzyConfig) -> dd.DataFrame:
    """Exact Jaccard similarity of each candidate pair's shingle sets; pairs below threshold dropped.

    :func:`score_edges`, then only the pairs at or above ``config.threshold``. The values of
    pairs below it are never read, so their merges stop as soon as they cannot reach it
    (:func:`curate.kernels.jaccard.jaccard_at_least`): the second round's pairs, which mostly
    fail, take half the time (``scripts/bench_members.py``, ``docs/benchmarks.md``).

    Parameters
    ----------
    edges, docs, text_field, config
        As :func:`score_edges`.

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``u``, ``v`` (int64), ``jaccard`` (float64, >= ``config.threshold``).
    """
    return passed_edges(score_edges(edges, docs, text_field, config, at_least=config.threshold), config.threshold)


def passed_edges(scored: dd.DataFrame, threshold: float) -> dd.DataFrame:
    """The rows of ``scored`` whose ``jaccard`` is at least ``threshold``, filtered within each partition.

    Parameters
    ----------
    scored : dask.dataframe.DataFrame
        Columns ``u``, ``v`` (int64), ``jaccard`` (float64), from :func:`score_edges`.
    threshold : float
        Jaccard similarity of a duplicate, in ``(0, 1]``.

    Returns
    -------
    dask.dataframe.DataFrame
        The same columns and partitions, rows with ``jaccard >= threshold``.

    Notes
    -----
    Not ``scored[scored.jaccard >= threshold]``: Dask cannot tell that a frame made from two
    frames (the edges and the texts) is partitioned like its own column, so it aligns frame
    and mask by shuffling both on the index. These indexes repeat across partitions, and the
    rows of one shuffle were masked by the other's (under the synchronous scheduler an
    IndexError, or other rows kept).
    """
    return scored.map_partitions(_at_least, threshold, meta=scored._meta)


def _at_least(part, threshold):
    return part[part[JACCARD] >= threshold]


def score_edges(
    edges: dd.DataFrame, docs: dd.DataFrame, text_field: str, config: FuzzyConfig, at_least: float = 0.0
) -> dd.DataFrame:
    """Exact Jaccard similarity of each candidate pair's shingle sets, every pair kept.

    The edges are shuffled on ``u`` (an LSH star's edges all land in one partition), and each
    partition asks for the texts of its edges' documents: those texts move from where they lie
    (:func:`curate.dedup.keys.select`) to the partitions that asked, once each. Texts are never
    copied onto edges: a partition builds each document's shingle set once and compares it with
    every partner (:func:`curate.kernels.jaccard.jaccard_indexed`), with the same shingles and
    normalisation as the MinHash stage.

    Parameters
    ----------
    edges : dask.dataframe.DataFrame
        Columns ``u``, ``v`` (int64).
    docs : dask.dataframe.DataFrame
        A document frame (:mod:`curate.dedup.keys`) with ``_doc`` and ``text_field``, holding
        at least every document of an edge (e.g. the candidates selected from the corpus).
    text_field : str
    config : FuzzyConfig
    at_least : float, default=0.0
        Pairs below it get, instead of their similarity, an upper bound of it below ``at_least``
        (see :func:`curate.kernels.jaccard.jaccard_indexed`); 0: every value exact.

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``u``, ``v`` (int64), ``jaccard`` (float64, in [0, 1]); partitioned by ``u``.
    """
    numbered = (
        edges[["u", "v"]].shuffle("u").map_partitions(_numbered, meta={"u": "int64", "v": "int64", PART: "int64"})
    )
    # Each end of an edge partition once: a document is named once per edge (an anchor once per
    # member), and the copies cost the shuffle to the documents 16 bytes an edge end (5.9 million
    # member pairs: 0.7 GB more in one worker, docs/benchmarks.md).
    ends = [numbered[[end, PART]].rename(columns={end: DOC}) for end in ("u", "v")]
    wanted = dd.concat([frame.map_partitions(_distinct, meta=frame._meta) for frame in ends])
    located = select(docs[[DOC, text_field]], wanted, columns=(PART,), repeats=True)
    texts = located[[PART, DOC, text_field]].set_index(
        PART, divisions=(*range(numbered.npartitions), numbered.npartitions - 1)
    )
    meta = {"u": "int64", "v": "int64", JACCARD: "float64"}  # built in the partitions' backend
    return dd.map_partitions(_score, numbered, texts, text_field, config, at_least, meta=meta, align_dataframes=False)


def _distinct(part):
    return part.drop_duplicates()


def _numbered(part, partition_info=None):
    number = 0 if partition_info is None else partition_info["number"]
    return part.assign(**{PART: np.int64(number)}).drop_duplicates(["u", "v"])


def _score(edges, texts, text_field, config, at_least):
    texts = texts.drop_duplicates(DOC).sort_values(DOC)
    keys = to_host(texts[DOC]).to_numpy()
    edges = edges.sort_values(
        ["u", "v"]
    )  # a star's anchor first in a run of its edges: its set is built once per chunk
    u, v = to_host(edges["u"]).to_numpy(), to_host(edges["v"]).to_numpy()
    similarity = jaccard(
        prepare_text(texts[text_field].reset_index(drop=True), config),
        np.searchsorted(keys, u),
        np.searchsorted(keys, v),
        config.width,
        config.ngram == "word",
        at_least,
    )
    return type(edges)({"u": u, "v": v, JACCARD: similarity})
