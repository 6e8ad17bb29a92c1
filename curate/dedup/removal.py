"""Removal: drop (or select) listed documents, partition by partition, keeping input order.

The removed keys (``_doc``, int64) are written once, sorted, to a Parquet file with small row
groups. Each document partition reads only the row groups that overlap its own key range
(Parquet statistics), so no task holds the whole list, the documents are never shuffled,
and the output keeps the input's order.
"""

import dask.dataframe as dd
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curate.io.read import DOC

_ROW_GROUP = 1 << 16


def write_keys(keys: np.ndarray, path: str) -> None:
    """Write ``_doc`` keys (int64, any order, repeats dropped) sorted into a Parquet file at ``path``."""
    table = pa.table({DOC: np.unique(np.asarray(keys, dtype=np.int64))})
    pq.write_table(table, path, row_group_size=_ROW_GROUP)


def drop_keys(docs: dd.DataFrame, keys_path: str) -> dd.DataFrame:
    """Documents whose ``_doc`` is not in the key file at ``keys_path`` (an anti-join).

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        With a ``_doc`` column (int64).
    keys_path : str
        File written by :func:`write_keys`.

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
    keys = pq.read_table(keys_path, filters=[(DOC, ">=", lo), (DOC, "<=", hi)])[DOC].to_numpy()
    return part[np.isin(doc, keys) == listed]
