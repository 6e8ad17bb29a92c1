"""Data fidelity and inputs: what is not deduplicated comes out exactly as it went in.

Kept JSONL records are their input lines byte for byte; Parquet keeps its schema; conversions
keep every value; side fields of any type ride along; overlapping inputs are read once; small
files share partitions.
"""

import datetime
import gzip
import json
import logging
import math
import os
import random

import pandas as pd
import pyarrow as pa
import pyarrow.dataset
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curate
from curate.config import load_config
from curate.io import read_documents, write_documents
from curate.io import records as record_parsing
from curate.io.files import expand_paths, find_inputs, overlap_message
from curate.io.plan import SPREAD_FLOOR, TO_THE_END, parse_pieces, plan_sources
from curate.pipeline import dedup
from tests.conftest import write_jsonl


def run(out, inputs, **overrides):
    return dedup([str(i) for i in inputs], str(out), load_config(None, overrides))


def output_lines(out) -> list[bytes]:
    files = sorted((out / "deduplicated").glob("part.*.jsonl"), key=lambda f: int(f.name.split(".")[1]))
    return [line for f in files for line in f.read_bytes().splitlines()]


def exact(line: bytes):
    """A JSON line's value with integers and floats as their exact text (so 1.0 != 1, 2**64 exact)."""
    return json.loads(line, parse_float=lambda s: ("float", float(s)), parse_int=int)


# -- 1. kept records are the input's records, unchanged ------------------------------------------


def test_floats_and_big_numbers_ride_along_unchanged(sync, tmp_path):
    # The issue's case: pandas' to_json wrote 0.123456789, 0.0 and 48.8583701235.
    lines = [
        b'{"id": 1, "text": "one", "score": 0.1234567890123456, "tiny": 1.5e-12, "lat": 48.858370123456789}',
        b'{"id": 2, "text": "one", "score": 0.5}',  # an exact copy of 1: removed
        b'{"text": "two", "id": 3, "big": 18446744073709551616, "neg": -9223372036854775809, "n": 9007199254740993,'
        b' "sub": 5e-324, "nested": {"b": [1, 2.50, null], "a": "\\u00e9\\ud83d\\ude00"}, "none": null, "x": 1E+2}',
        b'{"id": 4, "text": "three",   "spaced" :  [ ] }',
    ]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    summary = run(out, [tmp_path / "in.jsonl"], mode="exact")
    assert summary["counts"]["output"] == {"kept": 3, "removed": 1, "rejected": 0}
    assert output_lines(out) == [lines[0], lines[2], lines[3]]  # byte for byte: key order, escapes, spacing


def test_ids_outside_int64_are_exact(client, tmp_path):
    # Read as doubles, 2**64 and -2**63-1 once collided into a false "repeated id" error, and the
    # output rewrote 5 as 5.0 and 9007199254740993 as 9007199254740992.0. On the cluster: the
    # group tables that carry these ids pass P2P's conversion to Arrow.
    ids = [
        "18446744073709551616",
        "-9223372036854775809",
        "9007199254740993",
        "9007199254740992",
        "5",
        "18446744073709551617",
    ]
    lines = [f'{{"id": {i}, "text": "t{k % 3}"}}'.encode() for k, i in enumerate(ids)]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    docs = read_documents(str(tmp_path / "in.jsonl")).compute()
    assert docs.id.tolist() == ids  # strings holding the integers' exact text
    out = tmp_path / "out"
    run(out, [tmp_path / "in.jsonl"], mode="exact")
    assert output_lines(out) == lines[:3]
    removed = pd.read_parquet(out / "removed.parquet")
    assert removed[["id", "representative"]].to_dict("list") == {"id": ids[3:], "representative": ids[:3]}


def test_ids_that_fit_int64_stay_integers_and_a_later_big_one_is_named(tmp_path):
    lines = [json.dumps({"id": i, "text": "x" * 200}) for i in range(6000)]  # about 1.3 MB: beyond the sample
    lines[5500] = '{"id": 18446744073709551616, "text": "late"}'
    lines[5501] = '{"id": 9007199254740993, "text": "exact"}'  # in the same block: must not become a double
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        ValueError, match=r"^in.jsonl:5501: field 'id': integer 18446744073709551616 does not fit int64"
    ):
        read_documents(str(path)).compute()
    docs = read_documents(str(path), on_error="skip").compute()
    good = docs[docs._kind.isna()]
    assert good.id.dtype == "int64" and 9007199254740993 in set(good.id.tolist()) and len(good) == 5999


@pytest.mark.parametrize("blocksize", [None, "200B"])
def test_string_ids_that_read_as_numbers_stay_as_written(tmp_path, blocksize):
    # Where some ids are integers, a block of them was read with a decimal id column, which also
    # takes strings that read as numbers and writes them back its own way: "0012" became "12"
    # (a repeated id beside the real "12", whose record was rejected), "1e3" "1000", "-0" "0".
    ids = ["0012", 5, "12", "0099", "-0", "1e3", "+7", "007", 7, "0", 10**30]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": f"text {n}"}) + "\n" for n, i in enumerate(ids)))
    docs = read_documents(str(path), blocksize=blocksize).compute()
    assert docs.id.tolist() == [str(i) for i in ids]


def test_a_block_of_string_and_integer_ids_is_read_in_one_parse(sync, tmp_path, monkeypatch):
    # Taken from the records, not by reading the block line by line (halving until each run
    # holds one kind of id: about two parses a record where the kinds alternate).
    ids = [f"0{i}" if i % 2 else i for i in range(3000)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": "a text"}) + "\n" for i in ids))
    parses = []  # of the read, not the first MiB's sample (which infers the types)
    real = record_parsing.pajson.read_json

    def counted(*args, parse_options, **kwargs):
        parses.append(parse_options.explicit_schema is not None)
        return real(*args, parse_options=parse_options, **kwargs)

    monkeypatch.setattr(record_parsing.pajson, "read_json", counted)
    docs = read_documents(str(path)).compute()
    assert docs.id.tolist() == [str(i) for i in ids] and sum(parses) == 3  # as string, int64, decimal


def test_an_id_of_more_than_38_digits_is_named(tmp_path):
    # Integer ids beyond int64 are held exactly as 38-digit decimals; one digit more is named, not rounded.
    path = tmp_path / "in.jsonl"
    path.write_text(
        f'{{"id": {10**37}, "text": "a"}}\n{{"id": {10**38 - 1}, "text": "b"}}\n{{"id": {10**38}, "text": "c"}}\n'
    )
    with pytest.raises(ValueError, match=rf"^in.jsonl:3: field 'id': integer {10**38} has more than 38 digits"):
        read_documents(str(path)).compute()
    docs = read_documents(str(path), on_error="skip").compute()
    assert docs[docs._kind.isna()].id.tolist() == [str(10**37), str(10**38 - 1)]


def test_assigned_ids_are_put_first_in_the_records(sync, tmp_path):
    lines = [
        b'{"text": "a", "score": 0.1234567890123456}',
        b'  { "text":"b"}',
        b"",
        b'{"text": "a"}',
        b'{"text": "c", "id2": [1, {"x": 2.50}]}\r',
    ]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    run(out, [tmp_path / "in.jsonl"], mode="exact")
    assert output_lines(out) == [
        b'{"id": "in.jsonl:1", "text": "a", "score": 0.1234567890123456}',
        b'{"id": "in.jsonl:2", "text":"b"}',
        b'{"id": "in.jsonl:5", "text": "c", "id2": [1, {"x": 2.50}]}',
    ]
    assert pd.read_parquet(out / "removed.parquet")[["id", "representative"]].values.tolist() == [
        ["in.jsonl:4", "in.jsonl:1"]
    ]


def test_the_apis_jsonl_write_of_records_read_with_every_field_is_the_input(sync, tmp_path):
    # records=True keeps every field beside _record; write_documents put them all in front of
    # the record's own keys, so every key came out twice, first as converted values: {} and a
    # list of numbers and objects as their JSON text in strings, an integer beyond int64 too.
    fields = [
        b'"text": "some text here", "obj": {}, "mixed": [1, {"x": 2}], "big": 99999999999999999999}',
        b'"text":"other text","obj":{},"mixed":[1,{"x":2}],"big":5}',
        b'"text": "other text", "obj": {}, "mixed": [1], "big": 5.0}',  # an exact duplicate
    ]

    def kept_lines(name: str, lines: list[bytes]) -> list[bytes]:
        (tmp_path / f"{name}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        result = curate.deduplicate(read_documents(str(tmp_path / f"{name}.jsonl"), records=True))
        result.compute_with(write_documents(result.kept, str(tmp_path / name), "jsonl"))
        return (tmp_path / name / "part.00000.jsonl").read_bytes().splitlines()

    own = [b'{"id": 1, ' + fields[0], b'{"id":2,' + fields[1], b'{"id": 3, ' + fields[2]]
    assert kept_lines("own", own) == own[:2]
    assigned = kept_lines("bare", [b"{" + f for f in fields])
    assert assigned == [b'{"id": "bare.jsonl:1", ' + fields[0], b'{"id": "bare.jsonl:2", ' + fields[1]]


def test_parquet_keeps_its_schema_and_values(sync, tmp_path):
    nan = float("nan")
    table = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.uint64()),
            "text": pa.array(["a", "a", "b", "c"], pa.large_string()),
            "f32": pa.array([1.5, None, nan, -0.0], pa.float32()),
            "f64": pa.array([0.1234567890123456, nan, None, 5e-324]),
            "when": pa.array([0, 1, None, 2**57], pa.timestamp("us", tz="UTC")),
            "day": pa.array([0, None, 19000, -1], pa.date32()),
            "money": pa.array([None, 1, 2, 3], pa.decimal128(20, 4)),
            "tags": pa.array([[1], [], None, [2, None]], pa.list_(pa.int32())),
            "pair": pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": "é"}, {"a": 2, "b": None}]),
            "raw": pa.array([b"\x00\xff", None, b"", b"z"], pa.binary()),
            "cat": pa.array(["p", "q", None, "p"]).dictionary_encode(),
            "big": pa.array([2**63 + 1, 0, None, 1], pa.uint64()),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    out = tmp_path / "out"
    run(out, [tmp_path / "in.parquet"], mode="exact")
    written = pq.read_table(out / "deduplicated")
    expected = table.take([0, 2, 3]).cast(
        pa.schema([f.with_type(pa.string()) if f.name == "text" else f for f in table.schema])
    )
    assert written.schema.remove_metadata() == expected.schema  # the text is read as a string
    assert written.to_pylist().__repr__() == expected.to_pylist().__repr__()  # repr: NaN == NaN, -0.0 != 0.0


def test_parquet_keeps_the_metadata_every_file_shares(sync, tmp_path):
    # Hugging Face datasets' features (a class label) were dropped with every schema metadata key:
    # `label` read back as plain int64. pandas' own stays out (its dtypes and index).
    features = b'{"info": {"features": {"id": {"dtype": "int64", "_type": "Value"}, "text": {"dtype": "string", '
    features += b'"_type": "Value"}, "label": {"names": ["ham", "spam"], "_type": "ClassLabel"}}}}'
    (tmp_path / "in").mkdir()
    for i, texts in enumerate((["a", "a", "b"], ["c", "d", "b"])):
        table = pa.table({"id": [3 * i, 3 * i + 1, 3 * i + 2], "text": texts, "label": [0, 1, 0]})
        meta = {b"huggingface": features, b"pandas": b"{}", b"source": b"crawl-7"}
        pq.write_table(table.replace_schema_metadata(meta), tmp_path / "in" / f"{i}.parquet")
    run(tmp_path / "out", [tmp_path / "in"], mode="exact")
    written = pq.read_table(tmp_path / "out" / "deduplicated")
    assert written["id"].to_pylist() == [0, 2, 3, 4]
    assert written.schema.metadata == {b"huggingface": features, b"source": b"crawl-7"}
    # Files that differ in their metadata, or an id column the run adds: none.
    meta = {b"huggingface": features, b"source": b"crawl-8"}
    pq.write_table(
        pa.table({"id": [9], "text": ["e"], "label": [1]}).replace_schema_metadata(meta), tmp_path / "in" / "2.parquet"
    )
    run(tmp_path / "out2", [tmp_path / "in"], mode="exact")
    assert pq.read_table(tmp_path / "out2" / "deduplicated").schema.metadata is None
    (tmp_path / "bare").mkdir()
    pq.write_table(
        pa.table({"text": ["a", "b"]}).replace_schema_metadata({b"source": b"x"}), tmp_path / "bare" / "0.parquet"
    )
    run(tmp_path / "out3", [tmp_path / "bare"], mode="exact")
    assert pq.read_table(tmp_path / "out3" / "deduplicated").schema.metadata is None


def test_parquet_timestamps_in_two_time_zones_are_the_same_instants_in_utc(sync, tmp_path):
    # They were each value's JSON text, a string ('"2024-01-01T12:00:00+00:00"'), in Parquet output.
    (tmp_path / "in").mkdir()
    zones = {"a": pa.timestamp("ms", tz="UTC"), "b": pa.timestamp("us", tz="Europe/Berlin")}
    for name, dtype in zones.items():
        table = pa.table({"id": [name], "text": [f"text {name}"], "ts": pa.array([1_700_000_000_000_000], pa.int64())})
        table = table.set_column(2, "ts", pa.array([1_700_000_000_000_000 // (1000 if name == "a" else 1)]).cast(dtype))
        pq.write_table(table, tmp_path / "in" / f"{name}.parquet")
    run(tmp_path / "out", [tmp_path / "in"], mode="exact")
    written = pq.read_table(tmp_path / "out" / "deduplicated")
    assert written.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert written["ts"].to_pylist() == [datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC)] * 2


def test_parquet_categoricals_and_dates_beside_strings_and_timestamps_keep_their_values(sync, tmp_path):
    # pandas writes a categorical as a dictionary; beside a file of plain strings (or a date beside
    # a timestamp) it was written as each value's JSON text: 'ham' became '"ham"', and a filter on
    # label == "ham" found nothing.
    (tmp_path / "in").mkdir()
    a = pd.DataFrame({"id": [1, 2], "text": ["a b c", "d e f"], "label": pd.Categorical(["ham", "spam"])})
    a["when"], a["tags"] = pd.Timestamp("2020-01-02 03:04:05"), [["x"], ["y"]]
    a.to_parquet(tmp_path / "in" / "a.parquet", index=False)
    b = pa.table(
        {
            "id": [3],
            "text": ["g h i"],
            "label": ["ham"],
            "when": pa.array([datetime.date(2021, 5, 6)], pa.date32()),
            "tags": pa.array([["z"]], pa.list_(pa.dictionary(pa.int8(), pa.string()))),
        }
    )
    pq.write_table(b, tmp_path / "in" / "b.parquet")
    run(tmp_path / "out", [tmp_path / "in"], mode="exact")
    written = pq.read_table(tmp_path / "out" / "deduplicated")
    assert written.schema.field("label").type == pa.string() and written["label"].to_pylist() == ["ham", "spam", "ham"]
    when = written.schema.field("when").type  # pandas' unit (us in pandas 3)
    assert (
        pa.types.is_timestamp(when)
        and when.tz is None
        and written["when"].to_pylist()
        == [
            pd.Timestamp("2020-01-02 03:04:05"),
            pd.Timestamp("2020-01-02 03:04:05"),
            pd.Timestamp("2021-05-06"),
        ]
    )
    assert written["tags"].to_pylist() == [["x"], ["y"], ["z"]]
    # A date beside a timestamp with a time zone is no one instant: each value's JSON text, as before.
    pq.write_table(b.set_column(3, "when", pa.array([0], pa.timestamp("s", tz="UTC"))), tmp_path / "in" / "b.parquet")
    c = (
        b.drop(["label"])
        .set_column(0, "id", pa.array([4]))
        .set_column(1, "text", pa.array(["j k l"]))
        .set_column(2, "when", pa.array([datetime.date(2021, 5, 6)]))
    )
    pq.write_table(c, tmp_path / "in" / "c.parquet")
    (tmp_path / "in" / "a.parquet").unlink()
    run(tmp_path / "out2", [tmp_path / "in"], mode="exact")
    assert pq.read_table(tmp_path / "out2" / "deduplicated")["when"].to_pylist() == [
        '"1970-01-01T00:00:00+00:00"',
        '"2021-05-06"',
    ]


def test_parquet_output_has_the_inputs_columns_not_the_references(sync, tmp_path):
    # A week's output had every column that only what was published before held, null in every
    # row, in the reference's order: its schema depended on the reference.
    (tmp_path / "published").mkdir()
    (tmp_path / "new").mkdir()
    published = pa.table(
        {"id": ["p1", "p2"], "text": ["one two three", "four five six"], "old": [1, 2], "lang": ["en"] * 2}
    )
    pq.write_table(published, tmp_path / "published" / "a.parquet")
    new = pa.table({"lang": ["de", "en", "fr"], "id": ["n1", "n2", "n3"], "text": ["one two three", "seven", "eight"]})
    pq.write_table(new.replace_schema_metadata({b"huggingface": b"{}"}), tmp_path / "new" / "b.parquet")
    config = load_config(None, {"mode": "exact"})
    dedup([str(tmp_path / "new")], str(tmp_path / "out"), config, reference=[str(tmp_path / "published")])
    written = pq.read_table(tmp_path / "out" / "deduplicated")
    assert written.schema.names == ["lang", "id", "text"] and written["id"].to_pylist() == ["n2", "n3"]
    assert written.schema.metadata == {b"huggingface": b"{}"}  # the input's, though the reference has none
    # JSONL output copies each line as read: the reference's fields were never there.
    (tmp_path / "new" / "b.parquet").unlink()
    write_jsonl(tmp_path / "new" / "b.jsonl", new.to_pylist())
    (tmp_path / "published" / "a.parquet").unlink()
    write_jsonl(tmp_path / "published" / "a.jsonl", published.to_pylist())
    config = load_config(None, {"mode": "exact", "io": {"output_format": "parquet"}})
    dedup([str(tmp_path / "new")], str(tmp_path / "out2"), config, reference=[str(tmp_path / "published")])
    assert pq.read_table(tmp_path / "out2" / "deduplicated").schema.names == ["lang", "id", "text"]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_legacy_int96_timestamps_keep_their_dates(sync, tmp_path, fmt):
    # Spark's and Impala's INT96 timestamps were read as nanoseconds: 1500-01-01 wrapped around
    # to 2084-07-20 23:34:33.709551616, without a word.
    when = [datetime.datetime(1500, 1, 1), datetime.datetime(2020, 1, 2, 3, 4, 5, 6)]
    table = pa.table({"id": [1, 2], "text": ["a b", "c d"], "t": pa.array(when, pa.timestamp("us"))})
    pq.write_table(table, tmp_path / "in.parquet", use_deprecated_int96_timestamps=True)
    run(tmp_path / "out", [tmp_path / "in.parquet"], mode="exact", io={"output_format": fmt})
    if fmt == "parquet":
        assert pq.read_table(tmp_path / "out" / "deduplicated")["t"].to_pylist() == when
    else:
        assert [json.loads(line)["t"] for line in output_lines(tmp_path / "out")] == [
            "1500-01-01T00:00:00",
            "2020-01-02T03:04:05.000006",
        ]


def test_parquet_to_jsonl_keeps_float_precision(sync, tmp_path):
    pq.write_table(
        pa.table({"id": [1, 2], "text": ["a", "b"], "score": [0.1234567890123456, 1.5e-12], "n": [2**62 + 1, None]}),
        tmp_path / "in.parquet",
    )
    out = tmp_path / "out"
    run(out, [tmp_path / "in.parquet"], mode="exact", io={"output_format": "jsonl"})
    assert [json.loads(line) for line in output_lines(out)] == [
        {"id": 1, "text": "a", "score": 0.1234567890123456, "n": 2**62 + 1},
        {"id": 2, "text": "b", "score": 1.5e-12, "n": None},
    ]


def test_parquet_to_jsonl_writes_dates_in_iso_8601(sync, tmp_path):
    # Timestamps were written as Python's str ("2020-01-01 12:00:00", a space, not ISO's "T")
    # and durations as "0:01:30"; JSON readers (pandas, pyarrow) take ISO 8601.
    pq.write_table(
        pa.table(
            {
                "id": [1],
                "text": ["a"],
                "at": pa.array([1_577_880_000_000_000], pa.timestamp("us", tz="UTC")),
                "local": pa.array([1_577_880_000_000_000_001], pa.timestamp("ns")),
                "day": pa.array([18262], pa.date32()),
                "took": pa.array([90_000_000], pa.duration("us")),
            }
        ),
        tmp_path / "in.parquet",
    )
    out = tmp_path / "out"
    run(out, [tmp_path / "in.parquet"], mode="exact", io={"output_format": "jsonl"})
    assert json.loads(output_lines(out)[0]) == {
        "id": 1,
        "text": "a",
        "at": "2020-01-01T12:00:00+00:00",
        "local": "2020-01-01T12:00:00.000000001",
        "day": "2020-01-01",
        "took": "P0DT0H1M30S",
    }


def test_parquet_values_beyond_pythons_types_are_written(sync, tmp_path):
    # JSONL output stopped the run with a traceback (OverflowError) at a timestamp or date that
    # Python's datetime cannot hold (a year past 9999: an export's "infinity") or a duration
    # past timedelta's; a time64[ns] lost its last three digits (12:34:56.789012).
    table = pa.table(
        {
            "id": [1, 2],
            "text": ["a", "b"],
            "until": pa.array([2**63 - 1, 0], pa.timestamp("us")),
            "zoned": pa.array([2**40, None], pa.timestamp("s", tz="UTC")),
            "day": pa.array([2**31 - 1, 0], pa.date32()),
            "took": pa.array([-(2**62), 1500], pa.duration("ms")),
            "at": pa.array([45_296_789_012_345, 5000], pa.time64("ns")),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    out = tmp_path / "out"
    run(out, [tmp_path / "in.parquet"], mode="exact", io={"output_format": "jsonl"})
    assert [json.loads(line) for line in output_lines(out)] == [
        {
            "id": 1,
            "text": "a",
            "until": "294247-01-10T04:00:54.775807",
            "zoned": "36812-02-20T00:36:16.000+00:00",  # Parquet stores seconds as milliseconds
            "day": "5881580-07-11",
            "took": "-P53375995583DT15H36M27.904S",
            "at": "12:34:56.789012345",
        },
        {
            "id": 2,
            "text": "b",
            "until": "1970-01-01T00:00:00",
            "zoned": None,
            "day": "1970-01-01",
            "took": "P0DT0H0M1.5S",
            "at": "00:00:00.000005",
        },
    ]


def test_view_columns_are_read_as_strings_and_bytes(sync, tmp_path):
    # A string_view or binary_view column (pyarrow writes them; Parquet stores plain strings)
    # stopped every run with ArrowNotImplementedError: no take kernel for string_view.
    table = pa.table(
        {
            "id": [1, 2, 3],
            "text": pa.array(["same", "same", "other"], pa.string_view()),
            "note": pa.array(["x", None, "z"], pa.string_view()),
            "blob": pa.array([b"\x00", b"", None], pa.binary_view()),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    out = tmp_path / "out"
    run(out, [tmp_path / "in.parquet"], mode="exact")
    written = pq.read_table(out / "deduplicated")
    assert written.schema.types == [pa.int64(), pa.string(), pa.string(), pa.binary()]
    assert written.to_pylist() == [
        {"id": 1, "text": "same", "note": "x", "blob": b"\x00"},
        {"id": 3, "text": "other", "note": "z", "blob": None},
    ]


def test_parquet_to_jsonl_writes_each_files_own_values(sync, tmp_path):
    # A column of other types in other files (int64 here, strings there) was written as its
    # values' JSON text inside a JSON string ("\\"s1\\""; 0 as "0"), and a null text as "".
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"id": [1, 2], "text": ["a", None], "score": [0, 7]}), tmp_path / "in" / "a.parquet")
    pq.write_table(
        pa.table({"id": [3], "text": ["c"], "score": ["s1"], "x": [[1.5, float("nan")]]}), tmp_path / "in" / "b.parquet"
    )
    out = tmp_path / "out"
    run(out, [tmp_path / "in"], mode="exact", io={"output_format": "jsonl"})
    assert output_lines(out) == [
        b'{"id": 1, "text": "a", "score": 0}',
        b'{"id": 2, "text": null, "score": 7}',
        b'{"id": 3, "text": "c", "score": "s1", "x": [1.5, null]}',
    ]


def test_parquet_output_keeps_null_texts(sync, tmp_path):
    # A null text (read as empty for the dedup) was written to Parquet output as "".
    pq.write_table(pa.table({"id": [1, 2, 3], "text": ["a", None, "b"]}), tmp_path / "in.parquet")
    (tmp_path / "in.jsonl").write_text('{"id": 1, "text": null}\n{"id": 2, "text": "b"}\n')
    for name in ("in.parquet", "in.jsonl"):
        out = tmp_path / f"out-{name}"
        run(out, [tmp_path / name], mode="fuzzy", io={"output_format": "parquet"})
        texts = pq.read_table(out / "deduplicated").column("text").to_pylist()
        assert texts == (["a", None, "b"] if name == "in.parquet" else [None, "b"])


def test_jsonl_to_parquet_keeps_values(sync, tmp_path):
    records = [
        {"id": 1, "text": "a", "score": 0.1234567890123456, "tiny": 1.5e-12, "tags": ["x"]},
        {"id": 2, "text": "b", "score": 48.858370123456789},
    ]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    run(out, [tmp_path / "in.jsonl"], mode="exact", io={"output_format": "parquet"})
    rows = pq.read_table(out / "deduplicated").to_pylist()
    assert rows == [{"tiny": None, "tags": None, **r} if r["id"] == 2 else r for r in records]


def test_jsonl_to_parquet_keeps_integers_a_double_would_round(sync, tmp_path):
    # pyarrow reads an integer beyond int64 as a double, and widens int64 with double: the whole
    # field became double, and 2**53 + 1 and 2**63 - 1 were rounded in the Parquet output.
    (tmp_path / "in").mkdir()
    a = [{"id": 1, "text": "a", "n": 1, "m": 2**63 - 1, "x": 2**53}, {"id": 2, "text": "b", "n": 2**53 + 1, "m": 5}]
    b = [{"id": 3, "text": "c", "n": 2**64 + 1, "m": 1.5, "x": 0.5}]
    for name, records in [("a.jsonl", a), ("b.jsonl", b)]:
        (tmp_path / "in" / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    run(out, [tmp_path / "in"], mode="exact", io={"output_format": "parquet"})
    table = pq.read_table(out / "deduplicated")
    # n within one file, m across files: each value's JSON text. x (at most 2**53) widens as before.
    assert table["n"].to_pylist() == ["1", str(2**53 + 1), str(2**64 + 1)]
    assert table["m"].to_pylist() == [str(2**63 - 1), "5", "1.5"]
    assert table.schema.field("x").type == pa.float64() and table["x"].to_pylist() == [2.0**53, None, 0.5]


def test_jsonl_to_parquet_keeps_fields_of_empty_objects(sync, tmp_path):
    # A field that is {} in every record is struct<> in Arrow, which Parquet cannot store: the
    # output's write failed after the whole run. Such a field holds its JSON text, as a field
    # of several types does; an empty list is a list of nulls, which Parquet stores.
    (tmp_path / "in").mkdir()
    records = [
        {"id": i, "text": t, "meta": {}, "deep": {"a": {}}, "rows": [{}], "tags": []} for i, t in enumerate("ab")
    ]
    (tmp_path / "in" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    run(tmp_path / "out", [tmp_path / "in"], mode="exact", io={"output_format": "parquet"})
    table = pq.read_table(tmp_path / "out" / "deduplicated")
    assert table.drop_columns(["text"]).to_pylist() == [
        {"id": i, "meta": "{}", "deep": '{"a": {}}', "rows": "[{}]", "tags": []} for i in range(2)
    ]


# The property test: random records through a whole run, every kept line compared with its input.

_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [5e-324, 2.2250738585072014e-308, -0.0, 1e308, 0.1]
)
_ints = st.integers() | st.sampled_from([2**53 + 1, 2**63, -(2**63) - 1, 2**64, -(2**64)])
# Ids as the reader holds them exactly: integers of at most 38 digits (a longer one is an error
# that names it: test_an_id_of_more_than_38_digits_is_named).
_ids = st.integers(-(10**38) + 1, 10**38 - 1) | st.sampled_from([2**53 + 1, 2**63, -(2**63) - 1, 2**64, -(2**64)])
_scalars = st.none() | st.booleans() | _ints | _floats | st.text(max_size=8)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_side = st.dictionaries(st.sampled_from(["score", "meta", "é", "k\u2028", "tags", "n"]), _values, max_size=4)


@st.composite
def _corpora(draw):
    """(records as (id, text, side fields, key order seed), ensure_ascii per record)."""
    n = draw(st.integers(1, 12))
    ids = draw(st.lists(_ids, min_size=n, max_size=n, unique=True))
    texts = draw(st.lists(st.sampled_from(["a", "b", "", "ünï", "a "]), min_size=n, max_size=n))
    sides = draw(st.lists(_side, min_size=n, max_size=n))
    flags = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), min_size=n, max_size=n))
    return list(zip(ids, texts, sides, flags))


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(corpus=_corpora(), split=st.integers(0, 12))
def test_random_records_come_out_exactly(sync, tmp_path_factory, corpus, split):
    tmp = tmp_path_factory.mktemp("prop")
    lines = []
    for doc_id, text, side, (ascii_only, order) in corpus:
        record = {"id": doc_id, "text": text, **side}
        keys = list(record)
        random.Random(order).shuffle(keys)
        lines.append(json.dumps({k: record[k] for k in keys}, ensure_ascii=ascii_only).encode())
    (tmp / "in").mkdir()
    (tmp / "in" / "a.jsonl").write_bytes(b"".join(line + b"\n" for line in lines[:split]))
    (tmp / "in" / "b.jsonl").write_bytes(b"".join(line + b"\n" for line in lines[split:]))
    summary = run(tmp / "out", [tmp / "in"], mode="exact")
    first = {}
    for line, (_, text, _, _) in zip(lines, corpus):
        first.setdefault(text, line)
    kept = [line for line in lines if first[exact(line)["text"]] is line]  # brute force: first of each text
    written = output_lines(tmp / "out")
    assert written == kept
    assert [exact(line) for line in written] == [exact(line) for line in kept]
    assert summary["counts"]["output"] == {"kept": len(kept), "removed": len(lines) - len(kept), "rejected": 0}


# -- 2. no blank-line part files --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_partition_with_nothing_kept_writes_no_file(sync, tmp_path, fmt):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"id": 1, "text": "x"}\n{"id": 2, "text": "y"}\n')
    (tmp_path / "in" / "b.jsonl").write_text('{"id": 3, "text": "x"}\n')  # all removed
    (tmp_path / "in" / "c.jsonl").write_text('{"id": 4, "text": "z"}\n')
    out = tmp_path / "out"
    run(out, [tmp_path / "in"], mode="exact", io={"files_per_partition": 1, "output_format": fmt})
    assert sorted(f.name for f in (out / "deduplicated").iterdir()) == [f"part.00000.{fmt}", f"part.00002.{fmt}"]
    if fmt == "jsonl":
        assert [json.loads(line)["id"] for line in output_lines(out)] == [1, 2, 4]
    # Partition 0 with no documents: Parquet writes the schema with no row group, so the folder
    # reads back with its columns, and JSONL no file. An empty JSONL file stopped pyarrow's
    # dataset ("Empty JSON stream"), and a row group of 0 rows Hugging Face datasets' Parquet
    # reader ("BatchSize must be greater than 0").
    (tmp_path / "in" / "a.jsonl").write_text("")
    (tmp_path / "in" / "c.jsonl").write_text('{"id": 4, "text": "x"}\n')
    config = load_config(None, {"mode": "exact", "io": {"files_per_partition": 1, "output_format": fmt}})
    dedup([str(tmp_path / "in")], str(out), config, overwrite=True)
    files = sorted((out / "deduplicated").iterdir())
    if fmt == "jsonl":
        assert [f.name for f in files] == ["part.00001.jsonl"]
        assert pyarrow.dataset.dataset(out / "deduplicated", format="json").to_table()["id"].to_pylist() == [3]
    else:
        assert [f.name for f in files] == ["part.00000.parquet", "part.00001.parquet"]
        assert pq.ParquetFile(files[0]).metadata.num_row_groups == 0 and pq.read_table(files[0]).schema.names == [
            "id",
            "text",
        ]
        batches = [b.num_rows for f in files for b in pq.ParquetFile(f).iter_batches()]
        assert batches == [1] and pq.read_table(out / "deduplicated")["id"].to_pylist() == [3]


def test_parts_sort_by_name_in_input_order(sync, tmp_path):
    # part.10 sorted before part.2: pyarrow's and pandas' read of the folder, a glob and ls gave
    # the kept documents out of input order past ten parts.
    (tmp_path / "in").mkdir()
    for i in range(12):
        (tmp_path / "in" / f"{i:02d}.jsonl").write_text(f'{{"id": {i}, "text": "document {i}"}}\n')
    out = tmp_path / "out"
    run(out, [tmp_path / "in"], mode="exact", io={"files_per_partition": 1, "output_format": "parquet"})
    names = sorted(f.name for f in (out / "deduplicated").iterdir())
    assert names[:2] == ["part.00000.parquet", "part.00001.parquet"] and len(names) == 12
    assert pq.read_table(out / "deduplicated")["id"].to_pylist() == list(range(12))


# -- 3. side fields of any type ride along ------------------------------------------------------------


def test_side_field_types_that_differ_between_files(sync, tmp_path):
    (tmp_path / "in").mkdir()
    a = b'{"id": 1, "text": "one", "score": 3}\n'
    b = b'{"id": 2, "text": "two", "score": "high"}\n{"id": 3, "text": "three", "score": [1, {"x": null}]}\n'
    (tmp_path / "in" / "a.jsonl").write_bytes(a)
    (tmp_path / "in" / "b.jsonl").write_bytes(b)
    out = tmp_path / "out"
    summary = run(out, [tmp_path / "in"])
    assert output_lines(out) == (a + b).splitlines() and summary["counts"]["output"]["kept"] == 3
    # Converted to Parquet, the field holds each value's JSON text.
    run(tmp_path / "pq", [tmp_path / "in"], io={"output_format": "parquet"})
    assert pq.read_table(tmp_path / "pq" / "deduplicated")["score"].to_pylist() == ["3", '"high"', '[1, {"x": null}]']
    # Parquet files whose column types differ: the same.
    (tmp_path / "p").mkdir()
    pq.write_table(pa.table({"id": [1], "text": ["one"], "score": [3]}), tmp_path / "p" / "a.parquet")
    pq.write_table(pa.table({"id": [2], "text": ["two"], "score": ["high"]}), tmp_path / "p" / "b.parquet")
    run(tmp_path / "pp", [tmp_path / "p"])
    assert pq.read_table(tmp_path / "pp" / "deduplicated").to_pydict() == {
        "id": [1, 2],
        "text": ["one", "two"],
        "score": ["3", '"high"'],
    }


# -- 4. overlapping inputs --------------------------------------------------------------------------


def test_overlapping_inputs_are_read_once(sync, tmp_path, monkeypatch, caplog):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.jsonl.gz").write_bytes(gzip.compress(b'{"id": 1, "text": "a"}\n'))
    (tmp_path / "d" / "b.jsonl").write_text('{"id": 2, "text": "b"}\n')
    (tmp_path / "d" / "sub" / "c.jsonl").write_text('{"id": 3, "text": "c"}\n')
    monkeypatch.chdir(tmp_path)
    # a folder and a file in it, a glob, a relative and an absolute spelling, a symlink
    os.symlink(tmp_path / "d" / "b.jsonl", tmp_path / "link.jsonl")
    inputs = ["d", "d/a.jsonl.gz", str(tmp_path / "d" / "*.jsonl"), "d/../d/sub", "link.jsonl"]
    with caplog.at_level(logging.WARNING, logger="curate.io.read"):
        summary = run(tmp_path / "out", inputs)
    assert summary["counts"]["input"]["documents"] == 3
    assert [json.loads(line)["id"] for line in output_lines(tmp_path / "out")] == [1, 2, 3]
    warnings = [r.getMessage() for r in caplog.records if r.name == "curate.io.read"]
    # a, b and c each named again (b three times): three files, each shown once
    assert len(warnings) == 1 and warnings[0].startswith(
        "inputs overlap: 3 file(s) named more than once are read once: "
    )
    b_named = f"{tmp_path / 'd' / 'b.jsonl'} (in 'd' and {str(tmp_path / 'd' / '*.jsonl')!r} and 'link.jsonl')"
    assert b_named in warnings[0] and warnings[0].count("b.jsonl (in") == 1
    # Mixed absolute and relative arguments, folders expanding to absolute paths, file names relative to their common folder.
    fs, paths, _ = expand_paths([str(tmp_path / "d" / "b.jsonl"), "d/sub"])
    assert paths == [str(tmp_path / "d" / "b.jsonl"), str(tmp_path / "d" / "sub" / "c.jsonl")]
    assert read_documents(["d/b.jsonl", "d/sub"], id_field=None).compute().id.tolist() == [2, 3]


def test_hive_partition_folders_are_named_in_a_warning(sync, tmp_path, caplog):
    # Spark and pyarrow datasets read year=2020/ as a column; curate reads files, so the
    # partition key was missing from the output without a word.
    for year, ids in [(2020, [1, 2]), (2021, [3])]:
        (tmp_path / "in" / f"year={year}").mkdir(parents=True)
        pq.write_table(
            pa.table({"id": ids, "text": ["a b"] * len(ids)}), tmp_path / "in" / f"year={year}" / "p.parquet"
        )
    with caplog.at_level(logging.WARNING, logger="curate.io.read"):
        run(tmp_path / "out", [tmp_path / "in"], mode="exact")
    assert [r.getMessage() for r in caplog.records if r.name == "curate.io.read"] == [
        "inputs in Hive partition folders (year=...): curate reads the files, not a dataset, so these keys are not "
        "columns of the output; each file's path keeps them (source in duplicates.parquet)"
    ]  # once, though the run reads the files twice
    assert pq.read_table(tmp_path / "out" / "deduplicated").column_names == ["id", "text"]


def test_a_file_given_twice_is_counted_once(tmp_path):
    (tmp_path / "d").mkdir()
    for name in "abc":
        (tmp_path / "d" / f"{name}.jsonl").write_text(f'{{"id": "{name}", "text": "{name}"}}\n')
    d = str(tmp_path / "d")
    _, paths, _, repeats, _ = find_inputs([d, f"{d}/a.jsonl", f"{d}/a.jsonl", f"{d}/*.jsonl"])
    assert len(paths) == 3
    message = overlap_message(repeats)
    assert message.startswith("inputs overlap: 3 file(s) named more than once are read once: ")
    assert f"{d}/a.jsonl (in {d!r} and {d + '/a.jsonl'!r} and {d + '/*.jsonl'!r})" in message
    assert message.count("a.jsonl (in") == 1 and "; and" not in message


def test_a_url_given_twice_is_named_with_its_protocol():
    # "corpus/gz/reuters/part-00000.jsonl.gz (in ...)": the warning dropped s3:// (a trial on S3).
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/overlap/a.jsonl", b'{"id": "a", "text": "a"}\n')
    _, paths, _, repeats, _ = find_inputs(["memory://overlap/", "memory://overlap/a.jsonl"])
    assert overlap_message(repeats).endswith(
        "memory:///overlap/a.jsonl (in 'memory://overlap/' and 'memory://overlap/a.jsonl')"
    )
    fs.rm("/overlap", recursive=True)


def test_a_file_found_again_through_a_link_in_its_folder_is_named_by_both_spellings(tmp_path):
    # The warning said "given twice" of a folder given once, which held a link to one of its files.
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.jsonl").write_text('{"id": "a", "text": "a"}\n')
    os.symlink(tmp_path / "d" / "a.jsonl", tmp_path / "d" / "sub" / "link.jsonl")
    d = str(tmp_path / "d")
    _, paths, _, repeats, _ = find_inputs([d])
    assert paths == [f"{d}/a.jsonl"]
    assert overlap_message(repeats).endswith(f"{d}/a.jsonl (in {d!r}, also as {d}/sub/link.jsonl)")


def test_a_folders_files_of_other_names_are_named_in_a_warning(tmp_path, caplog, monkeypatch):
    # They were skipped without a word: a folder of a.jsonl, c.jl, d.jsonl.bz2... read a.jsonl only.
    d = tmp_path / "d"
    (d / ".git").mkdir(parents=True)
    (d / "_temporary").mkdir()
    for name in ["a.jsonl", "B.JSONL", "c.jl", "d.jsonl.bz2", "e.jsonl.gzip", "f.jsonlines", "g.txt", ".hidden.jsonl"]:
        (d / name).write_text(f'{{"id": "{name}", "text": "{name}"}}\n')
    # not data by convention: left out without a word
    for name in ["_SUCCESS", ".part-0.crc", "_common_metadata", ".git/HEAD", "_temporary/notes.txt"]:
        (d / name).write_text("")
    # nor the copies in such folders, which were read: a notebook's checkpoint, Spark's leftovers
    (d / ".ipynb_checkpoints").mkdir()
    for name in [".ipynb_checkpoints/a-checkpoint.jsonl", "_temporary/part-00000.jsonl"]:
        (d / name).write_text(f'{{"id": "{name}", "text": "{name}"}}\n')
    with caplog.at_level(logging.WARNING, logger="curate.io.read"):
        assert read_documents([str(d)]).compute().id.tolist() == ["B.JSONL", "a.jsonl"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "curate.io.read"]
    assert warnings == [
        "inputs skipped: 5 file(s) in folders or globs are not read, not named as JSONL (.jsonl, .json, .ndjson; "
        f"also .gz or .zst) or Parquet (.parquet): {d}/c.jl; {d}/d.jsonl.bz2; {d}/e.jsonl.gzip; and 2 more"
    ]
    skipped = ["c.jl", "d.jsonl.bz2", "e.jsonl.gzip", "f.jsonlines", "g.txt"]
    assert find_inputs([str(d)])[4] == [f"{d}/{name}" for name in skipped]
    # A glob the same: `d/*` stopped the run on _SUCCESS ("unknown file type"), `d/**` on d itself,
    # and `d/*.jsonl` read .hidden.jsonl (fsspec's globs match dot files).
    for pattern in ("*", "**", "*.*"):
        paths, _, _, skipped_here = find_inputs([f"{d}/{pattern}"])[1:]
        assert [os.path.basename(p) for p in paths] == ["B.JSONL", "a.jsonl"], pattern
        assert skipped_here == [f"{d}/{name}" for name in skipped], pattern
    assert [os.path.basename(p) for p in find_inputs([f"{d}/*.jsonl"])[1]] == ["a.jsonl"]
    with monkeypatch.context() as m:  # a relative glob
        m.chdir(d)
        assert [os.path.basename(p) for p in find_inputs(["*.jsonl"])[1]] == ["a.jsonl"]


def test_a_runs_output_or_a_saved_dataset_as_input_is_named_for_what_it_is(sync, tmp_path, monkeypatch):
    # A run's output folder as input (or published weeks that are run outputs, as --reference)
    # stopped with "inputs mix formats (jsonl .../summary.json, parquet .../part.00000.parquet)";
    # a Hugging Face save_to_disk folder had its .arrow files skipped and its dataset_info.json
    # read as a record ("invalid JSON"; with --on-error skip, exit 0 and nothing kept).
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "in.jsonl", [{"id": 1, "text": "a b c"}])
    for week in ("week1", "week2"):
        run(tmp_path / "runs" / week, [tmp_path / "in.jsonl"], mode="exact", io={"output_format": "parquet"})
    with pytest.raises(ValueError) as raised:
        find_inputs(["runs/"])
    assert str(raised.value) == (
        "input 'runs/' holds the output of 2 curate runs (runs/week1/summary.json; runs/week2/summary.json): "
        "name the kept documents, runs/week1/deduplicated; runs/week2/deduplicated"
    )
    assert [os.path.basename(p) for p in find_inputs(["runs/week1/deduplicated"])[1]] == ["part.00000.parquet"]
    # A glob names the folders found (they were the pattern joined to them: runs/*/week1/...), and
    # a run with --identify-only, which writes no deduplicated/, is one too (formats mixed).
    run(tmp_path / "runs" / "week3", [tmp_path / "in.jsonl"], mode="exact", io={"identify_only": True})
    with pytest.raises(ValueError) as raised:
        find_inputs(["runs/w*"])
    runs = tmp_path / "runs"
    assert str(raised.value) == (
        f"input 'runs/w*' holds the output of 3 curate runs ({runs}/week1/summary.json; {runs}/week2/summary.json; "
        f"{runs}/week3/summary.json): name the kept documents, {runs}/week1/deduplicated; {runs}/week2/deduplicated; "
        "a run with --identify-only wrote none (its removed.parquet lists the documents to leave out)"
    )
    saved = tmp_path / "saved"
    saved.mkdir()
    for name in ("data-00000-of-00001.arrow", "dataset_info.json", "state.json"):
        (saved / name).write_text("{}")
    with pytest.raises(ValueError, match=r"^input '.*saved' is a Hugging Face datasets folder \(save_to_disk"):
        find_inputs([str(saved)])
    # A folder of JSONL that holds a summary.json of its own, with no run's deduplicated/, is read.
    (saved / "data-00000-of-00001.arrow").unlink()
    (saved / "summary.json").write_text('{"id": 2, "text": "d e f"}')
    assert len(find_inputs([str(saved)])[1]) == 3


def test_file_urls_name_local_files(sync, tmp_path):
    # file:///abs/a.jsonl was taken for a relative path, '<cwd>/file:/abs/a.jsonl', and a
    # file:// glob's files were read back as URLs after the cluster had started.
    (tmp_path / "d").mkdir()
    for name in "ab":
        (tmp_path / "d" / f"{name}.jsonl").write_text(f'{{"id": "{name}", "text": "{name}"}}\n')
    d = str(tmp_path / "d")
    for inputs in ([f"file://{d}/a.jsonl", f"{d}/b.jsonl"], [f"file://{d}/*.jsonl"], [f"file://{d}"]):
        assert expand_paths(inputs)[1] == [f"{d}/a.jsonl", f"{d}/b.jsonl"], inputs
        assert read_documents(inputs).compute().id.tolist() == ["a", "b"], inputs
    assert run(tmp_path / "out", [f"file://{d}/*.jsonl"])["counts"]["input"]["documents"] == 2


# -- 5. partitions planned by bytes -----------------------------------------------------------------


def test_small_files_share_partitions(tmp_path):
    (tmp_path / "in").mkdir()
    for i in range(40):
        (tmp_path / "in" / f"{i:03}.jsonl.gz").write_bytes(
            gzip.compress(json.dumps({"id": i, "text": "word " * 200}).encode() + b"\n")
        )
    docs = read_documents(str(tmp_path / "in"))
    assert docs.npartitions == 1
    assert read_documents(str(tmp_path / "in"), files_per_partition=1).npartitions == 40  # the override
    # each file decompresses to 1,026 bytes: 10 of them fit 10,260
    small = read_documents(str(tmp_path / "in"), blocksize=10_260)
    assert small.npartitions == 4
    pd.testing.assert_frame_equal(
        small.compute().reset_index(drop=True), docs.compute().reset_index(drop=True)
    )  # same _doc keys


def test_packing_keeps_input_order_around_split_files():
    paths = ["a.jsonl.gz", "b.jsonl.gz", "big.jsonl", "c.jsonl.gz", "d.jsonl.gz", "e.jsonl.gz"]
    sizes = [40, 50, 250, 30, 80, 10]
    sources = plan_sources(paths, "jsonl", 100, None, sizes)
    assert [(s.file_indices, s.offset) for s in sources] == [
        ((0, 1), 0),
        ((2,), 0),
        ((2,), 100),
        ((2,), 200),
        ((3,), 0),
        ((4, 5), 0),
    ]
    sources = plan_sources(paths, "jsonl", 100, 2, sizes)
    assert [(s.file_indices, s.offset) for s in sources] == [
        ((0, 1), 0),
        ((2,), 0),
        ((2,), 100),
        ((2,), 200),
        ((3, 4), 0),
        ((5,), 0),
    ]


def test_compressed_files_larger_than_the_blocksize_are_cut_in_blocks_whose_last_reads_to_the_end():
    # Their sizes are estimates: the last block reads on, wherever the stream ends, and a
    # block is not cut in pieces (each would decode the file again).
    paths, sizes = ["a.jsonl.gz", "big.jsonl.zst", "c.jsonl.gz"], [40, 250, 30]
    sources = plan_sources(paths, "jsonl", 100, None, sizes)
    assert [(s.file_indices, s.offset, s.length, s.first_line) for s in sources] == [
        ((0,), 0, None, 1),
        ((1,), 0, 100, 1),
        ((1,), 100, 100, None),
        ((1,), 200, TO_THE_END, None),
        ((2,), 0, None, 1),
    ]
    assert all(parse_pieces(s, sizes, 10) == [s] for s in sources[1:4])
    # Each block decodes the file from its start: at most COMPRESSED_BLOCKS (4), larger than asked.
    blocks = plan_sources(["huge.jsonl.gz"], "jsonl", 100, None, [1000])
    assert [(s.offset, s.length) for s in blocks] == [(0, 250), (250, 250), (500, 250), (750, TO_THE_END)]
    assert plan_sources(paths, "parquet", 100, None, sizes)[1].length is None  # Parquet: whole files


def test_partitions_spread_over_the_worker_threads_down_to_the_floor():
    mb = 1 << 20
    files = ["a.jsonl.gz", "b.jsonl.gz", "c.jsonl.gz", "d.jsonl.gz"]  # read whole: 15 MiB each
    packed = {
        n: [s.file_indices for s in plan_sources(files, "jsonl", 64 * mb, None, [15 * mb] * 4, n)]
        for n in (1, 2, 4, 16)
    }
    assert packed == {
        1: [(0, 1, 2, 3)],  # 60 MiB: one 64 MiB partition
        2: [(0, 1), (2, 3)],  # 30 MiB each
        4: [(0,), (1,), (2,), (3,)],  # 16 MiB (the floor) each
        16: [(0,), (1,), (2,), (3,)],  # whole files make fewer
    }
    # A 40 MiB file cut for 16 threads: not under the floor (16 MiB); a smaller blocksize stays.
    assert SPREAD_FLOOR == 16 * mb
    ranges = plan_sources(["big.jsonl"], "jsonl", 64 * mb, None, [40 * mb], 16)
    assert [(s.offset, s.length) for s in ranges] == [(0, 16 * mb), (16 * mb, 16 * mb), (32 * mb, 16 * mb)]
    assert len(plan_sources(["big.jsonl"], "jsonl", mb, None, [20 * mb], 16)) == 20
    # Neither files per partition nor one file per partition (blocksize None) changes.
    assert len(plan_sources(files, "jsonl", 64 * mb, 2, [15 * mb] * 4, 16)) == 2
    assert len(plan_sources(["big.jsonl"], "jsonl", None, None, [20 * mb], 16)) == 1


def test_parse_pieces_cut_ranges_to_the_file_end_and_pack_whole_files():
    paths = ["a.jsonl.gz", "b.jsonl.gz", "big.jsonl", "c.jsonl.gz", "d.jsonl.gz", "e.jsonl.gz"]
    sizes = [40, 50, 250, 30, 80, 10]
    (whole,) = plan_sources(paths, "jsonl", 1000, None, sizes)
    assert [p.file_indices for p in parse_pieces(whole, sizes, 100)] == [(0, 1), (2,), (3,), (4, 5)]
    assert [p.paths for p in parse_pieces(whole, sizes, 100)][-1] == ("d.jsonl.gz", "e.jsonl.gz")
    ranges = [s for s in plan_sources(paths, "jsonl", 200, None, sizes) if s.length is not None]
    assert [(s.offset, s.length) for s in ranges] == [(0, 200), (200, 200)]  # the last passes the end (250)
    first, last = (parse_pieces(s, sizes, 64) for s in ranges)
    assert [(p.offset, p.length, p.first_line) for p in first] == [
        (0, 64, 1),
        (64, 64, None),
        (128, 64, None),
        (192, 8, None),
    ]
    assert [(p.offset, p.length) for p in last] == [(200, 50)]
    assert parse_pieces(whole, sizes, 1000) == [whole]


def test_compressed_size_is_estimated_from_the_sample(tmp_path):
    rng = random.Random(0)
    text = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(2_000_000))  # about 11 MB
    raw = "".join(
        json.dumps({"id": i, "text": text[i * 10_000 : (i + 1) * 10_000]}) + "\n" for i in range(1100)
    ).encode()
    (tmp_path / "big.jsonl.gz").write_bytes(gzip.compress(raw))
    from fsspec.implementations.local import LocalFileSystem

    from curate.io.files import sample_file

    _, size = sample_file(LocalFileSystem(), str(tmp_path / "big.jsonl.gz"), "jsonl")
    assert math.isclose(size, len(raw), rel_tol=0.1)
    # Where the file states its size and the sample's ratio falls short (a user's lines: 26 %,
    # and their last block as much over --blocksize), the stated size: one gzip member, one zstd frame.
    head = "".join(json.dumps({"id": i, "text": rng.randbytes(30).hex()}) + "\n" for i in range(20_000)).encode()
    tail = b"".join(b'{"id": %d, "text": "the same words again"}\n' % i for i in range(400_000))
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(head + tail))
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(head + tail))
    for name in ("b.jsonl.gz", "b.jsonl.zst"):
        assert sample_file(LocalFileSystem(), str(tmp_path / name), "jsonl")[1] == len(head + tail), name


def test_a_glob_that_matches_folders_reads_their_files(tmp_path):
    # --reference 'published/week[0-3]' matched no file ("no file matches the pattern"), though it
    # matched four folders; `**` matches a folder and its files, each read once, without a warning.
    for week in range(4):
        (tmp_path / "published" / f"week{week}" / "_tmp").mkdir(parents=True)
        (tmp_path / "published" / f"week{week}" / "part.jsonl").write_text(f'{{"id": {week}, "text": "t"}}\n')
        (tmp_path / "published" / f"week{week}" / "_tmp" / "x.jsonl").write_text("not data\n")
    root = str(tmp_path / "published")
    _, paths, _, repeats, _ = find_inputs([f"{root}/week[0-2]"])
    assert paths == [f"{root}/week{week}/part.jsonl" for week in range(3)] and repeats == []
    _, paths, _, repeats, _ = find_inputs([f"{root}/**"])
    assert paths == [f"{root}/week{week}/part.jsonl" for week in range(4)] and repeats == []
