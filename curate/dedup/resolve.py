"""Resolving the exact and fuzzy group tables into the run's result tables.

Fuzzy dedup runs on what exact dedup kept, so a document is in at most one exact and one fuzzy
group, and a chain is at most two long: an exact copy whose representative then went as a near
duplicate points to that document's (kept) representative.
"""

import dask.dataframe as dd

from curate.dedup.groups import group_meta
from curate.dedup.keys import in_order, uniform
from curate.dedup.stages import Stage, build_now
from curate.schema import DOC

REMOVED_COLUMNS = ["id", "kind", "representative", "jaccard"]


class AccountingError(RuntimeError):
    """The results do not account for every input document exactly once: one kept or removed, a
    representative kept (raised by :func:`curate.pipeline.check_accounting` and
    :meth:`curate.api.Deduplication.compute`)."""


def empty_groups(docs: dd.DataFrame, id_field: str) -> dd.DataFrame:
    """An empty group table (one partition) in ``docs``' backend, with its id dtype."""
    # from_pandas takes cudf frames too (dask-cudf registers it), so the backend stays the docs'.
    return dd.from_pandas(group_meta(docs[id_field]._meta), npartitions=1)


def removed_table(exact: dd.DataFrame, fuzzy: dd.DataFrame) -> dd.DataFrame:
    """The removed documents, from the exact and fuzzy group tables (lazy, distributed).

    Fuzzy dedup runs on what exact dedup kept, so a chain is at most two long: an exact
    duplicate whose representative was then removed as a fuzzy duplicate points to that
    fuzzy representative (identical text, so the similarity carries over).

    Returns
    -------
    dask.dataframe.DataFrame
        ``_doc``, ``id``, ``kind`` ("exact"/"fuzzy"), ``representative`` (kept id), ``jaccard``
        (float64, with the representative), one row per removed document (unordered:
        :func:`resolve` orders it).
    """
    fuzzy_removed = fuzzy[fuzzy._doc != fuzzy._rep]
    exact_removed = exact[exact._doc != exact._rep]
    # Inner join and anti-join rather than one left join: a left join would turn integer ids
    # into floats where there is no match. The anti-join joins a flag (cudf has no indicator).
    onward = fuzzy_removed[[DOC, "_rep_id", "_jaccard"]].rename(
        columns={DOC: "_rep", "_rep_id": "_onward", "_jaccard": "_onward_jaccard"}
    )
    moved = exact_removed.drop(columns="_jaccard").merge(onward, on="_rep")
    stayed = _left_only(exact_removed, onward[["_rep"]], "_rep")
    # Both kinds' rows first meet in in_order's shuffle, which makes each piece uniform (keys.align).
    return dd.concat(
        [
            _removed_rows(moved, "exact", "_onward", "_onward_jaccard"),
            _removed_rows(stayed, "exact", "_rep_id", "_jaccard"),
            _removed_rows(fuzzy_removed, "fuzzy", "_rep_id", "_jaccard"),
        ]
    )


def duplicates_table(exact: dd.DataFrame, fuzzy: dd.DataFrame, removed: dd.DataFrame) -> dd.DataFrame:
    """Every member of every duplicate group, and whether it is kept (lazy, distributed).

    Parameters
    ----------
    exact, fuzzy : dask.dataframe.DataFrame
        The group tables.
    removed : dask.dataframe.DataFrame
        :func:`removed_table` of the same groups (or that table read back from disk).

    Returns
    -------
    dask.dataframe.DataFrame
        ``_doc``, ``id``, ``group`` (the group's representative id), ``kind``, ``kept`` (bool: in
        the output), ``jaccard`` (float64, with the group's representative), one row per document
        per group it belongs to (unordered).
    """
    # The merge below shuffles both kinds' rows together: each piece uniform first (keys.uniform).
    members = dd.concat([uniform(exact.assign(kind="exact")), uniform(fuzzy.assign(kind="fuzzy"))])
    members = members.merge(removed[[DOC]].assign(_gone=True), on=DOC, how="left")
    duplicates = members.assign(kept=~members._gone.fillna(False).astype(bool))
    duplicates = duplicates[[DOC, "_id", "_rep_id", "kind", "kept", "_jaccard"]]
    return duplicates.rename(columns={"_id": "id", "_rep_id": "group", "_jaccard": "jaccard"})


def resolve(
    exact: dd.DataFrame, fuzzy: dd.DataFrame, divisions: tuple[int, ...], stage: Stage = build_now, locate=None
) -> tuple[dd.DataFrame, dd.DataFrame]:
    """The removed and duplicates tables of the exact and fuzzy group tables, in ``_doc`` order.

    Parameters
    ----------
    exact, fuzzy : dask.dataframe.DataFrame
        The group tables (:mod:`curate.dedup.groups`).
    divisions : tuple of int
        The documents' divisions (:func:`curate.dedup.keys.doc_divisions`): each table is put in
        the partitions of the documents its rows belong to and sorted there
        (:func:`curate.dedup.keys.in_order`), so read in partition order it is in input order.
    stage : callable, default=:func:`curate.dedup.stages.build_now`
        Runs the stages ``removed`` and ``duplicates`` (see :mod:`curate.dedup.stages`).
    locate : callable, optional
        Applied to the duplicates table before it is ordered (``curate dedup`` adds where each
        member lies in the input files).

    Returns
    -------
    removed, duplicates : dask.dataframe.DataFrame
        :func:`removed_table` and :func:`duplicates_table`, duplicates ordered by ``_doc`` then ``kind``.
    """
    removed = stage("removed", {}, lambda: in_order(removed_table(exact, fuzzy), divisions))
    members = lambda: (locate or (lambda frame: frame))(duplicates_table(exact, fuzzy, removed))  # noqa: E731
    duplicates = stage("duplicates", {}, lambda: in_order(members(), divisions, by=[DOC, "kind"]))
    return removed, duplicates


def coalesce(groups: dd.DataFrame, rows: int, rows_per_partition: int = 1_000_000) -> dd.DataFrame:
    """``groups`` in ``ceil(rows / rows_per_partition)`` partitions (at least one) if it has more.

    A group table comes out of a shuffle with as many partitions as the input, mostly empty when
    few documents are duplicates; joined and sorted as they are, each costs a task per partition
    in every step. Adjacent partitions are concatenated: nothing is shuffled.
    """
    wanted = max(1, -(-rows // rows_per_partition))
    return groups.repartition(npartitions=wanted) if groups.npartitions > wanted else groups


def _left_only(left: dd.DataFrame, right: dd.DataFrame, on: str) -> dd.DataFrame:
    """Rows of ``left`` whose ``on`` is not in ``right`` (an anti-join)."""
    flagged = left.merge(right.drop_duplicates().assign(_hit=True), on=on, how="left")
    return flagged[~flagged._hit.fillna(False).astype(bool)].drop(columns="_hit")


def _removed_rows(groups: dd.DataFrame, kind: str, representative: str, jaccard: str) -> dd.DataFrame:
    rows = groups[[DOC, "_id", representative, jaccard]].rename(
        columns={"_id": "id", representative: "representative", jaccard: "jaccard"}
    )
    return rows.assign(kind=kind)[[DOC, *REMOVED_COLUMNS]]


__all__ = [
    "REMOVED_COLUMNS",
    "AccountingError",
    "coalesce",
    "duplicates_table",
    "empty_groups",
    "removed_table",
    "resolve",
]
