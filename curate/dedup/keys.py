"""Document keys, and joins of small keyed tables to the documents that never move the documents.

Every document has ``_doc`` (int64), a key that is unique and increases in input order. A
document frame is indexed by it with known divisions: partition ``i`` holds the keys in
``[divisions[i], divisions[i + 1])``. :func:`curate.io.read_documents` makes such frames (keys
from the file and byte offset), and :func:`add_doc_keys` makes them from any Dask DataFrame.

A table of keys (duplicates to drop, candidates to select) is small next to the documents. To
join it to them, :func:`align` moves its rows into the partitions of the documents whose range
holds them (a shuffle of the keys only), and each document partition is then joined with its own
share where it lies: the texts never travel, the output keeps the documents' partitions and
order, and the graph is built without computing anything.
"""

import dask.dataframe as dd
import numpy as np
import pandas as pd
from dask.dataframe.dask_expr._collection import new_collection
from dask.dataframe.dask_expr._expr import ArrowStringConversion

from curate.backend import backend_of, stable_sort, to_host
from curate.schema import DOC, POSITION_BITS  # a key is (file or partition) << 40 | position

_TARGET = "_target_partition"  # align()'s own column: the partition a key row goes to


def add_doc_keys(docs: dd.DataFrame) -> dd.DataFrame:
    """``docs`` with ``_doc`` keys, indexed by them, for frames that did not come from :func:`curate.io.read_documents`.

    The key of row ``r`` of partition ``p`` is ``p << 40 | r``: unique, increasing in the
    frame's order, and the same for the same partitioning.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        Any partitions (pandas or cudf), any index; at most 2**23 partitions of at most 2**40 rows.

    Returns
    -------
    dask.dataframe.DataFrame
        ``docs`` with column ``_doc`` (int64) first, indexed by it (the old index is dropped), with
        known divisions ``(0, 1 << 40, ..., (npartitions << 40) - 1)``.

    Raises
    ------
    ValueError
        If ``docs`` already has a ``_doc`` column.
    """
    if DOC in docs.columns:
        raise ValueError(f"docs already has a {DOC!r} column; curate's keys are made by add_doc_keys or read_documents")
    return with_doc_keys(fixed_partitions(docs))


def require_columns(docs: dd.DataFrame, columns: list[str]) -> None:
    """Raise ValueError naming those of ``columns`` that ``docs`` lacks (and where ``_doc`` comes from)."""
    missing = [c for c in columns if c not in docs.columns]
    if missing:
        keys = f"; {DOC!r} comes from curate.add_doc_keys(frame) or curate.read_documents" if DOC in missing else ""
        raise ValueError(f"docs has no column {', '.join(map(repr, missing))} (columns: {list(docs.columns)}){keys}")


def with_doc_keys(docs: dd.DataFrame) -> dd.DataFrame:
    """:func:`add_doc_keys` of a frame whose partitions are already fixed (:func:`fixed_partitions`)."""
    with_keys = docs.map_partitions(
        _add_keys, meta=_add_keys(docs._meta, None), partition_info=True, clear_divisions=True
    )
    return keyed(
        with_keys,
        tuple(i << POSITION_BITS for i in range(docs.npartitions)) + ((docs.npartitions << POSITION_BITS) - 1,),
    )


def fixed_partitions(docs: dd.DataFrame) -> dd.DataFrame:
    """``docs`` with its partitions fixed as they are now: later steps cannot merge them.

    Dask may merge a Parquet read's files into fewer partitions once the steps after it read
    only some columns (dask-expr's fused reads), and repartitions the other inputs of a
    partition-wise step to match. Keys made from partition numbers, and tables aligned to
    them, would then point at other rows, or at partitions that are never made ("lost
    dependencies"). Cutting the expression here (:meth:`~dask.dataframe.DataFrame.to_delayed`,
    which optimizes the graph but computes nothing) fixes the partitioning for everything after.
    """
    frame = dd.from_delayed(docs.to_delayed(optimize_graph=True), meta=docs._meta, verify_meta=False)
    # Not Dask's string conversion (on by default for new collections, a step wrapped around the
    # frame): it would turn object columns (lists, mixed values) into their text, and such a
    # column rides along unchanged. Unwrapped, not switched off in dask.config, which is the
    # whole process's: other threads' frames were made without it meanwhile, and two threads
    # switching it back in turn left it off for good.
    if isinstance(frame.expr, ArrowStringConversion):
        frame = new_collection(frame.expr.frame)
    return frame


def keyed(frame: dd.DataFrame, divisions: tuple[int, ...]) -> dd.DataFrame:
    """A document frame from ``frame``, whose partition ``i`` holds (in order) the ``_doc`` keys
    in ``[divisions[i], divisions[i + 1])``: indexed by ``_doc``, with those divisions. Nothing is
    checked or computed (e.g. a document frame written to Parquet and read back)."""
    # rename_axis(index=None), not rename_axis(None): dask_cudf's takes index= only.
    return frame.set_index(DOC, drop=False, sorted=True, divisions=divisions).rename_axis(index=None)


def row_keys(part, partition_info) -> np.ndarray:
    """The ``_doc`` keys :func:`add_doc_keys` gives the rows of a partition (int64, ``number << 40 | row``)."""
    number = 0 if partition_info is None else partition_info["number"]
    return (np.int64(number) << POSITION_BITS) + np.arange(len(part), dtype=np.int64)


def _add_keys(part, partition_info):
    part = part.assign(**{DOC: row_keys(part, partition_info)})
    return part[[DOC, *(c for c in part.columns if c != DOC)]]


def doc_divisions(docs: dd.DataFrame) -> tuple[int, ...]:
    """The key range of each partition of a document frame (its divisions).

    Raises
    ------
    ValueError
        If ``docs`` has no ``_doc`` column or its divisions are unknown (a frame not made by
        :func:`curate.io.read_documents` or :func:`add_doc_keys`, or one that was shuffled).
    """
    if DOC not in docs.columns:
        raise ValueError(
            f"documents need a {DOC!r} column: read them with curate.io.read_documents or key them with curate.add_doc_keys"
        )
    if not docs.known_divisions:
        raise ValueError(
            "the documents' key ranges per partition are unknown (divisions): keep the frame as "
            "curate.io.read_documents or curate.add_doc_keys made it (filters keep them; shuffles, repartitions "
            f"and concatenations do not), or drop its {DOC!r} column (docs.drop(columns={DOC!r})) to key it anew "
            "(a skip-mode read's rejected records stay rejected, named by their _line and _record)"
        )
    return docs.divisions


def align(keys: dd.DataFrame, divisions: tuple[int, ...]) -> dd.DataFrame:
    """``keys`` moved into the partitions of the documents that hold them.

    Parameters
    ----------
    keys : dask.dataframe.DataFrame
        A ``_doc`` column (int64) and any others; any partitioning.
    divisions : tuple of int
        The documents' divisions (:func:`doc_divisions`).

    Returns
    -------
    dask.dataframe.DataFrame
        The same rows in ``len(divisions) - 1`` partitions: partition ``i`` holds the rows whose
        ``_doc`` lies in the documents' partition ``i``, sorted by ``_doc``; the index is the
        partition number. Only ``keys`` is shuffled.
    """
    parts = len(divisions) - 1
    starts = np.asarray(divisions[:-1], dtype=np.int64)
    keys = uniform(keys)  # the shuffle concatenates pieces of every partition
    meta = keys._meta.assign(**{_TARGET: pd.Series(dtype="int64")})
    numbered = keys.map_partitions(_number, starts, meta=meta, clear_divisions=True)
    # The partition number as a sorted index with divisions 0, 1, ..., parts - 1: row i goes to partition i.
    # The run's shuffle method (P2P with a client on the CPU): task shuffles cost ~n^2 tasks for n partitions.
    aligned = numbered.set_index(_TARGET, divisions=(*range(parts), parts - 1))
    return aligned.map_partitions(lambda part: stable_sort(part, DOC), meta=aligned._meta)


def _number(part, starts):
    keys = to_host(part[DOC]).to_numpy()
    return part.assign(**{_TARGET: np.searchsorted(starts, keys, side="right").astype(np.int64) - 1})


def uniform(frame: dd.DataFrame) -> dd.DataFrame:
    """``frame`` with every partition in its meta's column dtypes and with a RangeIndex (lazy).

    For frames whose partitions meet in one concat (a shuffle, ``dd.concat``) though they come
    from different steps: cudf's concat, unlike pandas', refuses columns of one name whose
    dtypes differ (one string dtype and another) and concatenates the index as a column unless
    every piece has a RangeIndex. A run removing both exact and fuzzy duplicates failed so on
    the H200 ("All columns must be the same type", where the two kinds' rows meet). The index
    is dropped: callers key rows by ``_doc``.
    """
    dtypes = dict(frame._meta.dtypes)
    return frame.map_partitions(_uniform, dtypes, meta=frame._meta.reset_index(drop=True), clear_divisions=True)


def _uniform(part, dtypes):
    differ = {name: dtype for name, dtype in dtypes.items() if part[name].dtype != dtype}
    return (part.astype(differ) if differ else part).reset_index(drop=True)


def select(
    docs: dd.DataFrame, keys: dd.DataFrame, columns: tuple[str, ...] = (), repeats: bool = False
) -> dd.DataFrame:
    """The documents whose ``_doc`` is in ``keys`` (a semi-join), with ``keys``' ``columns`` added.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        A document frame (see the module docstring).
    keys : dask.dataframe.DataFrame
        ``_doc`` (int64; repeats allowed) and ``columns``.
    columns : tuple of str, default=()
        Columns of ``keys`` to join onto the selected documents.
    repeats : bool, default=False
        With ``columns``: a document once per distinct value of ``columns`` among the rows of
        ``keys`` that name it, rather than once with the first such row. Rows that repeat a
        document and its values add nothing: verification asks for an anchor's text once per
        edge, and the text is delivered once per partition that asks.

    Returns
    -------
    dask.dataframe.DataFrame
        Same partitions as ``docs``, rows left out. Without ``columns``, in ``docs``' order; with
        them, added and indexed by ``_doc``, in ``docs``' order on pandas but any order on cudf
        (its merge does not keep row order): callers shuffle or sort the rows after.
    """
    if columns:  # joined to docs' rows, so of their kind (the API's components come from a host step)
        keys = keys.to_backend(backend_of(docs._meta))
    aligned = align(keys[[DOC, *columns]], doc_divisions(docs))
    meta = _semi(docs._meta, aligned._meta, list(columns), repeats)
    return dd.map_partitions(_semi, docs, aligned, list(columns), repeats, meta=meta, align_dataframes=False)


def drop(docs: dd.DataFrame, keys: dd.DataFrame) -> dd.DataFrame:
    """The documents whose ``_doc`` is not in ``keys`` (an anti-join); same partitions, index and order as ``docs``."""
    aligned = align(keys[[DOC]], doc_divisions(docs))
    return dd.map_partitions(_anti, docs, aligned, meta=docs._meta, align_dataframes=False)


def in_order(table: dd.DataFrame, divisions: tuple[int, ...], by: list[str] | None = None) -> dd.DataFrame:
    """``table`` (with ``_doc``) sorted by ``by`` (default ``[_doc]``, which must come first) across partitions.

    The rows go to the partitions of the documents they belong to (:func:`align`), and are sorted
    within each: reading the partitions in order reads the rows in order, without the pass over
    the data that choosing divisions by sampling takes. The index is reset.
    """
    by = by or [DOC]
    aligned = align(table, divisions)
    return aligned.map_partitions(
        lambda part: stable_sort(part, by, ignore_index=True),
        meta=aligned._meta.reset_index(drop=True),
        clear_divisions=True,
    )


def _member(part, aligned):
    return np.isin(to_host(part[DOC]).to_numpy(), to_host(aligned[DOC]).to_numpy())


def _semi(part, aligned, columns, repeats):
    if not columns:
        return part[_member(part, aligned)]
    extra = aligned[[DOC, *columns]].drop_duplicates(None if repeats else DOC)
    joined = part.merge(extra, on=DOC, how="inner")  # (see select for the order); the index is rebuilt
    joined.index = joined[DOC].values
    return joined


def _anti(part, aligned):
    return part[~_member(part, aligned)]


__all__ = [
    "DOC",
    "add_doc_keys",
    "align",
    "doc_divisions",
    "drop",
    "fixed_partitions",
    "in_order",
    "keyed",
    "select",
    "uniform",
]
