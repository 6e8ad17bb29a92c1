"""Correctness on real corpora from ../shared/data (skipped where that folder is absent)."""

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from curate.config import FuzzyConfig, load_config
from curate.dedup import ExactDedup
from curate.io import read_documents
from curate.pipeline import dedup
from tests import reference
from tests.conftest import shared_corpus, write_jsonl


@pytest.mark.parametrize("corpus", ["20news", "enron_spam"])
def test_exact_removes_what_pandas_drop_duplicates_removes(client, corpus):
    docs = read_documents(str(shared_corpus(corpus)))
    groups = ExactDedup()(docs).compute()
    frame = docs.compute()
    expected = frame.loc[frame.duplicated(subset="text", keep="first"), "_doc"]
    removed = groups.loc[groups._doc != groups._rep, "_doc"]
    assert sorted(removed) == sorted(expected)
    # every removed document's representative is the first occurrence of its text
    first = frame.drop_duplicates(subset="text", keep="first").set_index("text")["_doc"]
    text = frame.set_index("_doc")["text"]
    reps = groups[groups._doc != groups._rep]
    assert (first.loc[text.loc[reps._doc].to_numpy()].to_numpy() == reps._rep.to_numpy()).all()
    if corpus == "enron_spam":
        assert len(removed) == 6253 - 3031  # the corpus README: 3031 groups holding 6253 documents


def spam_mails(shard: int, start: int, n: int) -> list[dict]:
    """``n`` spam mails of an Enron-Spam shard, from its ``start``-th spam mail on: campaigns sent
    with small edits, so near duplicates are many and close together."""
    with gzip.open(shared_corpus("enron_spam") / f"part-{shard:05d}.jsonl.gz", "rt", encoding="utf-8") as lines:
        spam = (record for record in map(json.loads, lines) if record["label"] == "spam")
        return [{"id": r["id"], "text": r["text"]} for r in itertools.islice(spam, start, start + n)]


def news_posts(n: int) -> list[dict]:
    """The first ``n`` posts of 20news (few near duplicates, no exact ones)."""
    with gzip.open(shared_corpus("20news") / "part-00000.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [{"id": r["id"], "text": r["text"]} for r in map(json.loads, itertools.islice(lines, n))]


def true_jaccard_matrix(texts: pd.Series, width: int) -> np.ndarray:
    """All-pairs Jaccard of the char-shingle sets (the shingle strings themselves, pure Python
    reference shingling), as a sparse incidence-matrix product."""
    vocab: dict[bytes, int] = {}
    sets = [{vocab.setdefault(s, len(vocab)) for s in reference.char_shingles(t, width)} if t else set() for t in texts]
    rows = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
    cols = np.fromiter((c for s in sets for c in s), dtype=np.int64, count=len(rows))
    incidence = sp.csr_matrix((np.ones(len(cols), np.int32), (rows, cols)), shape=(len(sets), len(vocab)))
    common = (incidence @ incidence.T).toarray()
    sizes = np.array([len(s) for s in sets])
    union = sizes[:, None] + sizes[None, :] - common
    return np.where(union > 0, common / np.maximum(union, 1), 1.0)


def test_fuzzy_against_brute_force(client, tmp_path):
    # 20news has few near duplicates; Enron spam (campaigns sent with small edits) has many,
    # identical mails among the first ones, near duplicates that are not identical in the
    # densest window of enron5 (most pairs at J >= 0.9 must be found by similarity, not by equality).
    sample = pd.DataFrame(news_posts(300) + spam_mails(0, 0, 500) + spam_mails(2, 5600, 400))
    path = write_jsonl(tmp_path / "sample.jsonl", sample.to_dict("records"))
    out = tmp_path / "out"
    dedup([str(path)], str(out), load_config(None, {"mode": "fuzzy"}))
    removed = pd.read_parquet(out / "removed.parquet")

    similarity = true_jaccard_matrix(sample.text, FuzzyConfig().width)
    position = {doc_id: i for i, doc_id in enumerate(sample.id)}
    # (1) every removed document is within the threshold of its representative, which is kept
    pairs = [(position[d], position[r]) for d, r in zip(removed.id, removed.representative)]
    assert min(similarity[d, r] for d, r in pairs) >= 0.8
    assert not set(removed.representative) & set(removed.id)
    # (2) pairs with true Jaccard >= 0.9 end in one group (same final representative)
    rep = np.arange(len(sample))
    for d, r in pairs:
        rep[d] = r
    i, j = np.triu_indices(len(sample), k=1)
    for level, target in [(0.9, 0.99), (0.8, 0.95)]:
        close = similarity[i, j] >= level
        together = (rep[i[close]] == rep[j[close]]).mean()
        print(f"pairs with J >= {level}: {close.sum()}, in one group: {together:.4f}")
        assert close.sum() > 100 and together >= target
        assert (similarity[i[close], j[close]] < 1).sum() > 100  # pairs that are not identical


def partition_of(path: Path, blocksize: int | None, positions: pd.Series) -> np.ndarray:
    """The partition that holds the record at each byte offset when ``path`` is read in blocks of ``blocksize``."""
    starts = np.asarray(read_documents(str(path), blocksize=blocksize).divisions[:-1])  # _doc = offset in one file
    return np.searchsorted(starts, positions.to_numpy(), side="right") - 1


def test_same_removed_file_whatever_the_partitioning(client, tmp_path):
    from curate.cluster import connect
    from curate.config import ClusterConfig

    # The near duplicates' window of test_quality (spam position 11200), its mails split in two
    # halves (even, odd positions) with posts between, so that a campaign's mails lie in
    # different partitions (and some partitions hold no duplicate); then exact copies of the
    # first records, at the end.
    spam = spam_mails(2, 5501, 300)
    records = spam[0::2] + news_posts(300) + spam[1::2]
    records += [{"id": f"copy-{r['id']}", "text": r["text"]} for r in records[:20]]
    path = write_jsonl(tmp_path / "docs.jsonl", records)
    size = path.stat().st_size

    def removed(parts, workers):
        out = tmp_path / f"out-{parts}-{workers}"
        blocksize = size // parts + 1 if parts > 1 else None
        summary = dedup([str(path)], str(out), load_config(None, {"io": {"blocksize": blocksize}}))
        return summary["counts"]["input"]["partitions"], (out / "removed.parquet").read_bytes()

    # two worker processes: the session's cluster; one: a cluster of its own
    runs = [(1, 2), (4, 2), (3, 1)]  # (partitions, workers)
    outputs = [removed(*run) for run in runs[:2]]
    with connect(ClusterConfig(n_workers=1, threads_per_worker=1)):
        outputs += [removed(*run) for run in runs[2:]]
    assert [p for p, _ in outputs] == [parts for parts, _ in runs]
    assert len({removed for _, removed in outputs}) == 1
    # What makes it a test: exact and near duplicates, and at every partitioning (the single one
    # aside) some of each whose representative lies in another partition; some partitions hold
    # no duplicate at all.
    table = pd.read_parquet(tmp_path / "out-1-2" / "removed.parquet")
    members = pd.read_parquet(tmp_path / "out-1-2" / "duplicates.parquet")
    position = members.drop_duplicates("id").set_index("id")["position"]  # a document may be in two groups
    assert (table.kind == "exact").sum() >= 20 and (table.kind == "fuzzy").sum() >= 20
    without = 0
    for parts, _ in runs[1:]:
        blocksize = size // parts + 1
        apart = partition_of(path, blocksize, position[table.id]) != partition_of(
            path, blocksize, position[table.representative]
        )
        assert set(table.kind[apart]) == {"exact", "fuzzy"}, parts
        without += parts - len(set(partition_of(path, blocksize, members.position)))
    assert without > 0


def test_reference_documents_are_never_removed_and_take_their_copies(client, tmp_path):
    # Weekly dumps deduplicated against the weeks published before: a published document was
    # removed (exit 0) wherever the order of the arguments, or --keep, ranked a new copy first.
    # Published: campaign mails with near duplicates among themselves (all must stay), posts and
    # five posts published twice (exact copies, which stay too);
    # new: the same campaigns' next mails, exact copies of published documents, copies with a
    # header added in front (longer: --keep longest ranks them above their originals) and copies
    # among themselves.
    published = spam_mails(2, 5501, 200) + news_posts(100)
    published += [{"id": f"twin-{r['id']}", "text": r["text"]} for r in published[200:205]]  # published twice
    campaign = spam_mails(2, 5701, 200)
    copies = [{"id": f"copy-{r['id']}", "text": r["text"]} for r in published[::10]]
    headed = [{"id": f"headed-{r['id']}", "text": "Re: " + r["text"]} for r in published[5::10]]
    repeats = [{"id": f"again-{r['id']}", "text": r["text"]} for r in campaign[:10]]
    new = campaign + copies + headed + repeats
    ref_path = write_jsonl(tmp_path / "published" / "week1.jsonl", published)
    new_path = write_jsonl(tmp_path / "week2.jsonl", new)
    out = tmp_path / "out"
    summary = dedup([str(new_path)], str(out), load_config(None, {"keep": "longest"}), reference=[str(ref_path)])

    removed = pd.read_parquet(out / "removed.parquet")
    written = pd.read_json(out / "deduplicated" / "part.00000.jsonl", lines=True)
    every = pd.DataFrame(published + new)
    similarity = true_jaccard_matrix(every.text, FuzzyConfig().width)
    position = {doc_id: i for i, doc_id in enumerate(every.id)}
    published_ids = {r["id"] for r in published}
    # (1) no published document is removed, none is written; the new ones are written in input order
    assert not published_ids & set(removed.id) and not published_ids & set(written.id)
    assert written.id.tolist() == [r["id"] for r in new if r["id"] not in set(removed.id)]
    assert summary["counts"]["output"] == {
        "kept": len(written),
        "removed": len(removed),
        "rejected": 0,
        "reference": 305,
    }
    # (2) every removal is within the threshold of a representative that is published or written
    assert set(removed.representative) <= published_ids | set(written.id)
    assert min(similarity[position[d], position[r]] for d, r in zip(removed.id, removed.representative)) >= 0.8
    # (3) every exact copy went to a published document, though --keep longest ranks a longer
    # copy first: the headed copies are longer than their originals and went to them too
    gone = removed.set_index("id")
    assert all(gone.representative[r["id"]] in published_ids for r in copies + headed)
    assert (gone.kind[[r["id"] for r in copies]] == "exact").all()
    # (4) every new document within the threshold of a published one is removed (LSH may miss a
    # pair under 0.9; none above), and the published near duplicates of one another all stay
    n_pub = len(published)
    close = similarity[n_pub:, :n_pub].max(axis=1)
    new_ids = np.array([r["id"] for r in new])
    assert set(new_ids[close >= 0.9]) <= set(removed.id) and (close >= 0.9).sum() > 70
    i, j = np.triu_indices(n_pub, k=1)
    assert (similarity[i, j] >= 0.8).sum() > 10  # what makes the published side a test
