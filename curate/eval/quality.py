"""How good a dedup run is, measured against the exact all-pairs ground truth.

The ground truth is every pair of documents whose shingle sets have Jaccard similarity at or
above the threshold (:func:`similar_pairs`, exact, no sampling), with the shingles and
normalisation of the fuzzy config being measured and each shingle identified by its 64-bit
hash, as curate's verification does. A run is described by each document's final
representative (itself when kept, see :func:`final_representatives`), and
:func:`dedup_quality` scores it:

- *pair recall*: share of true pairs whose two documents end with the same representative;
- *removal precision*: share of removed documents whose representative is a true pair with them;
- *over-merge rate*: share of removed documents that have no kept document at the threshold;
- *missed duplicates*: kept documents that still have another kept document at the threshold.

Given the clusters a tool found before choosing representatives (for curate, the connected
components of verified edges, which its representative check may split), *cluster recall*
is the share of true pairs in one cluster; pair recall below it is what the split cost.
"""

import numpy as np
import pandas as pd

from curate.backend import text_buffers
from curate.config import FuzzyConfig
from curate.dedup.text import prepare_text
from curate.eval.allpairs import all_pairs
from curate.kernels.jaccard import shingle_sets


def similar_pairs(text: pd.Series, config: FuzzyConfig, threshold: float) -> pd.DataFrame:
    """Every pair of documents with Jaccard similarity ``>= threshold`` under ``config``'s shingles.

    Parameters
    ----------
    text : pandas.Series of str
        One document per row; positions ``0..n-1`` name the documents.
    config : FuzzyConfig
        ``ngram``, ``width`` and the normalisation flags are used (its threshold is not).
    threshold : float
        In ``(0, 1]``.

    Returns
    -------
    pandas.DataFrame
        Columns ``left``, ``right`` (int64 positions, ``left < right``) and ``jaccard``
        (float64), sorted by ``left`` then ``right``.

    Notes
    -----
    Exact: candidates come from prefix filtering (see :mod:`curate.eval.allpairs`) and
    every candidate is verified. Documents without shingles (empty text) are in no pair.
    """
    offsets, data = text_buffers(prepare_text(text.reset_index(drop=True), config))
    set_offsets, hashes = shingle_sets(offsets, data, config.width, config.ngram == "word")
    left, right, jaccard = all_pairs(set_offsets, hashes, threshold)
    pairs = pd.DataFrame({"left": left, "right": right, "jaccard": jaccard})
    return pairs.sort_values(["left", "right"], ignore_index=True)


def final_representatives(ids: pd.Series, removed: pd.DataFrame) -> np.ndarray:
    """Each document's representative position, from a ``removed.parquet``-style table.

    Parameters
    ----------
    ids : pandas.Series
        Document ids; positions ``0..n-1`` name the documents.
    removed : pandas.DataFrame
        Columns ``id`` and ``representative`` (an id, or null when the tool removed the
        document without naming one).

    Returns
    -------
    array of shape (n_docs,), dtype int64
        Position of the kept document each document is represented by; a kept document
        points to itself, a removed one without representative to -1.

    Raises
    ------
    ValueError
        If a removed id or a representative id is not in ``ids``, or a representative is
        itself removed.
    """
    index = pd.Index(ids)
    rep = np.arange(len(ids), dtype=np.int64)
    removed_at = index.get_indexer(removed["id"])
    rep_at = index.get_indexer(removed["representative"])
    named = removed["representative"].notna().to_numpy()
    if (removed_at < 0).any() or (rep_at[named] < 0).any():
        raise ValueError("removed table names ids that are not in the corpus")
    rep[removed_at] = np.where(named, rep_at, -1)
    if (rep[rep_at[named]] != rep_at[named]).any():
        raise ValueError("a representative is itself removed")
    return rep


def dedup_quality(
    pairs: pd.DataFrame, representative: np.ndarray, threshold: float, cluster: np.ndarray | None = None
) -> dict:
    """Pair recall, removal precision, over-merge rate and missed duplicates of one run.

    Parameters
    ----------
    pairs : pandas.DataFrame
        The ground truth from :func:`similar_pairs` at a threshold ``<= threshold``; pairs
        below ``threshold`` are ignored.
    representative : array of shape (n_docs,), dtype int64
        From :func:`final_representatives`.
    threshold : float
    cluster : array of shape (n_docs,), optional
        A cluster label per document (any integers); adds ``cluster_recall``.

    Returns
    -------
    dict
        ``pairs`` (true pairs), ``pair_recall``, ``removed``, ``removal_precision``,
        ``over_merge_rate`` (floats in [0, 1], NaN when their denominator is 0),
        ``missed_duplicates`` (kept documents with a kept document at the threshold), and
        the counts behind the rates: ``pairs_together``, ``removed_precise``,
        ``removed_over_merged``.
    """
    pairs = pairs[pairs.jaccard >= threshold]
    left, right = pairs.left.to_numpy(), pairs.right.to_numpy()
    n = len(representative)
    kept = representative == np.arange(n)
    removed = np.flatnonzero(~kept)
    # documents removed without a representative (-1) are with no one
    together = (representative[left] == representative[right]) & (representative[left] >= 0)
    # a removed document is precise when (document, representative) is a true pair
    rep = representative[removed]
    keys = np.minimum(removed, rep) * n + np.maximum(removed, rep)
    precise = (rep >= 0) & np.isin(keys, left * n + right)
    has_kept_match = np.zeros(n, dtype=bool)
    has_kept_match[left[kept[right]]] = True
    has_kept_match[right[kept[left]]] = True
    both_kept = kept[left] & kept[right]
    missed = np.union1d(left[both_kept], right[both_kept])
    over_merged = ~has_kept_match[removed]
    result = {
        "pairs": len(pairs),
        "pair_recall": _share(together),
        "removed": len(removed),
        "removal_precision": _share(precise),
        "over_merge_rate": _share(over_merged),
        "missed_duplicates": len(missed),
        "pairs_together": int(together.sum()),
        "removed_precise": int(precise.sum()),
        "removed_over_merged": int(over_merged.sum()),
    }
    if cluster is not None:
        result["cluster_recall"] = _share(cluster[left] == cluster[right])
    return result


def _share(flags: np.ndarray) -> float:
    return float(flags.mean()) if len(flags) else float("nan")
