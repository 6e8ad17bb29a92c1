"""Write documents (Parquet or JSONL part files) and the small result tables."""

import os
from pathlib import Path

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from curate.backend import to_arrow, to_host
from curate.io.read import DOC

ROW_GROUP_ROWS = 1 << 20


def write_documents(docs: dd.DataFrame, path: str, fmt: str, schema: pa.Schema | None = None) -> dd.Scalar:
    """Lazily write a document frame (without ``_doc``) as ``part.N.parquet`` / ``part.N.jsonl``.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
    path : str
        Output directory (local path or fsspec URL); created if needed.
    fmt : {"parquet", "jsonl"}
        Parquet files carry a plain Arrow schema (no pandas metadata, which pandas cannot read
        back for nested Arrow columns); JSONL is UTF-8, one object per line.
    schema : pyarrow.Schema, optional
        Parquet: the files' schema (else inferred per part, which for an empty part of object
        columns is null-typed).

    Returns
    -------
    dask Scalar, int64
        The number of rows written, once computed (with other work, to share the reads).

    Raises
    ------
    ValueError
        If ``fmt`` is unknown.
    """
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"unknown output format {fmt!r}; use 'parquet' or 'jsonl'")
    fs, root = url_to_fs(path)
    fs.makedirs(root, exist_ok=True)
    docs = docs.drop(columns=[DOC]) if DOC in docs.columns else docs
    return docs.map_partitions(_write_part, fs, root, fmt, schema, meta=(None, "int64")).sum()


def _write_part(part: pd.DataFrame, fs, root: str, fmt: str, schema, partition_info=None) -> int:
    with fs.open(f"{root}/part.{partition_info['number']}.{fmt}", "wb") as f:
        if fmt == "parquet":
            pq.write_table(to_arrow(part, schema), f)
        else:
            to_host(part).to_json(f, orient="records", lines=True, force_ascii=False)
    return len(part)


def write_table(source: str, path: str, columns: list[str]) -> None:
    """Copy ``columns`` of a Parquet folder written by Dask into one file, byte-identical for identical rows.

    Parameters
    ----------
    source : str
        Local folder of ``part.N.parquet`` files, read in ``N`` order.
    path : str
        The file to write (zstd); written under a temporary name and renamed.
    columns : list of str

    Row groups have a fixed number of rows (``ROW_GROUP_ROWS``), so the bytes depend only on the
    rows, never on how they were partitioned, and at most about two row groups are in memory.
    """
    files = sorted(Path(source).glob("part.*.parquet"), key=lambda f: int(f.name.split(".")[1]))
    schema = pq.read_schema(files[0]).remove_metadata()
    schema = pa.schema([schema.field(c) for c in columns])
    tmp, pending, rows = f"{path}.tmp", [], 0
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for file in files:
            for batch in pq.ParquetFile(file).iter_batches(batch_size=ROW_GROUP_ROWS, columns=columns):
                pending.append(batch.cast(schema))  # also drops per-file metadata
                rows += batch.num_rows
                while rows >= ROW_GROUP_ROWS:
                    table = pa.Table.from_batches(pending, schema)
                    writer.write_table(table.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
                    pending, rows = table.slice(ROW_GROUP_ROWS).to_batches(), rows - ROW_GROUP_ROWS
        if rows:
            writer.write_table(pa.Table.from_batches(pending, schema), row_group_size=ROW_GROUP_ROWS)
    os.replace(tmp, path)


def count_rows(docs: dd.DataFrame):
    """Delayed total row count (to compute together with a write)."""
    return docs.map_partitions(len, meta=(None, "int64")).sum()

