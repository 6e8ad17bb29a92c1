"""Read JSONL (plain, .gz, .zst) and Parquet through fsspec into a Dask DataFrame of documents.

Every document gets ``_doc`` (int64), a key that is unique and increases in input order, made
from the file's position in the sorted input list and the record's byte offset (JSONL, in the
decompressed stream) or row (Parquet) in that file: ``_doc = file_index << 40 | position``. It
does not depend on how the input is split into partitions, so results do not either.

Uncompressed JSONL is split into partitions of about ``blocksize`` bytes at line ends;
compressed JSONL and Parquet files are read whole, ``files_per_partition`` to a partition.
"""

import json
import os
from dataclasses import dataclass

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq
from dask.utils import parse_bytes
from fsspec.core import url_to_fs
from fsspec.utils import infer_compression, read_block, seek_delimiter

from curate.backend import from_arrow

DOC = "_doc"
_POSITION_BITS = 40
_JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
_COMPRESSED = {".gz": "gzip", ".zst": "zstd"}
_WHITESPACE = np.array([9, 10, 11, 12, 13, 32], dtype=np.uint8)


@dataclass(frozen=True)
class Source:
    """One partition's worth of input: whole files, or a byte range of one uncompressed file."""

    paths: tuple[str, ...]
    file_indices: tuple[int, ...]
    fmt: str  # "jsonl" or "parquet"
    offset: int = 0
    length: int | None = None  # None: whole file(s)
    first_line: int = 1  # line number of the block's first line (ids assigned from it)


def expand_paths(inputs: list[str] | str) -> tuple[object, list[str], str]:
    """Files named by paths, directories, globs or fsspec URLs, sorted, one format.

    Returns
    -------
    fs : fsspec.AbstractFileSystem
    paths : list of str
    fmt : {"jsonl", "parquet"}

    Raises
    ------
    FileNotFoundError
        If an input matches no file.
    ValueError
        If the files mix formats or have an unknown extension.
    """
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    fs, _ = url_to_fs(inputs[0])
    paths = []
    for item in inputs:
        if fs.isdir(item):
            found = sorted(p for p in fs.find(item) if _format_of(p) and not os.path.basename(p).startswith((".", "_")))
        else:
            found = sorted(fs.glob(item)) if any(c in item for c in "*?[") else ([item] if fs.exists(item) else [])
        if not found:
            raise FileNotFoundError(f"input {item!r} matches no JSONL or Parquet file")
        paths.extend(found)
    formats = {_format_of(p) for p in paths}
    if None in formats:
        bad = next(p for p in paths if _format_of(p) is None)
        raise ValueError(f"{bad}: unknown file type (expected .jsonl[.gz|.zst] or .parquet)")
    if len(formats) > 1:
        raise ValueError(f"inputs mix formats {sorted(formats)}; give one kind of file per run")
    return fs, [fs.unstrip_protocol(p) if "://" in inputs[0] else p for p in paths], formats.pop()


def _format_of(path: str) -> str | None:
    name = path.lower()
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(".parquet") and not path.lower().endswith(tuple(_COMPRESSED)):
        return "parquet"
    return None


def plan_sources(fs, paths: list[str], fmt: str, blocksize: int | None, files_per_partition: int) -> list[Source]:
    """Split the input files into partitions (see the module docstring)."""
    sources: list[Source] = []
    whole: list[tuple[str, int]] = []
    for index, path in enumerate(paths):
        size = fs.size(path)
        splittable = fmt == "jsonl" and infer_compression(path) is None and blocksize
        if splittable and size > blocksize:
            sources.extend(Source((path,), (index,), fmt, off, blocksize) for off in range(0, size, blocksize))
        else:
            whole.append((path, index))
    for i in range(0, len(whole), files_per_partition):
        group = whole[i : i + files_per_partition]
        sources.append(Source(tuple(p for p, _ in group), tuple(k for _, k in group), fmt))
    return sorted(sources, key=lambda s: (s.file_indices[0], s.offset))


def read_documents(
    inputs,
    *,
    id_field: str = "id",
    text_field: str = "text",
    blocksize: int | str | None = "64MB",
    files_per_partition: int = 1,
) -> dd.DataFrame:
    """Read documents into a Dask DataFrame with ``_doc``, the id and text fields and all other fields.

    Parameters
    ----------
    inputs : str or list of str
        Files, directories (searched recursively for ``.jsonl[.gz|.zst]`` / ``.parquet``), globs
        or fsspec URLs (``s3://...``).
    id_field : str, default="id"
        Column holding unique document ids (int or string). If the input has no such column,
        ids ``"<file name>:<line>"`` (JSONL, 1-based line) or ``"<file name>:<row>"``
        (Parquet, 0-based row) are assigned.
    text_field : str, default="text"
        Column holding the document text (string; null is read as empty).
    blocksize : int or str or None, default="64MB"
        Target partition size for uncompressed JSONL; None reads whole files.
    files_per_partition : int, default=1
        Whole files (compressed JSONL, Parquet) per partition.

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``_doc`` (int64) then the input's columns in file order; pandas partitions
        with Arrow-backed strings, or cudf partitions when ``dask.config``'s
        ``dataframe.backend`` is ``cudf`` (``curate.backend.use_backend("gpu")``).

    Raises
    ------
    FileNotFoundError
        If an input matches no file.
    ValueError
        If a record is not a JSON object, the text field is missing or not a string, or a file's
        columns differ from the first file's; the message names the file and line.
    """
    if files_per_partition < 1:
        raise ValueError(f"files_per_partition must be >= 1, got {files_per_partition}")
    blocksize = parse_bytes(blocksize) if isinstance(blocksize, str) else blocksize
    fs, paths, fmt = expand_paths(inputs)
    sources = plan_sources(fs, paths, fmt, blocksize, files_per_partition)
    root = os.path.commonpath([os.path.dirname(p) for p in paths]) if "://" not in paths[0] else None
    names = tuple(os.path.relpath(p, root) if root is not None else p for p in paths)
    meta_table = _read_source(sources[0], fs, names, None, id_field, text_field, sample=True, assign_ids=None)
    assign_ids = id_field not in meta_table.column_names
    if assign_ids:
        sources = _with_line_numbers(fs, sources)
    meta_table = _read_source(sources[0], fs, names, None, id_field, text_field, sample=True, assign_ids=assign_ids)
    # A field that is null throughout the sample may hold strings later on.
    schema = pa.schema([f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in meta_table.schema])
    meta_table = meta_table.cast(schema)
    frame_backend = dask.config.get("dataframe.backend", "pandas")
    meta = from_arrow(meta_table.slice(0, 0), frame_backend)
    return dd.from_map(
        _load_partition,
        sources,
        fs=fs,
        names=names,
        schema=schema,
        id_field=id_field,
        text_field=text_field,
        assign_ids=assign_ids,
        frame_backend=frame_backend,
        meta=meta,
        enforce_metadata=False,
        label="read-documents",
    )


def _with_line_numbers(fs, sources: list[Source]) -> list[Source]:
    """Set ``first_line`` of byte-range sources by counting the line ends before each block."""
    out, lines, last_path = [], 1, None
    for src in sources:
        if src.length is None:
            out.append(src)
            continue
        if src.paths[0] != last_path:
            lines, last_path = 1, src.paths[0]
        out.append(Source(src.paths, src.file_indices, src.fmt, src.offset, src.length, lines))
        with fs.open(src.paths[0], "rb") as f:
            lines += read_block(f, src.offset, src.length, delimiter=b"\n").count(b"\n")
    return out


def _load_partition(src: Source, fs, names, schema, id_field, text_field, assign_ids, frame_backend) -> pd.DataFrame:
    table = _read_source(src, fs, names, schema, id_field, text_field, assign_ids=assign_ids)
    return from_arrow(table, frame_backend)


def _read_source(src: Source, fs, names, schema, id_field, text_field, sample=False, assign_ids=False) -> pa.Table:
    tables = []
    for path, index in zip(src.paths, src.file_indices):
        if src.fmt == "parquet":
            with fs.open(path, "rb") as f:
                table = pq.ParquetFile(f).read_row_group(0) if sample else pq.read_table(f)
            position = np.arange(table.num_rows, dtype=np.int64)
            ids = [f"{names[index]}:{row}" for row in range(table.num_rows)] if assign_ids else None
        else:
            table, position, lines = _read_jsonl(src, path, fs, names[index], sample)
            if table.num_rows == 0 and schema is not None:
                tables.append(schema.empty_table())
                continue
            ids = [f"{names[index]}:{line}" for line in lines] if assign_ids else None
        table = _check_columns(table, path, id_field, text_field, assign_ids)
        if ids is not None:
            table = table.add_column(0, id_field, pa.array(ids, pa.string()))
        doc = (np.int64(index) << _POSITION_BITS) | position
        table = table.add_column(0, DOC, pa.array(doc, pa.int64()))
        if schema is not None:
            table = _conform(table, schema, path)
        tables.append(table)
        if sample:
            break
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _read_jsonl(src: Source, path: str, fs, name: str, sample: bool):
    """Parse one JSONL file or block; return (table, byte offset per record, line per record)."""
    start = 0
    with fs.open(path, "rb", compression="infer") as f:
        if src.length is not None:
            if src.offset:  # the block begins after the first line end at or after its offset
                f.seek(src.offset)
                seek_delimiter(f, b"\n", 1 << 16)
                start = f.tell()
            raw = read_block(f, src.offset, src.length, delimiter=b"\n")
        else:
            raw = f.read(1 << 20) if sample else f.read()
    if sample and src.length is None and b"\n" in raw:
        raw = raw[: raw.rindex(b"\n") + 1]
    buf = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate([[0], ends + 1])
    if len(starts) and starts[-1] >= len(raw):
        starts = starts[:-1]
    ends = np.append(ends, len(raw))[: len(starts)]
    # pyarrow skips blank lines; find them too, so records map to their lines.
    # Records start with "{", so only lines starting with whitespace need a closer look.
    keep = np.ones(len(starts), dtype=bool)
    for i in np.flatnonzero((ends == starts) | np.isin(buf[np.minimum(starts, len(buf) - 1)], _WHITESPACE)):
        keep[i] = bool(raw[starts[i] : ends[i]].strip())
    line_numbers = src.first_line + np.flatnonzero(keep)
    if not keep.any():  # a block inside one long line, or a file of blank lines
        return pa.table({}), np.zeros(0, np.int64), line_numbers
    try:
        table = pajson.read_json(
            pa.py_buffer(raw),
            read_options=pajson.ReadOptions(block_size=min(max(len(raw), 1 << 20), (1 << 31) - 1)),
            parse_options=pajson.ParseOptions(newlines_in_values=False),
        )
    except pa.ArrowInvalid as err:
        _raise_bad_line(raw, starts, ends, line_numbers, keep, name, err)
    if table.num_rows != keep.sum():
        _raise_bad_line(raw, starts, ends, line_numbers, keep, name, "record count mismatch")
    return table, start + starts[keep].astype(np.int64), line_numbers


def _raise_bad_line(raw, starts, ends, line_numbers, keep, name, err):
    for (s, e), line in zip(zip(starts[keep], ends[keep]), line_numbers):
        try:
            record = json.loads(raw[s:e])
        except ValueError as exc:
            raise ValueError(f"{name}:{line}: invalid JSON: {exc}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{name}:{line}: expected a JSON object, got {type(record).__name__}")
    raise ValueError(f"{name}: could not parse JSONL ({err})")


def _check_columns(table: pa.Table, path, id_field, text_field, assign_ids) -> pa.Table:
    if text_field not in table.column_names:
        raise ValueError(f"{path}: no text field {text_field!r} (fields: {table.column_names})")
    text = table[text_field]
    if pa.types.is_null(text.type):
        text = pa.chunked_array([pa.nulls(len(text), pa.string())])
    if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        raise ValueError(f"{path}: text field {text_field!r} has type {text.type}, expected string")
    table = table.set_column(table.column_names.index(text_field), text_field, text.cast(pa.string()).fill_null(""))
    if assign_ids is False:  # None: still finding out whether the input has ids
        if id_field not in table.column_names:
            raise ValueError(f"{path}: no id field {id_field!r} while other files have it")
        if table[id_field].null_count:
            raise ValueError(f"{path}: {table[id_field].null_count} record(s) without an id in field {id_field!r}")
    return table


def _conform(table: pa.Table, schema: pa.Schema, path) -> pa.Table:
    if set(table.column_names) != set(schema.names):
        extra = sorted(set(table.column_names) - set(schema.names))
        missing = sorted(set(schema.names) - set(table.column_names))
        raise ValueError(f"{path}: fields differ from the first file's (extra: {extra}, missing: {missing})")
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError) as err:
        raise ValueError(f"{path}: field types differ from the first file's ({err})") from None
