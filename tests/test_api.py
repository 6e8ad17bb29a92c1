"""The Python API (issue 13): ``curate.deduplicate`` keeps what ``curate dedup`` keeps, builds its
graph without computing, computes each stage once, and names a wrong option or column."""

import gzip
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import dask
import dask.dataframe as dd
import pandas as pd
import pytest
from dask.callbacks import Callback

import curate
import curate.backend
from curate.config import load_config
from curate.io import read_documents
from curate.pipeline import dedup
from tests.conftest import FIXTURES, shared_corpus

ROOT = Path(__file__).resolve().parents[1]


def slice_of(corpus: str, tmp_path: Path, n: int = 3000) -> Path:
    """The first ``n`` records of a shared corpus' first shard, as one uncompressed JSONL file."""
    shard = sorted(shared_corpus(corpus).glob("part-*.jsonl.gz"))[0]
    path = tmp_path / f"{corpus.replace('/', '-')}.jsonl"
    with gzip.open(shard, "rt", encoding="utf-8") as lines:
        path.write_text("".join(itertools.islice(lines, n)), encoding="utf-8")
    return path


def kept_ids(out: Path) -> list:
    return [
        json.loads(line)["id"]
        for part in sorted(out.glob("deduplicated/part.*.jsonl"), key=lambda p: int(p.name.split(".")[1]))
        for line in part.open()
    ]


@pytest.mark.parametrize(
    "corpus, frame",
    [
        ("20news", "read_documents"),  # curate's own keys (file and offset)
        ("enron_spam", "read_json"),  # a frame of the user's: keys made in the call
        ("bible/chapters", "from_pandas"),
    ],
)
def test_kept_ids_equal_the_cli_run(client, tmp_path, corpus, frame):
    path = slice_of(corpus, tmp_path)
    options = {"threshold": 0.7, "keep": "longest"}
    dedup(
        [str(path)],
        str(tmp_path / "out"),
        load_config(None, {"keep": "longest", "fuzzy": {"threshold": 0.7}, "io": {"blocksize": "2MB"}}),
    )
    if frame == "read_documents":
        docs = read_documents(str(path), blocksize="2MB")
    elif frame == "read_json":
        docs = dd.read_json(str(path), lines=True, blocksize="1MB")
    else:
        docs = dd.from_pandas(pd.read_json(path, lines=True, dtype=False), npartitions=5)
    result = curate.deduplicate(docs, **options)
    kept, removed, _ = result.compute()
    expected = kept_ids(tmp_path / "out")
    assert kept.id.tolist() == expected  # the same documents, in input order
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["counts"]
    assert result.counts["removed"] == summary["output"]["removed"] > 0
    assert result.counts["exact_removed"] == summary["exact"]["removed"]
    assert result.counts["fuzzy_removed"] == summary["fuzzy"]["removed"]
    assert set(removed.id).isdisjoint(expected) and set(removed.representative) <= set(expected)


class Tasks(Callback):
    """Counts the tasks the synchronous scheduler runs, and the calls of the per-partition kernels."""

    def __init__(self):
        super().__init__()
        self.tasks = 0

    def _pretask(self, key, dsk, state):
        self.tasks += 1


def fixture_frame(npartitions: int = 3) -> dd.DataFrame:
    return dd.from_pandas(pd.read_json(FIXTURES / "docs.jsonl", lines=True, dtype=False), npartitions=npartitions)


def test_building_runs_no_task_and_compute_runs_each_stage_once(monkeypatch):
    calls = {"md5": 0, "minhash": 0}

    def counted(name, function):
        def run(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return run

    monkeypatch.setitem(curate.backend.md5_hex._lookup, pd.Series, counted("md5", curate.backend.md5_hex_pandas))
    monkeypatch.setitem(
        curate.backend.minhash_signatures._lookup,
        pd.Series,
        counted("minhash", curate.backend.minhash_signatures_pandas),
    )
    docs = fixture_frame()
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}), Tasks() as tasks:
        result = curate.deduplicate(docs, threshold=0.5, width=3)
        assert tasks.tasks == 0  # building the graph ran nothing
        kept, removed, duplicates = result.compute()
    assert tasks.tasks > 0 and result.counts["removed"] > 0
    # md5 once per partition (the meta is built from an empty frame, without the backend);
    # MinHash once per partition of what exact dedup kept.
    assert calls == {"md5": docs.npartitions, "minhash": docs.npartitions}
    assert len(kept) + len(removed) == result.counts["documents"] == len(docs)


def test_parquet_reads_with_merged_partitions_keep_their_keys(tmp_path):
    # dask-expr merges a Parquet read's small files once later steps read fewer columns; keys
    # made from partition numbers must survive it (they used to point at lost partitions).
    frame = pd.read_json(FIXTURES / "docs.jsonl", lines=True, dtype=False).assign(extra="x" * 500)
    for i, part in enumerate(range(0, len(frame), 4)):
        frame.iloc[part : part + 4].to_parquet(tmp_path / f"part.{i}.parquet")
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}):
        expected = curate.deduplicate(
            dd.from_pandas(frame[["id", "text"]], npartitions=3), threshold=0.5, width=3
        ).compute()[0]
        kept = curate.deduplicate(dd.read_parquet(tmp_path, columns=["id", "text"]), threshold=0.5, width=3).compute()[
            0
        ]
    assert kept.id.tolist() == expected.id.tolist() and len(kept) < len(frame)


def test_options_and_columns_are_checked_at_the_call():
    docs = fixture_frame()
    with pytest.raises(TypeError, match=r"unknown option thresold="):
        curate.deduplicate(docs, thresold=0.8)
    with pytest.raises(TypeError, match=r"blocksize= configures reading files"):
        curate.deduplicate(docs, blocksize="1MB")
    with pytest.raises(ValueError, match=r"text_field='body': no such column"):
        curate.deduplicate(docs, text_field="body")
    with pytest.raises(ValueError, match=r"id_field='key': no such column"):
        curate.deduplicate(docs, id_field="key")
    with pytest.raises(ValueError, match=r"keep='max:score': no column 'score'"):
        curate.deduplicate(docs, keep="max:score")
    with pytest.raises(ValueError, match=r"threshold"):
        curate.deduplicate(docs, threshold=1.5)


def test_readme_example_runs(tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Python API") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    data = tmp_path / "data" / "bible"
    data.mkdir(parents=True)
    with (data / "part-00000.jsonl").open("w") as genesis:  # Genesis in the seven versions
        for shard in sorted(shared_corpus("bible/chapters").glob("part-*.jsonl.gz")):
            genesis.writelines(
                line for line in gzip.open(shard, "rt", encoding="utf-8") if json.loads(line)["book"] == 1
            )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    counts = eval(re.search(r"^\{'documents'.*\}$", run.stdout, re.M).group(0))
    assert counts["documents"] == 7 * 50 and counts["kept"] + counts["removed"] == 350 and counts["fuzzy_removed"] > 0
