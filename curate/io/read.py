"""Read JSONL (plain, .gz, .zst) and Parquet through fsspec into a Dask DataFrame of documents.

Every document gets ``_doc`` (int64), a key that is unique and increases in input order, made
from the file's position in the sorted input list and the record's byte offset (JSONL, in the
decompressed stream) or row (Parquet) in that file: ``_doc = file_index << 40 | position``. It
does not depend on how the input is split into partitions, so results do not either.

Uncompressed JSONL is split into partitions of about ``blocksize`` bytes at line ends;
compressed JSONL and Parquet files are read whole, ``files_per_partition`` to a partition.

The input's fields and their types are taken from the start of every file (the first MiB of
each JSONL file, each Parquet file's schema), so files may differ in their fields. A record
that cannot be read (see :mod:`curate.io.records`) stops the read with its file, line and field
(``on_error="fail"``), or is kept as a *rejected* row (``on_error="skip"``; see
:func:`split_rejected`).
"""

import json
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Literal

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from dask.utils import parse_bytes
from fsspec.core import url_to_fs
from fsspec.utils import infer_compression, read_block, seek_delimiter

from curate.backend import from_arrow
from curate.io.records import (
    Bad,
    Fields,
    Mismatch,
    conform,
    json_kind,
    parse_records,
    record_lines,
)

DOC = "_doc"
# Columns of a skip-mode read: the record's line (JSONL, 1-based) or row (Parquet, 0-based), and,
# for a rejected record, what is wrong (kind, field, reason) and the record itself (bytes).
REJECT_COLUMNS = ("_line", "_kind", "_field", "_reason", "_record")
_REJECT_TYPES = (pa.int64(), pa.string(), pa.string(), pa.string(), pa.binary())
POSITION_BITS = 40  # _doc = file_index << POSITION_BITS | position
_JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
_COMPRESSED = {".gz": "gzip", ".zst": "zstd"}
_BOM = b"\xef\xbb\xbf"
_SAMPLE_BYTES = 1 << 20  # of each JSONL file, to find its fields and their types
_CHUNK = 1 << 20
_DECODERS = {"gzip": lambda: zlib.decompressobj(zlib.MAX_WBITS | 16), "zstd": lambda: zstandard.ZstdDecompressor().decompressobj()}


@dataclass(frozen=True)
class Source:
    """One partition's worth of input: whole files, or a byte range of one uncompressed file."""

    paths: tuple[str, ...]
    file_indices: tuple[int, ...]
    fmt: str  # "jsonl" or "parquet"
    offset: int = 0
    length: int | None = None  # None: whole file(s)
    first_line: int | None = 1  # line number of the block's first line; None: not counted


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


def source_names(paths: list[str]) -> tuple[str, ...]:
    """How files are named in ids, messages and ``rejected/``: relative to their common folder (URLs whole)."""
    if "://" in paths[0]:
        return tuple(paths)
    root = os.path.commonpath([os.path.dirname(p) for p in paths])
    return tuple(os.path.relpath(p, root) for p in paths)


def _format_of(path: str) -> str | None:
    name = path.lower()
    for suffix in _COMPRESSED:
        name = name.removesuffix(suffix)
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
            sources.extend(Source((path,), (index,), fmt, off, blocksize, None if off else 1) for off in range(0, size, blocksize))
        else:
            whole.append((path, index))
    for i in range(0, len(whole), files_per_partition):
        group = whole[i : i + files_per_partition]
        sources.append(Source(tuple(p for p, _ in group), tuple(k for _, k in group), fmt))
    return sorted(sources, key=lambda s: (s.file_indices[0], s.offset))


def read_documents(
    inputs,
    *,
    id_field: str | None = None,
    text_field: str = "text",
    blocksize: int | str | None = "64MB",
    files_per_partition: int = 1,
    on_error: Literal["fail", "skip"] = "fail",
) -> dd.DataFrame:
    """Read documents into a Dask DataFrame with ``_doc``, the id and text fields and all other fields.

    Parameters
    ----------
    inputs : str or list of str
        Files, directories (searched recursively for ``.jsonl[.gz|.zst]`` / ``.parquet``), globs
        or fsspec URLs (``s3://...``).
    id_field : str or None, default=None
        Field holding unique document ids (int or string); every record must have it. None:
        ``id`` if any file has it (then every record must), else ids ``"<file>:<line>"`` (JSONL,
        1-based line) or ``"<file>:<row>"`` (Parquet, 0-based row) are assigned in column ``id``.
        Ids that are integers in one file and strings in another are all read as strings.
    text_field : str, default="text"
        Field holding the document text: a string, or null (read as empty).
    blocksize : int or str or None, default="64MB"
        Target partition size for uncompressed JSONL; None reads whole files.
    files_per_partition : int, default=1
        Whole files (compressed JSONL, Parquet) per partition.
    on_error : {"fail", "skip"}, default="fail"
        What a record that cannot be read does: "fail" raises ``ValueError`` naming its file,
        line (or row) and field; "skip" keeps it as a rejected row (see :func:`split_rejected`).

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``_doc`` (int64), the assigned ``id`` if any, then the input's fields in the order
        first seen (a field absent from a file is null there); with ``on_error="skip"`` also
        :data:`REJECT_COLUMNS`. Pandas partitions with Arrow-backed strings, or cudf partitions
        when ``dask.config``'s ``dataframe.backend`` is ``cudf`` (``curate.backend.use_backend("gpu")``).

    Raises
    ------
    FileNotFoundError
        If an input matches no file.
    PermissionError
        If a file cannot be read (raised here, before any partition is read).
    ValueError
        If no file has the text field (or the given id field); when computed, with
        ``on_error="fail"``, at the first record that cannot be read, naming its file, line (or
        row) and field, e.g. ``a.jsonl:12: field 'text': expected a string, got a number``.

    Notes
    -----
    A field whose types differ between files is widened where Arrow can (``int64`` and
    ``double`` to ``double``; an id to ``string``); otherwise the first type seen holds and
    records that do not fit it are bad records. A field that first appears after the first MiB
    of every file is not known, so records with it are bad records too.
    """
    if files_per_partition < 1:
        raise ValueError(f"files_per_partition must be >= 1, got {files_per_partition}")
    if on_error not in ("fail", "skip"):
        raise ValueError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    blocksize = parse_bytes(blocksize) if isinstance(blocksize, str) else blocksize
    fs, paths, fmt = expand_paths(inputs)
    names = source_names(paths)
    id_name = id_field or "id"
    with ThreadPoolExecutor(min(16, len(paths))) as pool:  # remote stores: overlap the requests
        found = list(pool.map(lambda path: _file_schema(fs, path, fmt, text_field, id_name), paths))
    schema = _unify(found, text_field, id_name)
    if text_field not in schema.names:
        if schema.names:
            raise ValueError(f"no text field {text_field!r} in any input file (fields: {schema.names})")
        schema = pa.schema([(text_field, pa.string())])  # no records at all
    if id_field is not None and id_field not in schema.names:
        raise ValueError(f"no id field {id_field!r} in any input file (fields: {schema.names})")
    assign_ids = id_name not in schema.names
    reader = _Reader(fs, names, schema, Fields(text_field, None if assign_ids else id_name), assign_ids, on_error == "skip")
    sources = plan_sources(fs, paths, fmt, blocksize, files_per_partition)
    if assign_ids or reader.skip:
        sources = _with_line_numbers(fs, sources)
    # Workers do not see the client's dask.config: the backend travels with the tasks.
    frame_backend = dask.config.get("dataframe.backend", "pandas")
    return dd.from_map(
        _load_partition,
        sources,
        reader=reader,
        frame_backend=frame_backend,
        meta=_frame(reader.output_schema().empty_table(), reader.keys(), frame_backend),
        enforce_metadata=False,
        label="read-documents",
    )


def split_rejected(docs: dd.DataFrame) -> tuple[dd.DataFrame, dd.DataFrame | None]:
    """Split a skip-mode read into good documents and rejected records (one pass over the input).

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        From :func:`read_documents`.

    Returns
    -------
    good : dask.dataframe.DataFrame
        The documents, without :data:`REJECT_COLUMNS`.
    rejected : dask.dataframe.DataFrame or None
        ``_doc`` and :data:`REJECT_COLUMNS` of the rejected records, in input order; None for a
        fail-mode read (which has no such columns).
    """
    if "_kind" not in docs.columns:
        return docs, None
    bad = docs["_kind"].notnull()
    return docs[~bad].drop(columns=list(REJECT_COLUMNS)), docs[bad][[DOC, *REJECT_COLUMNS]]


def locate(inputs, keys) -> list[str]:
    """``"<file>:<line>"`` (JSONL) or ``"<file>:<row>"`` (Parquet) of documents by ``_doc`` key.

    Reads each JSONL file up to the record (decompressing if needed), so use it for a few keys
    (error messages), not for many.
    """
    fs, paths, fmt = expand_paths(inputs)
    names = source_names(paths)
    out = []
    for key in map(int, keys):
        index, position = key >> POSITION_BITS, key & ((1 << POSITION_BITS) - 1)
        where = position if fmt == "parquet" else _lines_before(fs, paths[index], position) + 1
        out.append(f"{names[index]}:{where}")
    return out


def read_records(inputs, keys) -> list[dict]:
    """The input records with the given ``_doc`` keys, reading only as far as they lie.

    Each file holding a wanted record is read once, in position order, and no further than its
    last wanted record: uncompressed JSONL by seeking to each record, compressed JSONL by
    decompressing in chunks (the bytes before a wanted record are dropped as they pass),
    Parquet by reading only the row groups that hold the wanted rows. So reading a few records
    of a large run costs at most one decompression of each file they lie in.

    Parameters
    ----------
    inputs : str or list of str
        The inputs of the run, as given to :func:`read_documents` (the file list and its order
        must be the same, or the keys point elsewhere).
    keys : iterable of int
        ``_doc`` keys (``file_index << 40 | position``); repeats allowed.

    Returns
    -------
    list of dict
        One record per key, in the order of ``keys``: the parsed JSON object, or the Parquet row
        (all its fields), as in the input: no assigned id, and a null text stays ``None``. A
        repeated key gives the same dict object each time.

    Raises
    ------
    FileNotFoundError
        If an input matches no file, or a file with wanted records is missing.
    ValueError
        If a key's file index is beyond the input files, or its position is not the start of a
        record in that file (or lies past its end), naming the file and position, and the line
        where known; if a wanted line is not a JSON object.
    """
    fs, paths, fmt = expand_paths(inputs)
    names = source_names(paths)
    keys = [int(k) for k in keys]
    wanted: dict[int, set[int]] = {}
    for key in keys:
        index, position = key >> POSITION_BITS, key & ((1 << POSITION_BITS) - 1)
        if key < 0 or index >= len(paths):
            raise ValueError(f"_doc key {key}: file index {key >> POSITION_BITS} is beyond the {len(paths)} input file(s)")
        wanted.setdefault(index, set()).add(position)

    def read_file(index: int) -> dict[int, dict]:
        positions = sorted(wanted[index])
        if fmt == "parquet":
            return _parquet_rows(fs, paths[index], names[index], positions)
        return _jsonl_records(fs, paths[index], names[index], positions)

    # Decompression is CPU work: more threads than cores only slowed it down (measured).
    with ThreadPoolExecutor(max(1, min(len(wanted), os.cpu_count() or 1))) as pool:
        found = dict(zip(wanted, pool.map(read_file, wanted)))
    return [found[key >> POSITION_BITS][key & ((1 << POSITION_BITS) - 1)] for key in keys]


def _jsonl_records(fs, path: str, name: str, positions: list[int]) -> dict[int, dict]:
    """Records of one JSONL file at byte ``positions`` (increasing, in the decompressed stream)."""
    out = {}
    codec = infer_compression(path)
    with fs.open(path, "rb") as f:
        lines = _lines_at_offsets(f, positions) if codec is None else _lines_in_stream(_chunks(f, codec), positions)
        try:
            for position, line in zip(positions, lines):
                out[position] = _parse_record(fs, path, name, position, line)
        except _Broken as err:
            raise ValueError(f"{name}: {err} before byte position {positions[len(out)]}") from None
    return out


def _lines_at_offsets(f, positions: list[int]):
    """The line (with its ``\\n``) at each byte position of an uncompressed file.

    Yields None where no line starts at the position (a line starts at 0, at 3 after a UTF-8
    BOM, and after every ``\\n``) and ``b""`` past the end of the file.
    """
    first = len(_BOM) if f.read(len(_BOM)) == _BOM else 0
    for position in positions:
        if position <= first:
            start = position == first
        else:
            f.seek(position - 1)
            start = f.read(1) == b"\n"
        f.seek(position)
        line = f.readline()
        yield line if start or not line else None


def _lines_in_stream(chunks, positions: list[int]):
    """Like :func:`_lines_at_offsets` for a file read as a stream of chunks.

    Holds only the bytes from the byte before the wanted line to the end of that line (and the
    rest of the chunk that ends it), so memory stays about one chunk plus one line.
    """
    chunks, buf, base = iter(chunks), bytearray(), 0  # buf holds the stream from byte base on
    while len(buf) < len(_BOM) and (chunk := next(chunks, None)) is not None:
        buf += chunk
    first = len(_BOM) if buf.startswith(_BOM) else 0
    for position in positions:
        ended = False
        while True:
            drop = min(max(position - 1 - base, 0), len(buf))  # keep the byte before the line
            del buf[:drop]
            base += drop
            at = position - base
            if ended or (at < len(buf) and buf.find(b"\n", at) >= 0):
                break
            chunk = next(chunks, None)
            ended = chunk is None
            buf += chunk or b""
        if at >= len(buf):
            yield b""
            continue
        start = position == first if position <= first else buf[at - 1] == 0x0A
        end = buf.find(b"\n", at)
        yield bytes(buf[at : end + 1 if end >= 0 else len(buf)]) if start else None


def _parse_record(fs, path: str, name: str, position: int, line: bytes | None) -> dict:
    """The JSON object on a wanted line; ValueError naming file, position and line if it is none."""
    if line == b"":
        raise ValueError(f"{name}: byte position {position} is past the end of the file")
    record, problem = None, "is not the start of a record" if line is None else "is a blank line"
    if line is not None and line.strip():
        try:
            record = json.loads(line)
            problem = f"holds {json_kind(record)}, not a JSON object"
        except ValueError as err:
            problem = f"is not valid JSON ({err})"
    if isinstance(record, dict):
        return record
    line_number = _lines_before(fs, path, position) + 1  # counted on this error path only
    raise ValueError(f"{name}: byte position {position} (line {line_number}) {problem}")


def _parquet_rows(fs, path: str, name: str, rows: list[int]) -> dict[int, dict]:
    """Rows of one Parquet file, reading only the row groups that hold them."""
    out = {}
    with fs.open(path, "rb") as f:
        parquet = pq.ParquetFile(f)
        sizes = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
        ends = np.cumsum(sizes, dtype=np.int64)
        if rows[-1] >= parquet.metadata.num_rows:
            raise ValueError(f"{name}: row {rows[-1]} is past the end of the file ({parquet.metadata.num_rows} rows)")
        groups = np.searchsorted(ends, rows, side="right")
        for group in np.unique(groups):
            table = parquet.read_row_group(int(group))
            first = int(ends[group] - sizes[group])
            mine = [row for row, g in zip(rows, groups) if g == group]
            out.update(zip(mine, table.take([row - first for row in mine]).to_pylist()))
    return out


def _with_line_numbers(fs, sources: list[Source]) -> list[Source]:
    """Set ``first_line`` of byte-range sources by counting the line ends before each block."""
    out, lines, last_path = [], 1, None
    for src in sources:
        if src.length is None:
            out.append(src)
            continue
        if src.paths[0] != last_path:
            lines, last_path = 1, src.paths[0]
        out.append(replace(src, first_line=lines))
        with fs.open(src.paths[0], "rb") as f:
            lines += read_block(f, src.offset, src.length, delimiter=b"\n").count(b"\n")
    return out


def _lines_before(fs, path: str, offset: int) -> int:
    """Line ends in the (decompressed) file before byte ``offset``."""
    count, seen = 0, 0
    with fs.open(path, "rb") as f:
        for chunk in _chunks(f, infer_compression(path)):
            count += chunk[: offset - seen].count(b"\n")
            seen += len(chunk)
            if seen >= offset:
                break
    return count


def _load_partition(src: Source, reader: "_Reader", frame_backend: str):
    return _frame(reader.read(src), reader.keys(), frame_backend)


def _frame(table: pa.Table, keys: tuple[str, ...], frame_backend: str):
    if frame_backend != "pandas":
        return from_arrow(table, frame_backend)
    # Nested values (lists, structs) and bytes stay Arrow-typed: as object columns Dask would
    # turn them into strings ("dataframe.convert-string"). Integers and booleans too, so that a
    # field that is absent somewhere keeps its type (numpy's int64 has no null); the key columns,
    # never null, stay numpy. Everything else gets pandas' own mapping.
    frame = table.to_pandas(types_mapper=arrow_typed)
    for name in keys:
        if name in frame.columns and isinstance(frame[name].dtype, pd.ArrowDtype):
            frame[name] = frame[name].to_numpy()
    return frame


def arrow_typed(dtype: pa.DataType) -> pd.ArrowDtype | None:
    """The pandas dtype of an Arrow type in curate's frames (a ``types_mapper``; see ``_frame``)."""
    t = pa.types
    keep = t.is_nested(dtype) or t.is_integer(dtype) or t.is_boolean(dtype) or t.is_binary(dtype) or t.is_large_binary(dtype)
    return pd.ArrowDtype(dtype) if keep else None


class _Broken(Exception):
    """A compressed stream that ends early or is corrupt: ``what`` happened, and the decoder's ``detail``."""

    def __init__(self, what: str, detail):
        super().__init__(f"{what} ({detail})")
        self.what, self.detail = what, detail


def _chunks(f, codec: str | None):
    """Decompressed chunks of an open file; raises :class:`_Broken` where the stream breaks.

    Decoder objects rather than file wrappers: ``gzip.GzipFile`` drops the data decoded in the
    read that hits a cut, and zstandard's stream reader stops at one without a word.
    """
    if codec is None:
        yield from iter(lambda: f.read(_CHUNK), b"")
        return
    if codec not in _DECODERS:
        raise ValueError(f"{codec}: unsupported compression")
    decoder, fed = _DECODERS[codec](), False
    try:
        for data in iter(lambda: f.read(_CHUNK), b""):
            while data:  # a file may hold several members (gzip) or frames (zstd)
                yield decoder.decompress(data)
                fed = True
                if not decoder.eof:
                    break
                data, decoder, fed = decoder.unused_data, _DECODERS[codec](), False
    except (zlib.error, zstandard.ZstdError) as err:
        raise _Broken(f"corrupt {codec} stream", err) from None
    if fed and not decoder.eof:
        raise _Broken(f"truncated {codec} stream", "it ends inside a compressed block")


def _file_schema(fs, path: str, fmt: str, text_field: str, id_field: str) -> pa.Schema | None:
    """A file's fields and types (from the first MiB of JSONL); None for a file without records."""
    with fs.open(path, "rb") as f:
        if fmt == "parquet":
            schema = pq.read_schema(f).remove_metadata()
            return schema if len(schema) else None
        raw = bytearray()
        try:
            for chunk in _chunks(f, infer_compression(path)):
                raw += chunk
                if len(raw) >= _SAMPLE_BYTES and b"\n" in chunk:
                    break
        except _Broken:
            pass  # reported with its line when the file is read
    raw = bytes(raw).removeprefix(_BOM)
    if b"\n" in raw:
        raw = raw[: raw.rindex(b"\n") + 1]
    starts, ends, keep = record_lines(raw)
    pieces, _ = parse_records(raw, starts[keep], ends[keep], None, Fields(None, None))  # bad lines: reported later
    return _unify([table.schema for _, table in pieces], text_field, id_field) if pieces else None


def _unify(schemas: list, text_field: str, id_field: str) -> pa.Schema:
    """One schema for all files: fields in the order first seen, the text a string, nulls strings.

    Where a field's types differ, numbers are widened (``int64`` and ``double`` to ``double``)
    and an id that is an integer in one place and a string in another becomes a string. Types
    that cannot be reconciled keep the first one seen: records that do not fit it are bad
    records, reported with their file and line when read.
    """
    types: dict[str, pa.DataType] = {}
    for schema in schemas:
        for field in schema or ():
            seen = types.get(field.name)
            if seen is None or pa.types.is_null(seen):
                types[field.name] = field.type
            elif seen != field.type and not pa.types.is_null(field.type):
                types[field.name] = _widen(field, seen, id_field)
    return pa.schema([(n, pa.string() if n == text_field or pa.types.is_null(t) else t) for n, t in types.items()])


def _widen(field: pa.Field, seen: pa.DataType, id_field: str) -> pa.DataType:
    if field.name == id_field:
        return pa.string()
    try:
        return pa.unify_schemas([pa.schema([field.with_type(seen)]), pa.schema([field])], promote_options="permissive").field(0).type
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return seen


@dataclass(frozen=True)
class _Reader:
    """Everything a partition read needs (shipped to the workers)."""

    fs: object
    names: tuple[str, ...]
    schema: pa.Schema  # the records' fields (without _doc and an assigned id)
    fields: Fields
    assign_ids: bool
    skip: bool

    def output_schema(self) -> pa.Schema:
        """``_doc``, an assigned id, the record fields and, skipping, the reject columns."""
        schema = pa.schema([(DOC, pa.int64())] + ([("id", pa.string())] if self.assign_ids else []) + list(self.schema))
        if self.skip:
            schema = pa.schema(list(schema) + list(zip(REJECT_COLUMNS, _REJECT_TYPES)))
        return schema

    def keys(self) -> tuple[str, ...]:
        """Columns that are never null: ``_doc``, the id, ``_line``."""
        return (DOC, self.fields.id or "id", "_line")

    def read(self, src: Source) -> pa.Table:
        """The documents (and, skipping, rejected records) of one source, in input order."""
        read_file = self._parquet if src.fmt == "parquet" else self._jsonl
        tables = [read_file(src, path, index) for path, index in zip(src.paths, src.file_indices)]
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def _jsonl(self, src: Source, path: str, index: int) -> pa.Table:
        raw, start, broken = _read_bytes(self.fs, src, path)
        tail = b""
        if broken is not None:  # the cut line and whatever followed it are lost: one rejected record
            cut = raw.rfind(b"\n") + 1
            raw, tail = raw[:cut], raw[cut:]
        starts, ends, keep = record_lines(raw)
        line_index = np.flatnonzero(keep)
        starts, ends = starts[keep], ends[keep]
        pieces, bad = parse_records(raw, starts, ends, self.schema, self.fields)
        positions = start + starts
        records = [raw[starts[b.index] : ends[b.index]].removesuffix(b"\r") for b in bad]
        if broken is not None:  # whole files only, so lines are counted from 1
            reason = f"{broken.what} after line {len(keep)} ({broken.detail})"
            bad.append(Bad(len(starts), "truncated", None, reason))
            positions, line_index = np.append(positions, start + len(raw)), np.append(line_index, len(keep))
            records.append(tail)
        first_line = src.first_line
        if bad and first_line is None:  # only where a record is rejected or stops the run
            first_line = _lines_before(self.fs, path, start) + 1
        return self._assemble(pieces, bad, records, positions, (first_line or 1) + line_index, index)

    def _parquet(self, src: Source, path: str, index: int) -> pa.Table:
        with self.fs.open(path, "rb") as f:
            table = pq.read_table(f)
        problems = _row_problems(table, self.fields)
        rows = np.arange(table.num_rows, dtype=np.int64)
        good = np.setdiff1d(rows, list(problems))
        try:
            pieces = [(good, conform(table.take(good), self.schema, self.fields))]
        except Mismatch as err:  # a column of another type than in other files: every row
            pieces, problems = [], dict.fromkeys(rows.tolist(), (err.kind, err.field, err.reason)) | problems
        bad = [Bad(row, *problems[row]) for row in sorted(problems)]
        records = _row_json(table.take([b.index for b in bad])) if bad else []
        return self._assemble(pieces, bad, records, rows, rows, index)

    def _assemble(self, pieces, bad: list[Bad], records: list[bytes], positions, lines, index: int) -> pa.Table:
        """The file's good records as documents, and its bad ones raised or as rejected rows."""
        if bad and not self.skip:
            first = bad[0]
            field = f"field {first.field!r}: " if first.field else ""
            raise ValueError(f"{self.names[index]}:{lines[first.index]}: {field}{first.reason}")
        rows = np.concatenate([i for i, _ in pieces]) if pieces else np.zeros(0, np.int64)
        table = pa.concat_tables([t for _, t in pieces]) if pieces else self.schema.empty_table()
        if self.assign_ids:
            table = table.add_column(0, "id", pa.array([f"{self.names[index]}:{line}" for line in lines[rows]], pa.string()))
        key = (np.int64(index) << POSITION_BITS) | np.asarray(positions, dtype=np.int64)
        table = table.add_column(0, DOC, pa.array(key[rows], pa.int64()))
        if not self.skip:
            return table
        extra = [pa.array(lines[rows], pa.int64())] + [pa.nulls(len(rows), t) for t in _REJECT_TYPES[1:]]
        table = pa.table(table.columns + extra, schema=self.output_schema())
        if not bad:
            return table
        at = np.array([b.index for b in bad], dtype=np.int64)
        columns = {DOC: pa.array(key[at], pa.int64()), "_line": pa.array(lines[at], pa.int64())}
        columns |= {"_kind": [b.kind for b in bad], "_field": [b.field for b in bad], "_reason": [b.reason for b in bad]}
        columns["_record"] = pa.array(records, pa.binary())
        rejected = pa.table([columns.get(f.name, _placeholder(f.type, len(bad))) for f in table.schema], schema=table.schema)
        both = pa.concat_tables([table, rejected])
        return both.take(np.argsort(both[DOC].to_numpy(), kind="stable"))


def _read_bytes(fs, src: Source, path: str) -> tuple[bytes, int, _Broken | None]:
    """The source's bytes (a BOM at the file start dropped), their offset, and why the stream broke."""
    start, broken = 0, None
    with fs.open(path, "rb") as f:
        if src.length is not None:
            if src.offset:  # the block begins after the first line end at or after its offset
                f.seek(src.offset)
                seek_delimiter(f, b"\n", 1 << 16)
                start = f.tell()
            raw = read_block(f, src.offset, src.length, delimiter=b"\n")
        else:
            data = bytearray()
            try:
                for chunk in _chunks(f, infer_compression(path)):
                    data += chunk  # what came before a break is kept
            except _Broken as err:
                broken = err
            raw = bytes(data)
    if start == 0 and raw.startswith(_BOM):
        raw, start = raw[len(_BOM) :], len(_BOM)
    return raw, start, broken


def _row_problems(table: pa.Table, fields: Fields) -> dict[int, tuple[str, str | None, str]]:
    """Parquet rows that cannot be documents: row -> (kind, field, reason), the first problem only."""
    problems: dict[int, tuple[str, str | None, str]] = {}
    everything = range(table.num_rows)
    if fields.text not in table.column_names:
        problems.update(dict.fromkeys(everything, ("missing-field", fields.text, "missing")))
    else:
        text = table[fields.text]
        if pa.types.is_dictionary(text.type):
            text = text.cast(text.type.value_type)
        if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type) or pa.types.is_null(text.type)):
            for row in np.flatnonzero(text.is_valid().to_numpy(zero_copy_only=False)):
                problems.setdefault(int(row), ("wrong-type", fields.text, f"expected a string, got {text.type}"))
    if fields.id is not None:
        if fields.id not in table.column_names:
            for row in everything:
                problems.setdefault(row, ("missing-field", fields.id, "missing"))
        else:
            for row in np.flatnonzero(table[fields.id].is_null().to_numpy(zero_copy_only=False)):
                problems.setdefault(int(row), ("missing-field", fields.id, "null"))
    for name in table.column_names:  # Parquet readers do not check UTF-8; pandas would fail on it
        column = table[name]
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        try:
            column.validate(full=True)
        except pa.ArrowInvalid:
            for row, value in enumerate(column.cast(pa.large_binary()).to_pylist()):
                try:
                    value is None or value.decode("utf-8")
                except UnicodeDecodeError as err:
                    problems.setdefault(row, ("invalid-utf8", name, f"invalid UTF-8 (byte 0x{value[err.start]:02x} at byte {err.start})"))
    return problems


def _row_json(table: pa.Table) -> list[bytes]:
    """Rows as JSON objects (UTF-8); bytes of strings that are not valid UTF-8 written as ``\\xNN``."""
    columns = {}
    for name in table.column_names:
        column = table[name]
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            columns[name] = [None if v is None else v.decode("utf-8", "backslashreplace") for v in column.cast(pa.large_binary()).to_pylist()]
        else:
            columns[name] = column.to_pylist()
    return [json.dumps(dict(zip(columns, values)), ensure_ascii=False, default=str).encode() for values in zip(*columns.values())]


def _placeholder(dtype: pa.DataType, n: int) -> pa.Array:
    # Rejected rows carry no document; zeros keep integer and boolean columns non-null, so pandas
    # keeps their dtypes (a null would turn int64 into float64).
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_boolean(dtype):
        return pa.array(np.zeros(n, dtype=np.int8)).cast(dtype)
    return pa.nulls(n, dtype)
