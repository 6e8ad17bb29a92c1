"""Removal: drop (or select) listed documents, partition by partition, keeping input order.

The listed keys (``_doc``, int64) are sorted across the cluster and written once to a folder
of Parquet files with small row groups. Each document partition reads only the row groups
that overlap its own key range (Parquet statistics), so no process holds the whole list, the
documents are never shuffled, and the output keeps the input's order.
"""

import dask
import dask.dataframe as dd
import numpy as np
import pyarrow.parquet as pq

from curate.backend import to_host, to_parquet
from curate.io.read import DOC

_ROW_GROUP = 1 << 16
_SORTED_ROWS = 4_000_000  # rows per sorted partition: a few hundred MB of group table at most


def sort_by_doc(frame: dd.DataFrame, by: list[str] | None = None, rows_per_partition: int = _SORTED_ROWS) -> dd.DataFrame:
    """``frame`` range-partitioned on ``_doc`` and sorted by ``by`` (default ``[_doc]``) in each partition.

    Dask's own ``sort_values`` hangs here when its input is a ``concat`` (dask 2026.7), so the
    divisions are chosen as it would: one pass computes quantiles of ``_doc`` per partition
    (33 values each, a few KB in all), the client merges them into about
    ``len / rows_per_partition`` ranges, and ``set_index`` moves each row to its range.
    Equal keys land in one partition. ``frame`` is computed twice (once for the quantiles), so
    give it a cheap input, such as a stage read back from disk; a frame of one partition is
    only sorted.

    Returns
    -------
    dask.dataframe.DataFrame
        Same columns, ``_doc`` first; partition ``i`` holds smaller keys than ``i + 1``.
    """
    by = by or [DOC]
    if frame.npartitions == 1:  # already one range: no pass for the divisions, nothing to move
        frame = frame[[DOC, *(c for c in frame.columns if c != DOC)]]
        return frame.map_partitions(lambda part: part.sort_values(by, kind="stable", ignore_index=True), meta=frame._meta)
    samples = dask.compute(*[dask.delayed(_quantiles)(part) for part in frame[DOC].to_delayed()])
    samples = [(n, q) for n, q in samples if n]
    if not samples:
        return frame
    total = sum(n for n, _ in samples)
    points = np.concatenate([q for _, q in samples])
    parts = max(1, min(total // rows_per_partition, len(points) - 1))
    divisions = np.unique(np.quantile(points, np.linspace(0, 1, parts + 1), method="nearest"))
    divisions = [int(d) for d in (divisions if len(divisions) > 1 else np.repeat(divisions, 2))]
    ordered = frame.set_index(DOC, divisions=divisions).reset_index()
    return ordered.map_partitions(lambda part: part.sort_values(by, kind="stable", ignore_index=True), meta=ordered._meta)


def _quantiles(keys) -> tuple[int, np.ndarray]:
    keys = to_host(keys).to_numpy()
    # Both ends are included, so the divisions cover every key.
    return len(keys), (np.quantile(keys, np.linspace(0, 1, 33), method="nearest") if len(keys) else keys)


def write_keys(keys: dd.DataFrame, path: str):
    """Lazily write ``keys`` sorted by ``_doc`` (int64, any order, repeats dropped) into the folder ``path``.

    Parameters
    ----------
    keys : dask.dataframe.DataFrame
        A ``_doc`` column, and any columns to return with the selected documents (see
        :func:`select_keys`); of repeated keys the first row stays.
    path : str

    Returns
    -------
    dask collection
        The write; compute it (with other work, to share reads).
    """
    ordered = sort_by_doc(keys)
    unique = ordered.map_partitions(lambda part: part.drop_duplicates(DOC, ignore_index=True), meta=ordered._meta)
    return to_parquet(unique, path, row_group_size=_ROW_GROUP)


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


def select_keys(docs: dd.DataFrame, keys_path: str, columns: tuple[str, ...] = ()) -> dd.DataFrame:
    """Documents whose ``_doc`` is in the key file at ``keys_path`` (a semi-join); see :func:`drop_keys`.

    Parameters
    ----------
    columns : tuple of str, default=()
        Columns of the key file to add to the selected documents (a join without a shuffle:
        each partition reads the key rows of its own ``_doc`` range). With columns the
        partitions are pandas, whatever the backend: use it for small selections that the host
        works on.
    """
    if not columns:
        return docs.map_partitions(_filter_partition, keys_path, True, meta=docs._meta)
    meta = _join_partition(to_host(docs._meta), keys_path, list(columns))
    return docs.map_partitions(_join_partition, keys_path, list(columns), meta=meta)


def _keys_in_range(keys_path, part, columns):
    doc = part[DOC].to_numpy()
    lo, hi = int(doc.min()), int(doc.max())
    return doc, pq.read_table(keys_path, columns=[DOC, *columns], filters=[(DOC, ">=", lo), (DOC, "<=", hi)])


def _filter_partition(part, keys_path, listed):
    if len(part) == 0:
        return part
    doc, keys = _keys_in_range(keys_path, part, [])
    return part[np.isin(doc, keys[DOC].to_numpy()) == listed]


def _join_partition(part, keys_path, columns):
    part = to_host(part)
    if len(part) == 0:
        keys = pq.ParquetDataset(keys_path).schema.empty_table().select([DOC, *columns])
    else:
        _, keys = _keys_in_range(keys_path, part, columns)
    return part.merge(keys.to_pandas(), on=DOC)
