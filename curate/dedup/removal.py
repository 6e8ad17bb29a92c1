"""Removal: drop (or select) listed documents, partition by partition, keeping input order.

The listed keys (``_doc``, int64) are sorted across the cluster and written once to a folder
of Parquet files with small row groups. Each document partition reads only the row groups
that overlap its own key range (Parquet statistics), so no process holds the whole list, the
documents are never shuffled, and the output keeps the input's order.
"""

import dask.dataframe as dd
import numpy as np
import pyarrow.parquet as pq

from curate.io.read import DOC

_ROW_GROUP = 1 << 16


def write_keys(keys: dd.Series, path: str):
    """Lazily write ``_doc`` keys (int64, any order, repeats dropped) sorted into the folder ``path``.

    Sorting range-partitions the keys (equal keys land in one partition), so repeats are
    dropped partition by partition and file ``part.i`` holds smaller keys than ``part.i+1``.

    Returns
    -------
    dask collection
        The write; compute it (with other work, to share reads).
    """
    ordered = keys.rename(DOC).to_frame().sort_values(DOC)
    unique = ordered.map_partitions(lambda part: part.drop_duplicates(), meta=ordered._meta)
    return unique.to_parquet(path, write_index=False, row_group_size=_ROW_GROUP, compute=False)


def drop_keys(docs: dd.DataFrame, keys_path: str) -> dd.DataFrame:
    """Documents whose ``_doc`` is not in the key file at ``keys_path`` (an anti-join).

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        With a ``_doc`` column (int64).
    keys_path : str
        Folder written by :func:`write_keys` (or any Parquet data with a ``_doc`` column).

    Returns
    -------
    dask.dataframe.DataFrame
        Same columns and partitions as ``docs``, listed rows left out.
    """
    return docs.map_partitions(_filter_partition, keys_path, False, meta=docs._meta)


def select_keys(docs: dd.DataFrame, keys_path: str) -> dd.DataFrame:
    """Documents whose ``_doc`` is in the key file at ``keys_path`` (a semi-join); see :func:`drop_keys`."""
    return docs.map_partitions(_filter_partition, keys_path, True, meta=docs._meta)


def _filter_partition(part, keys_path, listed):
    if len(part) == 0:
        return part
    doc = part[DOC].to_numpy()
    lo, hi = int(doc.min()), int(doc.max())
    keys = pq.read_table(keys_path, columns=[DOC], filters=[(DOC, ">=", lo), (DOC, "<=", hi)])[DOC].to_numpy()
    return part[np.isin(doc, keys) == listed]
