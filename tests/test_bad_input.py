"""Bad input, case by case: the exact behaviour with --on-error fail (the default) and skip.

Each test builds its fixture in ``tmp_path``. Fail mode: the message names file, line and field.
Skip mode: the exact rejected rows (line, kind, field, reason, record bytes) and the documents kept.
"""

import datetime
import errno
import gzip
import json
import logging
import os
import re
import shutil
import tempfile
import zlib
from pathlib import Path

import click
import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from click.testing import CliRunner
from distributed.shuffle._exceptions import P2POutOfDiskError

import curate
from curate.checks import STRING_IDS, check_inputs
from curate.cli import main
from curate.config import IOConfig, load_config
from curate.io import read_documents, write_documents
from curate.io.read import split_rejected
from curate.io.records import BadRecordError
from curate.pipeline import dedup


def jsonl(path, *lines, end=b"\n"):
    """Write lines (str or bytes) joined by ``end``, with ``end`` after the last one too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = [line.encode() if isinstance(line, str) else line for line in lines]
    path.write_bytes(b"".join(line + end for line in data))
    return path


def doc_lines(n, *, words=20):
    return [json.dumps({"id": i, "text": f"document {i} " * words}) for i in range(n)]


def read(path, **kwargs) -> pd.DataFrame:
    """Fail-mode read, computed, without ``_doc``."""
    return read_documents(str(path), **kwargs).compute().drop(columns="_doc").reset_index(drop=True)


def read_skip(path, **kwargs):
    """Skip-mode read: (documents without ``_doc``, rejected rows as (line, kind, field, reason, record))."""
    good, rejected = split_rejected(read_documents(str(path), on_error="skip", **kwargs))
    rows = rejected.compute()
    rows = list(
        zip(
            rows._line,
            rows._kind,
            rows._field.astype(object).where(rows._field.notna(), None),
            rows._reason,
            rows._record,
        )
    )
    return good.compute().drop(columns="_doc").reset_index(drop=True), rows


def fail_message(path, **kwargs) -> str:
    with pytest.raises(ValueError) as err:
        read_documents(str(path), **kwargs).compute()
    return str(err.value)


def run(tmp_path, inputs, **overrides):
    out = tmp_path / "out"
    return out, dedup([str(i) for i in inputs], str(out), load_config(None, overrides))


def test_malformed_line_in_a_large_shard(tmp_path):
    lines = doc_lines(3000)
    lines[1500] = '{"id": 1500, "text": "cut'
    path = jsonl(tmp_path / "shard.jsonl", *lines)
    reason = "invalid JSON: Unterminated string starting at column 22"
    for blocksize in (None, "16KB"):  # the fast parse fails in one block of the split file only
        assert fail_message(path, blocksize=blocksize) == f"shard.jsonl:1501: {reason}"
        good, rejected = read_skip(path, blocksize=blocksize)
        assert rejected == [(1501, "invalid-json", None, reason, lines[1500].encode())]
        assert good.id.tolist() == [i for i in range(3000) if i != 1500]
        assert good.text.tolist() == [json.loads(line)["text"] for i, line in enumerate(lines) if i != 1500]


def test_rejected_records_do_not_depend_on_partitioning(tmp_path):
    lines = [
        '{"id": 1, "text": "a"}',
        '{"id": 2.0, "text": "b"}',
        "x",
        '{"id": 3, "text": 5}',
        '{"id": 4, "text": "d"}',
        "[]",
    ]
    path = jsonl(tmp_path / "x.jsonl", *lines)
    whole_good, whole_rejected = read_skip(path, blocksize=None)
    # 2.0 is a number, not an integer (test_ids_that_are_not_integers_or_strings_are_bad_records)
    expected = [(2, "wrong-type"), (3, "invalid-json"), (4, "wrong-type"), (6, "not-an-object")]
    assert [r[:2] for r in whole_rejected] == expected
    assert whole_good.text.tolist() == ["a", "d"]
    for blocksize in (1, 30, 60):  # 1: every line is a block of its own
        good, rejected = read_skip(path, blocksize=blocksize)
        assert rejected == whole_rejected
        pd.testing.assert_frame_equal(good, whole_good)


def test_valid_json_that_is_not_an_object(tmp_path):
    path = jsonl(
        tmp_path / "x.jsonl",
        '{"id": 1, "text": "a"}',
        "[1, 2]",
        "42",
        '"text"',
        "null",
        "true",
        '{"id": 7, "text": "g"}',
    )
    assert fail_message(path) == "x.jsonl:2: expected a JSON object, got an array"
    good, rejected = read_skip(path)
    assert good.id.tolist() == [1, 7]
    assert [(line, kind, reason) for line, kind, _, reason, _ in rejected] == [
        (2, "not-an-object", "expected a JSON object, got an array"),
        (3, "not-an-object", "expected a JSON object, got a number"),
        (4, "not-an-object", "expected a JSON object, got a string"),
        (5, "not-an-object", "expected a JSON object, got null"),
        (6, "not-an-object", "expected a JSON object, got a boolean"),
    ]


def test_json_files_that_are_not_jsonl(tmp_path):
    # A JSON array of records, on one line or pretty-printed: the error says what JSONL is
    # (not for other arrays: test_valid_json_that_is_not_an_object).
    records = [{"id": 1, "text": "a"}, {"id": 2, "text": "b"}]
    one_line = jsonl(tmp_path / "a.json", json.dumps(records))
    assert fail_message(one_line).endswith("got an array (JSONL holds one JSON object per line, not an array of them)")
    for name, value in [("b.json", records), ("c.jsonl", records[0])]:
        path = jsonl(tmp_path / name, json.dumps(value, indent=2))
        assert re.fullmatch(rf"{name}:1: invalid JSON: .* \(JSONL holds one JSON object per line\)", fail_message(path))
    # Only such a first line: other invalid JSON is not a pretty-printed file.
    assert not fail_message(jsonl(tmp_path / "d.jsonl", '{"id": 1, "text": "a"')).endswith("per line)")


@pytest.mark.parametrize("at", [0, 3, 6])  # the file's first line, a middle one, the last
def test_a_null_line_among_records(tmp_path, at):
    # pyarrow was given blocks holding a line `null` among objects: where it began the block (a
    # file's first line, or a block of a split file) the process crashed (a segfault, no
    # message); elsewhere it became a row of nulls, and the field check raised a TypeError.
    lines = doc_lines(6)
    lines.insert(at, "null")
    path = jsonl(tmp_path / "x.jsonl", *lines)
    reason = "expected a JSON object, got null"
    for blocksize in (None, 1):  # 1: every line is a block of its own
        assert fail_message(path, blocksize=blocksize) == f"x.jsonl:{at + 1}: {reason}"
        good, rejected = read_skip(path, blocksize=blocksize)
        assert rejected == [(at + 1, "not-an-object", None, reason, b"null")]
        assert good.id.tolist() == list(range(6))


def test_missing_text_field(tmp_path):
    path = jsonl(tmp_path / "x.jsonl", '{"id": 1, "text": "a"}', '{"id": 2, "body": "b"}', '{"id": 3, "text": null}')
    assert fail_message(path) == "x.jsonl:2: field 'text': missing"
    good, rejected = read_skip(path)
    assert rejected == [(2, "missing-field", "text", "missing", b'{"id": 2, "body": "b"}')]
    assert good.to_dict("list") == {"id": [1, 3], "text": ["a", None], "body": [None, None]}
    nowhere = jsonl(tmp_path / "body.jsonl", '{"id": 1, "body": "b"}')
    for on_error in ("fail", "skip"):  # no file has it: a wrong --text-field, stopped before reading
        with pytest.raises(ValueError, match=r"^no text field 'text' in any input file \(fields: \['id', 'body'\]\)$"):
            read_documents(str(nowhere), on_error=on_error)


def test_null_text_stays_null_or_reads_as_empty(tmp_path):
    # Null, as read (the documents as curate dedup writes them back); empty for the stages' own read.
    path = jsonl(tmp_path / "x.jsonl", '{"id": 1, "text": null}', '{"id": 2, "text": "b"}', '{"id": 3, "text": null}')
    assert read(path).to_dict("list") == {"id": [1, 2, 3], "text": [None, "b", None]}
    assert read(path, keep_null_text=False).to_dict("list") == {"id": [1, 2, 3], "text": ["", "b", ""]}
    good, rejected = read_skip(path, keep_null_text=False)
    assert rejected == [] and good.text.tolist() == ["", "b", ""]


def test_text_of_another_type(tmp_path):
    lines = [
        '{"id": 1, "text": 5}',
        '{"id": 2, "text": ["x"]}',
        '{"id": 3, "text": {"a": 1}}',
        '{"id": 4, "text": true}',
        '{"id": 5, "text": "e"}',
    ]
    path = jsonl(tmp_path / "x.jsonl", *lines)
    assert fail_message(path) == "x.jsonl:1: field 'text': expected a string, got a number"
    good, rejected = read_skip(path)
    assert good.to_dict("list") == {"id": [5], "text": ["e"]}
    kinds = ["a number", "an array", "an object", "a boolean"]
    assert rejected == [
        (i + 1, "wrong-type", "text", f"expected a string, got {k}", lines[i].encode()) for i, k in enumerate(kinds)
    ]
    numbers = jsonl(
        tmp_path / "n.jsonl", '{"id": 1, "text": 5}', '{"id": 2, "text": 6}'
    )  # pyarrow alone reads these fine
    assert fail_message(numbers) == "n.jsonl:1: field 'text': expected a string, got a number"


def test_a_number_beyond_a_double_names_its_field(tmp_path):
    # Valid JSON that Arrow's reader refuses even in a field curate does not read.
    path = jsonl(tmp_path / "h.jsonl", '{"id": 1, "text": "a"}', '{"id": 2, "text": "b", "extra": 1e400}')
    assert fail_message(path) == "h.jsonl:2: field 'extra': invalid JSON: Number too big to be stored in double"
    good, rejected = read_skip(path)
    assert good.id.tolist() == [1] and [r[:3] for r in rejected] == [(2, "invalid-json", "extra")]
    # Nested: its path (the message named no field).
    path = jsonl(tmp_path / "n.jsonl", '{"id": 1, "text": "a"}', '{"id": 2, "text": "b", "meta": {"s": [0, -1e999]}}')
    assert fail_message(path) == "n.jsonl:2: field 'meta.s.1': invalid JSON: Number too big to be stored in double"


@pytest.mark.parametrize("dirty", [False, True])
def test_records_nested_too_deep_are_refused_wherever_they_are(tmp_path, dirty):
    # Arrays nested 3,000 levels deep in a field curate never reads stopped the run with a bare
    # RecursionError (Python's json, in the sample of a file's first MiB, or after it wherever
    # the line's block held another bad line: read line by line); 20,000 levels killed the
    # process (pyarrow's type inference, in the sample). Now every read refuses more than 64.
    def record(i, levels, text="t"):
        return json.dumps({"id": i, "text": text, "deep": "@"}).replace('"@"', "[" * levels + "]" * levels)

    text = 'a [[[[ {{{{ " \\" ' * 100  # brackets in a string, after escaped quotes, do not nest
    head = [record(1, 63, text), record(2, 64), record(3, 3_000), record(4, 20_000), record(5, 1)]
    filler = doc_lines(3_000, words=40)[5:]  # past the 1 MiB sample
    tail = [record(9_001, 63), record(9_002, 64), record(9_003, 3_000)]
    path = jsonl(tmp_path / "deep.jsonl", *head, *filler, *tail, *(["{not json"] if dirty else []))
    assert os.path.getsize(path) > 1.2 * 2**20
    deep = "invalid JSON: arrays and objects nested more than 64 levels deep"
    assert fail_message(path) == f"deep.jsonl:2: {deep}"
    good, rejected = read_skip(path)
    assert [r[:4] for r in rejected] == [
        (2, "invalid-json", None, deep),
        (3, "invalid-json", None, deep),
        (4, "invalid-json", None, deep),
        (3_002, "invalid-json", None, deep),
        (3_003, "invalid-json", None, deep),
    ] + (
        [(3_004, "invalid-json", None, "invalid JSON: Expecting property name enclosed in double quotes at column 2")]
        if dirty
        else []
    )
    assert rejected[3][4] == tail[1].encode()
    assert good.id.tolist() == [1, 5, *range(5, 3_000), 9_001] and good.text[0] == text


def test_other_fields_of_another_type_and_bad_escapes(tmp_path):
    lines = [
        '{"id": 1, "text": "a", "score": 1}',
        '{"id": 2, "text": "b", "score": "high"}',
        '{"id": 3, "text": "c", "score": 2.5}',
        '{"id": 4, "text": "\\ud800"}',  # a lone surrogate: Python's json takes it, Arrow does not
    ]
    path = jsonl(tmp_path / "x.jsonl", *lines)
    surrogate = (4, "invalid-json", None, "invalid JSON: The surrogate pair in string is invalid")
    assert fail_message(path) == "x.jsonl:4: invalid JSON: The surrogate pair in string is invalid"
    # A field whose types differ holds each value's JSON text; no record is bad for it.
    good, rejected = read_skip(path)
    assert good.to_dict("list") == {"id": [1, 2, 3], "text": ["a", "b", "c"], "score": ["1", '"high"', "2.5"]}
    assert [r[:4] for r in rejected] == [surrogate]
    # Fields not asked for are not read at all.
    good, rejected = read_skip(path, columns=["id", "text"])
    assert good.to_dict("list") == {"id": [1, 2, 3], "text": ["a", "b", "c"]} and [r[:4] for r in rejected] == [
        surrogate
    ]


def test_texts_that_all_hold_a_lone_surrogate_are_named_as_invalid_json(tmp_path):
    # Every sampled text with a lone surrogate (Python's json takes it, Arrow does not): the check
    # before the run said "field 'text' holds numbers or mixed arrays in its first records".

    path = jsonl(tmp_path / "x.jsonl", '{"id": "a", "text": "one \\ud800 two"}', '{"id": "b", "text": "\\udfff"}')
    check_inputs([str(path)], IOConfig(), "first")  # strings: the reader names the line
    assert fail_message(path) == "x.jsonl:1: invalid JSON: The surrogate pair in string is invalid"


def test_a_value_of_another_type_after_the_sample(tmp_path):
    lines = doc_lines(6000)  # about 1.5 MiB: the fields are taken from the first MiB
    lines = [line[:-1] + ', "score": 1}' for line in lines]
    lines[5000] = '{"id": 5000, "text": "late", "score": "high"}'
    path = jsonl(tmp_path / "x.jsonl", *lines)
    convert = "cannot convert string to int64 (Failed to parse string: 'high' as a scalar of type int64)"
    assert fail_message(path, blocksize="256KB") == f"x.jsonl:5001: field 'score': {convert}"  # every field read
    assert read(path, blocksize="256KB", columns=["id", "text"]).id.tolist() == list(range(6000))  # not read
    # Every field checked, as a read of all of them (the output's, JSONL to Parquet), but only some returned.
    checked = dict(blocksize="256KB", columns=["id", "text"], check_all=True)
    assert fail_message(path, **checked) == f"x.jsonl:5001: field 'score': {convert}"
    good, rejected = read_skip(path, **checked)
    assert (
        list(good.columns) == ["id", "text"]
        and len(good) == 5999
        and [r[:3] for r in rejected] == [(5001, "wrong-type", "score")]
    )
    assert fail_message(path, blocksize="256KB", columns=["score"]) == f"x.jsonl:5001: field 'score': {convert}"
    # An integer beyond int64 there was "invalid JSON: The string 'd5000' is not a valid decimal128
    # number" (the last of the string id's parse types), naming no field.
    lines = [json.dumps({"id": f"d{i}", "text": "x" * 250, "score": 10**20 if i == 5000 else i}) for i in range(6000)]
    path = jsonl(tmp_path / "y.jsonl", *lines)
    huge = "field 'score': the integer 100000000000000000000 does not fit int64"
    assert fail_message(path, blocksize="256KB", columns=["score"]) == f"y.jsonl:5001: {huge}"


def test_a_field_null_in_the_first_records_then_of_another_type_is_named(tmp_path):
    # Null in every record sampled, a field is read as strings; a later number was "invalid JSON:
    # Column(/score) changed from string to number", naming no field, of a valid line.
    lines = [json.dumps({"id": i, "text": "x" * 250, "score": None}) for i in range(6000)]
    lines[5000] = json.dumps({"id": 5000, "text": "y", "score": 3})
    lines[5001] = json.dumps({"id": 5001, "text": "y", "score": True})
    path = jsonl(tmp_path / "x.jsonl", *lines)
    why = "(its values in the input's first records, the first MiB of each file, are strings or null)"
    assert (
        fail_message(path, blocksize="256KB") == f"x.jsonl:5001: field 'score': expected a string {why}, got a number"
    )
    _, rejected = read_skip(path, blocksize="256KB", columns=["id", "score"])
    assert [r[:4] for r in rejected] == [
        (5001, "wrong-type", "score", f"expected a string {why}, got a number"),
        (5002, "wrong-type", "score", f"expected a string {why}, got a boolean"),
    ]


def test_utf16_and_cr_only_files_are_named_as_such(tmp_path):
    lines = '{"id": 1, "text": "a"}\n{"id": 2, "text": "b"}\n'
    utf16 = " (NUL bytes or a byte-order mark: the file looks UTF-16 or UTF-32; curate reads UTF-8: convert it, "
    utf16 += "e.g. iconv -f UTF-16 -t UTF-8 IN > OUT)"
    for encoding, first in [
        ("utf-16", "invalid UTF-8 (byte 0xff at column 1)"),
        ("utf-16-le", "invalid JSON: Expecting property name enclosed in double quotes at column 2"),
        ("utf-32-be", "invalid JSON: Expecting value at column 1"),
    ]:
        path = tmp_path / f"{encoding}.jsonl"
        path.write_bytes(lines.encode(encoding))
        assert fail_message(path) == f"{encoding}.jsonl:1: {first}{utf16}"
    # A raw NUL in a UTF-8 line is no sign of UTF-16 (the message said so, and how to convert).
    path = jsonl(tmp_path / "nul.jsonl", '{"id": 1, "text": "a"}', b'{"id": 2, "text": "raw nul \x00 inside"}')
    nul = r"(a raw NUL byte: JSON strings hold control characters escaped, as \u0000)"
    assert fail_message(path) == f"nul.jsonl:2: invalid JSON: Invalid control character at column 28 {nul}"
    path = tmp_path / "mac.jsonl"
    path.write_bytes(lines.replace("\n", "\r").encode())
    cr_only = r" (lines end in \r alone: JSONL records end in \n, e.g. tr '\r' '\n' < IN > OUT)"
    assert fail_message(path) == f"mac.jsonl:1: invalid JSON: Extra data at column 24{cr_only}"
    path.write_bytes(lines.replace("\n", "\r\n").encode())  # CRLF lines are JSONL
    assert read_documents(str(path)).compute().id.tolist() == [1, 2]


def test_field_first_seen_after_the_sample_and_null_ids(tmp_path):
    lines = doc_lines(6000)  # about 1.5 MiB: the fields are taken from the first MiB
    lines[5000] = '{"id": 5000, "text": "late", "late": 1}'
    lines[5001] = '{"id": null, "text": "no id"}'
    path = jsonl(tmp_path / "x.jsonl", *lines)
    unknown = "not among the input's fields (those found at the start of each file)"
    assert fail_message(path, blocksize="256KB") == f"x.jsonl:5001: field 'late': {unknown}"
    good, rejected = read_skip(path, blocksize="256KB")
    assert [r[:4] for r in rejected] == [
        (5001, "unknown-field", "late", unknown),
        (5002, "missing-field", "id", "null"),
    ]
    assert good.id.tolist() == [i for i in range(6000) if i not in (5000, 5001)]


def test_an_id_first_seen_after_the_sample_where_ids_are_assigned(sync, tmp_path):
    # No file's first MiB held "id", so ids were assigned; a later record's own id went through:
    # JSONL output wrote {"id": "x.jsonl:5001", "text": "late", "id": 7} (two ids, readers keep
    # the last), while Parquet output refused it.
    lines = [json.dumps({"text": f"document {i} " * 20}) for i in range(6000)]
    lines[5000] = '{"text": "late", "id": 7}'
    path = jsonl(tmp_path / "in" / "x.jsonl", *lines)
    why = "not in any file's first records, so ids are assigned (file:line); give every record an id, or none"
    for output_format in ("jsonl", "parquet"):
        with pytest.raises(BadRecordError, match=re.escape(f"x.jsonl:5001: field 'id': {why}")):
            run(tmp_path / output_format, [path], io={"output_format": output_format})
    out, summary = run(tmp_path / "skip", [path], io={"on_error": "skip"})
    rejected = pd.read_parquet(out / "rejected")
    assert rejected[["line", "kind", "field"]].values.tolist() == [[5001, "unknown-field", "id"]]
    kept = (out / "deduplicated" / "part.00000.jsonl").read_text().splitlines()
    assert len(kept) == 5999 and all(line.count('"id"') == 1 for line in kept)


def test_invalid_utf8_is_rejected_never_replaced(tmp_path):
    bad_line = b'{"id": 2, "text": "b\xff\xfec"}'
    path = jsonl(tmp_path / "x.jsonl", b'{"id": 1, "text": "a"}', bad_line, b'{"id": 3, "text": "c"}')
    assert fail_message(path) == "x.jsonl:2: invalid UTF-8 (byte 0xff at column 21)"
    good, rejected = read_skip(path)
    assert rejected == [
        (2, "invalid-utf8", None, "invalid UTF-8 (byte 0xff at column 21)", bad_line)
    ]  # the bytes as read
    assert good.to_dict("list") == {"id": [1, 3], "text": ["a", "c"]}
    # Parquet does not check UTF-8 either; the record is the row as JSON with the bad bytes escaped.
    text = pa.array([b"ok", b"b\xff"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"id": [1, 2], "text": text}), tmp_path / "p.parquet")
    assert fail_message(tmp_path / "p.parquet") == "p.parquet:1: field 'text': invalid UTF-8 (byte 0xff at byte 1)"
    good, rejected = read_skip(tmp_path / "p.parquet")
    assert rejected == [
        (1, "invalid-utf8", "text", "invalid UTF-8 (byte 0xff at byte 1)", b'{"id": 2, "text": "b\\\\xff"}')
    ]
    assert good.to_dict("list") == {"id": [1], "text": ["ok"]}


def test_utf8_bom_at_file_start(tmp_path):
    path = jsonl(tmp_path / "bom.jsonl", b'\xef\xbb\xbf{"id": 1, "text": "a"}', b'{"id": 2, "text": "b"}')
    docs = read_documents(str(path)).compute()
    assert docs.to_dict("list") == {"_doc": [3, 26], "id": [1, 2], "text": ["a", "b"]}  # offsets count the BOM
    noid = jsonl(tmp_path / "noid.jsonl", b'\xef\xbb\xbf{"text": "a"}', b"[]")
    assert read_skip(noid)[1] == [(2, "not-an-object", None, "expected a JSON object, got an array", b"[]")]
    assert read_skip(noid)[0].to_dict("list") == {"id": ["noid.jsonl:1"], "text": ["a"]}


def test_crlf_line_ends(tmp_path):
    # A JSON string cannot hold a raw CR, so "\r\n" is only ever the line end: no "\r" reaches the text.
    path = jsonl(tmp_path / "crlf.jsonl", '{"text": "a"}', '{"text": "b\\r\\nc"}', "{bad", '{"text": "d"}', end=b"\r\n")
    for blocksize in (None, 20):
        good, rejected = read_skip(path, blocksize=blocksize)
        assert good.to_dict("list") == {
            "id": ["crlf.jsonl:1", "crlf.jsonl:2", "crlf.jsonl:4"],
            "text": ["a", "b\r\nc", "d"],
        }
        assert [(line, kind, record) for line, kind, _, _, record in rejected] == [(3, "invalid-json", b"{bad")]


def test_final_line_without_newline(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": 1, "text": "a"}\n{"id": 2, "text": "b"}')
    for blocksize in (None, 16):
        assert read(path, blocksize=blocksize).to_dict("list") == {"id": [1, 2], "text": ["a", "b"]}
    path.write_text('{"id": 1, "text": "a"}\n{"id": 2, "text": "b')
    assert fail_message(path) == "x.jsonl:2: invalid JSON: Unterminated string starting at column 19"


def test_empty_file(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b"")
    alone = read_documents(str(tmp_path / "a.jsonl")).compute()
    assert len(alone) == 0 and list(alone.columns) == ["_doc", "id", "text"]
    jsonl(tmp_path / "b.jsonl", '{"id": 1, "text": "b"}')
    both = read_documents(str(tmp_path)).compute()  # the empty file sorts first and gives nothing
    assert both.to_dict("list") == {"_doc": [1 << 40], "id": [1], "text": ["b"]}
    # An empty week's dump with --id-field said "no id field 'uid' in any input file (fields:
    # ['text'])": it holds no records, so no field is missing (a user's trial).
    named = read_documents(str(tmp_path / "a.jsonl"), id_field="uid", columns=["uid", "text", "week"]).compute()
    assert len(named) == 0 and list(named.columns) == ["_doc", "uid", "text", "week"]


def test_inputs_without_records_are_named_in_a_warning(tmp_path, joined):
    # Empty files (blank lines only) gave an empty output and a summary of zeros, like a success.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(b"")
    (tmp_path / "in" / "b.jsonl").write_bytes(b"\n\n")
    result = CliRunner().invoke(main, ["dedup", str(tmp_path / "in"), "-o", str(tmp_path / "out"), *joined])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: the inputs hold no records; the output is empty"]


def test_empty_and_whitespace_only_documents(tmp_path):
    path = jsonl(tmp_path / "ws.jsonl", '{"text": ""}', "", '{"text": " "}', "   ", '{"text": "\\n\\t "}')
    # blank lines are not records (assigned ids skip them); empty and blank texts are documents, as they are
    assert read(path).to_dict("list") == {"id": ["ws.jsonl:1", "ws.jsonl:3", "ws.jsonl:5"], "text": ["", " ", "\n\t "]}


def test_one_document_of_50_mb(tmp_path):
    path = jsonl(tmp_path / "big.jsonl", json.dumps({"id": 1, "text": "x" * 50_000_000}), '{"id": 2, "text": "y"}')
    for blocksize in ("64MB", "16MB"):  # 16MB: three blocks start inside the long line
        docs = read(path, blocksize=blocksize)
        assert docs.id.tolist() == [1, 2] and docs.text.str.len().tolist() == [50_000_000, 1]


def test_duplicate_ids_within_and_across_files(sync, tmp_path):
    jsonl(
        tmp_path / "in" / "a.jsonl",
        '{"id": 1, "text": "one"}',
        '{"id": 7, "text": "seven"}',
        '{"id": 1, "text": "one again"}',
    )
    jsonl(tmp_path / "in" / "b.jsonl", '{"id": 7, "text": "seven again"}', '{"id": 9, "text": "nine"}')
    with pytest.raises(ValueError) as err:
        run(tmp_path / "fail", [tmp_path / "in"])
    assert (
        str(err.value)
        == "2 id(s) in field 'id' appear more than once, e.g. 1 (a.jsonl:1, a.jsonl:3), 7 (a.jsonl:2, b.jsonl:1); "
        "ids must be unique: --id-field names another field, or --on-error skip keeps each id's first record "
        "and lists the later ones in OUT/rejected/"
    )
    out, summary = run(tmp_path / "skip", [tmp_path / "in"], io={"on_error": "skip"})
    rejected = pd.read_parquet(out / "rejected")
    assert rejected.drop(columns="record").to_dict("records") == [
        {
            "source": "a.jsonl",
            "line": 3,
            "field": "id",
            "kind": "duplicate-id",
            "reason": "duplicate id 1: first at a.jsonl:1",
        },
        {
            "source": "b.jsonl",
            "line": 1,
            "field": "id",
            "kind": "duplicate-id",
            "reason": "duplicate id 7: first at a.jsonl:2",
        },
    ]
    assert [json.loads(r) for r in rejected.record] == [
        {"id": 1, "text": "one again"},
        {"id": 7, "text": "seven again"},
    ]
    kept = [
        json.loads(line) for f in sorted((out / "deduplicated").glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    assert [d["id"] for d in kept] == [1, 7, 9]
    assert summary["counts"]["input"]["documents"] == 5 and summary["counts"]["rejected"] == {"duplicate-id": 2}
    assert summary["counts"]["output"] == {"kept": 3, "removed": 0, "rejected": 2}


def test_missing_id_field(tmp_path):
    noid = jsonl(tmp_path / "noid" / "a.jsonl", '{"text": "a"}', '{"text": "b"}')
    assert read(noid).id.tolist() == ["a.jsonl:1", "a.jsonl:2"]  # not given: assigned
    with pytest.raises(ValueError, match=r"^no id field 'id' in any input file \(fields: \['text'\]\)$"):
        read_documents(str(noid), id_field="id")  # given: required
    jsonl(tmp_path / "some" / "a.jsonl", '{"doc_id": "x1", "text": "a"}')
    jsonl(tmp_path / "some" / "b.jsonl", '{"text": "b"}', '{"doc_id": "x3", "text": "c"}')
    assert fail_message(tmp_path / "some", id_field="doc_id") == "b.jsonl:1: field 'doc_id': missing"
    good, rejected = read_skip(tmp_path / "some", id_field="doc_id")
    assert good.doc_id.tolist() == ["x1", "x3"] and rejected == [
        (1, "missing-field", "doc_id", "missing", b'{"text": "b"}')
    ]
    # The config knows whether the field was given, even as "id" (configs/default.yaml leaves it unset).
    assert not IOConfig().id_field_given and IOConfig(id_field="id").id_field_given
    assert load_config(None, {"io": {"id_field": "doc_id"}}).io.id_field_given


def test_mixed_schemas_across_files(tmp_path):
    jsonl(tmp_path / "j" / "a.jsonl", '{"id": 1, "text": "a", "x": 1}')
    jsonl(tmp_path / "j" / "b.jsonl", '{"id": "b2", "text": "b", "y": "q"}')
    docs = read_documents(str(tmp_path / "j"))
    frame = docs.compute().drop(columns="_doc")
    # extra fields are kept, absent ones null; integer ids in one file and strings in another are strings
    assert frame.astype(object).where(frame.notna(), None).to_dict("list") == {
        "id": ["1", "b2"],
        "text": ["a", "b"],
        "x": [1, None],
        "y": [None, "q"],
    }
    assert str(frame.x.dtype) == "int64[pyarrow]"  # integers stay integers where a file lacks them
    write_documents(docs, str(tmp_path / "out"), "jsonl").compute()
    written = [
        json.loads(line) for f in sorted((tmp_path / "out").glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    assert written == [{"id": "1", "text": "a", "x": 1, "y": None}, {"id": "b2", "text": "b", "x": None, "y": "q"}]
    (tmp_path / "p").mkdir()
    pq.write_table(pa.table({"id": [1, 2], "text": ["a", "b"]}), tmp_path / "p" / "a.parquet")
    pq.write_table(pa.table({"id": ["x"], "text": ["c"], "score": [0.5]}), tmp_path / "p" / "b.parquet")
    frame = read(tmp_path / "p")
    assert frame[["id", "text"]].to_dict("list") == {"id": ["1", "2", "x"], "text": ["a", "b", "c"]}
    assert frame.score.isna().tolist() == [True, True, False] and frame.score[2] == 0.5


def test_parquet_large_string_and_dictionary_text(tmp_path):
    texts = ["a", "b", None, "a"]
    frames = []
    for name, array in [
        ("plain", pa.array(texts)),
        ("large", pa.array(texts, pa.large_string())),
        ("dict", pa.array(texts).dictionary_encode()),
        # Hive and older Spark write strings as binary: every row was rejected as wrong-type
        ("binary", pa.array([None if t is None else t.encode() for t in texts], pa.binary())),
        ("large_binary", pa.array([None if t is None else t.encode() for t in texts], pa.large_binary())),
    ]:
        pq.write_table(pa.table({"id": [1, 2, 3, 4], "text": array}), tmp_path / f"{name}.parquet")
        frames.append(read(tmp_path / f"{name}.parquet"))
    assert frames[0].to_dict("list") == {"id": [1, 2, 3, 4], "text": ["a", "b", None, "a"]}
    for frame in frames[1:]:
        pd.testing.assert_frame_equal(frame, frames[0])
    # A run reads it as text, and so does its review (curate report, inspect).
    from curate.review.inspect import RunOutput

    pq.write_table(
        pa.table({"id": [1, 2], "text": pa.array([b"a b c", b"a b c"], pa.binary())}), tmp_path / "in.parquet"
    )
    with dask.config.set(scheduler="sync"):
        out, _ = run(tmp_path, [tmp_path / "in.parquet"], mode="exact")
    assert RunOutput(out).texts([1, 2]) == ({1: "a b c", 2: "a b c"}, {})
    # Hive writes every string column so, the id too: each row was rejected as wrong-type.
    binary = lambda values: pa.array([v.encode() for v in values], pa.binary())  # noqa: E731
    pq.write_table(
        pa.table({"id": binary(["r1", "r2", "r3"]), "text": binary(["a b", "a b", "c"])}), tmp_path / "hive.parquet"
    )
    with dask.config.set(scheduler="sync"):
        out, _ = run(tmp_path / "hive", [tmp_path / "hive.parquet"], mode="exact")
    assert pd.read_parquet(out / "removed.parquet")[["id", "representative"]].values.tolist() == [["r2", "r1"]]
    assert check_inputs([str(tmp_path / "hive.parquet")], IOConfig()).warnings == ()
    # Binary text is checked for UTF-8 as strings are.
    pq.write_table(pa.table({"id": [1, 2], "text": pa.array([b"a", b"b\xff"], pa.binary())}), tmp_path / "bad.parquet")
    good, rejected = read_skip(tmp_path / "bad.parquet")
    assert good.text.tolist() == ["a"] and [r[:4] for r in rejected] == [
        (1, "invalid-utf8", "text", "invalid UTF-8 (byte 0xff at byte 1)")
    ]


def _cut_after(codec: str, head: bytes, rest: bytes) -> bytes:
    """A compressed stream holding all of ``head`` (flushed) and then the first half of ``rest``'s."""
    if codec == "gzip":
        compressor = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
        flushed = compressor.compress(head) + compressor.flush(zlib.Z_FULL_FLUSH)
    else:
        compressor = zstandard.ZstdCompressor().compressobj()
        flushed = compressor.compress(head) + compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    tail = compressor.compress(rest) + compressor.flush()
    return flushed + tail[: len(tail) // 2]


@pytest.mark.parametrize("blocksize", [None, 50_000])  # read whole, and in blocks of the decompressed stream
@pytest.mark.parametrize("codec, suffix", [("gzip", ".gz"), ("zstd", ".zst")])
def test_truncated_compressed_shard(tmp_path, codec, suffix, blocksize):
    lines = doc_lines(4000)
    head, rest = (
        "".join(line + "\n" for line in lines[:1000]).encode(),
        "".join(line + "\n" for line in lines[1000:]).encode(),
    )
    path = tmp_path / f"x.jsonl{suffix}"
    path.write_bytes(_cut_after(codec, head, rest))
    good, rejected = read_skip(path, blocksize=blocksize)
    n = len(good)  # everything before the cut is kept, the rest is one rejected record
    assert n >= 1000 and good.id.tolist() == list(range(n)) and n < 4000
    assert len(rejected) == 1
    line, kind, field, reason, record = rejected[0]
    assert (line, kind, field) == (n + 1, "truncated", None)
    assert reason == f"truncated {codec} stream after line {n} (it ends inside a compressed block)"
    assert lines[n].encode().startswith(record) and record != lines[n].encode()  # the cut line, as far as it goes
    assert fail_message(path, blocksize=blocksize) == f"x.jsonl{suffix}:{n + 1}: {reason}"
    path.write_bytes(_cut_after(codec, head, b""))  # cut exactly after a flushed line: nothing of the next
    assert read_skip(path, blocksize=blocksize)[1] == [
        (1001, "truncated", None, f"truncated {codec} stream after line 1000 (it ends inside a compressed block)", b"")
    ]
    whole = gzip.compress(head) if codec == "gzip" else zstandard.ZstdCompressor().compress(head)
    path.write_bytes(whole + whole)  # several members / frames are one stream, not a cut
    assert read(path, blocksize=blocksize).id.tolist() == list(range(1000)) * 2
    # An empty file (an aborted download) was read as no records, without a word; even a
    # stream of nothing has a header.
    path.write_bytes(b"")
    empty = f"truncated {codec} stream before its first line (the file is empty, 0 bytes)"
    assert read_skip(path, blocksize=blocksize)[1] == [(1, "truncated", None, empty, b"")]
    path.write_bytes(gzip.compress(b"") if codec == "gzip" else zstandard.ZstdCompressor().compress(b""))
    assert read_skip(path, blocksize=blocksize)[1] == []


def test_a_file_cut_short_is_not_blamed_on_the_fields(tmp_path, joined):
    # One good record and a .gz cut inside its first block: 1 of 2 records rejected, and the
    # warning said to check --text-field and --id-field, not that the file's rest went uncounted.
    jsonl(tmp_path / "in" / "a.jsonl", json.dumps({"id": "a", "text": "fine"}))
    (tmp_path / "in" / "b.jsonl.gz").write_bytes(_cut_after("gzip", b"", doc_lines(1, words=2000)[0].encode()))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["dedup", str(tmp_path / "in"), "-o", str(out), "--on-error", "skip", *joined])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: 1 input file could not be read to the end (truncated or corrupt: b.jsonl.gz): the records after "
        f"the damage are not read and in no count; each file's reason is in {out}/rejected/"
    ]
    reasons = pd.read_parquet(out / "rejected").reason.tolist()  # it said "after line 0"
    assert reasons == ["truncated gzip stream before its first line (it ends inside a compressed block)"]


def test_corrupt_compressed_shard(tmp_path):
    head = "".join(line + "\n" for line in doc_lines(10)).encode()
    flushed = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
    data = flushed.compress(head) + flushed.flush(zlib.Z_FULL_FLUSH) + b"\xff" * 64  # not deflate
    (tmp_path / "x.jsonl.gz").write_bytes(data)
    # zlib drops what it decoded in the call that meets the damage: the whole (small) file was one
    # rejected record. What came before the damage is now read.
    reason = "corrupt gzip stream after line 10 (Error -3 while decompressing data: invalid block type)"
    good, rejected = read_skip(tmp_path / "x.jsonl.gz")
    assert len(good) == 10 and rejected == [(11, "corrupt", None, reason, b"")]  # it was "truncated"
    assert fail_message(tmp_path / "x.jsonl.gz") == f"x.jsonl.gz:11: {reason}"
    # A bad checksum at the end, after every record decoded well: 3,000 records were one rejected.
    whole = bytearray(gzip.compress("".join(line + "\n" for line in doc_lines(3000)).encode()))
    whole[-8] ^= 0xFF  # the CRC-32 of the gzip trailer
    (tmp_path / "x.jsonl.gz").write_bytes(bytes(whole))
    reason = "corrupt gzip stream after line 3000 (Error -3 while decompressing data: incorrect data check)"
    good, rejected = read_skip(tmp_path / "x.jsonl.gz")
    assert good.id.tolist() == list(range(3000)) and rejected == [(3001, "corrupt", None, reason, b"")]


@pytest.mark.parametrize("chunk", [None, 1])
def test_zero_bytes_after_the_last_gzip_member_are_padding(tmp_path, monkeypatch, chunk):
    # gzip(1) and Python's gzip read a file padded with zero bytes (tape blocks, some archivers);
    # curate rejected the padding as a corrupt record ("incorrect header check"), which stopped
    # the run by default. Two members, padding after each, padding across reads (_CHUNK).
    if chunk:  # read a byte at a time: a zero byte inside a member (its header has some) is data
        monkeypatch.setattr(curate.io.files, "_CHUNK", chunk)
    member = gzip.compress("".join(line + "\n" for line in doc_lines(3)).encode())
    second = gzip.compress("".join(line + "\n" for line in doc_lines(5)[3:]).encode())
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(member + b"\0" * 100 + second + b"\0" * (5 << 20 if chunk is None else 100))
    good, rejected = read_skip(path)
    assert good.id.tolist() == [0, 1, 2, 3, 4] and rejected == []
    # Anything else after a member is still damage.
    path.write_bytes(member + b"\0" * 10 + b"junk")
    reason = "corrupt gzip stream after line 3 (Error -3 while decompressing data: incorrect header check)"
    assert fail_message(path) == f"x.jsonl.gz:4: {reason}"


def test_a_keep_column_that_does_not_order_is_refused(tmp_path):
    # --keep max:score ordered the JSON text of numbers and a string as text (7.5 was kept over
    # 100 and 12); --keep max:topics (lists) failed in a shuffle after the cluster had started.
    text = "the same words in every one of these records"
    scores = [12, 7.5, 100, "9"]
    jsonl(
        tmp_path / "a" / "x.jsonl",
        *(json.dumps({"id": str(i), "text": text, "score": s}) for i, s in enumerate(scores)),
    )
    jsonl(tmp_path / "b" / "x.jsonl", *(json.dumps({"id": str(i), "text": text, "topics": [str(i)]}) for i in range(2)))
    with pytest.raises(
        ValueError,
        match=r"^field 'score', which --keep orders, holds values of several types \(x\.jsonl: double, int64, string\)$",
    ):
        run(tmp_path, [tmp_path / "a"], keep="max:score")
    # Each file's types (the message named none); integers a double would round count as another type.
    jsonl(tmp_path / "c" / "1.jsonl", json.dumps({"id": "1", "text": text, "score": 2**60}))
    jsonl(tmp_path / "c" / "2.jsonl", json.dumps({"id": "2", "text": text, "score": 0.5}))
    with pytest.raises(ValueError, match=r"several types \(1\.jsonl: integers beyond 2\*\*53; 2\.jsonl: double\)$"):
        run(tmp_path, [tmp_path / "c"], keep="max:score")
    # The same in one file was said to hold "integers beyond int64" (2**53 + 1 is within int64).
    jsonl(
        tmp_path / "e" / "k.jsonl",
        *(json.dumps({"id": str(i), "text": text, "score": s}) for i, s in enumerate([2**53 + 1, 0.5])),
    )
    with pytest.raises(ValueError, match=r"several types \(k\.jsonl: double, integers beyond 2\*\*53\)$"):
        run(tmp_path, [tmp_path / "e"], keep="max:score")
    # Integers beyond int64 (the only type in the file) were said to be "of several types".
    jsonl(tmp_path / "d" / "big.jsonl", *(json.dumps({"id": str(i), "text": text, "score": 2**63 + i}) for i in (1, 2)))
    jsonl(tmp_path / "d" / "small.jsonl", json.dumps({"id": "3", "text": text, "score": 5}))
    with pytest.raises(
        ValueError,
        match=r"^field 'score', which --keep orders, holds integers beyond int64 \(big\.jsonl\), which it cannot order: ",
    ):
        run(tmp_path, [tmp_path / "d"], keep="max:score")
    with pytest.raises(
        ValueError, match=r"^field 'topics', which --keep orders, holds list<item: string>: give a field"
    ):
        run(tmp_path, [tmp_path / "b"], keep="min:topics")
    # Empty objects (read as their JSON text) were said to be "of several types".
    jsonl(tmp_path / "f" / "x.jsonl", *(json.dumps({"id": str(i), "text": text, "meta": {}}) for i in range(2)))
    with pytest.raises(ValueError, match=r"^field 'meta', which --keep orders, holds struct<>: give a field"):
        run(tmp_path, [tmp_path / "f"], keep="max:meta")
    docs = read_documents(str(tmp_path / "b"))
    with pytest.raises(
        ValueError, match=r"^keep='max:topics': the column holds list<item: string>, which does not order$"
    ):
        curate.deduplicate(docs, keep="max:topics")
    jsonl(
        tmp_path / "a" / "x.jsonl",
        *(json.dumps({"id": str(i), "text": text, "score": s}) for i, s in enumerate(scores[:3])),
    )
    out, _ = run(tmp_path, [tmp_path / "a"], keep="max:score")  # numbers of both kinds order as numbers
    assert pd.read_parquet(out / "removed.parquet").representative.tolist() == ["2", "2"]


def test_a_broken_link_in_an_input_folder_is_named_as_one(tmp_path):
    # It stopped the run with a bare "[Errno 2] No such file or directory" naming the link.
    jsonl(tmp_path / "in" / "a.jsonl", '{"id": 1, "text": "a"}')
    os.symlink(tmp_path / "gone.jsonl", tmp_path / "in" / "b.jsonl")
    with pytest.raises(FileNotFoundError) as err:
        read_documents(str(tmp_path / "in"))
    link, target = tmp_path / "in" / "b.jsonl", tmp_path / "gone.jsonl"
    assert str(err.value) == (
        f"input {str(tmp_path / 'in')!r}: {link} is a broken symbolic link (to {target}); remove it, or name the other files"
    )
    # Named itself, it was "no such file or folder", as if the link were not there.
    with pytest.raises(FileNotFoundError) as err:
        read_documents(str(link))
    assert (
        str(err.value) == f"input {str(link)!r} matches no JSONL or Parquet file: a broken symbolic link (to {target})"
    )


def test_parquet_file_cut_short_or_not_parquet(tmp_path):
    # pyarrow's "Parquet magic bytes not found in footer" stopped the run without naming the
    # file, --on-error skip included.
    table = pa.table({"id": ["a", "b"], "text": ["one two", "three four"]})
    pq.write_table(table, tmp_path / "a.parquet")
    data = (tmp_path / "a.parquet").read_bytes()
    (tmp_path / "b.parquet").write_bytes(data[: len(data) // 2])
    (tmp_path / "c.parquet").write_text("not parquet at all")
    reason = "not a readable Parquet file (Parquet magic bytes not found in footer. Either the file is corrupted or this is not a parquet file.)"
    assert fail_message(tmp_path) == f"b.parquet:0: {reason}"
    good, rejected = read_skip(tmp_path)
    assert good.id.tolist() == ["a", "b"]
    assert rejected == [(0, "truncated", None, reason, b"")] * 2
    # Its footer whole, its data not: pyarrow raised OSError("Corrupt snappy compressed data.").
    for name in ("b.parquet", "c.parquet"):
        (tmp_path / name).unlink()
    texts = [f"word{i} " * 200 for i in range(200)]
    pq.write_table(pa.table({"id": [str(i) for i in range(200)], "text": texts}), tmp_path / "d.parquet")
    data = bytearray((tmp_path / "d.parquet").read_bytes())
    data[200:5000] = bytes(range(256)) * 18 + bytes(range(192))
    (tmp_path / "d.parquet").write_bytes(bytes(data))
    assert fail_message(tmp_path).startswith("d.parquet:0: Parquet data that cannot be read (")
    good, rejected = read_skip(tmp_path)
    assert good.id.tolist() == ["a", "b"] and [r[:3] for r in rejected] == [(0, "corrupt", None)]


def test_parquet_value_the_widened_type_cannot_hold_rejects_its_row_only(tmp_path):
    # Files whose column types differ are read in a type both hold (ms and ns timestamps as ns,
    # int64 and double as double). One value beyond it rejected every row of its file, each
    # with that value's reason, and the failing run named row 0.
    (tmp_path / "p").mkdir()
    stamps = [datetime.datetime(2000, 1, 1)] * 300
    stamps[200] = datetime.datetime(3000, 1, 1)  # beyond int64 nanoseconds
    numbers = list(range(300))
    numbers[250] = 2**53 + 1  # no double holds it
    pq.write_table(
        pa.table(
            {
                "id": list(range(300)),
                "text": [f"document number {i}" for i in range(300)],
                "ts": pa.array(stamps, pa.timestamp("ms")),
                "n": numbers,
            }
        ),
        tmp_path / "p" / "a.parquet",
        row_group_size=64,
    )
    pq.write_table(
        pa.table({"id": [300], "text": ["last"], "ts": pa.array([None], pa.timestamp("ns")), "n": [0.5]}),
        tmp_path / "p" / "b.parquet",
    )
    message = fail_message(tmp_path / "p")
    assert message.startswith("a.parquet:200: field 'ts': cannot convert timestamp[ms] to timestamp[ns] (")
    good, rejected = read_skip(tmp_path / "p")
    assert good.id.tolist() == [i for i in range(301) if i not in (200, 250)]
    assert [r[:3] for r in rejected] == [(200, "wrong-type", "ts"), (250, "wrong-type", "n")]
    assert rejected[1][3].startswith("cannot convert int64 to double (Integer value 9007199254740993 not in range")
    assert json.loads(rejected[0][4])["id"] == 200 and json.loads(rejected[1][4])["n"] == 2**53 + 1
    assert good.n[good.id == 249].tolist() == [249.0] and good.ts.notna().sum() == 298


def test_parquet_damage_in_a_column_the_dedup_does_not_read(tmp_path):
    # The stages read the id and text only; the final write, every column: a damaged page of
    # another column rejected the file there, after the dedup had kept and removed its rows
    # (AccountingError "20 input records != 10 kept + 0 removed + 1 rejected", no results).
    texts = [f"document number {i} " + "lorem ipsum dolor sit amet " * (i % 5 + 1) for i in range(10)]
    (tmp_path / "in").mkdir()
    pq.write_table(
        pa.table({"id": [f"g{i}" for i in range(10)], "text": texts, "meta": list(range(10))}),
        tmp_path / "in" / "a.parquet",
    )
    damaged = tmp_path / "in" / "b.parquet"
    table = pa.table(
        {"id": [f"b{i}" for i in range(10)], "text": [t + " more" for t in texts], "meta": list(range(10))}
    )
    pq.write_table(table, damaged, compression="zstd", row_group_size=2)
    page = pq.ParquetFile(damaged).metadata.row_group(3).column(2)  # meta, rows 6-7
    data = bytearray(damaged.read_bytes())
    at = page.data_page_offset + bytes(data[page.data_page_offset :]).index(b"\x28\xb5\x2f\xfd")  # zstd frame
    data[at : at + 4] = b"XXXX"
    damaged.write_bytes(bytes(data))
    assert pq.ParquetFile(damaged).read(columns=["id", "text"]).num_rows == 10  # what the stages read is whole
    assert fail_message(tmp_path / "in", columns=["id", "text"]).startswith(
        "b.parquet:0: Parquet data that cannot be read ("
    )
    for fmt in ("parquet", "jsonl"):
        out, summary = run(
            tmp_path / fmt, [tmp_path / "in"], io={"on_error": "skip", "output_format": fmt}, mode="exact"
        )
        assert summary["counts"]["output"] == {"kept": 10, "removed": 0, "rejected": 1}
        assert pd.read_parquet(out / "rejected")[["source", "line", "kind"]].values.tolist() == [
            ["b.parquet", 0, "corrupt"]
        ]


def test_a_pattern_that_matches_nothing_says_what_the_folder_holds(tmp_path):
    # "no file matches the pattern" for *.jsonl in a folder of .jsonl.gz files, and for *.txt
    # files, which the pattern did match.
    for name in ("b.jsonl.gz", "a.jsonl.gz", "c.parquet", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(FileNotFoundError) as err:
        read_documents(str(tmp_path / "*.jsonl"))
    assert str(err.value) == (
        f"input {str(tmp_path / '*.jsonl')!r} matches no JSONL or Parquet file: no file matches the pattern; "
        f"{tmp_path}/ holds 3 files that curate reads (a.jsonl.gz, b.jsonl.gz, c.parquet): "
        "give the folder, or a pattern that matches them"
    )
    with pytest.raises(FileNotFoundError) as err:
        read_documents(str(tmp_path / "*.txt"))
    assert str(err.value).endswith(
        "the pattern matches 1 file, none named as JSONL (.jsonl, .json, .ndjson; also .gz or .zst) or Parquet "
        f"(.parquet): {tmp_path / 'notes.txt'}"
    )
    with pytest.raises(FileNotFoundError, match=r"matches no JSONL or Parquet file: no file matches the pattern$"):
        read_documents(str(tmp_path / "nowhere" / "*.jsonl"))
    # _SUCCESS matched, but is not data: "no file matches the pattern" said otherwise.
    (tmp_path / "_SUCCESS").write_bytes(b"")
    with pytest.raises(FileNotFoundError) as err:
        read_documents(str(tmp_path / "_*"))
    assert str(err.value).endswith(
        "the pattern matches only names starting with . or _, which are not data (as Spark and Arrow read "
        f"folders): {tmp_path / '_SUCCESS'}"
    )


def test_missing_and_unreadable_paths(tmp_path, monkeypatch):
    with pytest.raises(
        FileNotFoundError, match=r"^input '.*nope\.jsonl' matches no JSONL or Parquet file: no such file or folder$"
    ):
        read_documents(str(tmp_path / "nope.jsonl"))
    path = jsonl(tmp_path / "in" / "a.jsonl", '{"id": 1, "text": "a"}')
    if os.geteuid() != 0:  # root reads anything: simulate the refusal below instead
        path.chmod(0)
        with pytest.raises(PermissionError, match="a.jsonl"):
            read_documents(str(tmp_path / "in"))
        path.chmod(0o644)
    from fsspec.implementations.local import LocalFileSystem

    real_open = LocalFileSystem._open

    def refuse(self, name, *args, **kwargs):
        if name.endswith("a.jsonl"):
            raise PermissionError(13, "Permission denied", name)
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(LocalFileSystem, "_open", refuse)
    with pytest.raises(PermissionError, match=r"Permission denied: '.*a\.jsonl'"):
        read_documents(str(tmp_path / "in"))  # when the graph is built, before any partition is read
    result = CliRunner().invoke(main, ["dedup", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--n-workers", "1"])
    assert result.exit_code == 1 and "Permission denied" in result.output and "a.jsonl" in result.output
    assert not (tmp_path / "out").exists()


def test_an_input_name_that_is_not_utf8_is_refused_before_the_run(tmp_path):
    # A Latin-1 name (from an old archive) failed every run with "Error: " and nothing after it:
    # the assigned ids, or removed.parquet's source, could not hold it.
    folder = tmp_path / "in"
    jsonl(folder / "ok.jsonl", *doc_lines(2))
    jsonl(Path(os.fsdecode(bytes(folder) + b"/latin1-\xe9.jsonl")), *doc_lines(2))
    result = CliRunner().invoke(main, ["dedup", str(folder), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and result.output == (
        f"Error: input file {folder}/latin1-\\xe9.jsonl: its name is not UTF-8, which curate records it in "
        "(ids, removed.parquet); rename it (convmv -f latin1 -t utf-8 renames files named in Latin-1)\n"
    )
    assert not (tmp_path / "out").exists()


def test_an_error_without_words_is_named_by_its_type():
    # An error rebuilt from a worker can lose its message: the CLI printed "Error: " alone.
    from curate.cli import _user_errors

    with pytest.raises(click.ClickException) as err, _user_errors(False, "out", {}):
        raise UnicodeEncodeError.__new__(UnicodeEncodeError)
    assert err.value.message == "UnicodeEncodeError"


@pytest.mark.parametrize(
    "err",
    [
        OSError(28, "No space left on device"),
        OSError("Error writing bytes to file. Detail: [errno 28] No space left on device"),
        P2POutOfDiskError(),  # the spill folder: "increasing the number of workers or the size of the attached disk"
    ],
)
def test_a_full_disk_says_where_to_free_space_and_how_to_go_on(err, tmp_path, monkeypatch):
    # A full output or spill disk said "Error: [Errno 28] No space left on device" and no more
    # (Arrow's OSError names no file and carries the errno only in its words); then "free space
    # where OUT or --local-directory lies", naming neither folder, nor TMPDIR's spill folder
    # where no --local-directory was given.
    from curate.cli import _user_errors

    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    spills = {
        "": f"the spill folder {tmp_path / 'tmp' / 'dask-scratch-space'} (TMPDIR; --local-directory chooses another)",
        "/scratch/me": "the spill folder /scratch/me (--local-directory)",
    }
    for given, spill in spills.items():
        with (
            dask.config.set({"temporary-directory": None}),  # Dask's own, else TMPDIR (the tests set one)
            pytest.raises(click.ClickException) as raised,
            _user_errors(False, "runs/out", {"local_directory": given}),
        ):
            raise err
        assert raised.value.message == (
            f"{err}\n(a disk is full: free space in runs/out or in {spill}; the stages that finished are "
            "kept in runs/out/_stages, and the same command with --resume, not --overwrite, goes on from them)"
        )
    with pytest.raises(click.ClickException) as raised, _user_errors(False, "o", {"scheduler_address": "tcp://h:8786"}):
        raise err
    assert "free space in o or in the workers' spill folders (dask worker --local-directory);" in raised.value.message


def test_a_full_disk_says_how_large_the_output_and_spill_disks_are(tmp_path, monkeypatch):
    # A trial's output folder on a tmpfs of 60 MB: "free space in smallout/g or in the spill
    # folder /tmp/dask-scratch-space", which left the operator to guess which one filled.
    from curate import cli

    out, spill = tmp_path / "out", tmp_path / "spill"
    out.mkdir(), spill.mkdir()
    disks = {str(out): (1, 60 << 20, 58 << 20), str(spill): (2, 250 << 30, 54 << 30)}
    monkeypatch.setattr(cli, "_disk", lambda folder: disks.get(folder))
    full = OSError(28, "No space left on device")
    advice = cli._storage_advice(full, str(out), {"local_directory": str(spill)})
    assert (
        f"; {out} is on a disk of 60.00 MiB (58.00 MiB free now), the spill folder is on a disk of "
        "250.00 GiB (54.00 GiB free now); the stages that finished"
    ) in advice
    disks[str(spill)] = disks[str(out)]  # one disk
    advice = cli._storage_advice(full, str(out), {"local_directory": str(spill)})
    assert "(--local-directory); both are on one disk of 60.00 MiB (58.00 MiB free now); the stages" in advice
    del disks[str(spill)]  # a folder that does not exist (here): its disk is not guessed
    advice = cli._storage_advice(full, str(out), {"local_directory": str(spill)})
    assert f"(--local-directory); {out} is on a disk of 60.00 MiB (58.00 MiB free now); the stages" in advice
    # The real disks, for a folder that exists.
    monkeypatch.undo()
    assert cli._disk(str(out))[1] == shutil.disk_usage(out).total and cli._disk(str(tmp_path / "none")) is None


def test_a_file_size_limit_or_a_read_only_disk_says_what_to_do_as_a_full_disk_does(tmp_path):
    # Under `ulimit -f` a P2P shuffle's EFBIG came as a 139-line traceback ending in "RuntimeError:
    # P2P ... failed during barrier phase", with no Error line; elsewhere as "[Errno 27] File too
    # large" alone; a read-only file system as "[Errno 30] ..." alone.
    from curate.cli import _user_errors

    spill = {"local_directory": "/scratch/me"}
    go_on = "; the stages that finished are kept in o/_stages, and the same command with --resume, not --overwrite, goes on from them)"
    size = "a file passed the file size limit (ulimit -f) or the file system's largest, in o or in the spill folder /scratch/me (--local-directory): lift it"
    read_only = (
        "a file system turned read-only: make o or the spill folder /scratch/me (--local-directory) writable again"
    )
    too_large = OSError(errno.EFBIG, "File too large")
    shuffle = RuntimeError("P2P 0083dc29 failed during barrier phase")  # the worker's error in words
    shuffle.__cause__ = RuntimeError(f'Unexpected error encountered during P2P barrier: Exception("{too_large!r}")')
    cases = [
        (too_large, f"{too_large}\n({size}{go_on}"),
        (OSError("Error writing bytes to file. Detail: [errno 27] File too large"), None),
        (OSError(errno.EROFS, "Read-only file system", "o/_stages/verify.tmp/part.2.parquet"), None),
        (shuffle, f"{too_large}\n({size}{go_on}"),
    ]
    for err, message in cases:
        with pytest.raises(click.ClickException) as raised, _user_errors(False, "o", spill):
            raise err
        assert raised.value.message == (message or f"{err}\n({read_only if '30' in str(err) else size}{go_on}")
    with pytest.raises(RuntimeError, match="^P2P"), _user_errors(False, "o", spill):  # another cause: as it was
        raise RuntimeError("P2P 0083dc29 failed during barrier phase") from ValueError("a bug")


def test_output_directory_with_a_previous_run(sync, tmp_path):
    jsonl(tmp_path / "in" / "a.jsonl", '{"id": 1, "text": "a"}', "oops", '{"id": 2, "text": "b"}')
    out, _ = run(tmp_path, [tmp_path / "in"], io={"on_error": "skip"})
    assert len(pd.read_parquet(out / "rejected")) == 1
    with pytest.raises(
        FileExistsError, match="already holds .*rejected.*: a finished run; pass --overwrite to replace it"
    ):
        run(tmp_path, [tmp_path / "in"], io={"on_error": "skip"})
    jsonl(tmp_path / "in" / "a.jsonl", '{"id": 1, "text": "a"}')
    out = tmp_path / "out"
    dedup([str(tmp_path / "in")], str(out), load_config(None, {}), overwrite=True)
    assert not (out / "rejected").exists()  # a fail-mode run leaves no stale rejected/ behind


def test_cli_skip_end_to_end(tmp_path, joined):
    """A folder of bad files through the CLI: accounting holds and rejected/ lists exactly the bad records."""
    story = "the quick brown fox jumps over the lazy dog and keeps running far away"
    jsonl(
        tmp_path / "in" / "a.jsonl",
        json.dumps({"id": "a1", "text": story}),
        '{"id": "a2", "text": "broken',
        "[1, 2]",
        '{"id": "a4", "text": 5}',
        json.dumps({"id": "a5", "text": story}),  # exact copy of a1: removed, not rejected
        '{"id": "a6"}',
    )
    (tmp_path / "in" / "b.jsonl").write_bytes(
        b'\xef\xbb\xbf{"id": "b1", "text": "b\xffad"}\r\n{"id": "a1", "text": "same id as a1"}\r\n{"id": "b3", "text": "fine"}'
    )
    (tmp_path / "in" / "c.jsonl").write_bytes(b"")
    head = "".join(json.dumps({"id": f"d{i}", "text": f"zipped {i}"}) + "\n" for i in range(3)).encode()
    (tmp_path / "in" / "d.jsonl.gz").write_bytes(_cut_after("gzip", head, b""))  # cut right after line 3
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["dedup", str(tmp_path / "in"), "-o", str(out), "--on-error", "skip", *joined, "--files-per-partition", "2"],
    )
    assert result.exit_code == 0, result.output
    assert "records rejected" in result.output
    # More than half rejected is more likely a wrong field than bad data: a warning says so.
    # (the files that hold them were not named)
    said = " ".join(result.output.split())
    assert "warning: 7 of 13 records were rejected (duplicate-id 1, invalid-json 1, " in said
    assert "wrong-type 1; most in a.jsonl 4, b.jsonl 2, d.jsonl.gz 1); check --text-field" in said
    # A valid record lost to another file's id was one in the count of rejected records.
    assert (
        "warning: 1 record rejected for an id an earlier record has (e.g. b.jsonl:2: duplicate id 'a1': first at "
        "a.jsonl:1); ids must be unique across all inputs: sources that number their ids apart need runs of their "
        "own, or --id-field naming a field unique across them"
    ) in said
    # The cut .gz is one rejected record; what followed the cut is in no count, which was not said.
    assert (
        "warning: 1 input file could not be read to the end (truncated or corrupt: d.jsonl.gz): the records after "
        f"the damage are not read and in no count; each file's reason is in {out}/rejected/"
    ) in " ".join(result.output.split())
    counts = json.loads((out / "summary.json").read_text())["counts"]
    assert counts["output"] == {"kept": 5, "removed": 1, "rejected": 7}
    assert counts["input"]["documents"] == 13 == sum(counts["output"].values())
    kinds = [
        "duplicate-id",
        "invalid-json",
        "invalid-utf8",
        "missing-field",
        "not-an-object",
        "truncated",
        "wrong-type",
    ]
    assert counts["rejected"] == dict.fromkeys(kinds, 1)
    rejected = pd.read_parquet(out / "rejected").sort_values(["source", "line"])
    assert list(
        zip(
            rejected.source,
            rejected.line,
            rejected.kind,
            rejected.field.astype(object).where(rejected.field.notna(), None),
        )
    ) == [
        ("a.jsonl", 2, "invalid-json", None),
        ("a.jsonl", 3, "not-an-object", None),
        ("a.jsonl", 4, "wrong-type", "text"),
        ("a.jsonl", 6, "missing-field", "text"),
        ("b.jsonl", 1, "invalid-utf8", None),
        ("b.jsonl", 2, "duplicate-id", "id"),
        ("d.jsonl.gz", 4, "truncated", None),
    ]
    kept = [
        json.loads(line) for f in sorted((out / "deduplicated").glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    assert [d["id"] for d in kept] == ["a1", "b3", "d0", "d1", "d2"]
    assert not any("\ufffd" in d["text"] for d in kept)  # invalid UTF-8 is never replaced in kept output
    assert rejected[rejected.kind == "invalid-utf8"].record.tolist() == [b'{"id": "b1", "text": "b\xffad"}']


def test_cli_fail_mode_says_an_earlier_record_may_be_bad(tmp_path):
    # Partitions are read in parallel, so which bad record stops the run varies between runs
    # (two bad lines of one split file: either could be named). The error says so, and how to list all.
    lines = doc_lines(3000)
    lines[100] = lines[2900] = '{"id": "bad", "text": 5}'
    jsonl(tmp_path / "in.jsonl", *lines)
    with pytest.raises(BadRecordError, match=r"in\.jsonl:(101|2901): field 'text': expected a string, got a number"):
        read_documents(str(tmp_path / "in.jsonl"), blocksize=16_000).compute(scheduler="sync")
    args = ["dedup", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out"), "--blocksize", "16KB", "--n-workers", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert re.search(r"in\.jsonl:(101|2901): field 'text': expected a string, got a number\n", result.output)
    assert (
        "so an earlier record may be bad too; --on-error skip lists every bad record in OUT/rejected/" in result.output
    )
    # In the input's first part no earlier record can be bad: the error says only how to list them all.
    lines = doc_lines(3000)
    lines[1] = '{"id": "bad", "text": 5}'
    jsonl(tmp_path / "in.jsonl", *lines)
    result = CliRunner().invoke(main, [*args, "--overwrite"])
    assert result.exit_code == 1 and result.output.endswith(
        "in.jsonl:2: field 'text': expected a string, got a number\n"
        "(--on-error skip lists every bad record in OUT/rejected/ and goes on)\n"
    )


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_a_type_past_the_sampled_first_mib_gives_what_smaller_files_give(sync, tmp_path, on_error, caplog):
    # Field types are sampled from each JSONL file's first MiB. An integer id column with a string
    # id later, or (Parquet output) a field of integers with a float later, stopped the run, and
    # with --on-error skip rejected the record, a good document; the same records in smaller
    # files ran (ids read as strings, the field as doubles, with a warning). Read again so,
    # they give the same outputs, byte for byte.
    lines = [json.dumps({**json.loads(line), "id": i, "score": i}) for i, line in enumerate(doc_lines(6000))]
    assert sum(map(len, lines[:5000])) > 1 << 20
    lines[5500] = json.dumps({**json.loads(lines[5500]), "score": 0.5})
    lines[5600] = json.dumps({**json.loads(lines[5600]), "id": "late"})
    lines[5700] = json.dumps({**json.loads(lines[10]), "id": 5700, "score": 5700})  # an exact copy, removed
    jsonl(tmp_path / "one" / "in.jsonl", *lines)
    for name, part in (("a", lines[:5000]), ("b", lines[5000:])):  # the float and the string in b's first MiB
        jsonl(tmp_path / "two" / f"{name}.jsonl", *part)
    outputs = {}
    for source in ("one", "two"):
        config = load_config(None, {"mode": "exact", "io": {"output_format": "parquet", "on_error": on_error}})
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="curate.pipeline"):
            summary = dedup([str(tmp_path / source)], str(tmp_path / f"out-{source}"), config)
        assert summary["counts"]["output"] == {"kept": 5999, "removed": 1, "rejected": 0}
        out = tmp_path / f"out-{source}"
        outputs[source] = ((out / "removed.parquet").read_bytes(), pq.read_table(out / "deduplicated"))
        warnings = [r.getMessage() for r in caplog.records if r.name == "curate.pipeline"]
        if source == "one":
            again = "the input is read again, field {!r} taking {} values too, as where a file's first records hold one"
            assert warnings == [
                "in.jsonl:5501: field 'score': cannot convert double to int64 (Float value 0.500000 was truncated "
                f"converting to int64): {again.format('score', 'double')}",
                "in.jsonl:5601: field 'id': expected an integer (as the ids at the start of the input files), got a "
                f"string: {again.format('id', 'string')} ({STRING_IDS})",
            ]
    assert outputs["one"][0] == outputs["two"][0] and outputs["one"][1].equals(outputs["two"][1])
    written = pq.read_table(tmp_path / "out-one" / "deduplicated")
    assert written.num_rows == 5999 and written["id"][5600].as_py() == "late" and written["score"][5500].as_py() == 0.5
    assert pq.read_table(tmp_path / "out-one" / "removed.parquet").to_pylist()[0]["id"] == "5700"


def test_a_failed_overwrite_keeps_the_previous_results(sync, tmp_path):
    # --overwrite deleted the previous run's outputs as the run started: a run that then failed
    # (here on a bad record) left the folder without any results.
    copy = json.dumps({"id": 5, "text": json.loads(doc_lines(1)[0])["text"]})
    jsonl(tmp_path / "in" / "a.jsonl", *doc_lines(5), copy, "oops")
    out, _ = run(tmp_path, [tmp_path / "in"], io={"on_error": "skip"})
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert {Path("summary.json"), Path("removed.parquet")} <= set(before) and any(
        p.parts[0] == "rejected" for p in before
    )
    with pytest.raises(BadRecordError, match=r"a\.jsonl:7: invalid JSON"):  # not skipped this time
        dedup([str(tmp_path / "in")], str(out), load_config(None, {}), overwrite=True)
    after = {
        p.relative_to(out): p.read_bytes()
        for p in out.rglob("*")
        if p.is_file() and p.parts[len(out.parts)] != "_stages"
    }
    assert after == before
    # A run that succeeds replaces them all: no rejected/ from the skip-mode run is left.
    jsonl(tmp_path / "in" / "a.jsonl", *doc_lines(5), copy)
    dedup([str(tmp_path / "in")], str(out), load_config(None, {}), overwrite=True)
    assert (
        not (out / "rejected").exists()
        and json.loads((out / "summary.json").read_text())["counts"]["output"]["rejected"] == 0
    )


def test_a_full_disk_at_the_tables_keeps_the_previous_results(sync, tmp_path, monkeypatch):
    # --overwrite removed the previous run's outputs before writing the two tables: a disk that
    # filled meanwhile left neither run's summary.json, removed.parquet or duplicates.parquet.
    import curate.pipeline

    jsonl(tmp_path / "in" / "a.jsonl", *doc_lines(5), doc_lines(1)[0].replace('"id": 0', '"id": 5'))
    out, _ = run(tmp_path, [tmp_path / "in"])
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert {Path("summary.json"), Path("removed.parquet"), Path("duplicates.parquet")} <= set(before)
    write_table = curate.pipeline.write_table

    def fills_the_disk(source, path, columns):
        if "removed" in path:
            raise OSError(28, "No space left on device")
        write_table(source, path, columns)

    monkeypatch.setattr(curate.pipeline, "write_table", fills_the_disk)
    with pytest.raises(OSError, match="No space left"):
        dedup([str(tmp_path / "in")], str(out), load_config(None, {}), overwrite=True)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert {k: v for k, v in after.items() if k.parts[0] in ("summary.json", "deduplicated", "removed.parquet")} == {
        k: v for k, v in before.items() if k.parts[0] in ("summary.json", "deduplicated", "removed.parquet")
    }
    assert after[Path("duplicates.parquet")] == before[Path("duplicates.parquet")]
    # What the failed run left is what a rerun clears.
    monkeypatch.setattr(curate.pipeline, "write_table", write_table)
    dedup([str(tmp_path / "in")], str(out), load_config(None, {}), resume=True)
    assert {p.name for p in out.iterdir()} == {"summary.json", "deduplicated", "removed.parquet", "duplicates.parquet"}


def test_an_input_rewritten_to_its_own_size_during_the_run_fails_it(sync, tmp_path, monkeypatch):
    # Rewritten in place to the same size (an id and a word changed), the file kept every offset,
    # so nothing failed: the run ended with exit 0, the record as it now stands in neither the
    # output nor removed.parquet (which named the old id), and a text that was never deduplicated.
    import curate.pipeline

    path = jsonl(tmp_path / "in" / "a.jsonl", *doc_lines(5), doc_lines(1)[0].replace('"id": 0', '"id": 5'))
    read_for_output = curate.pipeline._read_for_output

    def rewritten_meanwhile(*args, **kwargs):  # between the dedup's reads and the final one
        path.write_bytes(path.read_bytes().replace(b'"id": 5', b'"id": 9'))
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
        return read_for_output(*args, **kwargs)

    monkeypatch.setattr(curate.pipeline, "_read_for_output", rewritten_meanwhile)
    with pytest.raises(curate.pipeline.InputChangedError) as err:
        run(tmp_path, [path])
    assert str(err.value) == (
        f"input file {path} changed during the run (size or modification time), so its records were read in "
        "different states; once the inputs stay as they are, run the same command with --resume (what was made "
        "from the file is made again) or --overwrite"
    )
    # Nothing of the write is left (a disk the write filled stayed full: no run uses its parts).
    assert not (tmp_path / "out" / "summary.json").exists() and not (tmp_path / "out" / "deduplicated.tmp").exists()


def test_a_field_named_as_a_column_the_reader_adds_is_refused_where_it_is_read(sync, tmp_path):
    # A Parquet column (or, read whole, a JSONL field) named _doc, _line or _kind met the
    # reader's own: a traceback ("'DataFrame' object has no attribute 'dtype'"), or after the
    # whole dedup a KeyError at the write.
    from curate.config import load_config
    from curate.pipeline import dedup

    for name in ("_doc", "_line", "_kind", "_record"):
        folder = tmp_path / name
        folder.mkdir()
        pq.write_table(pa.table({"id": [1, 2], "text": ["a", "a"], name: [5, 6]}), folder / "a.parquet")
        message = f"a.parquet: field '{name}' has the name of a column curate adds"
        for on_error in ("fail", "skip"):
            with pytest.raises(ValueError, match=message):
                dedup([str(folder)], str(tmp_path / "out"), load_config(None, {"io": {"on_error": on_error}}))
    # JSONL to JSONL never reads it: each kept line is written as read.
    path = jsonl(tmp_path / "j" / "a.jsonl", '{"id": 1, "text": "a", "_doc": 5}', '{"id": 2, "text": "a", "_doc": 6}')
    summary = dedup([str(path)], str(tmp_path / "out-j"), load_config(None, {}))
    assert summary["counts"]["output"] == {"kept": 1, "removed": 1, "rejected": 0}
    assert (
        tmp_path / "out-j" / "deduplicated" / "part.00000.jsonl"
    ).read_text() == '{"id": 1, "text": "a", "_doc": 5}\n'
    with pytest.raises(ValueError, match="a.jsonl: field '_doc' has the name"):
        dedup([str(path)], str(tmp_path / "out-p"), load_config(None, {"io": {"output_format": "parquet"}}))


def test_ids_that_are_not_integers_or_strings_are_bad_records(tmp_path):
    # Beside string ids, 1.0 was read as the id 1 (said to repeat id 1), 1e20 as
    # "100000000000000000000", ids no record holds; a Parquet id column of doubles or booleans
    # gave "1.5", "nan", "true".
    path = jsonl(
        tmp_path / "a.jsonl",
        '{"id": 1, "text": "a"}',
        '{"id": 1.0, "text": "b"}',
        '{"id": "x", "text": "c"}',
        '{"id": 1e20, "text": "d"}',
        '{"id": true, "text": "e"}',
        '{"id": 100000000000000000000, "text": "f"}',
    )
    assert fail_message(path) == "a.jsonl:2: field 'id': expected a string or an integer, got a number"
    good, rejected = read_skip(path)
    assert good.id.tolist() == ["1", "x", "100000000000000000000"]
    number = ("wrong-type", "id", "expected a string or an integer, got a number")
    assert [r[:4] for r in rejected] == [
        (2, *number),
        (4, *number),
        (5, "wrong-type", "id", "expected a string or an integer, got a boolean"),
    ]
    for values in ([1.5, float("nan"), 3.0], [True, False, True]):
        pq.write_table(pa.table({"id": values, "text": ["a", "b", "c"]}), tmp_path / "p.parquet")
        kind = "double" if isinstance(values[0], float) else "bool"
        assert (
            fail_message(tmp_path / "p.parquet") == f"p.parquet:0: field 'id': expected strings or integers, got {kind}"
        )
    pq.write_table(pa.table({"id": pa.nulls(2), "text": ["a", "b"]}), tmp_path / "p.parquet")  # each id missing
    assert [r[:4] for r in read_skip(tmp_path / "p.parquet")[1]] == [(i, "missing-field", "id", "null") for i in (0, 1)]


def test_a_keep_column_that_is_not_utf8_rejects_its_row_in_every_read(sync, tmp_path):
    # The stages' read rejected the row (its keep value is not UTF-8) but the final write's,
    # reading every column, checked the text and the id only: the row went to the output as
    # kept, never deduplicated (its exact copy stayed too) and not listed as rejected.
    from curate.config import load_config
    from curate.pipeline import dedup

    name = pa.Array.from_buffers(
        pa.string(), 3, [None, pa.py_buffer(np.array([0, 1, 3, 4], np.int32)), pa.py_buffer(b"a\xffbc")]
    )
    (tmp_path / "in").mkdir()
    pq.write_table(
        pa.table({"id": [1, 2, 3], "text": ["same", "same", "other"], "name": name}), tmp_path / "in" / "a.parquet"
    )
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / fmt
        config = load_config(None, {"keep": "max:name", "io": {"on_error": "skip", "output_format": fmt}})
        summary = dedup([str(tmp_path / "in")], str(out), config)
        assert summary["counts"]["output"] == {"kept": 2, "removed": 0, "rejected": 1}, fmt
        assert pd.read_parquet(out / "rejected").field.tolist() == ["name"]
