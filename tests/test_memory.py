"""What the client and the workers hold: the client collects counts, never per-document lists
(ids, edges, removal lists); a worker's shingle sets fit its memory limit."""

import gzip

import dask
import numpy as np
import pandas as pd
from distributed import Client, LocalCluster

import curate.kernels.jaccard
from curate.backend import SETS_BUDGET, greedy_representatives, jaccard, sets_budget
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


def test_a_workers_shingle_sets_take_at_most_a_quarter_of_a_threads_room(monkeypatch):
    # Workers of 600 MB were restarted in verification until the run stopped: the host kernels
    # built up to 256 MB of shingle sets at once (32 MiB of text) whatever the workers' limit.
    books = pd.read_json(shared_corpus("gutenberg") / "part-00000.jsonl.zst", lines=True, nrows=24)["text"]
    texts = pd.concat([books, books.str.slice(1000)], ignore_index=True)  # each book and a near copy
    n = len(books)
    x, y = np.r_[np.arange(n), np.zeros(n - 1, dtype=np.int64)], np.r_[np.arange(n, 2 * n), np.arange(1, n)]
    order = np.argsort(np.r_[np.arange(n), np.arange(n)], kind="stable")  # each book before its copy
    starts = np.arange(0, 2 * n + 1, 2)
    size = texts.str.encode("utf-8").str.len().to_numpy()
    assert size.sum() > 8 << 20 and sets_budget() == SETS_BUDGET  # outside a task: the default
    expected = jaccard(texts, x, y, 24, False), greedy_representatives(texts[order], starts, 0.8, 24, False)
    built = []

    def recording(offsets, docs, buffer):
        made = real(offsets, docs, buffer)
        built.append(made.nbytes)
        return made

    real = curate.kernels.jaccard.sets_buffer
    monkeypatch.setattr(curate.kernels.jaccard, "sets_buffer", recording)
    # A worker in this process (which holds more than its limit): its memory is not managed.
    unmanaged = {f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")}
    with (
        dask.config.set(unmanaged),
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, memory_limit="700MB", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        budget = client.submit(sets_budget).result()
        both, ordered = client.scatter([texts, texts[order]])  # (not 16 MB of graph)
        scored = client.submit(jaccard, both, x, y, 24, False).result()
        split = client.submit(greedy_representatives, ordered, starts, 0.8, 24, False).result()
    assert budget == (700_000_000 - 300_000_000) // 2 // 8 // 4  # 6.25 MB of text, sets of 50 MB
    # Chunks of pairs and batches of groups of at most the budget's text bytes (no pair, no group
    # of a book and its copy, holds more); the default budget took all the texts at once.
    assert max(size[x] + size[y]) < budget
    assert len(built) > 2 and max(built) <= 8 * budget < 8 * size.sum() // 2
    np.testing.assert_array_equal(scored, expected[0])
    for got, want in zip(split, expected[1], strict=True):
        np.testing.assert_array_equal(got, want)


def test_signature_blocks_stay_under_their_budget_whatever_num_perm(monkeypatch):
    # A user's trial: --num-perm 10000 on the Bible verses took workers of 5 GB to 95 %: the
    # signatures were computed 32,768 documents at a time, 1.3 GB a block at 10,000 values.
    import curate.dedup.minhash as stage

    sizes = []
    compute = stage.minhash_signatures

    def recorded(text, *args):
        signatures, counts = compute(text, *args)
        sizes.append(signatures.nbytes)
        return signatures, counts

    monkeypatch.setattr(stage, "minhash_signatures", recorded)
    monkeypatch.setattr(stage, "_CHUNK_BYTES", 1 << 20)
    texts = pd.Series([f"document number {i} and some words" for i in range(3000)], dtype=object)
    part = pd.DataFrame({"_doc": np.arange(3000, dtype=np.int64), "text": texts})
    for num_perm, blocks in [(260, 3), (2000, 23)]:  # 1,008 and 131 documents a block
        sizes.clear()
        config = load_config(
            None, {"fuzzy": {"num_perm": num_perm, "num_bands": 20, "rows_per_band": num_perm // 20}}
        ).fuzzy
        a, b = stage.permutations(config.num_hashes, config.seed, config.hash_bits)
        buckets = stage._partition_buckets(part, "text", config, a, b)
        assert len(sizes) == blocks and max(sizes) <= 1 << 20, sizes
        assert len(buckets) == 3000 * 20
