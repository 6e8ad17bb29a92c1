"""Reading and writing documents: formats, splitting, ids, errors that name file and line."""

import gzip
import io
import itertools
import json
import os
import zlib

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import zstandard
from dask.utils import key_split
from fsspec.utils import read_block
from pydantic import ValidationError

import curate.io.files
import curate.io.read
from curate.config import IOConfig
from curate.io import read_documents, write_documents
from curate.io.files import Broken, decompressed, decompressed_block, decompressed_chunks, source_names
from curate.io.plan import TO_THE_END
from curate.io.write import write_table
from tests.conftest import FIXTURES, write_jsonl

LINES = (FIXTURES / "docs.jsonl").read_bytes()


def _chunked(data: bytes, codec: str) -> tuple[bytes, str | None]:
    out = []
    try:
        out.extend(decompressed_chunks(io.BytesIO(data), codec))
    except Broken as err:
        return b"".join(out), str(err)
    return b"".join(out), None


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_a_file_is_decoded_in_one_call_where_that_gives_what_the_chunks_give(codec, monkeypatch):
    # A whole file decodes in one call (zstd: 0.48 against 1.1 s for gutenberg's 470 MB); what
    # that call would take differently (several frames, padding, damage) goes to the chunks.
    text = b"".join(b'{"id": %d, "text": "line %d of the file"}\n' % (i, i) for i in range(20000))
    half = text[: len(text) // 2]
    if codec == "gzip":
        sound = gzip.compress(text)
        raw = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
        others = [
            gzip.compress(half) + gzip.compress(text),  # two members
            gzip.compress(half) + b"\0" * 100 + gzip.compress(half) + b"\0" * 7,  # padding, as gzip(1) reads it
            gzip.compress(half) + b"junk",
            sound[: len(sound) // 2],  # cut short
            sound[:-8] + bytes([sound[-8] ^ 0xFF]) + sound[-7:],  # its CRC-32 wrong
            raw.compress(half) + raw.flush(zlib.Z_FULL_FLUSH) + b"\xff" * 64,  # not deflate after a flush
            b"",
        ]
    else:
        sound = zstandard.ZstdCompressor().compress(text)
        stream = zstandard.ZstdCompressor().compressobj()
        skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"skip"
        others = [
            sound + sound,  # two frames
            zstandard.ZstdCompressor().compress(b"") + sound,  # an empty frame first
            stream.compress(text) + stream.flush(),  # its size unknown
            skippable + sound,
            sound + b"junk",
            sound[: len(sound) // 2],
            b"",
        ]
    for data in others:
        got, broken = decompressed(io.BytesIO(data), codec)
        assert (got, broken and str(broken)) == _chunked(data, codec)
    assert _chunked(others[0], codec)[0].endswith(text) and _chunked(others[-2], codec)[1] is not None

    def refused(f, codec):
        raise AssertionError("decoded in chunks")

    monkeypatch.setattr(curate.io.files, "decompressed_chunks", refused)
    assert decompressed(io.BytesIO(sound), codec) == (text, None)
    assert decompressed(io.BytesIO(text), None) == (text, None)


def test_compressed_and_plain_jsonl_read_the_same(tmp_path):
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(LINES))
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(LINES))
    plain = read_documents(str(FIXTURES / "docs.jsonl")).compute()
    both = read_documents(str(tmp_path)).compute()  # a directory: both files, sorted
    assert len(both) == 24
    pd.testing.assert_frame_equal(both.iloc[:12].drop(columns="_doc"), plain.drop(columns="_doc"))
    assert (both._doc.to_numpy()[12:] >> 40 == 1).all()  # second file
    assert plain._doc.tolist() == [0] + [sum(len(line) + 1 for line in LINES.split(b"\n")[:i]) for i in range(1, 12)]


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_a_compressed_files_blocks_are_the_blocks_of_its_stream(codec, monkeypatch):
    # A compressed JSONL file was read whole whatever --blocksize said (a user's 48 MiB shards of
    # 470,000 lines each took workers of 2 GB past their limit): its blocks are now cut as an
    # uncompressed file's, on the decompressed stream.
    monkeypatch.setattr(curate.io.files, "_CHUNK", 37)  # decoded chunks that cross every boundary
    text = b"".join(b'{"id": %d, "text": "%s"}\n' % (i, b"w" * (i % 23)) for i in range(300)) + b'{"id": 300}'
    data = gzip.compress(text) if codec == "gzip" else zstandard.ZstdCompressor().compress(text)
    for offset in [0, 1, 5, 40, 41, 500, len(text) - 3, len(text), len(text) + 9]:
        for length in [1, 30, 700, len(text)]:
            block, start, lines, broken = decompressed_block(io.BytesIO(data), codec, offset, length)
            assert block == read_block(io.BytesIO(text), offset, length, delimiter=b"\n") and broken is None
            assert text[start : start + len(block)] == block and lines == text[:start].count(b"\n")
    cut = data[: len(data) * 3 // 4]  # a stream cut short: exactly one block says so, the one where the cut line starts
    decoded = _chunked(cut, codec)[0]
    for size in [50, 333, 10_000]:
        offsets = range(0, len(text), size)
        blocks = [
            decompressed_block(io.BytesIO(data), codec, o, TO_THE_END if o == offsets[-1] else size) for o in offsets
        ]
        assert b"".join(block for block, *_ in blocks) == text
        blocks = [
            decompressed_block(io.BytesIO(cut), codec, o, TO_THE_END if o == offsets[-1] else size) for o in offsets
        ]
        assert b"".join(block for block, *_ in blocks) == decoded
        said = [(o, start, block) for o, (block, start, _, broken) in zip(offsets, blocks) if broken is not None]
        assert len(said) == 1, said
        tail = decoded.rfind(b"\n") + 1  # the cut line's key
        offset, start, block = said[0]
        assert (offset < tail or offset == 0) and tail <= offset + size and start + block.rfind(b"\n") + 1 == tail
    assert decompressed_block(io.BytesIO(b""), codec, 0, 10)[3] is not None  # an empty file: block 0 says so
    assert decompressed_block(io.BytesIO(b""), codec, 10, 10)[3] is None


def test_compressed_jsonl_splits_without_changing_documents(tmp_path):
    lines = b"".join(b'{"text": "document %d %s"}\n' % (i, b"x" * (i % 50)) for i in range(2000))
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(lines))
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    (tmp_path / "c.jsonl").write_bytes(lines)
    whole = read_documents(str(tmp_path), blocksize=None)
    split = read_documents(str(tmp_path), blocksize=8_000)
    assert whole.npartitions == 3 and split.npartitions == 4 + 4 + -(
        -len(lines) // 8_000
    )  # compressed: 4 blocks at most
    got, expected = split.compute(), whole.compute()
    pd.testing.assert_frame_equal(got, expected)  # ids (file:line, none given) and keys too
    assert got.id.iloc[[0, 1999, 2000, 4000]].tolist() == [
        "a.jsonl.gz:1",
        "a.jsonl.gz:2000",
        "b.jsonl.zst:1",
        "c.jsonl:1",
    ]
    assert all(split.map_partitions(len).compute())  # each file's blocks hold its lines between them


def test_blocksize_splits_without_changing_documents(tmp_path):
    whole = read_documents(str(FIXTURES / "docs.jsonl"), blocksize=None)
    split = read_documents(str(FIXTURES / "docs.jsonl"), blocksize=300)
    assert whole.npartitions == 1 and split.npartitions == len(LINES) // 300 + 1
    pd.testing.assert_frame_equal(split.compute().reset_index(drop=True), whole.compute().reset_index(drop=True))


def test_result_tables_do_not_depend_on_the_parts_writer(tmp_path):
    # cuDF (the GPU run's parts) writes strings as `string` and a column without nulls as
    # required; the table took part 0's schema, so it differed from the CPU run's and a null
    # in a later part failed the cast.
    rows = [{"id": "a", "kind": "exact", "jaccard": 1.0}, {"id": "b", "kind": "fuzzy", "jaccard": None}]
    for name, nullable, strings in (("cpu", True, pa.large_string()), ("gpu", False, pa.string())):
        (tmp_path / name).mkdir()
        for i, row in enumerate(rows):
            fields = [pa.field("id", strings, nullable), pa.field("kind", strings, nullable)]
            fields.append(pa.field("jaccard", pa.float64(), nullable or row["jaccard"] is None))
            pq.write_table(pa.Table.from_pylist([row], pa.schema(fields)), tmp_path / name / f"part.{i}.parquet")
        write_table(str(tmp_path / name), str(tmp_path / f"{name}.parquet"), ["id", "kind", "jaccard"])
    assert (tmp_path / "gpu.parquet").read_bytes() == (tmp_path / "cpu.parquet").read_bytes()
    table = pq.read_table(tmp_path / "gpu.parquet")
    assert table.schema.field("id").type == pa.large_string() and table.schema.field("jaccard").nullable
    assert table.to_pylist() == rows


def test_result_tables_do_not_depend_on_the_partitions(tmp_path):
    # The writer cuts pages where a chunk ends: a row group of the parts' chunks gave other bytes
    # for 56 partitions than for 15 (a user's 7.2 million lines, the rows equal).
    rng = np.random.default_rng(0)
    n = 300_000  # past a page (1 MiB) of ids, so that where the chunks end matters
    table = pa.table({"id": [f"doc-{i}-{v}" for i, v in enumerate(rng.integers(10**9, size=n))], "j": rng.random(n)})
    for name, cuts in [("one", [0, n]), ("many", sorted({0, n, *rng.integers(0, n, 36).tolist()}))]:
        (tmp_path / name).mkdir()
        for i, (start, end) in enumerate(itertools.pairwise(cuts)):
            pq.write_table(table.slice(start, end - start), tmp_path / name / f"part.{i}.parquet")
        write_table(str(tmp_path / name), str(tmp_path / f"{name}.parquet"), ["id", "j"])
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "many.parquet").read_bytes()
    assert pq.read_table(tmp_path / "many.parquet").equals(
        table.cast(pa.schema([("id", pa.large_string()), ("j", pa.float64())]))
    )


def test_missing_ids_are_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "noid.jsonl", [{"text": "x"}, {"text": "y"}, {"text": "z"}])
    path.write_text(path.read_text().replace('{"text": "y"}\n', '{"text": "y"}\n\n'))  # a blank line
    one = read_documents(str(path)).compute()
    assert one.id.tolist() == ["noid.jsonl:1", "noid.jsonl:2", "noid.jsonl:4"]
    split = read_documents(str(path), blocksize=16).compute()
    assert split.id.tolist() == one.id.tolist()


def test_files_named_relative_to_their_common_folder_or_whole_from_the_root():
    # Files in /work/... and /tmp/... were named "work/..." and "tmp/...": relative to the root,
    # they read as relative to the current folder.
    assert source_names(["/data/a/x.jsonl", "/data/b/y.jsonl"]) == ("a/x.jsonl", "b/y.jsonl")
    assert source_names(["/work/a/x.jsonl", "/tmp/b/y.jsonl"]) == ("/work/a/x.jsonl", "/tmp/b/y.jsonl")
    assert source_names(["/x.jsonl"]) == ("/x.jsonl",)
    assert source_names(["s3://b/a/x.jsonl", "s3://b/y.jsonl"]) == ("s3://b/a/x.jsonl", "s3://b/y.jsonl")


def test_parquet_input_and_output(tmp_path):
    table = pa.table({"id": [3, 1, 2], "text": pa.array(["a", "b", None], pa.large_string()), "score": [0.5, 0.1, 0.9]})
    pq.write_table(table, tmp_path / "in.parquet")
    docs = read_documents(str(tmp_path / "in.parquet"))
    frame = docs.compute()
    assert frame.id.tolist() == [3, 1, 2] and frame.text.isna().tolist() == [False, False, True]  # null stays null
    assert read_documents(str(tmp_path / "in.parquet"), keep_null_text=False).compute().text.tolist() == ["a", "b", ""]
    assert write_documents(docs, str(tmp_path / "out"), "parquet").compute() == 3
    assert pq.read_table(tmp_path / "out").to_pydict() == {
        "id": [3, 1, 2],
        "text": ["a", "b", None],
        "score": [0.5, 0.1, 0.9],
    }
    assert write_documents(docs, str(tmp_path / "jsonl"), "jsonl").compute() == 3
    lines = (tmp_path / "jsonl" / "part.00000.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"id": 3, "text": "a", "score": 0.5},
        {"id": 1, "text": "b", "score": 0.1},
        {"id": 2, "text": None, "score": 0.9},
    ]


def test_bad_json_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1, "text": "a"}\n{"id": 2, "text": "b"\n{"id": 3, "text": "c"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: invalid JSON"):
        read_documents(str(path)).compute()
    path.write_text('{"id": 1, "text": "a"}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: expected a JSON object, got an array"):
        read_documents(str(path)).compute()


def test_missing_text_field_and_paths(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"id": 1, "body": "a"}])
    with pytest.raises(ValueError, match="no text field 'text'"):
        read_documents(str(path))
    assert read_documents(str(path), text_field="body").compute().body.tolist() == ["a"]
    with pytest.raises(FileNotFoundError, match="matches no JSONL or Parquet file"):
        read_documents(str(tmp_path / "nothing-*.jsonl"))


def test_date_like_strings_stay_the_strings_they_are(tmp_path):
    # pyarrow's JSON reader took ISO 8601 strings for timestamps: JSONL to Parquet wrote
    # "2020-01-01T00:00:00+02:00" as 2019-12-31 22:00 (no zone), and where a later line held
    # another string the field became JSON text ('"2020-01-01"').
    write_jsonl(tmp_path / "a" / "s.jsonl", [{"id": "n1", "text": "a", "c": "2020-01-01T00:00:00+02:00"},
                                             {"id": "n2", "text": "b", "c": "2020-06-01 10:00:00"}])  # fmt: skip
    write_jsonl(tmp_path / "b" / "s.jsonl", [{"id": "n1", "text": "a", "c": "2020-01-01", "d": [1]},
                                             {"id": "n2", "text": "b", "c": "x", "d": ["s"]}])  # fmt: skip
    write_jsonl(tmp_path / "c" / "1.jsonl", [{"id": "n1", "text": "a", "c": "x", "e": {"at": "2021-03-04"}}])
    write_jsonl(tmp_path / "c" / "2.jsonl", [{"id": "n2", "text": "b", "c": "2021-03-04", "e": {"at": "y"}}])
    expected = {
        "a": ["2020-01-01T00:00:00+02:00", "2020-06-01 10:00:00"],
        "b": ["2020-01-01", "x"],
        "c": ["x", "2021-03-04"],
    }
    for folder, values in expected.items():
        docs = read_documents(str(tmp_path / folder)).compute(scheduler="sync")
        assert docs.c.tolist() == values and pd.api.types.is_string_dtype(docs.c.dtype), folder
    assert [e["at"] for e in docs.e] == ["2021-03-04", "y"]


def test_a_rewritten_file_is_read_again_where_a_cluster_holds_an_earlier_read(client, tmp_path):
    # Task names did not depend on the files' state: a cluster still holding an earlier read's
    # result (a persisted frame, a future in a traceback) handed back the old records, and a
    # second `curate dedup` run in one process reported the first run's bad record.
    path = write_jsonl(tmp_path / "a.jsonl", [{"id": "a", "text": "old text"}])
    held = client.compute(read_documents(str(path)))
    assert held.result().text.tolist() == ["old text"]
    write_jsonl(path, [{"id": "a", "text": "new text"}])  # the same size
    os.utime(path, ns=(0, path.stat().st_mtime_ns + 10**9))  # and surely a later time
    assert read_documents(str(path)).compute().text.tolist() == ["new text"]


def test_a_file_named_like_a_pattern_is_that_file(sync, tmp_path):
    # A folder's x[1].jsonl was read, then named again (the final write reads the files found)
    # and taken for a pattern that matched nothing: the whole run stopped.
    from curate.config import load_config
    from curate.pipeline import dedup

    (tmp_path / "in").mkdir()
    write_jsonl(tmp_path / "in" / "x[1].jsonl", [{"id": 1, "text": "a"}, {"id": 2, "text": "a"}])
    write_jsonl(tmp_path / "in" / "y.jsonl", [{"id": 3, "text": "b"}])
    assert read_documents(str(tmp_path / "in" / "x[1].jsonl")).compute().id.tolist() == [1, 2]
    summary = dedup([str(tmp_path / "in")], str(tmp_path / "out"), load_config(None, {"mode": "exact"}))
    assert summary["counts"]["output"] == {"kept": 2, "removed": 1, "rejected": 0}
    write_jsonl(tmp_path / "x1.jsonl", [{"id": 4, "text": "c"}])
    assert read_documents(str(tmp_path / "x[1].jsonl")).compute().id.tolist() == [4]  # no such file: a pattern


def test_what_a_killed_write_leaves_goes_with_the_next_run(sync, tmp_path):
    # summary.json.tmp (a run killed before renaming it) and report.html.tmp (a killed curate
    # report) stayed in OUT for good: no run removed them.
    from curate.config import load_config
    from curate.pipeline import dedup

    out, config = tmp_path / "out", load_config(None, {"mode": "exact"})
    dedup([str(FIXTURES / "docs.jsonl")], str(out), config)
    (out / "summary.json.tmp").write_text("{")
    (out / "report.html.tmp").write_text("<html>")
    dedup([str(FIXTURES / "docs.jsonl")], str(out), config, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "deduplicated",
        "duplicates.parquet",
        "removed.parquet",
        "summary.json",
    ]


def test_blocksizes_that_are_no_size_are_refused():
    # "" and YAML's true were 1 byte to Dask, reported as "1 bytes is too small"; the reader's
    # -5 an IndexError while planning the partitions.
    for value in ("", True):
        with pytest.raises(ValidationError, match=rf"{value!r} is not a size in bytes \(e\.g\. 64MB\)"):
            IOConfig(blocksize=value)
    for value in ("64", 3999, "3.9KB"):
        with pytest.raises(ValidationError, match=r"bytes is too small a partition: give 4KB or more"):
            IOConfig(blocksize=value)
    assert [IOConfig(blocksize=v).blocksize for v in ("4KB", "4KiB", 4000, None)] == [4000, 4096, 4000, None]
    for value in (-5, 0, "0B"):
        with pytest.raises(
            ValueError,
            match=rf"blocksize must be a positive number of bytes, or None, got {value if isinstance(value, int) else 0}$",
        ):
            read_documents(str(FIXTURES / "docs.jsonl"), blocksize=value)


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_a_partition_whose_records_pass_2_gib_can_be_filtered(tmp_path, on_error):
    # A run over a compressed shard of 2.7 GB failed at its first row selection (exact dedup's
    # filter): the records column (each JSONL line as read, written back unchanged) was binary,
    # whose int32 offsets Arrow's take overflows when it joins the column's chunks.
    write_jsonl(tmp_path / "a.jsonl", [{"id": 1, "text": "x"}])
    meta = read_documents(str(tmp_path / "a.jsonl"), records=True, on_error=on_error)._meta
    kind = meta["_record"].dtype.pyarrow_dtype
    offsets = np.int64 if pa.types.is_large_binary(kind) else np.int32
    size = 3 << 28  # 0.75 GiB of NUL bytes per chunk (2.25 GiB in all): zero pages, memory only once copied

    def chunk():
        data = pa.py_buffer(np.zeros(size, np.uint8))
        return pa.Array.from_buffers(kind, 1, [None, pa.py_buffer(np.array([0, size], offsets)), data])

    part = pd.DataFrame({"_record": pd.arrays.ArrowExtensionArray(pa.chunked_array([chunk(), chunk(), chunk()]))})
    kept = part[np.array([False, False, True])]  # as exact dedup's filter selects rows: Arrow's take
    assert pc.binary_length(kept["_record"].array._pa_array).to_pylist() == [size]


def test_a_skip_mode_partition_past_2_gib_puts_its_rejected_records_in_order(tmp_path, monkeypatch):
    # Skip mode puts the rejected records among the documents with Arrow's take, which joins each
    # column's chunks into one array: past 2 GiB the text's int32 offsets overflow, so such a
    # partition's columns take int64 offsets first. The limit lowered to 0 takes that path here.
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 1, "text": "a"}\n{"id": 2, "text": \n{"id": 3, "text": "c", "n": 5}\n')
    expected = read_documents(str(path), on_error="skip", records=True).compute(scheduler="sync")
    monkeypatch.setattr(curate.io.read, "SMALL_OFFSETS_LIMIT", 0)
    got = read_documents(str(path), on_error="skip", records=True).compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, expected)
    assert got["_kind"].notna().tolist() == [False, True, False] and got["_line"].tolist() == [1, 2, 3]


def test_a_host_read_is_a_pandas_read():
    # A read named as a host step runs beside the GPU's task on GPU workers: device partitions
    # made there would hold the GPU unaccounted for.
    with dask.config.set({"dataframe.backend": "cudf"}):
        with pytest.raises(ValueError, match="host=True reads pandas partitions only; dataframe.backend is 'cudf'"):
            read_documents(str(FIXTURES / "docs.jsonl"), host=True)
    names = {key_split(key) for key in read_documents(str(FIXTURES / "docs.jsonl"), host=True).__dask_graph__()}
    assert "host-read-documents" in names and "read-documents" not in names


def test_input_fingerprints_see_a_remote_object_replaced_after_its_listing():
    # s3fs answers info() from the listing it cached: an object replaced mid-run kept its first
    # size and time, so the changed-input check found no change and the read's s3fs error
    # ("Etag ... no longer exists") named no change (a trial on S3). A listing cache as s3fs's:
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    from curate.checkpoints import input_fingerprint

    class Caching(MemoryFileSystem):
        protocol = "caching"

        @classmethod
        def _strip_protocol(cls, path):
            return "/" + path.removeprefix("caching://").strip("/")

        def info(self, path, **kwargs):
            path = self._strip_protocol(path)
            if path in self.dircache:
                return self.dircache[path]
            self.dircache[path] = super().info(path, **kwargs)
            return self.dircache[path]

        def invalidate_cache(self, path=None):  # as s3fs's
            self.dircache.clear()

    fsspec.register_implementation("caching", Caching, clobber=True)
    fs = fsspec.filesystem("caching")
    fs.pipe("/week/a.jsonl", b'{"id": "a", "text": "a"}\n')
    assert input_fingerprint(["caching://week/"])[0][1] == 25
    fs.pipe("/week/a.jsonl", b'{"id": "a", "text": "a longer text"}\n')  # replaced, the listing cached
    assert input_fingerprint(["caching://week/"])[0][1] == 37
    fs.rm_file("/week/a.jsonl")


def test_inputs_are_sampled_once_while_unchanged(tmp_path, monkeypatch):
    # A run sampled its inputs three times (the command's checks, the first read, the write's
    # read): 26,277 small files of a crawl took 31 s each time.
    import curate.io.files as files

    for i in range(3):
        (tmp_path / f"{i}.jsonl").write_text(f'{{"id": "{i}", "text": "t{i}"}}\n')
    sampled, sample_file = [], files.sample_file
    monkeypatch.setattr(files, "sample_file", lambda fs, path, fmt: sampled.append(path) or sample_file(fs, path, fmt))
    fs, paths, fmt = files.expand_paths([str(tmp_path)])[:3]
    first = files.sample_files(fs, paths, fmt)
    assert files.sample_files(fs, paths, fmt) == first and len(sampled) == 3
    (tmp_path / "1.jsonl").write_text('{"id": "1", "text": "a longer text", "year": 1987}\n')  # rewritten
    again = files.sample_files(fs, paths, fmt)
    assert sampled[3:] == [paths[1]] and again[1] != first[1] and again[1][0][0].names == ["id", "text", "year"]
    assert again[::2] == first[::2]
