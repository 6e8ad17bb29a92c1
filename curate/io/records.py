"""JSONL blocks to Arrow tables, record by record where a block is bad.

A block of JSONL bytes is first parsed whole by pyarrow (the fast path). Only when that fails
(invalid UTF-8 or JSON, a record that does not fit the input's fields) is it parsed line by line
with Python's ``json`` to find the bad records and say what is wrong with each, and the good lines
are parsed by pyarrow again, halving the run wherever one still fails. No file system here:
:mod:`curate.io.read` reads the bytes and places the results.

A :class:`Layout` says which fields are read: only some (the others are never parsed, so their
values and types cannot stop a read), or all of them (then a field not seen at the start of
the files is a bad record). Ids are read exactly: an integer id that does not fit int64 is
never a double.
"""

import datetime
import json
import math
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson

_WHITESPACE = np.array([9, 10, 11, 12, 13, 32], dtype=np.uint8)
# Arrays and objects nested deeper than this in a record make it invalid input (see
# curate.kernels.nesting). The sample's type of a field so deep is pickled with every frame's
# meta, three Python frames a level (300 levels failed at the top of a stack).
MAX_DEPTH = 64
TOO_DEEP = f"invalid JSON: arrays and objects nested more than {MAX_DEPTH} levels deep"
# How a string id column parses ids: as strings, or integers (exact up to 38 digits), then cast.
_STRING_ID_TYPES = (pa.string(), pa.int64(), pa.decimal128(38, 0))
# Why a field read by type holds strings: the input's first records say so (a field null in all
# of them holds strings too, since no type is known).
_STRINGS_WHY = " (its values in the input's first records, the first MiB of each file, are strings or null)"
_JSON_KINDS = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


@dataclass(frozen=True)
class Fields:
    """The fields every record is checked for.

    ``text`` must be present and a string or null (read as empty); ``id`` must be present and
    not null (its type, like any other field's, is checked by casting to the input's schema, the
    same way in the fast and the line-by-line path). None: not checked (sampling, assigned ids).
    ``absent`` must not be present: the id's name where ids are assigned, since no file's first
    records hold it (a later record's own would meet the assigned one: two ids in one line).
    """

    text: str | None
    id: str | None
    absent: str | None = None


@dataclass(frozen=True)
class Layout:
    """What a block's records become: the fields read, their types, and what is checked.

    ``schema`` holds the fields read, with the input's (unified) types; None takes every field
    as it comes (sampling). ``only``: read just ``schema``'s fields (pyarrow ignores the others);
    otherwise every field is read and one not in ``schema`` makes the record bad. Fields in
    ``json_text`` (typed string in ``schema``) hold each value's JSON text: their types differ
    between files, so no Arrow type holds them all. ``keep_null_text``: a null text stays null
    (the final write); otherwise it reads as empty (the dedup's view). ``compared``: fields the
    stages order by (a keep policy's), checked as the text and the id are.
    """

    schema: pa.Schema | None
    fields: Fields
    only: bool = False
    json_text: frozenset = frozenset()
    keep_null_text: bool = False
    compared: tuple[str, ...] = ()

    def explicit(self) -> bool:
        """Whether pyarrow reads only the schema's fields (others ignored): reading just some
        fields, or every field where some hold JSON text (checked from each line's own parse,
        as pyarrow cannot read a field whose types differ, let alone a list of numbers and objects)."""
        return self.only or bool(self.json_text)

    def parse_types(self) -> list[pa.Schema]:
        """The explicit schemas pyarrow is given, tried in order (they differ in the id's type only).

        A string id column also takes integer ids, as int64 or, beyond int64, as a 38-digit
        decimal, so that their text is exact (pyarrow would otherwise read them as doubles).
        """
        if self.schema is None:
            return [None]
        # Reading every field, the others' types are inferred (and cast after), but one that holds
        # strings is always given: pyarrow would read a block of date-like strings as timestamps.
        names = (
            self.schema.names
            if self.explicit()
            else [f.name for f in self.schema if f.name in (self.fields.text, self.fields.id) or _holds_strings(f.type)]
        )
        base = [self.schema.field(n) for n in names if n not in self.json_text]
        id_type = self.schema.field(self.fields.id).type if self.fields.id in self.schema.names else None
        if id_type is None or not (pa.types.is_string(id_type) or pa.types.is_large_string(id_type)):
            return [pa.schema(base)]
        return [pa.schema([f.with_type(t) if f.name == self.fields.id else f for f in base]) for t in _STRING_ID_TYPES]


def _holds_strings(dtype: pa.DataType) -> bool:
    if pa.types.is_string(dtype):
        return True
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _holds_strings(dtype.value_type)
    return pa.types.is_struct(dtype) and any(_holds_strings(dtype.field(i).type) for i in range(dtype.num_fields))


@dataclass(frozen=True)
class Bad:
    """One record that cannot be read: its index among the block's records, what is wrong and where."""

    index: int
    kind: str  # invalid-utf8 | invalid-json | not-an-object | missing-field | wrong-type | unknown-field | truncated | corrupt
    field: str | None
    reason: str


class BadRecordError(ValueError):
    """A record that cannot be read, in a read that stops at one (``on_error="fail"``): the message
    names its file, line (or Parquet row) and field.

    Partitions are read in parallel, so it is the first bad record of its partition; ``first``
    says whether that partition is the input's first, so no earlier record is bad. ``late``:
    where the record is bad only for a type (or a field) that the first MiB of each JSONL file,
    from which types are taken, did not show, the field as this record holds it
    (``pyarrow.Field``): read with it unified too, the record would be good.
    """

    def __init__(self, message: str, first: bool = False, late: pa.Field | None = None):
        super().__init__(message)
        self.first, self.late = first, late

    def __reduce__(self):  # raised on a worker, rebuilt on the client
        return type(self), (str(self), self.first, self.late)


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


def parse_records(raw: bytes, starts: np.ndarray, ends: np.ndarray, layout: Layout):
    """Parse the records ``raw[starts[i]:ends[i]]`` into tables that fit ``layout``.

    Parameters
    ----------
    raw : bytes
        JSONL; ``starts``/``ends`` (int64) delimit its non-blank lines.
    layout : Layout
        The fields read and their types. A value that cannot be cast to its field's type (or,
        reading every field, a field not in the layout's schema) makes its record bad.

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
    # numba (0.4 s to import) only once records are parsed: `curate --help` and the commands
    # that check a config or the inputs' paths stay quick (tests/test_checks.py)
    from curate.kernels.nesting import nested_deeper

    everything = np.arange(len(starts), dtype=np.int64)
    deep = nested_deeper(np.frombuffer(raw, dtype=np.uint8), starts, ends, MAX_DEPTH)
    if not deep.any() and _valid_utf8(raw) and _objects_only(raw, starts, ends):
        try:
            table = _read_json(raw, layout)
            if table.num_rows == len(starts) and not _lacks_field(raw, starts, ends, table, layout.fields):
                return [
                    (
                        everything,
                        conform(table, layout, [raw[s:e] for s, e in zip(starts, ends)] if layout.json_text else None),
                    )
                ], []
        except (pa.ArrowInvalid, Mismatch):
            pass
    bad = [
        b
        for b in (
            Bad(i, "invalid-json", None, TOO_DEEP) if deep[i] else _check_line(raw[s:e], i, layout.fields)
            for i, (s, e) in enumerate(zip(starts, ends))
        )
        if b is not None
    ]
    good = np.setdiff1d(everything, [b.index for b in bad])
    pieces, unparsed = _parse_runs(raw, starts, ends, good, layout)
    return pieces, sorted(bad + unparsed, key=lambda b: b.index)


def conform(table: pa.Table, layout: Layout, lines: list[bytes] | None = None) -> pa.Table:
    """``table`` with the layout's fields in its order (absent ones null) and types, text as string.

    Parameters
    ----------
    table : pyarrow.Table
        Records as parsed (JSONL) or read (Parquet).
    layout : Layout
    lines : list of bytes, optional
        The records' JSONL lines, one per row: the JSON text of a ``json_text`` field is taken
        from them exactly (else it is written from the parsed values).

    Raises
    ------
    Mismatch
        If a field is not in the schema (reading every field), the text field is not a string,
        or a value cannot be cast to its field's type.
    """
    fields, schema = layout.fields, layout.schema
    if fields.text is not None and fields.text in table.column_names:
        text = table[fields.text]
        if pa.types.is_dictionary(text.type):
            text = text.cast(text.type.value_type)
        if text.null_count == len(text):
            text = pa.nulls(len(text), pa.string())
        if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type) or pa.types.is_null(text.type)):
            raise Mismatch("wrong-type", fields.text, f"expected a string, got {text.type}")
        text = text.cast(pa.string())
        table = table.set_column(
            table.column_names.index(fields.text), fields.text, text if layout.keep_null_text else text.fill_null("")
        )
    if schema is None:
        return table
    decoded = [json.loads(line) for line in lines] if lines is not None and layout.json_text else None
    if not layout.only:
        names = table.column_names if decoded is None else dict.fromkeys(name for d in decoded for name in d)
        extra = [name for name in names if name not in schema.names]
        if extra:
            raise Mismatch(
                "unknown-field", extra[0], "not among the input's fields (those found at the start of each file)"
            )
    columns = []
    for field in schema:
        if field.name in layout.json_text:
            values = (
                [d.get(field.name) for d in decoded]
                if decoded is not None
                else (python_values(table[field.name]) if field.name in table.column_names else [None] * table.num_rows)
            )
            columns.append(pa.array([None if v is None else json_text(v) for v in values], pa.string()))
        elif field.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, field.type))
        else:
            try:
                columns.append(table[field.name].cast(field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
                raise Mismatch(
                    "wrong-type", field.name, f"cannot convert {table[field.name].type} to {field.type} ({err})"
                ) from None
    return pa.table(columns, schema=schema)


# Bytes one string or binary array holds at most: its offsets are int32.
SMALL_OFFSETS_LIMIT = 2**31


def large_offsets(dtype: pa.DataType) -> pa.DataType:
    """``string`` and ``binary`` as ``large_string`` and ``large_binary`` (int64 offsets, no 2 GiB
    limit per array, pandas' own string type); any other type as it is."""
    return {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}.get(dtype, dtype)


def without_views(table: pa.Table | pa.Schema):
    """``table`` (or a schema) with ``string_view`` and ``binary_view`` columns as ``string`` and
    ``binary``: Arrow's ``take`` and the conversions to pandas and JSON have no kernels for the
    view types (a run stopped with ArrowNotImplementedError), and Parquet stores them as plain
    strings and bytes anyway."""
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    if isinstance(table, pa.Schema):
        return pa.schema([f.with_type(plain.get(f.type, f.type)) for f in table], metadata=table.metadata)
    for i, field in enumerate(table.schema):
        if field.type in plain:
            table = table.set_column(i, field.with_type(plain[field.type]), table[i].cast(plain[field.type]))
    return table


def python_values(column) -> list:
    """A column's values as Python objects; bytes of strings that are not valid UTF-8 written as
    ``\\xNN``; dates, times, timestamps and durations that Python's own types cannot hold as
    their ISO 8601 text (:func:`_temporal_text`)."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return [
            None if v is None else v.decode("utf-8", "backslashreplace")
            for v in column.cast(pa.large_binary()).to_pylist()
        ]
    if pa.types.is_time64(column.type) and column.type.unit == "ns":
        # datetime.time holds microseconds: 12:34:56.789012345 lost its last three digits.
        ns = column.cast(pa.int64()).to_pylist()
        return [
            None if v is None else (t if v % 1000 == 0 else _temporal_text(v, column.type))
            for v, t in zip(ns, column.to_pylist())
        ]
    try:
        return column.to_pylist()
    except (OverflowError, ValueError):  # a value beyond Python's datetime (years 1-9999) or timedelta
        if not pa.types.is_temporal(column.type):
            raise
    values = []
    for scalar in column:
        try:
            values.append(scalar.as_py())
        except (OverflowError, ValueError):
            storage = pa.int32() if column.type.bit_width == 32 else pa.int64()
            values.append(_temporal_text(scalar.cast(storage).as_py(), column.type))
    return values


def _temporal_text(value: int, dtype: pa.DataType) -> str:
    """ISO 8601 text of a date, time, timestamp or duration of ``dtype`` held as the integer
    ``value`` (its unit since 1970-01-01 or midnight), beyond Python's types: extended years from
    numpy (``294247-01-10T04:00:54.775807``; a time zone's instants in UTC, ``+00:00``);
    durations as pandas writes them (``P1DT0H0M0.5S``)."""
    if pa.types.is_date32(dtype) or pa.types.is_date64(dtype):
        return str(np.datetime64(value, "D" if pa.types.is_date32(dtype) else "ms").astype("datetime64[D]"))
    if pa.types.is_timestamp(dtype):
        return str(np.datetime64(value, dtype.unit)) + ("+00:00" if dtype.tz else "")
    if pa.types.is_time(dtype):
        return pa.scalar(value, pa.int64()).cast(dtype).cast(pa.string()).as_py()
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[dtype.unit]
    seconds, fraction = divmod(abs(value), per_second)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    digits = f".{fraction:0{len(str(per_second)) - 1}d}".rstrip("0") if fraction else ""
    return f"{'-' if value < 0 else ''}P{days}DT{hour}H{minute}M{second}{digits}S"


def python_rows(table: pa.Table) -> list[dict]:
    """A table's rows as dicts of Python values (see :func:`python_values`), in column order."""
    columns = {name: python_values(table[name]) for name in table.column_names}
    return [{name: values[i] for name, values in columns.items()} for i in range(table.num_rows)]


def json_text(value) -> str:
    """A decoded value as JSON text, exactly: integers whole, floats as the shortest text that
    reads back as the same double (Python's ``repr``), non-ASCII characters as they are.

    Values JSON has no notation for are written as strings: bytes decoded as UTF-8 (other
    bytes as ``\\xNN``), dates, times and durations in ISO 8601 (``2020-01-01T12:00:00+00:00``,
    ``P0DT0H1M30S``, as pandas' ``to_json(date_format="iso")``), anything else (a decimal) as its ``str``.
    """
    return json.dumps(value, ensure_ascii=False, default=_as_string)


def finite(value):
    """``value`` with NaN and infinite floats (no JSON notation) as None, nested values too."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def _as_string(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, datetime.timedelta):
        import pandas as pd  # here: the command line's checks import this module, and pandas is slow to import

        return pd.Timedelta(value).isoformat()  # timedelta has no isoformat; pd.Timedelta is one
    if isinstance(value, datetime.date | datetime.time):  # datetime and pd.Timestamp included
        return value.isoformat()
    return str(value)


def json_kind(value) -> str:
    """The JSON type of a decoded value, with its article ("a string", "an array", "null")."""
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)


def _read_json(raw: bytes, layout: Layout) -> pa.Table:
    """Parse a block with pyarrow, trying each of the layout's explicit schemas in turn."""
    error = None
    for schema in layout.parse_types():
        options = pajson.ParseOptions(newlines_in_values=False)
        if schema is not None:
            options = pajson.ParseOptions(
                newlines_in_values=False,
                explicit_schema=schema,
                unexpected_field_behavior="ignore" if layout.explicit() else "infer",
            )
        try:
            # Explicit block size: one block holds the whole buffer, however long a record is.
            table = pajson.read_json(
                pa.py_buffer(raw),
                read_options=pajson.ReadOptions(block_size=min(max(len(raw), 1 << 20), (1 << 31) - 1)),
                parse_options=options,
            )
        except pa.ArrowInvalid as err:
            error = err
            continue
        ids = _ids_as_written(raw, table, layout.fields.id)
        if ids is not None:
            table = table.set_column(table.column_names.index(layout.fields.id), layout.fields.id, ids)
        return table
    raise error


def _ids_as_written(raw: bytes, table: pa.Table, id_field: str | None) -> pa.Array | None:
    """Where a decimal id column read the block (integer ids among string ids, or past int64):
    the ids as the records write them, as strings, if some are strings; None if all are integers.

    A decimal column takes any number-like value and writes it back its own way: strings
    (``"0012"`` as 12, ``"-0"`` as 0, ``"1e3"`` as 1000, ids no record holds) and numbers with a
    fraction or exponent (1.0 as 1). The first are taken from the records; the second make
    the block be read line by line, where they are named (:func:`_id_problem`).

    Raises
    ------
    pyarrow.ArrowInvalid
        If an id is a number with a fraction or exponent, or a boolean, or a line is not JSON to Python.
    """
    if id_field not in table.column_names or not pa.types.is_decimal(table.schema.field(id_field).type):
        return None
    try:
        ids = [json.loads(line).get(id_field) for line in raw.split(b"\n") if line.strip()]
    except ValueError:  # a line Python's json does not take: the line by line read names it
        raise pa.ArrowInvalid("a line pyarrow reads is not JSON to Python") from None
    if any(isinstance(value, (float, bool)) for value in ids):
        raise pa.ArrowInvalid(f"an id in field {id_field!r} is a number with a fraction or exponent")
    if not any(isinstance(value, str) for value in ids):
        return None  # integers only: the decimals hold them exactly
    return pa.array([value if value is None or isinstance(value, str) else str(value) for value in ids], pa.string())


def _valid_utf8(raw: bytes) -> bool:
    # pyarrow's JSON parser copies invalid UTF-8 into strings; Arrow's own check costs ~0.1 ms/MB.
    offsets = pa.py_buffer(np.array([0, len(raw)], dtype=np.int64))
    try:
        pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(raw)]).cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def _objects_only(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether every line starts with "{" (after any whitespace). pyarrow gets no block with
    another line: a line ``null`` crashed the process (pyarrow 26, at a block's first line) or
    was read as a record of nulls."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    other = buf[starts] != ord("{")
    return all(raw[s:e].lstrip()[:1] == b"{" for s, e in zip(starts[other], ends[other]))


def _lacks_field(raw, starts, ends, table: pa.Table, fields: Fields) -> bool:
    """Whether a record lacks the text or id field, has a null id (a null text is fine) or holds
    the ``absent`` field."""
    if fields.absent is not None and (name := json.dumps(fields.absent).encode()) in raw:
        for line in (raw[s:e] for s, e in zip(starts, ends)):
            try:
                if name in line and fields.absent in json.loads(line):
                    return True
            except ValueError:  # what pyarrow reads and json does not: the line-by-line path says
                return True
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


_ONE_PER_LINE = "JSONL holds one JSON object per line"


def _check_line(line: bytes, index: int, fields: Fields) -> Bad | None:
    """What is wrong with one record line, or None."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        where = f"byte 0x{line[err.start]:02x} at column {err.start + 1}"
        return Bad(index, "invalid-utf8", None, f"invalid UTF-8 ({where}){_encoding_hint(line)}")
    try:
        record = json.loads(text)
    except ValueError as err:
        # A pretty-printed JSON file's first line ("[" or "{"): say what JSONL is.
        hint = f" ({_ONE_PER_LINE})" if text.strip() in ("[", "{") else _encoding_hint(line)
        # The decoder's "line 1 column 19 (char 18)" would name a line of its own beside the file's.
        if isinstance(err, json.JSONDecodeError):
            err = f"{err.msg}{'' if err.msg.endswith(' at') else ' at'} column {err.colno}"
        return Bad(index, "invalid-json", None, f"invalid JSON: {err}{hint}")
    if not isinstance(record, dict):
        of_objects = isinstance(record, list) and any(isinstance(value, dict) for value in record)
        hint = f" ({_ONE_PER_LINE}, not an array of them)" if of_objects else ""
        return Bad(index, "not-an-object", None, f"expected a JSON object, got {json_kind(record)}{hint}")
    for name in (fields.text, fields.id):
        if name is not None and name not in record:
            return Bad(index, "missing-field", name, "missing")
    if fields.absent is not None and fields.absent in record:
        return Bad(
            index,
            "unknown-field",
            fields.absent,
            "not in any file's first records, so ids are assigned (file:line); give every record an id, or none",
        )
    if fields.text is not None and not (record[fields.text] is None or isinstance(record[fields.text], str)):
        return Bad(index, "wrong-type", fields.text, f"expected a string, got {json_kind(record[fields.text])}")
    if fields.id is not None and record[fields.id] is None:
        return Bad(index, "missing-field", fields.id, "null")
    return None


def _encoding_hint(line: bytes) -> str:
    """Why a line that is not UTF-8 JSON may be so: another encoding, or lines ended by CR alone."""
    # UTF-16 and UTF-32 put NUL bytes beside every ASCII character, JSON's quotes among them; a raw
    # NUL in UTF-8 is a control character, which JSON strings write escaped.
    if line.startswith((b"\xff\xfe", b"\xfe\xff")) or line.count(b'"\x00') + line.count(b'\x00"') >= 2:
        return (
            " (NUL bytes or a byte-order mark: the file looks UTF-16 or UTF-32; curate reads UTF-8: convert it, "
            "e.g. iconv -f UTF-16 -t UTF-8 IN > OUT)"
        )
    # A raw CR inside a line is whitespace between tokens (strings cannot hold one): records
    # separated by CR alone (classic Mac OS line ends) read as one line.
    if b"\r" in line.rstrip(b"\r"):
        return r" (lines end in \r alone: JSONL records end in \n, e.g. tr '\r' '\n' < IN > OUT)"
    if b"\x00" in line:
        return r" (a raw NUL byte: JSON strings hold control characters escaped, as \u0000)"
    return ""


def _parse_runs(raw, starts, ends, good: np.ndarray, layout: Layout):
    """Parse the ``good`` lines with pyarrow, halving any run that fails until the culprit is alone."""
    if len(good) == 0:
        return [], []
    lines = [raw[starts[i] : ends[i]] for i in good]
    try:
        table = conform(_read_json(b"\n".join(lines), layout), layout, lines)
        if table.num_rows != len(good):
            raise pa.ArrowInvalid(f"{table.num_rows} records read from {len(good)} lines")
        return [(good, table)], []
    except Mismatch as err:
        if len(good) == 1:
            return [], [Bad(int(good[0]), err.kind, err.field, err.reason)]
    except pa.ArrowInvalid as err:
        if len(good) == 1:
            return [], [_diagnose(lines[0], int(good[0]), layout, err)]
    half = len(good) // 2
    left, left_bad = _parse_runs(raw, starts, ends, good[:half], layout)
    right, right_bad = _parse_runs(raw, starts, ends, good[half:], layout)
    return left + right, left_bad + right_bad


def _diagnose(line: bytes, index: int, layout: Layout, err: pa.ArrowInvalid) -> Bad:
    """Why pyarrow could not read one line that Python's ``json`` reads: a value of another type
    than its field's (named), or else (an escaped lone surrogate) invalid JSON."""
    record = json.loads(line)
    for field in layout.parse_types()[0] or ():
        value = record.get(field.name)
        if value is None or field.name == layout.fields.text:  # the text's type was checked before
            continue
        if field.name == layout.fields.id:
            reason = _id_problem(value, layout.schema.field(field.name).type)
            if reason:
                return Bad(index, "wrong-type", field.name, reason)
            continue
        if pa.types.is_string(field.type) and not isinstance(value, str):  # else cast to one, so found wanting
            return Bad(index, "wrong-type", field.name, f"expected a string{_STRINGS_WHY}, got {json_kind(value)}")
        try:
            found = pa.array([value])
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError):
            if isinstance(value, int) and not isinstance(value, bool):  # beyond 64 bits: the field is named
                return Bad(index, "wrong-type", field.name, f"the integer {value} does not fit {field.type}")
            continue  # not even alone: the line is invalid JSON to Arrow (say, a lone surrogate)
        try:
            found.cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as cast_error:
            return Bad(index, "wrong-type", field.name, f"cannot convert {found.type} to {field.type} ({cast_error})")
    message = re.sub(r"\.?( in row \d+)?$", "", str(err).removeprefix("JSON parse error: "))
    # A number beyond a double's range (1e400) is JSON, but Arrow's reader refuses the whole line
    # even in a field it is not asked for: name the field.
    return Bad(index, "invalid-json", _infinite(record), f"invalid JSON: {message}")


def _infinite(value, path: str = "") -> str | None:
    """The dotted path (``meta.x``, ``scores.2``) of the first number in ``value`` beyond a double's range."""
    if isinstance(value, float) and math.isinf(value):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        found = _infinite(inner, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def _id_problem(value, id_type: pa.DataType) -> str | None:
    """What is wrong with an id value for an id column of ``id_type`` (int64 or string), or None."""
    integer = isinstance(value, int) and not isinstance(value, bool)
    if pa.types.is_integer(id_type):
        if not integer:
            return f"expected an integer (as the ids at the start of the input files), got {json_kind(value)}"
        if not -(1 << 63) <= value < (1 << 63):
            return f"integer {value} does not fit int64 (the ids at the start of the input files do)"
    elif not (integer or isinstance(value, str)):
        return f"expected a string or an integer, got {json_kind(value)}"
    elif integer and len(str(abs(value))) > 38:
        return f"integer {value} has more than 38 digits"
    return None
