"""JSONL blocks to Arrow tables, record by record where a block is bad.

A block of JSONL bytes is first parsed whole by pyarrow (the fast path). Only when that fails
(invalid UTF-8 or JSON, a record that does not fit the input's fields) is it parsed line by line
with Python's ``json`` to find the bad records and say what is wrong with each, and the good lines
are parsed by pyarrow again, halving the run wherever one still fails. No file system here:
:mod:`curate.io.read` reads the bytes and places the results.
"""

import json
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson

_WHITESPACE = np.array([9, 10, 11, 12, 13, 32], dtype=np.uint8)
_JSON_KINDS = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


@dataclass(frozen=True)
class Fields:
    """The fields every record is checked for.

    ``text`` must be present and a string or null (read as empty); ``id`` must be present and
    not null (its type, like any other field's, is checked by casting to the input's schema, the
    same way in the fast and the line-by-line path). None: not checked (sampling, assigned ids).
    """

    text: str | None
    id: str | None


@dataclass(frozen=True)
class Bad:
    """One record that cannot be read: its index among the block's records, what is wrong and where."""

    index: int
    kind: str  # invalid-utf8 | invalid-json | not-an-object | missing-field | wrong-type | unknown-field
    field: str | None
    reason: str


class Mismatch(ValueError):
    """A table (or one record) does not fit the input's fields; ``field`` names the culprit."""

    def __init__(self, kind: str, field: str, reason: str):
        super().__init__(f"field {field!r}: {reason}")
        self.kind, self.field, self.reason = kind, field, reason


def record_lines(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Byte ranges of the lines in ``raw``, and which of them are records (not blank).

    Returns
    -------
    starts, ends : array of shape (n_lines,), dtype int64
        ``raw[starts[i]:ends[i]]`` is line ``i`` without its ``\\n`` (a ``\\r`` before it stays).
    keep : array of shape (n_lines,), dtype bool
        False for blank (empty or whitespace-only) lines, which pyarrow skips and are no records.
    """
    buf = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate([[0], ends + 1])
    if len(starts) and starts[-1] >= len(raw):
        starts = starts[:-1]
    ends = np.append(ends, len(raw))[: len(starts)]
    # Records start with "{", so only lines starting with whitespace need a closer look.
    keep = np.ones(len(starts), dtype=bool)
    for i in np.flatnonzero((ends == starts) | np.isin(buf[np.minimum(starts, len(buf) - 1)], _WHITESPACE)):
        keep[i] = bool(raw[starts[i] : ends[i]].strip())
    return starts.astype(np.int64), ends.astype(np.int64), keep


def parse_records(raw: bytes, starts: np.ndarray, ends: np.ndarray, schema: pa.Schema | None, fields: Fields):
    """Parse the records ``raw[starts[i]:ends[i]]`` into tables that fit ``schema``.

    Parameters
    ----------
    raw : bytes
        JSONL; ``starts``/``ends`` (int64) delimit its non-blank lines.
    schema : pyarrow.Schema or None
        The input's record fields and types. A record with another field, or a value that cannot
        be cast to the field's type, is bad. None: take the types as they come (sampling).
    fields : Fields

    Returns
    -------
    pieces : list of (array of int64, pyarrow.Table)
        Record indices (increasing) and their table, in record order; with a schema every table
        has its fields and types, and the text field is a string (null read as empty).
    bad : list of Bad
        The records that could not be read, in record order.
    """
    if len(starts) == 0:
        return [], []
    everything = np.arange(len(starts), dtype=np.int64)
    if _valid_utf8(raw):
        try:
            table = _read_json(raw)
            if table.num_rows == len(starts) and not _lacks_field(raw, starts, ends, table, fields):
                return [(everything, conform(table, schema, fields))], []
        except (pa.ArrowInvalid, Mismatch):
            pass
    bad = [b for b in (_check_line(raw[s:e], i, fields) for i, (s, e) in enumerate(zip(starts, ends))) if b is not None]
    good = np.setdiff1d(everything, [b.index for b in bad])
    pieces, unparsed = _parse_runs(raw, starts, ends, good, schema, fields)
    return pieces, sorted(bad + unparsed, key=lambda b: b.index)


def conform(table: pa.Table, schema: pa.Schema | None, fields: Fields) -> pa.Table:
    """``table`` with ``schema``'s fields in its order (absent ones null) and types, text as string.

    Raises
    ------
    Mismatch
        If a field is not in ``schema``, the text field is not a string, or a value cannot be
        cast to its field's type.
    """
    if fields.text is not None and fields.text in table.column_names:
        text = table[fields.text]
        if pa.types.is_dictionary(text.type):
            text = text.cast(text.type.value_type)
        if text.null_count == len(text):
            text = pa.nulls(len(text), pa.string())
        if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type) or pa.types.is_null(text.type)):
            raise Mismatch("wrong-type", fields.text, f"expected a string, got {text.type}")
        table = table.set_column(table.column_names.index(fields.text), fields.text, text.cast(pa.string()).fill_null(""))
    if schema is None:
        return table
    extra = [name for name in table.column_names if name not in schema.names]
    if extra:
        raise Mismatch("unknown-field", extra[0], "not among the input's fields (those found at the start of each file)")
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        try:
            columns.append(table[field.name].cast(field.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
            raise Mismatch("wrong-type", field.name, f"cannot convert {table[field.name].type} to {field.type} ({err})") from None
    return pa.table(columns, schema=schema)


def json_kind(value) -> str:
    """The JSON type of a decoded value, with its article ("a string", "an array", "null")."""
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)


def _read_json(raw: bytes) -> pa.Table:
    # Explicit block size: one block holds the whole buffer, however long a record is.
    return pajson.read_json(
        pa.py_buffer(raw),
        read_options=pajson.ReadOptions(block_size=min(max(len(raw), 1 << 20), (1 << 31) - 1)),
        parse_options=pajson.ParseOptions(newlines_in_values=False),
    )


def _valid_utf8(raw: bytes) -> bool:
    # pyarrow's JSON parser copies invalid UTF-8 into strings; Arrow's own check costs ~0.1 ms/MB.
    offsets = pa.py_buffer(np.array([0, len(raw)], dtype=np.int64))
    try:
        pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(raw)]).cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def _lacks_field(raw, starts, ends, table: pa.Table, fields: Fields) -> bool:
    """Whether a record lacks the text or id field or has a null id (a null text is fine)."""
    for name in (fields.text, fields.id):
        if name is None:
            continue
        if name not in table.column_names:
            return True
        nulls = table[name].null_count
        if nulls and name == fields.id:
            return True
        if nulls:  # pyarrow reads an absent field as null too; look at those lines only
            rows = np.flatnonzero(table[name].is_null().to_numpy(zero_copy_only=False))
            if any(name not in json.loads(raw[starts[i] : ends[i]]) for i in rows):
                return True
    return False


def _check_line(line: bytes, index: int, fields: Fields) -> Bad | None:
    """What is wrong with one record line, or None."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        return Bad(index, "invalid-utf8", None, f"invalid UTF-8 (byte 0x{line[err.start]:02x} at column {err.start + 1})")
    try:
        record = json.loads(text)
    except ValueError as err:
        return Bad(index, "invalid-json", None, f"invalid JSON: {err}")
    if not isinstance(record, dict):
        return Bad(index, "not-an-object", None, f"expected a JSON object, got {json_kind(record)}")
    for name in (fields.text, fields.id):
        if name is not None and name not in record:
            return Bad(index, "missing-field", name, "missing")
    if fields.text is not None and not (record[fields.text] is None or isinstance(record[fields.text], str)):
        return Bad(index, "wrong-type", fields.text, f"expected a string, got {json_kind(record[fields.text])}")
    if fields.id is not None and record[fields.id] is None:
        return Bad(index, "missing-field", fields.id, "null")
    return None


def _parse_runs(raw, starts, ends, good: np.ndarray, schema, fields: Fields):
    """Parse the ``good`` lines with pyarrow, halving any run that fails until the culprit is alone."""
    if len(good) == 0:
        return [], []
    try:
        table = conform(_read_json(b"\n".join(raw[starts[i] : ends[i]] for i in good)), schema, fields)
        if table.num_rows != len(good):
            raise pa.ArrowInvalid(f"{table.num_rows} records read from {len(good)} lines")
        return [(good, table)], []
    except Mismatch as err:
        if len(good) == 1:
            return [], [Bad(int(good[0]), err.kind, err.field, err.reason)]
    except pa.ArrowInvalid as err:
        if len(good) == 1:  # e.g. an escaped lone surrogate, which Python's json accepts
            message = re.sub(r"\.?( in row \d+)?$", "", str(err).removeprefix("JSON parse error: "))
            return [], [Bad(int(good[0]), "invalid-json", None, f"invalid JSON: {message}")]
    half = len(good) // 2
    left, left_bad = _parse_runs(raw, starts, ends, good[:half], schema, fields)
    right, right_bad = _parse_runs(raw, starts, ends, good[half:], schema, fields)
    return left + right, left_bad + right_bad
