"""Write documents (Parquet or JSONL part files) and the small result tables."""

from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from fsspec.core import url_to_fs
from zlib_ng import gzip_ng

from curate.backend import host_step, to_arrow, to_host
from curate.io.files import common_compression
from curate.io.records import SMALL_OFFSETS_LIMIT, finite, json_text, large_offsets, python_rows
from curate.schema import DOC, PART_DIGITS

ROW_GROUP_ROWS = 1 << 20
# JSONL part files: suffix and compressor. gzip level 6 (gzip's own default; 9 is much slower
# for a few percent) and mtime 0, so the same records always give the same bytes (with one
# version of the compressor, on one kind of CPU); zstd level 3 (zstd's default). gzip by zlib-ng,
# which reads and writes the same format as zlib: 2.7x zlib's speed at level 6 on Enron's text
# (0.72 s against 1.93 s for 55 MB, 1% larger), where zlib took most of the last pass's time.
_JSONL_CODECS = {
    "none": ("", lambda data: data),
    "gzip": (".gz", lambda data: gzip_ng.compress(data, compresslevel=6, mtime=0)),
    "zstd": (".zst", lambda data: zstandard.ZstdCompressor(level=3).compress(data)),
}


def output_compression(given: str | None, input_fmt: str, output_fmt: str, paths: list[str]) -> str:
    """The compression of the kept documents: ``given`` if set; else for JSONL output from JSONL
    the input files' own (``"gzip"``, ``"zstd"``) when they all share one, else ``"none"``; for
    Parquet output ``"snappy"`` (pyarrow's default codec)."""
    if given is not None:
        return given
    if output_fmt == "parquet":
        return "snappy"
    return (common_compression(paths) if input_fmt == "jsonl" else None) or "none"


def write_documents(
    docs: dd.DataFrame,
    path: str,
    fmt: str,
    schema: pa.Schema | None = None,
    compression: str | None = None,
    metadata: dict[bytes, bytes] | None = None,
) -> dd.Scalar:
    """Lazily write a document frame (without ``_doc``) as ``part.N.parquet`` / ``part.N.jsonl[.gz|.zst]``.

    N is the partition's number with zeros in front to at least :data:`curate.schema.PART_DIGITS` digits
    (``part.00000.jsonl``), so that the parts sort by name in the frame's order. A partition
    without rows writes no file, except partition 0 in Parquet, which is always written (then
    the schema and no row group), so that the folder reads back with its columns however few
    rows there are. An empty JSONL file is not written: pyarrow's dataset refuses one (``Empty
    JSON stream``), as Hugging Face datasets refuse a Parquet row group of no rows.

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        With ``_record`` (binary: JSONL lines, from :func:`curate.io.read_documents` with
        ``records=True``), JSONL output writes each record's line unchanged (an assigned ``id``
        its first key) and none of the frame's other columns: drop ``_record`` to write them.
        Otherwise each row is written from its Arrow values: in JSONL, integers whole and floats
        as the shortest text that reads back as the same double (NaN and infinities, which JSON
        lacks, as null), and a field read as JSON text (values of several types) as a string.
    path : str
        Output directory (local path or fsspec URL); created if needed.
    fmt : {"parquet", "jsonl"}
        Parquet files carry a plain Arrow schema (no pandas metadata, which pandas cannot read
        back for nested Arrow columns); JSONL is UTF-8, one object per line.
    schema : pyarrow.Schema, optional
        Parquet: the files' schema. Default: the frame's columns' types (``pd.ArrowDtype``
        columns their own, pandas strings ``string``), the same in every part.
    compression : str, optional
        JSONL: ``"none"`` (default), ``"gzip"`` (``part.N.jsonl.gz``) or ``"zstd"``
        (``part.N.jsonl.zst``), the same bytes for the same records. Parquet: the codec inside
        the files (``"none"``, ``"gzip"``, ``"zstd"``, ...; default ``"snappy"``).
    metadata : dict of bytes to bytes, optional
        Parquet: the files' schema metadata (``curate dedup`` passes the input's, see
        :func:`curate.io.files.shared_metadata`). Default: none.

    Returns
    -------
    dask Scalar, int64
        The number of rows written, once computed (with other work, to share the reads).

    Raises
    ------
    ValueError
        If ``fmt`` is unknown, or ``compression`` for JSONL.
    """
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"unknown output format {fmt!r}; use 'parquet' or 'jsonl'")
    if fmt == "jsonl" and (compression or "none") not in _JSONL_CODECS:
        raise ValueError(f"unknown JSONL compression {compression!r}; use one of {sorted(_JSONL_CODECS)}")
    fs, root = url_to_fs(path)
    fs.makedirs(root, exist_ok=True)
    docs = docs.drop(columns=[DOC]) if DOC in docs.columns else docs
    schema = (schema or _frame_schema(to_host(docs._meta))).with_metadata(metadata or {})
    # Arrow conversion, encoding and compression run on the host (to_arrow copies a cudf partition there).
    # Numbers of one width, so that a folder listing, a glob or pyarrow's dataset (which sort by
    # name) read the parts in order: part.10 sorted before part.2.
    width = max(PART_DIGITS, len(str(docs.npartitions - 1)))
    write = docs.map_partitions(
        _write_part, fs, root, fmt, schema, compression, width, meta=(None, "int64"), token=host_step(_write_part)
    )
    return write.sum()


def _frame_schema(meta: pd.DataFrame) -> pa.Schema:
    """Arrow schema of a pandas frame: its Arrow-typed columns' types, pandas strings ``string``
    (the readers' type for them; pandas itself would say ``large_string``)."""
    schema = pa.Schema.from_pandas(meta, preserve_index=False).remove_metadata()
    return pa.schema(
        [f.with_type(pa.string()) if isinstance(meta[f.name].dtype, pd.StringDtype) else f for f in schema]
    )


def _write_part(
    part: pd.DataFrame,
    fs,
    root: str,
    fmt: str,
    schema: pa.Schema,
    compression: str | None,
    width: int,
    partition_info=None,
) -> int:
    number = partition_info["number"]
    if len(part) == 0 and (number or fmt == "jsonl"):
        return 0
    name = f"{root}/part.{number:0{width}d}"
    if fmt == "parquet":
        with fs.open(f"{name}.parquet", "wb") as f:
            if len(part) == 0:  # the schema and no row group: Hugging Face datasets refuse a group of 0 rows
                pq.ParquetWriter(f, schema, compression=compression or "snappy").close()
            else:
                table = _arrow_table(part, schema).replace_schema_metadata(schema.metadata)
                pq.write_table(table, f, compression=compression or "snappy")
        return len(part)
    table = _arrow_table(part, schema)
    suffix, compress = _JSONL_CODECS[compression or "none"]
    with fs.open(f"{name}.jsonl{suffix}", "wb") as f:
        f.write(compress(jsonl_lines(table)))
    return len(part)


def _arrow_table(part, schema: pa.Schema) -> pa.Table:
    """``to_arrow(part, schema)`` of a partition (pandas or cudf), made of pieces where one Arrow
    array would pass 2 GiB: ``string`` and ``binary`` have int32 offsets, and a partition's
    ``large_string`` column, one chunk after a filter or sort (pandas) and always on cudf, would
    not cast (``input array too large``) after the run's work was done."""
    try:
        return to_arrow(part, schema)
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        if len(part) < 2 or int(part.memory_usage(deep=True, index=False).sum()) < SMALL_OFFSETS_LIMIT:
            raise  # not a matter of size
    half = len(part) // 2
    # take copies each half into buffers of its own; a slice keeps its place in the big buffer,
    # whose offsets Arrow's cast checks.
    halves = (part.take(np.arange(half)), part.take(np.arange(half, len(part))))
    return pa.concat_tables([_arrow_table(piece, schema) for piece in halves])


def jsonl_lines(table: pa.Table) -> bytes:
    """JSONL of a table's rows (see :func:`write_documents`): each ending in ``\\n``, UTF-8.

    With a ``_record`` column (binary JSON objects), each record as it is; the other columns are
    not written (they hold the same fields, converted).
    """
    if "_record" not in table.column_names:
        return b"".join(json_text(finite(row)).encode() + b"\n" for row in python_rows(table))
    return b"".join(line + b"\n" for line in table["_record"].to_pylist())


def write_table(source: str, path: str, columns: list[str]) -> None:
    """Copy ``columns`` of a Parquet folder written by Dask into one file, byte-identical for identical rows.

    Parameters
    ----------
    source : str
        Local folder of ``part.N.parquet`` files, read in ``N`` order.
    path : str
        The file to write (zstd). :func:`curate.pipeline.dedup` writes a temporary name and
        renames it once every output is written.
    columns : list of str

    Row groups have a fixed number of rows (``ROW_GROUP_ROWS``), each written as one chunk, so the
    bytes depend only on the rows, never on how they were partitioned or which engine wrote them,
    and at most about two row groups are in memory. (The writer cuts pages where a chunk ends: a
    row group of the parts' chunks wrote other bytes for 56 partitions than for 15 of the same
    7.2 million lines, the rows equal.)
    """
    files = sorted(Path(source).glob("part.*.parquet"), key=lambda f: int(f.name.split(".")[1]))
    written = pq.read_schema(files[0])
    schema = pa.schema([_canonical(written.field(c)) for c in columns])
    pending, rows = [], 0
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for file in files:
            for batch in pq.ParquetFile(file).iter_batches(batch_size=ROW_GROUP_ROWS, columns=columns):
                pending.append(batch.cast(schema))  # also drops per-file metadata
                rows += batch.num_rows
                while rows >= ROW_GROUP_ROWS:
                    table = pa.Table.from_batches(pending, schema)
                    writer.write_table(table.slice(0, ROW_GROUP_ROWS).combine_chunks(), row_group_size=ROW_GROUP_ROWS)
                    pending, rows = table.slice(ROW_GROUP_ROWS).to_batches(), rows - ROW_GROUP_ROWS
        if rows:
            writer.write_table(pa.Table.from_batches(pending, schema).combine_chunks(), row_group_size=ROW_GROUP_ROWS)


def _canonical(field: pa.Field) -> pa.Field:
    """``field`` as pyarrow writes a pandas column: large strings and bytes, nullable, no metadata.

    cuDF writes strings as ``string`` and a column without nulls as required, so a GPU run's
    table differed from the CPU run's and a later part's null failed the cast to part 0's schema.
    """
    return pa.field(field.name, large_offsets(field.type), nullable=True)


def count_rows(docs: dd.DataFrame):
    """Delayed total row count (to compute together with a write)."""
    return docs.map_partitions(len, meta=(None, "int64")).sum()
