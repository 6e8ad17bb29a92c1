"""Rejected records (``--on-error skip``): repeated ids, and the ``OUT/rejected/`` table.

A skip-mode read (:func:`curate.io.read_documents`) keeps the records it cannot read as rows
with ``_kind`` set; :func:`curate.io.read.split_rejected` separates them from the documents.
Ids are checked over the whole input, so a repeated id is found after the read: every
occurrence after the first (in input order) is marked rejected here the same way.
"""

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from curate.backend import host_step, on_host, shown, to_arrow, to_host
from curate.io.lookup import locate
from curate.io.read import arrow_typed
from curate.io.records import json_text, large_offsets, python_rows
from curate.schema import DOC, POSITION_BITS, REJECT_COLUMNS

REJECTED_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("line", pa.int64()),
        ("field", pa.string()),
        ("kind", pa.string()),
        ("reason", pa.string()),
        ("record", pa.binary()),
    ]
)
_ROW_GROUP = 1 << 16


def repeated_ids_error(docs: dd.DataFrame, repeated: pd.Series, id_field: str, inputs) -> ValueError:
    """The error for ids that appear more than once, naming the five smallest and where each occurs.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        The documents (computed again for the examples' keys).
    repeated : pandas.Series
        Occurrences (int) indexed by the repeated ids.
    """
    examples = sorted(repeated.index)[:5]
    rows = on_host(docs[docs[id_field].isin(examples)][[DOC, id_field]]).compute().sort_values(DOC)
    where = dict(zip(rows[DOC].tolist(), locate(inputs, rows[DOC].tolist())))
    listed = [
        f"{shown(value)} ({', '.join(where[k] for k in rows[DOC][rows[id_field] == value])})" for value in examples
    ]
    return ValueError(
        f"{len(repeated)} id(s) in field {id_field!r} appear more than once, e.g. {', '.join(listed)}; ids must be "
        "unique: --id-field names another field, or --on-error skip keeps each id's first record and lists the "
        "later ones in OUT/rejected/"
    )


def reject_repeated_ids(docs: dd.DataFrame, repeated: pd.Index, id_field: str, names, path: str) -> dd.DataFrame:
    """Mark every occurrence of a repeated id after the first (in input order) as rejected.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        A skip-mode read (with :data:`curate.schema.REJECT_COLUMNS`).
    repeated : pandas.Index
        Ids that appear more than once among the documents that are not rejected.
    id_field : str
    names : sequence of str
        Source names by file index (:func:`curate.io.files.source_names`).
    path : str
        Where to write the marked keys and reasons (Parquet, sorted by ``_doc``).

    Returns
    -------
    dask.dataframe.DataFrame
        ``docs`` with those records' ``_kind`` = "duplicate-id", ``_field``, ``_reason`` (naming
        the first occurrence's file and line) and ``_record`` (the row as a JSON object) set.
    """
    rows = on_host(docs[docs["_kind"].isna() & docs[id_field].isin(list(repeated))][[DOC, id_field, "_line"]]).compute()
    rows = rows.sort_values(DOC, kind="stable")
    first = rows.drop_duplicates(id_field).set_index(id_field)
    later = rows[rows.duplicated(id_field)]
    first_doc, first_line = (
        first[DOC].reindex(later[id_field]).to_numpy(),
        first["_line"].reindex(later[id_field]).to_numpy(),
    )
    reasons = [
        f"duplicate id {value!r}: first at {names[doc >> POSITION_BITS]}:{line}"
        for value, doc, line in zip(later[id_field].tolist(), first_doc.tolist(), first_line.tolist())
    ]
    table = pa.table({DOC: later[DOC].to_numpy(np.int64), "reason": pa.array(reasons, pa.string())})
    pq.write_table(table, path, row_group_size=_ROW_GROUP)
    return mark_repeated_ids(docs, path, id_field)


def mark_repeated_ids(docs: dd.DataFrame, path: str, id_field: str) -> dd.DataFrame:
    """``docs`` with the records listed at ``path`` (by :func:`reject_repeated_ids`) marked rejected."""
    return docs.map_partitions(_mark, path, id_field, meta=docs._meta)


def _mark(part: pd.DataFrame, path: str, id_field: str) -> pd.DataFrame:
    if len(part) == 0:
        return part
    doc = part[DOC].to_numpy()
    listed = pq.read_table(path, filters=[(DOC, ">=", int(doc.min())), (DOC, "<=", int(doc.max()))]).to_pandas()
    return mark_listed(part, listed, id_field)


def later_occurrences(docs: dd.DataFrame, id_field: str) -> dd.DataFrame:
    """Every occurrence of an id after its first (in ``_doc`` order), and every null id.

    One shuffle of the keys and ids, not the texts: the rows of an id meet in one partition.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        A document frame (``_doc`` and ``id_field``; pandas or cudf partitions).
    id_field : str

    Returns
    -------
    dask.dataframe.DataFrame
        Pandas partitions: ``_doc`` (int64), ``id_field`` and ``_first`` (int64: the ``_doc`` of
        the id's first occurrence; -1 for a null id). Empty when every id is unique and set.
    """
    pairs = docs[[DOC, id_field]]
    meta = to_host(pairs._meta).assign(_first=pd.Series(dtype="int64"))
    return pairs.shuffle(id_field).map_partitions(_later, id_field, meta=meta, token=host_step(_later))


def _later(part, id_field: str) -> pd.DataFrame:
    part = to_host(part).sort_values(DOC, kind="stable")
    ids = part[id_field]
    later = ids.isna() | ids.duplicated()
    first = part[~later].set_index(id_field)[DOC]
    found = part[later]
    return found.assign(_first=found[id_field].map(first).fillna(-1).to_numpy(np.int64))


def mark_listed(part: pd.DataFrame, listed: pd.DataFrame, id_field: str) -> pd.DataFrame:
    """A partition of a skip-mode read with the rows ``listed`` names marked rejected as repeated ids.

    ``listed`` holds ``_doc`` (int64) and ``reason`` (str); each marked row gets ``_kind`` =
    "duplicate-id", ``_field`` = ``id_field``, its reason, and ``_record`` (the row as a JSON
    object where the read kept no line)."""
    doc = part[DOC].to_numpy()
    hit = np.isin(doc, listed[DOC].to_numpy())
    if not hit.any():
        return part
    reasons = np.full(len(doc), None, dtype=object)
    reasons[hit] = listed.set_index(DOC)["reason"].reindex(doc[hit]).to_numpy()
    # Series.where, not .loc[rows, column] = values: cudf sends such values through
    # cupy.asarray, which has no object (string) dtype; where takes host values on both.
    part = part.assign(
        _kind=part["_kind"].where(~hit, "duplicate-id"),
        _field=part["_field"].where(~hit, id_field),
        _reason=part["_reason"].where(~hit, reasons),
    )
    if "_record" not in part.columns:  # a device read leaves it behind (curate.io.read._frame)
        return part
    # The record: its line as read where the read kept it (records=True), else the row as JSON.
    record = part["_record"].to_numpy(dtype=object)
    missing = hit & part["_record"].isna().to_numpy()
    fields = [c for c in part.columns if c != DOC and c not in REJECT_COLUMNS]
    record[missing] = [json_text(row).encode() for row in python_rows(to_arrow(part.loc[missing, fields]))]
    part["_record"] = pd.array(record, dtype=part["_record"].dtype)
    return part


def rejected_rows(rejected: dd.DataFrame, names) -> dd.DataFrame:
    """The ``OUT/rejected/`` table: source, line, field, kind, reason, record (see the README).

    ``line`` is the JSONL line (1-based) or Parquet row (0-based); ``record`` the line's bytes as
    read (JSONL) or the row as a JSON object (Parquet rows, repeated ids).
    """
    # record as the reader holds it (large_binary: a partition's may pass 2 GiB); the write casts
    # it to REJECTED_SCHEMA's binary, in pieces where one array would pass 2 GiB.
    schema = pa.schema([f.with_type(large_offsets(f.type)) for f in REJECTED_SCHEMA])
    meta = schema.empty_table().to_pandas(types_mapper=arrow_typed)
    return rejected.map_partitions(_rows, np.asarray(names, dtype=object), meta=meta)


def _rows(part: pd.DataFrame, names: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "source": names[part[DOC].to_numpy() >> POSITION_BITS],
            "line": part["_line"].to_numpy(),
            "field": part["_field"].to_numpy(),
            "kind": part["_kind"].to_numpy(),
            "reason": part["_reason"].to_numpy(),
            "record": part["_record"].array,
        }
    )


__all__ = ["REJECTED_SCHEMA", "reject_repeated_ids", "rejected_rows", "repeated_ids_error"]
