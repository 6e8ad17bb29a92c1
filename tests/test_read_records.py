"""read_records: the input records at given ``_doc`` keys, checked against read_documents' keys."""

import bisect
import gzip
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import curate.io.files as files_module
import curate.io.lookup as read_module
from curate.io import read_documents
from curate.io.lookup import locate, read_records
from tests.conftest import shared_corpus

BOM = b"\xef\xbb\xbf"


def make_records(n: int, seed: int = 0, prefix: str = "") -> list[dict]:
    """Records of varied sizes, unicode, nested and null fields."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "γάμμα", "δέλτα", "日本語", "emoji🙂", "x"]
    return [
        {
            "id": f"{prefix}{i}",
            "text": " ".join(rng.choice(words) for _ in range(rng.randint(0, 60))),
            "score": rng.random(),
            "tags": [rng.randint(0, 9) for _ in range(rng.randint(0, 3))],
            "note": None if i % 3 else "n",
        }
        for i in range(n)
    ]


def jsonl_bytes(records: list[dict], *, bom: bool = False) -> bytes:
    """JSONL with a blank line and a CRLF line end among the records (both must be skipped/handled)."""
    lines = [json.dumps(r, ensure_ascii=False).encode() for r in records]
    lines[len(lines) // 2] += b"\r"
    lines.insert(len(lines) // 3, b"   ")
    return (BOM if bom else b"") + b"\n".join(lines) + b"\n"


def check_all(inputs, records: list[dict], *, seed: int = 1, **read_kwargs) -> list[int]:
    """read_records at every key and at a shuffled sample with repeats equals the records written."""
    docs = read_documents(inputs, **read_kwargs).compute()
    assert len(docs) == len(records)
    by_id = {r["id"]: r for r in records}
    keys = docs["_doc"].tolist()
    assert [r["id"] for r in read_records(inputs, keys)] == docs["id"].tolist()
    sample = random.Random(seed).choices(keys, k=len(keys) // 2) + keys[:1] * 2
    expected = [by_id[i] for i in docs.set_index("_doc").loc[sample, "id"]]
    assert read_records(inputs, sample) == expected
    return keys


def test_plain_jsonl_read_in_several_blocks(tmp_path):
    records = make_records(120)
    path = tmp_path / "a.jsonl"
    path.write_bytes(jsonl_bytes(records, bom=True))
    keys = check_all(str(path), records, blocksize=512)
    assert read_documents(str(path), blocksize=512).npartitions > 4
    assert keys[0] == 3  # the record after the BOM


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_jsonl_across_chunk_ends(tmp_path, monkeypatch, suffix):
    records = make_records(150, seed=2)
    raw = jsonl_bytes(records, bom=True)
    half = len(raw) // 2
    if suffix == ".gz":  # two gzip members
        data = gzip.compress(raw[:half]) + gzip.compress(raw[half:])
    else:  # two zstd frames
        data = zstandard.ZstdCompressor().compress(raw[:half]) + zstandard.ZstdCompressor().compress(raw[half:])
    path = tmp_path / f"a.jsonl{suffix}"
    path.write_bytes(data)
    monkeypatch.setattr(files_module, "_CHUNK", 37)  # records and BOM cut across many chunks
    check_all(str(path), records)


def test_compressed_file_is_read_only_up_to_the_last_wanted_record(tmp_path, monkeypatch):
    records = make_records(10000, seed=3)  # 3 MB; zstd hands out blocks of up to 128 KiB
    raw = jsonl_bytes(records)
    (tmp_path / "a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    monkeypatch.setattr(files_module, "_CHUNK", 1024)
    decompressed = []
    chunks = read_module.decompressed_chunks

    def counting(f, codec):
        for chunk in chunks(f, codec):
            decompressed.append(len(chunk))
            yield chunk

    monkeypatch.setattr(read_module, "decompressed_chunks", counting)
    second = len(json.dumps(records[0], ensure_ascii=False).encode()) + 1
    assert read_records(str(tmp_path), [second, 0]) == [records[1], records[0]]
    assert 0 < sum(decompressed) < len(raw) // 10


def test_locate_reads_each_file_once_and_counts_lines_as_the_bytes_do(tmp_path, monkeypatch):
    # locate read a file from its start for every key: 3,387 duplicates of a 19 MB corpus took
    # minutes (the README offers it to name a read_documents run's duplicates).
    raws = {"a.jsonl.gz": jsonl_bytes(make_records(300, seed=4), bom=True), "b.jsonl": jsonl_bytes(make_records(200))}
    for name, raw in raws.items():
        (tmp_path / name).write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    monkeypatch.setattr(files_module, "_CHUNK", 97)  # keys in one chunk, and chunks without one
    opened = []
    chunks = files_module.decompressed_chunks
    monkeypatch.setattr(files_module, "decompressed_chunks", lambda f, codec: opened.append(f) or chunks(f, codec))
    keys = read_documents(str(tmp_path)).compute()["_doc"].tolist()
    keys = random.Random(5).sample(keys, len(keys)) + keys[:2]  # any order, repeats
    names = sorted(raws)
    line_ends = {name: [i for i, byte in enumerate(raw) if byte == ord("\n")] for name, raw in raws.items()}
    files, offsets = [names[key >> 40] for key in keys], [key & ((1 << 40) - 1) for key in keys]
    expected = [f"{name}:{bisect.bisect_left(line_ends[name], at) + 1}" for name, at in zip(files, offsets)]
    opened.clear()
    assert locate([str(tmp_path)], keys) == expected
    assert len(opened) == 2
    assert locate([str(tmp_path)], [1 << 40, 3]) == ["b.jsonl:1", "a.jsonl.gz:1"]  # a.jsonl.gz's BOM: 3 bytes


def test_several_files_of_mixed_compression(tmp_path):
    parts = [make_records(40, seed=s, prefix=f"{s}-") for s in range(3)]
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.jsonl").write_bytes(jsonl_bytes(parts[0]))
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(jsonl_bytes(parts[1])))
    (tmp_path / "sub" / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl_bytes(parts[2], bom=True)))
    keys = check_all(str(tmp_path), [r for part in parts for r in part])
    assert sorted({k >> 40 for k in keys}) == [0, 1, 2]


def test_parquet_reads_only_the_row_groups_it_needs(tmp_path, monkeypatch):
    records = make_records(50, seed=4)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "a.parquet", row_group_size=7)
    check_all(str(tmp_path / "a.parquet"), records)
    groups = []
    read_group = pq.ParquetFile.read_row_group
    monkeypatch.setattr(
        pq.ParquetFile, "read_row_group", lambda self, i, *a, **k: groups.append(i) or read_group(self, i, *a, **k)
    )
    assert read_records(str(tmp_path), [20, 6, 49, 21]) == [records[20], records[6], records[49], records[21]]
    assert groups == [0, 2, 3, 7]  # rows 0-6, 14-20, 21-27, 49-49: each read once, in order


def test_shared_corpus_records(tmp_path):
    corpus = str(shared_corpus("reuters"))
    docs = read_documents(corpus).compute()
    sample = docs.sample(60, random_state=0)
    got = read_records(corpus, sample["_doc"].tolist())
    assert [r["id"] for r in got] == sample["id"].tolist()
    assert [r["text"] or "" for r in got] == sample["text"].tolist()
    assert {k >> 40 for k in sample["_doc"]} == {0, 1}  # both shards


def error(inputs, keys) -> str:
    with pytest.raises(ValueError) as info:
        read_records(inputs, keys)
    return str(info.value)


@pytest.mark.parametrize("suffix", ["", ".zst"])
def test_keys_that_are_not_records(tmp_path, suffix):
    raw = BOM + b'{"id": 1, "text": "a"}\n\n{"id": 2, "text": "b"}\n[3]\n{"id": 4, "te'
    path = tmp_path / f"a.jsonl{suffix}"
    path.write_bytes(zstandard.ZstdCompressor().compress(raw) if suffix else raw)
    assert read_records(str(path), [27, 3]) == [{"id": 2, "text": "b"}, {"id": 1, "text": "a"}]
    name = path.name
    assert error(str(path), [0]) == f"{name}: byte position 0 (line 1) is not the start of a record"  # before the BOM
    assert error(str(path), [10]) == f"{name}: byte position 10 (line 1) is not the start of a record"
    assert error(str(path), [26]) == f"{name}: byte position 26 (line 2) is a blank line"
    assert error(str(path), [50]) == f"{name}: byte position 50 (line 4) holds an array, not a JSON object"
    assert error(str(path), [54]).startswith(f"{name}: byte position 54 (line 5) is not valid JSON (")
    assert error(str(path), [len(raw)]) == f"{name}: byte position {len(raw)} is past the end of the file"
    assert error(str(path), [len(raw) + 100]) == f"{name}: byte position {len(raw) + 100} is past the end of the file"
    assert error(str(path), [3, 2 << 40]) == "_doc key 2199023255552: file index 2 is beyond the 1 input file(s)"


def test_truncated_stream_before_a_wanted_record(tmp_path):
    records = make_records(10000, seed=5)  # several zstd blocks
    raw = jsonl_bytes(records)
    data = zstandard.ZstdCompressor().compress(raw)
    path = tmp_path / "a.jsonl.zst"
    path.write_bytes(data[: len(data) // 2])
    assert read_records(str(path), [0]) == [records[0]]  # before the cut: fine
    last = raw.rindex(b"\n", 0, len(raw) - 1) + 1
    assert error(str(path), [last]).startswith(
        f"a.jsonl.zst: truncated zstd stream (it ends inside a compressed block) before byte position {last}"
    )


def test_parquet_row_past_the_end(tmp_path):
    pq.write_table(pa.table({"id": [1, 2], "text": ["a", "b"]}), tmp_path / "a.parquet")
    assert read_records(str(tmp_path), [1]) == [{"id": 2, "text": "b"}]
    assert error(str(tmp_path), [2]) == "a.parquet: row 2 is past the end of the file (2 rows)"


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="gone.jsonl"):
        read_records(str(tmp_path / "gone.jsonl"), [0])
