"""The client collects counts, never per-document lists (ids, edges, removal lists)."""

import gzip

import pandas as pd
from distributed import Client

from curate.config import load_config
from curate.pipeline import dedup
from tests.conftest import shared_corpus


def test_client_gathers_no_document_lists(client, tmp_path, monkeypatch):
    # 3,000 enron mails hold 220 exact and near duplicates: any list of them gathered
    # into the client (removed ids, group tables, candidate nodes, edges) has hundreds of rows.
    shard = shared_corpus("enron_spam") / "part-00000.jsonl.gz"
    lines = gzip.decompress(shard.read_bytes()).splitlines(keepends=True)[:3000]
    data = tmp_path / "enron.jsonl"
    data.write_bytes(b"".join(lines))
    gathered, gather = [], Client.gather

    def recording_gather(self, futures, *args, **kwargs):
        result = gather(self, futures, *args, **kwargs)
        gathered.append(result)
        return result

    monkeypatch.setattr(Client, "gather", recording_gather)
    # local_components_max_edges=0: the distributed path, as for corpora with millions of edges.
    config = load_config(None, {"io": {"blocksize": "1MB"}, "fuzzy": {"local_components_max_edges": 0}})
    summary = dedup([str(data)], str(tmp_path / "out"), config)

    removed = pd.read_parquet(tmp_path / "out" / "removed.parquet")
    assert len(removed) == summary["counts"]["output"]["removed"] > 128
    assert summary["counts"]["input"]["partitions"] > 3
    largest = max(_rows(result) for result in gathered)
    assert largest <= 64, f"the client gathered an object of {largest} rows"


def _rows(result) -> int:
    """Rows of the largest table, series or array inside a gathered result."""
    if isinstance(result, (list, tuple)):
        return max((_rows(r) for r in result), default=0)
    if isinstance(result, dict):
        return max((_rows(r) for r in result.values()), default=0)
    return len(result) if hasattr(result, "__len__") and not isinstance(result, (str, bytes)) else 0
