import dask
import pandas as pd
import pytest

from curate.dedup import ExactDedup, KeepPolicy
from curate.io import read_documents
from tests.conftest import FIXTURES


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
