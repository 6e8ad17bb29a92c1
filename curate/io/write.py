"""Write documents (Parquet or JSONL part files) and the small result tables."""

import os

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from curate.io.read import DOC

ROW_GROUP_ROWS = 1 << 20


def write_documents(docs: dd.DataFrame, path: str, fmt: str, *, compute: bool = True):
    """Write a document frame (without ``_doc``) as ``part.N.parquet`` or ``part.N.jsonl`` files.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
    path : str
        Output directory (local path or fsspec URL); created if needed.
    fmt : {"parquet", "jsonl"}
    compute : bool, default=True
        False returns the delayed write, to be computed together with other work.

    Raises
    ------
    ValueError
        If ``fmt`` is unknown.
    """
    docs = docs.drop(columns=[DOC]) if DOC in docs.columns else docs
    if fmt == "parquet":
        os.makedirs(path, exist_ok=True)
        written = docs.map_partitions(_write_parquet_part, path, meta=(None, "int64"))
        return written.sum() if not compute else written.sum().compute()
    if fmt == "jsonl":
        return docs.to_json(os.path.join(path, "part.*.jsonl"), orient="records", lines=True, force_ascii=False, compute=compute)
    raise ValueError(f"unknown output format {fmt!r}; use 'parquet' or 'jsonl'")


def _write_parquet_part(part: pd.DataFrame, path: str, partition_info=None) -> int:
    # Written without pandas metadata: pandas cannot read back the dtype names it records for
    # Arrow nested columns, while plain Arrow schemas read fine everywhere.
    table = pa.Table.from_pandas(part, preserve_index=False).replace_schema_metadata(None)
    pq.write_table(table, os.path.join(path, f"part.{partition_info['number']}.parquet"))
    return len(part)


def write_table(frame: pd.DataFrame, path: str) -> None:
    """Write a small result table as one Parquet file, byte-identical for identical frames.

    Row groups have a fixed number of rows, so the bytes depend only on the rows, never on
    how the frame was assembled. The file is written under a temporary name and renamed.
    """
    table = pa.Table.from_pandas(frame, preserve_index=False)
    tmp = f"{path}.tmp"
    pq.write_table(table, tmp, row_group_size=ROW_GROUP_ROWS, compression="zstd")
    os.replace(tmp, path)


def count_rows(docs: dd.DataFrame):
    """Delayed total row count (to compute together with a write)."""
    return docs.map_partitions(len, meta=(None, "int64")).sum()

