"""--output-compression and --keep-stages: what a run leaves in OUT."""

import gzip
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import zstandard

from curate.backend import to_arrow
from curate.config import load_config
from curate.io import read_documents
from curate.io.rejected import REJECTED_SCHEMA, _rows
from curate.io.write import _arrow_table, output_compression
from curate.pipeline import dedup
from tests.conftest import FIXTURES

DOCS = FIXTURES / "docs.jsonl"


def run(inputs, out, resume=False, keep_stages=False, **io):
    return dedup(
        [str(i) for i in inputs], str(out), load_config(None, {"io": io}), resume=resume, keep_stages=keep_stages
    )


def test_output_compression_default_follows_the_input():
    assert output_compression(None, "jsonl", "jsonl", ["a.jsonl.gz", "b.jsonl.gz"]) == "gzip"
    assert output_compression(None, "jsonl", "jsonl", ["a.jsonl.zst"]) == "zstd"
    assert output_compression(None, "jsonl", "jsonl", ["a.jsonl.gz", "b.jsonl.zst"]) == "none"  # files differ
    assert output_compression(None, "jsonl", "jsonl", ["a.jsonl.gz", "b.jsonl"]) == "none"
    assert output_compression(None, "parquet", "jsonl", ["a.parquet"]) == "none"
    assert output_compression(None, "jsonl", "parquet", ["a.jsonl.gz"]) == "snappy"  # pyarrow's default codec
    assert output_compression("zstd", "jsonl", "jsonl", ["a.jsonl"]) == "zstd"


def test_compressed_input_gives_compressed_output_of_the_same_lines(sync, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "docs.jsonl.gz").write_bytes(gzip.compress(DOCS.read_bytes()))
    plain = run([DOCS], tmp_path / "plain")
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == [
        "deduplicated",
        "duplicates.parquet",
        "removed.parquet",
        "summary.json",
    ]
    assert plain["output_compression"] == "none"
    lines = (tmp_path / "plain" / "deduplicated" / "part.00000.jsonl").read_bytes()

    zipped = run([tmp_path / "in"], tmp_path / "gz")
    assert zipped["output_compression"] == "gzip" and zipped["counts"]["output"] == plain["counts"]["output"]
    assert [p.name for p in (tmp_path / "gz" / "deduplicated").iterdir()] == ["part.00000.jsonl.gz"]
    written = (tmp_path / "gz" / "deduplicated" / "part.00000.jsonl.gz").read_bytes()
    assert gzip.decompress(written) == lines
    # the same records give the same bytes: the gzip header (RFC 1952) holds no file name or
    # other optional field (FLG byte 0) and no time stamp (MTIME, bytes 4-7, 0)
    assert written[3] == 0 and written[4:8] == bytes(4)
    # and curate reads its own output
    assert read_documents(str(tmp_path / "gz" / "deduplicated")).compute()["id"].tolist() == [
        json.loads(line)["id"] for line in lines.splitlines()
    ]

    run([tmp_path / "in"], tmp_path / "none", output_compression="none")
    assert (tmp_path / "none" / "deduplicated" / "part.00000.jsonl").read_bytes() == lines


def test_keep_stages_and_output_compression_on_resume(sync, tmp_path):
    out = tmp_path / "out"
    first = run([DOCS], out, keep_stages=True)
    stages = sorted(p.parent.name for p in (out / "_stages").glob("*/_marker.json"))
    assert stages and first["reused_stages"] == []
    lines = (out / "deduplicated" / "part.00000.jsonl").read_bytes()
    # the output's compression is not part of any stage's key: only the final write runs again
    again = run([DOCS], out, resume=True, output_compression="zstd")
    assert sorted(again["reused_stages"]) == stages and again["output_compression"] == "zstd"
    assert [p.name for p in (out / "deduplicated").iterdir()] == ["part.00000.jsonl.zst"]
    assert (
        zstandard.ZstdDecompressor().decompress((out / "deduplicated" / "part.00000.jsonl.zst").read_bytes()) == lines
    )
    assert not (out / "_stages").exists()  # a successful run without keep_stages removes them


def test_failed_run_keeps_its_stages(sync, tmp_path, monkeypatch):
    import curate.pipeline

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(curate.pipeline, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        run([DOCS], tmp_path / "out")
    assert len(list((tmp_path / "out" / "_stages").glob("*/_marker.json"))) > 5  # for --resume


def test_parquet_output_codec(sync, tmp_path):
    run([DOCS], tmp_path / "snappy", output_format="parquet")
    run([DOCS], tmp_path / "zstd", output_format="parquet", output_compression="zstd")
    for name, codec in [("snappy", "SNAPPY"), ("zstd", "ZSTD")]:
        meta = pq.ParquetFile(tmp_path / name / "deduplicated" / "part.00000.parquet").metadata
        assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {codec}
    assert pq.read_table(tmp_path / "zstd" / "deduplicated") == pq.read_table(tmp_path / "snappy" / "deduplicated")


def test_identify_only_lists_what_a_full_run_removes_and_writes_no_copy(sync, tmp_path, caplog):
    bad = tmp_path / "in" / "docs.jsonl"  # a record that cannot be read is still listed
    bad.parent.mkdir()
    bad.write_bytes(DOCS.read_bytes() + b'{"id": "broken", "text": \n')
    full = run([bad], tmp_path / "full", on_error="skip")
    out = tmp_path / "ids"
    listed = run([bad], out, keep_stages=True, on_error="skip", identify_only=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "_stages",
        "duplicates.parquet",
        "rejected",
        "removed.parquet",
        "summary.json",
    ]
    for name in ("removed.parquet", "duplicates.parquet", "rejected/part.00000.parquet"):
        assert (out / name).read_bytes() == (tmp_path / "full" / name).read_bytes()
    assert listed["counts"] == full["counts"] and listed["counts"]["output"] == {"kept": 7, "removed": 5, "rejected": 1}
    assert listed["output_format"] is None and listed["output_compression"] is None
    # No stage depends on it: the same command without it writes the copy from the kept stages.
    stages = sorted(p.parent.name for p in (out / "_stages").glob("*/_marker.json"))
    again = run([bad], out, resume=True, keep_stages=True, on_error="skip")
    assert sorted(again["reused_stages"]) == stages
    part = "deduplicated/part.00000.jsonl"
    assert (out / part).read_bytes() == (tmp_path / "full" / part).read_bytes()
    # Replacing a run whose outputs this one does not write says so (they went without a word).
    (out / "report.html").write_text("the previous run's report")
    caplog.clear()
    run([DOCS], out, resume=True, identify_only=True)
    assert sorted(p.name for p in out.iterdir()) == ["duplicates.parquet", "removed.parquet", "summary.json"]
    assert f"removed the previous run's deduplicated/ and rejected/ from {out}: this run writes none" in caplog.text


def test_a_partition_past_2_gib_of_text_is_written_in_pieces():
    # After a filter or a sort, pandas holds a partition's text as one large_string chunk (cudf's
    # export always does): Arrow's cast to the output's string type (int32 offsets) refused it
    # past 2 GiB, so a run over a big compressed shard failed at its last write.
    sizes = [3 << 29, 1 << 30]  # 1.5 GiB and 1 GiB of NUL characters
    offsets = pa.py_buffer(np.array([0, sizes[0], sum(sizes)], np.int64))
    chars = pa.py_buffer(np.zeros(sum(sizes), np.uint8))  # zero pages: memory only once copied
    text = pa.Array.from_buffers(pa.large_string(), 2, [None, offsets, chars])
    part = pd.DataFrame(
        {"id": ["a", "b"], "text": pd.Series(pa.chunked_array([text]), dtype=pd.StringDtype("pyarrow"))}
    )
    schema = pa.schema([("id", pa.string()), ("text", pa.string())])
    with pytest.raises(pa.ArrowInvalid, match="input array too large"):
        to_arrow(part, schema)  # what the write did
    table = _arrow_table(part, schema)
    assert table.schema == schema and table["id"].to_pylist() == ["a", "b"]
    assert pc.binary_length(table["text"]).to_pylist() == sizes
    assert all(chunk.nbytes < 2**31 for chunk in table["text"].chunks)


def test_rejected_records_past_2_gib_are_written_in_pieces():
    # The rejected list cast each partition's records to binary before the write could cut it
    # (a skip-mode run over a big shard that repeats its ids: every later copy is listed with its line).
    size = 3 << 28  # 0.75 GiB of NUL bytes per record (2.25 GiB in all): zero pages, memory only once copied
    offsets = pa.py_buffer(np.arange(4, dtype=np.int64) * size)
    lines = pa.Array.from_buffers(pa.large_binary(), 3, [None, offsets, pa.py_buffer(np.zeros(3 * size, np.uint8))])
    part = pd.DataFrame(
        {
            "_doc": np.arange(3, dtype=np.int64),
            "_line": np.arange(1, 4, dtype=np.int64),
            "_kind": ["duplicate-id"] * 3,
            "_field": ["id"] * 3,
            "_reason": ["repeats"] * 3,
            "_record": pd.arrays.ArrowExtensionArray(pa.chunked_array([lines])),
        }
    )
    rows = _rows(part, np.array(["big.jsonl.zst"], dtype=object))
    table = _arrow_table(rows, REJECTED_SCHEMA)
    assert table.schema == REJECTED_SCHEMA and table["line"].to_pylist() == [1, 2, 3]
    assert pc.binary_length(table["record"]).to_pylist() == [size] * 3
