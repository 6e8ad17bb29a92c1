"""The duplicate-group table that exact and fuzzy dedup both produce.

One row per document in a group of two or more: ``_doc`` (int64), ``_rep`` (int64, the kept
document's ``_doc``; equal to ``_doc`` for the representative itself), ``_id`` and ``_rep_id``
(the user's ids of both, dtype of the id column) and ``_jaccard`` (float64, the Jaccard
similarity of the document's shingle set with its representative's: 1.0 for exact groups and
representatives, NaN for fuzzy groups formed without verification).
"""

import pandas as pd


def group_frame(doc, rep, doc_id, rep_id, jaccard):
    """Group table from aligned series (any backend: built with the series' frame type); ``jaccard``
    may also be a scalar or a float64 array of the same length."""
    frame_type = doc.to_frame().__class__
    return frame_type(
        {"_doc": doc, "_rep": rep, "_id": doc_id, "_rep_id": rep_id, "_jaccard": jaccard}, index=doc.index
    )


def group_meta(id_like) -> pd.DataFrame:
    """Empty group table whose id columns have the dtype of ``id_like`` (a series)."""
    empty = id_like.iloc[:0]
    doc = empty.index.to_series().astype("int64")
    return group_frame(doc, doc, empty, empty, doc.astype("float64"))
