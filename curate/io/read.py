"""Read JSONL (plain, .gz, .zst) and Parquet through fsspec into a Dask DataFrame of documents.

Every document gets ``_doc`` (int64), a key that is unique and increases in input order, made
from the file's position in the input list (:func:`curate.io.files.expand_paths`) and the record's byte offset
(JSONL, in the decompressed stream) or row (Parquet) in that file:
``_doc = file_index << 40 | position``. It does not depend on how the input is split into
partitions, so results do not either.

Uncompressed JSONL larger than ``blocksize`` is split into partitions of about that size at
line ends; other files are read whole and packed into partitions of about ``blocksize`` bytes
(or ``files_per_partition`` to a partition; see :mod:`curate.io.plan`).

The input's fields and their types are taken from the start of every file (the first MiB of
each JSONL file, each Parquet file's schema), so files may differ in their fields. Only the
fields asked for are read (``columns``); the others are never parsed. A record
that cannot be read (see :mod:`curate.io.records`) stops the read with its file, line and field
(``on_error="fail"``), or is kept as a *rejected* row (``on_error="skip"``; see
:func:`split_rejected`).
"""

import functools
import json
import logging
from dataclasses import dataclass
from typing import Literal

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
from dask.utils import parse_bytes
from fsspec.utils import infer_compression, read_block, seek_delimiter

from curate.backend import arrow_partitions, from_arrow
from curate.io.files import (
    BOM,
    Broken,
    check_ordered,
    decompressed,
    decompressed_block,
    find_inputs,
    hive_keys_message,
    lines_before,
    overlap_message,
    parquet_file,
    sample_files,
    skipped_message,
    source_names,
    unify_schemas,
    value_field,
)
from curate.io.plan import Source, parse_pieces, plan_sources, source_divisions, with_line_numbers
from curate.io.records import (
    SMALL_OFFSETS_LIMIT,
    Bad,
    BadRecordError,
    Fields,
    Layout,
    Mismatch,
    conform,
    finite,
    json_text,
    large_offsets,
    parse_records,
    python_rows,
    record_lines,
    without_views,
)
from curate.schema import DOC, POSITION_BITS, REJECT_COLUMNS

logger = logging.getLogger(__name__)
_SAID: set[str] = set()  # warnings given in this process

# _record is large_binary (int64 offsets): a partition's records may pass 2 GiB, and pandas
# selects rows of a binary column with Arrow's take, which joins its chunks into one array first.
_REJECT_TYPES = (pa.int64(), pa.string(), pa.string(), pa.string(), pa.large_binary())  # of REJECT_COLUMNS
RESERVED = (DOC, *REJECT_COLUMNS)  # the reader's own columns, which no input field read may be named
# Device partitions may be much larger than what one host thread parses quickly (pyarrow's JSON
# reader: about 125 MB/s here); each is parsed in pieces of at most this many bytes, side by side.
PARSE_PIECE = parse_bytes("64MB")


def read_documents(
    inputs,
    *,
    id_field: str | None = None,
    text_field: str = "text",
    columns: list[str] | None = None,
    blocksize: int | str | None = "64MB",
    files_per_partition: int | None = None,
    min_partitions: int = 1,
    on_error: Literal["fail", "skip"] = "fail",
    records: bool = False,
    compared: tuple[str, ...] = (),
    keep_null_text: bool = True,
    check_all: bool = False,
    host: bool = False,
    late: tuple[pa.Field, ...] = (),
    raise_late: bool = False,
) -> dd.DataFrame:
    """Read documents into a Dask DataFrame with ``_doc``, the id and text fields and all other fields.

    Parameters
    ----------
    inputs : str or list of str
        Files, directories (searched recursively for JSONL: ``.jsonl``, ``.json``, ``.ndjson``,
        each also ``.gz`` or ``.zst``, or ``.parquet``; other files are skipped with a warning), globs or fsspec URLs (``s3://...``), in any mix; a file
        named twice is read once (see :func:`curate.io.files.expand_paths`).
    id_field : str or None, default=None
        Field holding unique document ids (int or string); every record must have it. None:
        ``id`` if any file has it (then every record must), else ids ``"<file>:<line>"`` (JSONL,
        1-based line) or ``"<file>:<row>"`` (Parquet, 0-based row) are assigned in column ``id``.
        Ids are int64 when every id at the start of the files is an integer that fits int64,
        else strings, integers written exactly (``18446744073709551616``, ``5``).
    text_field : str, default="text"
        Field holding the document text: a string, or null (see ``keep_null_text``).
    columns : list of str or None, default=None
        The input fields to return (an assigned ``id`` is always returned; naming it is
        allowed). None: all. Only these, the id and the text are read from JSONL and Parquet,
        and (without ``check_all``) only they are checked: other fields are never parsed, so
        their values and types cannot make a record bad (Parquet pages of every column are
        decoded, though: a damaged one rejects its file, as the final write would find it).
    blocksize : int or str or None, default="64MB"
        Target partition size in bytes of JSONL as read (decompressed) or Parquet on disk:
        larger JSONL files (compressed ones too, each block decoding the file up to its end) are
        split at line ends, smaller files of any kind are
        packed whole into partitions of about this size (see :func:`curate.io.plan.plan_sources`). None: one
        file per partition.
    files_per_partition : int or None, default=None
        Whole files per partition instead of packing by size.
    min_partitions : int, default=1
        With ``blocksize``, partitions smaller than it where the input would otherwise make
        fewer than this many (at least 16 MiB each; see :func:`curate.io.plan.plan_sources`):
        ``curate dedup`` asks for one per worker thread.
    on_error : {"fail", "skip"}, default="fail"
        What a record that cannot be read does: "fail" raises ``ValueError`` naming its file,
        line (or row) and field; "skip" keeps it as a rejected row (see :func:`split_rejected`),
        whose fields are placeholders (0 in numeric and boolean columns, else null; ``_record``
        holds the record as read).
    records : bool, default=False
        Also return ``_record`` (binary), each record as read, to write it unchanged as JSONL
        (:func:`curate.io.write_documents`): its line without the line end (JSONL), or its
        row's values as a JSON object, every column of its file in the file's types (Parquet;
        NaN and infinities as null); an assigned id is put first (``{"id": "a.jsonl:1", ...``).
    compared : tuple of str, default=()
        Fields whose values are ordered (a keep policy's column, ``--keep max:FIELD``): each
        must have one type, and one that orders (not a list, struct or map); a Parquet row
        whose value there is not UTF-8 is bad, as for the text and the id, whatever is read.
    keep_null_text : bool, default=True
        Whether a null text stays null: the documents as they were read, as ``curate dedup``
        writes them back (the dedup stages take a null text as empty); otherwise it reads as
        empty (the stages' own read).
    check_all : bool, default=False
        With ``columns``: parse and check every field, as ``columns=None`` does, but return
        only ``columns``, so that exactly the records a read of every field would reject are
        rejected, while the partitions hold only what is used.
    host : bool, default=False
        Name the read's tasks as a host step (``host-read-documents``, see
        :func:`curate.backend.host_step`), for a read into pandas partitions that no device step
        follows in the same task: on GPU workers such reads then run on the host's threads beside
        the GPU's one task instead of one at a time (``curate dedup``'s last pass, whose records
        host steps write). Reads into device partitions need not: their parsing is always a host
        step of its own, and the copy to the device the first step of the next task
        (:func:`curate.backend.arrow_partitions`).
    late : tuple of pyarrow.Field, default=()
        Fields as records past the files' first MiB hold them (a ``BadRecordError``'s ``late``),
        unified with the types the first MiB show, as if a file's first records held them: a
        double with integers is a double, a string id with integer ids makes every id a string.
    raise_late : bool, default=False
        A value of another type than the files' first MiB show (or a field they do not hold), in
        a field read for its type (``check_all``) or an integer id, raises
        :class:`~curate.io.records.BadRecordError` with ``late`` set even with
        ``on_error="skip"``, so that the caller reads again with it in ``late`` (``curate
        dedup`` does) instead of rejecting good records.

    Returns
    -------
    dask.dataframe.DataFrame
        Indexed by the ``_doc`` values (the index is unnamed) with known divisions (:func:`curate.io.plan.source_divisions`: each partition's
        key range, which :mod:`curate.dedup.keys` uses to join keys to documents without moving
        them). Columns ``_doc`` (int64), the assigned ``id`` if any, then the input's fields in the order
        first seen (a field absent from a file is null there); with ``on_error="skip"`` also
        :data:`REJECT_COLUMNS`. Pandas partitions (the text and string ids as pandas strings,
        the other fields Arrow-typed, ``pd.ArrowDtype``, so every value stays as read), or cudf
        partitions when ``dask.config``'s ``dataframe.backend`` is ``cudf``
        (``curate.backend.use_backend("gpu")``).

    Raises
    ------
    FileNotFoundError
        If an input matches no file.
    PermissionError
        If a file cannot be read (raised here, before any partition is read).
    ValueError
        If no file has the text field (or the given id field, or a field in ``columns``), or
        a field read is named as a column the reader adds (:data:`RESERVED`: ``_doc``,
        ``_line``, ``_kind``, ``_field``, ``_reason``, ``_record``), or ``host`` is set where
        ``dataframe.backend`` is not pandas.
    curate.io.records.BadRecordError
        A ``ValueError``, when computed with ``on_error="fail"``, at a record that cannot be read
        (the first of its partition: partitions are read in parallel; ``first`` when that is the
        input's first), naming its file, line (or row) and field, e.g.
        ``a.jsonl:12: field 'text': expected a string, got a number``.

    Notes
    -----
    Fields and their types come from the start of every file (the first MiB of JSONL, the
    Parquet schema). Where a field's types differ, they are widened where Arrow can (``int64``
    and ``double`` to ``double``, unless that would round an integer seen beyond 2**53); an id
    becomes a string; any other field holds each value's JSON text (a string column: ``3``,
    ``"high"``), as does a field with an integer beyond int64. Reading every field
    (``columns=None`` or ``check_all``), a value found later that does not fit its field's
    type, or a field that first appears after the first MiB of every JSONL file, makes its
    record bad.
    """
    if files_per_partition is not None and files_per_partition < 1:
        raise ValueError(f"files_per_partition must be >= 1, got {files_per_partition}")
    if on_error not in ("fail", "skip"):
        raise ValueError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    blocksize = parse_bytes(blocksize) if isinstance(blocksize, str) else blocksize
    if blocksize is not None and blocksize < 1:  # was an IndexError while planning the partitions
        raise ValueError(f"blocksize must be a positive number of bytes, or None, got {blocksize}")
    fs, paths, fmt, repeats, skipped = find_inputs(inputs)
    if repeats:
        logger.warning(overlap_message(repeats))
    if skipped:
        logger.warning(skipped_message(skipped))
    if (hive := hive_keys_message(paths)) and hive not in _SAID:  # once: a run reads its files again to write
        _SAID.add(hive)
        logger.warning(hive)
    names = source_names(paths)
    id_name = id_field or "id"
    versions = tuple(fs.ukey(path) for path in paths)
    samples = sample_files(fs, paths, fmt, versions)
    # Fields as records past the samples hold them (curate dedup's read again): unified as a sample's.
    found = [s for schemas, _ in samples for s in schemas] + [pa.schema([field]) for field in late]
    schema, json_text = unify_schemas(found, text_field, id_name)
    if not schema.names:  # no records at all: an empty read, of the fields asked for ("no id field" was said)
        asked = [*([id_field] if id_field else []), text_field, *(columns or [])]
        schema = pa.schema([(name, pa.string()) for name in dict.fromkeys(asked)])
    if text_field not in schema.names:
        raise ValueError(f"no text field {text_field!r} in any input file (fields: {schema.names})")
    if id_field is not None and id_field not in schema.names:
        raise ValueError(f"no id field {id_field!r} in any input file (fields: {schema.names})")
    assign_ids = id_name not in schema.names
    fields = Fields(text_field, None, id_name) if assign_ids else Fields(text_field, id_name)
    only = columns is not None and not check_all
    if columns is not None:
        missing = [c for c in columns if c not in schema.names and not (assign_ids and c == "id")]
        if missing:
            raise ValueError(f"no field {missing[0]!r} in any input file (fields: {schema.names})")
    if only:
        read = {text_field, id_name, *columns}
        schema = pa.schema([f for f in schema if f.name in read])
    for name in compared:
        check_ordered(name, schema, json_text, [(source, schemas) for source, (schemas, _) in zip(names, samples)])
    for name in sorted(set(schema.names) & set(RESERVED)):  # read, it would meet the reader's own column
        source = next(source for source, (schemas, _) in zip(names, samples) if any(name in s.names for s in schemas))
        raise ValueError(
            f"{source}: field {name!r} has the name of a column curate adds ({', '.join(RESERVED)}); "
            "rename it in the input"
        )
    layout = Layout(
        schema,
        fields,
        only=only,
        json_text=frozenset(json_text) & set(schema.names),
        keep_null_text=keep_null_text,
        compared=compared,
    )
    returned = None if columns is None else tuple(columns)
    reader = _Reader(fs, names, layout, returned, assign_ids, on_error == "skip", records, raise_late, versions)
    sizes = [size for _, size in samples]
    sources = plan_sources(paths, fmt, blocksize, files_per_partition, sizes, min_partitions)
    # Workers do not see the client's dask.config: the backend travels with the tasks.
    frame_backend = dask.config.get("dataframe.backend", "pandas")
    if host and frame_backend != "pandas":
        raise ValueError(f"host=True reads pandas partitions only; dataframe.backend is {frame_backend!r}")
    # A device partition's input is parsed in pieces on the host's threads (arrow_partitions).
    pieces = [parse_pieces(s, sizes, PARSE_PIECE) if frame_backend != "pandas" else [s] for s in sources]
    if assign_ids or reader.skip:
        numbered = iter(with_line_numbers(fs, [p for partition in pieces for p in partition]))
        pieces = [[next(numbered) for _ in partition] for partition in pieces]
    to_frame = functools.partial(_frame, keys=reader.keys(), frame_backend=frame_backend)
    return arrow_partitions(
        reader.read,
        pieces,
        to_frame,
        meta=to_frame(reader.output_schema().empty_table()),
        divisions=source_divisions(sources),
        label="read-documents",
        host=host,
    )


def split_rejected(docs: dd.DataFrame, records: bool = False) -> tuple[dd.DataFrame, dd.DataFrame | None]:
    """Split a skip-mode read into good documents and rejected records (one pass over the input).

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        From :func:`read_documents`.
    records : bool, default=False
        Whether ``docs`` was read with ``records=True``: then the documents keep ``_record``.

    Returns
    -------
    good : dask.dataframe.DataFrame
        The documents, without :data:`REJECT_COLUMNS` (``_record`` kept with ``records``).
    rejected : dask.dataframe.DataFrame or None
        ``_doc`` and :data:`REJECT_COLUMNS` of the rejected records, in input order; None for a
        fail-mode read (which has no such columns).
    """
    if "_kind" not in docs.columns:
        return docs, None
    bad = docs["_kind"].notnull()
    present = [c for c in REJECT_COLUMNS if c in docs.columns]  # a device read has no _record (_frame)
    dropped = [c for c in present if not (records and c == "_record")]
    return docs[~bad].drop(columns=dropped), docs[bad][[DOC, *present]]


def _frame(table: pa.Table, keys: tuple[str, ...], frame_backend: str):
    # Indexed by _doc, so that the frame's divisions say which keys each partition holds.
    if frame_backend != "pandas":
        # cudf has no binary type (rapidsai/cudf#23492): a skip-mode read's _record (each bad
        # line as read) stays behind; OUT/rejected/ takes it from the final read, on the host.
        frame = from_arrow(table.drop_columns([c for c in ["_record"] if c in table.column_names]), frame_backend)
        frame.index = frame[DOC].values
        return frame
    # Every value stays Arrow-typed but strings (pandas' own str dtype, Arrow-backed too): as
    # object columns Dask would turn nested values and bytes into strings
    # ("dataframe.convert-string"); numpy's int64 has no null and its float64 makes null and
    # NaN one value; dates, decimals and timestamps keep their exact type. So a field rides
    # along unchanged into the output. The key columns, never null, stay numpy.
    frame = table.to_pandas(types_mapper=arrow_typed)
    for name in keys:
        if name in frame.columns and isinstance(frame[name].dtype, pd.ArrowDtype):
            frame[name] = frame[name].to_numpy()
    frame.index = frame[DOC].to_numpy()
    return frame


def arrow_typed(dtype: pa.DataType) -> pd.ArrowDtype | None:
    """The pandas dtype of an Arrow type in curate's frames (a ``types_mapper``; see ``_frame``):
    pandas' own for strings, ``pd.ArrowDtype`` for everything else."""
    return None if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) else pd.ArrowDtype(dtype)


@dataclass(frozen=True)
class _Reader:
    """Everything a partition read needs (shipped to the workers)."""

    fs: object
    names: tuple[str, ...]
    layout: Layout  # the fields read (without _doc and an assigned id), their types, what is checked
    returned: tuple[str, ...] | None  # the fields returned (None: all)
    assign_ids: bool
    skip: bool
    records: bool  # return each JSONL record's line as _record
    # A late type (:meth:`_late_type`) raises even when skipping, for a read with it unified.
    raise_late: bool
    # Each file's fsspec ukey (size and modification time, or ETag), as Dask's own readers put in
    # their task names: a file rewritten since an earlier read gets new names, where a cluster
    # still holding that read's results (or errors) would hand them back.
    versions: tuple[str, ...]

    def output_schema(self) -> pa.Schema:
        """``_doc``, an assigned id, the returned fields, ``_record`` and, skipping, the reject columns."""
        assigned = [("id", pa.string())] if self.assign_ids else []
        fields = [f for f in self.layout.schema if self.returned is None or f.name in self.returned]
        schema = pa.schema([(DOC, pa.int64()), *assigned, *fields])
        if self.skip:
            return pa.schema(list(schema) + list(zip(REJECT_COLUMNS, _REJECT_TYPES)))
        return pa.schema(list(schema) + [("_record", pa.large_binary())]) if self.records else schema

    def _late_type(self, bad: Bad) -> bool:
        """Whether ``bad`` is bad only for a type (or a field) its file's first MiB did not show:
        a field read for Parquet output (reading every field), or an integer id column's. An id
        where ids are assigned (``absent``) is bad wherever it is, as the README says."""
        if bad.field == self.layout.fields.absent:
            return False
        if bad.kind not in ("wrong-type", "unknown-field") or bad.field in (
            self.layout.fields.text,
            *self.layout.compared,
        ):
            return False
        if bad.field == self.layout.fields.id:
            return pa.types.is_integer(self.layout.schema.field(bad.field).type)
        return not self.layout.only

    def keys(self) -> tuple[str, ...]:
        """Columns that are never null: ``_doc``, the id, ``_line``."""
        return (DOC, self.layout.fields.id or "id", "_line")

    def read(self, src: Source) -> pa.Table:
        """The documents (and, skipping, rejected records) of one source, in input order."""
        read_file = self._parquet if src.fmt == "parquet" else self._jsonl
        try:
            tables = [read_file(src, path, index) for path, index in zip(src.paths, src.file_indices)]
        except BadRecordError as err:
            first = src.file_indices[0] == 0 and src.offset == 0
            raise BadRecordError(str(err), first, err.late if src.fmt == "jsonl" else None) from None
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def _jsonl(self, src: Source, path: str, index: int) -> pa.Table:
        raw, start, first_line, broken = _read_bytes(self.fs, src, path)
        tail = b""
        if broken is not None:  # the cut line and whatever followed it are lost: one rejected record
            cut = raw.rfind(b"\n") + 1
            raw, tail = raw[:cut], raw[cut:]
        starts, ends, keep = record_lines(raw)
        line_index = np.flatnonzero(keep)
        starts, ends = starts[keep], ends[keep]
        pieces, bad = parse_records(raw, starts, ends, self.layout)
        positions = start + starts
        # A record's line without its line end ("\r\n" too: a JSON line cannot hold a raw CR).
        lines = [raw[s:e].removesuffix(b"\r") for s, e in zip(starts, ends)] if self.records else None
        records = [raw[starts[b.index] : ends[b.index]].removesuffix(b"\r") for b in bad]
        if broken is not None:  # whole files, and a compressed file's block, whose lines are counted
            last = first_line - 1 + len(keep)  # the last whole line's number
            where = f"after line {last}" if last else "before its first line"
            reason = f"{broken.what} {where} ({broken.detail})"
            kind = "truncated" if broken.what.startswith("truncated") else "corrupt"
            bad.append(Bad(len(starts), kind, None, reason))
            positions, line_index = np.append(positions, start + len(raw)), np.append(line_index, len(keep))
            records.append(tail)
        if bad and first_line is None:  # only where a record is rejected or stops the run
            first_line = lines_before(self.fs, path, [start])[0] + 1
        return self._assemble(pieces, bad, records, positions, (first_line or 1) + line_index, index, lines)

    def _parquet(self, src: Source, path: str, index: int) -> pa.Table:
        kind, what = "truncated", "not a readable Parquet file"
        try:
            with self.fs.open(path, "rb") as f:
                parquet = parquet_file(f)
                kind, what = "corrupt", "Parquet data that cannot be read"  # the footer was whole
                # Every column, though the stages use some: the final write reads them all, so
                # damage in any column rejects the file here, in every read, not after the dedup.
                table = parquet.read()
        except (
            pa.ArrowInvalid,
            OSError,
        ) as err:  # no row can be read: the file is one rejected record, as a broken .gz is
            if isinstance(err, OSError) and err.errno is not None:  # the file system's error, not the file's
                raise
            bad = [Bad(0, kind, None, f"{what} ({err})")]
            return self._assemble([], bad, [b""], np.zeros(1, np.int64), np.zeros(1, np.int64), index)
        fields = self.layout.fields
        table = _binary_as_strings(without_views(table.replace_schema_metadata(None)), (fields.text, fields.id))
        lines = _row_json(table) if self.records else None  # in this file's own types, as JSONL output writes them
        if self.layout.only:
            table = table.select([n for n in self.layout.schema.names if n in table.column_names])
        problems = _row_problems(table, self.layout)
        for row, problem in _cast_problems(table, self.layout).items():
            problems.setdefault(row, problem)
        rows = np.arange(table.num_rows, dtype=np.int64)
        good = np.setdiff1d(rows, list(problems))
        try:
            pieces = [(good, conform(table.take(good), self.layout))]
        except Mismatch as err:  # what no row causes alone (a value beyond the type is _cast_problems'): every row
            pieces, problems = [], dict.fromkeys(rows.tolist(), (err.kind, err.field, err.reason)) | problems
        bad = [Bad(row, *problems[row]) for row in sorted(problems)]
        records = _row_json(table.take([b.index for b in bad])) if bad else []
        return self._assemble(pieces, bad, records, rows, rows, index, lines)

    def _assemble(
        self, pieces, bad: list[Bad], records: list[bytes], positions, lines, index: int, raw_lines=None
    ) -> pa.Table:
        """The file's good records as documents, and its bad ones raised or as rejected rows.

        ``raw_lines`` (with ``records``): every record's line (JSONL) or row as JSON (Parquet), by record index.
        """
        late = [(b, record) for b, record in zip(bad, records) if self._late_type(b)]
        if (bad and not self.skip) or (late and self.raise_late):
            first, record = late[0] if late and self.raise_late else (bad[0], records[0])
            field = f"field {first.field!r}: " if first.field else ""
            raise BadRecordError(
                f"{self.names[index]}:{lines[first.index]}: {field}{first.reason}",
                late=value_field(first.field, json.loads(record).get(first.field)) if self._late_type(first) else None,
            )
        schema = self.output_schema()
        rows = np.concatenate([i for i, _ in pieces]) if pieces else np.zeros(0, np.int64)
        table = pa.concat_tables([t for _, t in pieces]) if pieces else self.layout.schema.empty_table()
        key = (np.int64(index) << POSITION_BITS) | np.asarray(positions, dtype=np.int64)
        columns = {DOC: pa.array(key[rows], pa.int64())}
        ids = [f"{self.names[index]}:{line}" for line in lines[rows]] if self.assign_ids else None
        if ids is not None:
            columns["id"] = pa.array(ids, pa.string())
        if self.records:
            lines_kept = [raw_lines[i] for i in rows]
            if ids is not None:  # the record as written out: its assigned id its first key
                lines_kept = [_with_id(line, id_) for line, id_ in zip(lines_kept, ids)]
            columns["_record"] = pa.array(lines_kept, pa.large_binary())
        if self.skip:
            columns["_line"] = pa.array(lines[rows], pa.int64())
        table = pa.table(
            [
                columns[f.name]
                if f.name in columns
                else (table[f.name] if f.name in table.column_names else pa.nulls(len(rows), f.type))
                for f in schema
            ],
            schema=schema,
        )
        if not bad:
            return table
        at = np.array([b.index for b in bad], dtype=np.int64)
        columns = {DOC: pa.array(key[at], pa.int64()), "_line": pa.array(lines[at], pa.int64())}
        columns |= {
            "_kind": [b.kind for b in bad],
            "_field": [b.field for b in bad],
            "_reason": [b.reason for b in bad],
        }
        columns["_record"] = pa.array(records, pa.large_binary())
        rejected = pa.table([columns.get(f.name, _placeholder(f.type, len(bad))) for f in schema], schema=schema)
        both = pa.concat_tables([table, rejected])
        if both.nbytes >= SMALL_OFFSETS_LIMIT:  # take joins each column's chunks into one array
            both = both.cast(pa.schema([f.with_type(large_offsets(f.type)) for f in both.schema]))
        return both.take(np.argsort(both[DOC].to_numpy(), kind="stable"))


def _with_id(record: bytes, id_: str) -> bytes:
    """A JSON object's bytes with ``"id": id_`` put first, the rest of them unchanged."""
    rest = record.lstrip()[1:].lstrip()  # after the object's '{'
    return b'{"id": ' + json_text(id_).encode() + (b"" if rest.startswith(b"}") else b", ") + rest


def _read_bytes(fs, src: Source, path: str) -> tuple[bytes, int, int | None, Broken | None]:
    """The source's bytes (a BOM at the file start dropped), their offset, the line number of
    their first line (None: not counted), and why the stream broke."""
    start, broken, first_line = 0, None, src.first_line
    with fs.open(path, "rb") as f:
        if src.length is not None and (codec := infer_compression(path)):
            raw, start, lines, broken = decompressed_block(f, codec, src.offset, src.length)
            first_line = lines + 1
        elif src.length is not None:
            if src.offset:  # the block begins after the first line end at or after its offset
                f.seek(src.offset)
                seek_delimiter(f, b"\n", 1 << 16)
                start = f.tell()
            raw = read_block(f, src.offset, src.length, delimiter=b"\n")
        else:
            raw, broken = decompressed(f, infer_compression(path))
    if start == 0 and raw.startswith(BOM):
        raw, start = raw[len(BOM) :], len(BOM)
    return raw, start, first_line, broken


def _id_type(dtype: pa.DataType) -> bool:
    """Whether a Parquet column of ``dtype`` holds ids: integers or strings (dictionary-encoded
    too), or nulls only (each row's id then is missing)."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    return any(
        is_type(dtype)
        for is_type in (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_null)
    )


def _row_problems(table: pa.Table, layout: Layout) -> dict[int, tuple[str, str | None, str]]:
    """Parquet rows that cannot be documents: row -> (kind, field, reason), the first problem only.

    Only the fields read are checked: reading every field, just the text, the id and the
    fields compared (the others ride along as they are, bytes that are not UTF-8 included), so
    that every read of a run rejects the same rows.
    """
    fields = layout.fields
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
        elif not _id_type(table.schema.field(fields.id).type):  # 1.5, NaN or true as "1.5", "nan", "true"
            dtype = table.schema.field(fields.id).type
            for row in everything:
                problems.setdefault(row, ("wrong-type", fields.id, f"expected strings or integers, got {dtype}"))
        else:
            for row in np.flatnonzero(table[fields.id].is_null().to_numpy(zero_copy_only=False)):
                problems.setdefault(int(row), ("missing-field", fields.id, "null"))
    used = (fields.text, fields.id, *layout.compared)
    checked = table.column_names if layout.only else [n for n in used if n in table.column_names]
    for name in checked:  # Parquet readers do not check UTF-8; pandas would fail on it
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
                    problems.setdefault(
                        row,
                        ("invalid-utf8", name, f"invalid UTF-8 (byte 0x{value[err.start]:02x} at byte {err.start})"),
                    )
    return problems


def _cast_problems(table: pa.Table, layout: Layout) -> dict[int, tuple[str, str, str]]:
    """Parquet rows holding a value that the input's type for its field cannot hold: row -> problem.

    Where files' types for a field differ, each file's column is cast to the type found for all
    (:func:`curate.io.files.unify_schemas`: ``timestamp[ms]`` and ``[ns]`` as ``[ns]``, ``int64``
    and ``double`` as ``double``), and a single value beyond it (the year 3000 in nanoseconds,
    2**53 + 1 as a double) fails the cast of its whole column. The failing rows are found by
    halving the column, so a file with k such values costs about ``2 k log2(rows)`` casts, and the
    rest of the file is read. A pair of types Arrow cannot cast at all fails every row.
    """
    problems: dict[int, tuple[str, str, str]] = {}
    for field in layout.schema or ():
        if field.name in layout.json_text or field.name not in table.column_names:
            continue
        column = table[field.name]
        if column.type == field.type:
            continue
        reason = f"cannot convert {column.type} to {field.type}"
        try:
            column.cast(field.type)
            continue
        except pa.ArrowInvalid:
            pass
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:  # the types themselves
            problems.update(dict.fromkeys(range(table.num_rows), ("wrong-type", field.name, f"{reason} ({err})")))
            continue
        pending = [(0, len(column))]
        while pending:
            start, stop = pending.pop()
            try:
                column.slice(start, stop - start).cast(field.type)
            except pa.ArrowInvalid as err:
                if stop - start == 1:
                    problems.setdefault(start, ("wrong-type", field.name, f"{reason} ({err})"))
                else:
                    middle = (start + stop) // 2
                    pending += [(middle, stop), (start, middle)]
    return problems


def _binary_as_strings(table: pa.Table, names: tuple[str | None, ...]) -> pa.Table:
    """``table`` with its ``binary`` text and id columns (``names``) read as strings. Hive and
    older Spark write strings as Parquet binary without the UTF8 annotation (Spark's
    ``spark.sql.parquet.binaryAsString``); each row was rejected as ``wrong-type``. The bytes
    are not copied; :func:`_row_problems` checks their UTF-8 as any string column's."""
    for name in (n for n in names if n in table.column_names):
        column = table[name]
        kind = {pa.binary(): pa.string(), pa.large_binary(): pa.large_string()}.get(column.type)
        if kind is not None:
            strings = pa.chunked_array([chunk.view(kind) for chunk in column.chunks], kind)
            table = table.set_column(table.column_names.index(name), name, strings)
    return table


def _row_json(table: pa.Table) -> list[bytes]:
    """Rows as JSON objects (UTF-8); bytes of strings that are not valid UTF-8 written as ``\\xNN``,
    NaN and infinities (no JSON notation) as null."""
    return [json_text(finite(row)).encode() for row in python_rows(table)]


def _placeholder(dtype: pa.DataType, n: int) -> pa.Array:
    # Rejected rows carry no document; zeros keep integer and boolean columns non-null, so pandas
    # keeps their dtypes (a null would turn int64 into float64).
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_boolean(dtype):
        return pa.array(np.zeros(n, dtype=np.int8)).cast(dtype)
    return pa.nulls(n, dtype)
