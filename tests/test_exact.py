import dask
import pandas as pd
import pytest

from curate.dedup import ExactDedup, KeepPolicy
from curate.io import read_documents
from tests.conftest import FIXTURES, write_jsonl


@pytest.fixture(autouse=True)
def task_shuffle():
    # These compute with the sync scheduler; with a distributed client alive (the session
    # fixture, once another test file used it) Dask would pick P2P shuffles, which need workers.
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        yield


def test_digest_collision_never_merges_different_texts(monkeypatch):
    # Every text gets the same "digest": only byte-equal texts may still be grouped.
    monkeypatch.setattr("curate.dedup.exact.md5_hex", lambda text: pd.Series("0" * 32, index=text.index, dtype="str"))
    docs = read_documents(str(FIXTURES / "docs.jsonl"))
    groups = ExactDedup()(docs).compute(scheduler="sync").sort_values("_doc")
    assert dict(zip(groups._id, groups._rep_id)) == {"a1": "a1", "a3": "a1", "a12": "a1", "a6": "a6", "a8": "a6"}


def test_keep_column_may_be_the_id_column():
    docs = read_documents(str(FIXTURES / "docs.jsonl"))
    groups = ExactDedup(keep=KeepPolicy("max", "id"))(docs).compute(scheduler="sync")
    # string ids: "a3" > "a12" > "a1"
    assert dict(zip(groups._id, groups._rep_id)) == {"a1": "a3", "a3": "a3", "a12": "a3", "a6": "a8", "a8": "a8"}


def _shuffled_bytes(client) -> int:
    metrics = client.run_on_scheduler(lambda dask_scheduler: dict(dask_scheduler.cumulative_worker_metrics))
    return int(metrics.get(("p2p", "foreground", "shards", "bytes"), 0))


def test_only_keys_and_digests_are_shuffled(client, tmp_path):
    # 300 documents of 20 kB, a third of them copies: the digests shuffle some 50 bytes a document,
    # the texts of the copies are read where they lie and only those are shuffled.
    import random

    rng = random.Random(0)
    texts = ["".join(rng.choice("abcdefgh ") for _ in range(20_000)) for _ in range(200)]
    records = [{"id": f"d{i}", "text": texts[i % 200]} for i in range(300)]
    docs = read_documents(str(write_jsonl(tmp_path / "docs.jsonl", records)), blocksize="1MB")
    text_bytes = sum(len(r["text"]) for r in records)
    with dask.config.set({"dataframe.shuffle.method": "p2p"}):
        before = _shuffled_bytes(client)
        candidates = ExactDedup().candidates(docs).compute()
        digests = _shuffled_bytes(client) - before
    assert sorted(candidates._doc) == sorted(docs._doc.compute()[[i % 200 < 100 for i in range(300)]])
    assert digests < text_bytes / 100
