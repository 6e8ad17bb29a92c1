"""Run one peer dedup tool on a JSONL corpus and write what it removed, for scripts/eval_quality.py.

Runs in the peers' environment (datasketch, text-dedup, datatrove), not curate's:

    python scripts/quality_peers.py TOOL CORPUS_DIR OUT_DIR --ngram char --width 24 --num-perm 260 \
        --bands 20 --rows 13 [--threshold 0.8]

``CORPUS_DIR`` holds ``part-*.jsonl`` files with ``id`` and ``text``. Writes
``OUT_DIR/removed.parquet`` (``id``, ``representative``: the kept document of the removed
one's cluster) and ``OUT_DIR/run.json`` (``seconds``: wall time of the tool's own work).

- ``datasketch``: ``MinHashLSH`` with the given bands x rows (``params``), fed the exact shingles curate uses (``tests/reference.py``), each
  document queried then inserted; candidates joined by union-find, the first document of a
  component kept. No verification.
- ``text-dedup``: ``python -m text_dedup.minhash`` with its own shingles (lower-cased words split
  on ``\\W``, joined by spaces); clusters from its ``--debug`` union-find dump, the kept
  document of a cluster from its output. ``--min_length 0`` so no document is dropped unseen.
- ``datatrove``: its four MinHash steps with the local executor; shingles are word n-grams of
  its ``simplify_text`` (lower case, no punctuation, numbers as 0, ...) tokenised by spaCy.
  Cluster ids come from ``save_cluster_id`` and its filter step's kept and excluded outputs.
"""

import argparse
import gzip
import json
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.reference import shingles  # the shingle definition curate's tests use


def read_corpus(corpus: Path) -> pd.DataFrame:
    return pd.concat(
        [pd.read_json(f, lines=True, dtype={"id": str}) for f in sorted(corpus.glob("part-*.jsonl"))], ignore_index=True
    )


def clusters_to_removed(ids: pd.Series, cluster: pd.Series, kept: pd.Series) -> pd.DataFrame:
    """Removed documents and their representative from a cluster label and a kept flag per document."""
    frame = pd.DataFrame({"id": ids, "cluster": cluster, "kept": kept})
    representative = frame[frame.kept].drop_duplicates("cluster").set_index("cluster")["id"]
    removed = frame[~frame.kept]
    return pd.DataFrame({"id": removed.id, "representative": removed.cluster.map(representative)})


def run_datasketch(corpus: Path, out: Path, args) -> float:
    from datasketch import MinHash, MinHashLSH

    start = time.perf_counter()
    docs = read_corpus(corpus)
    lsh = MinHashLSH(threshold=args.threshold, num_perm=args.num_perm, params=(args.bands, args.rows))
    parent = list(range(len(docs)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, text in enumerate(docs.text):
        tokens = shingles(text, args.width, args.ngram == "word")
        if not tokens:
            continue
        m = MinHash(num_perm=args.num_perm)
        m.update_batch(tokens)
        for j in lsh.query(m):
            a, b = find(i), find(j)
            parent[max(a, b)] = min(a, b)  # the root is the component's first document
        lsh.insert(i, m)
    roots = pd.Series([find(i) for i in range(len(docs))])
    seconds = time.perf_counter() - start
    removed = roots != roots.index
    pd.DataFrame({"id": docs.id[removed], "representative": docs.id.to_numpy()[roots[removed]]}).to_parquet(
        out / "removed.parquet"
    )
    return seconds


def run_text_dedup(corpus: Path, out: Path, args) -> float:
    from datasets import load_from_disk

    with tempfile.TemporaryDirectory() as scratch:
        result = Path(scratch) / "out"
        command = [
            sys.executable,
            "-m",
            "text_dedup.minhash",
            "--path",
            "json",
            "--data_files",
            f"{corpus}/part-*.jsonl",
            "--split",
            "train",
            "--cache_dir",
            f"{scratch}/hf",
            "--output",
            str(result),
            "--column",
            "text",
            "--idx_column",
            "id",
            "--debug",
            "--min_length",
            "0",
            "--ngram",
            str(args.width),
            "--num_perm",
            str(args.num_perm),
            "--threshold",
            str(args.threshold),
            "--num_proc",
            "2",
        ]
        command += ["--b", str(args.bands), "--r", str(args.rows)]
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        docs = read_corpus(corpus)
        kept = set(load_from_disk(str(result))["id"])
        with open(result / "uf.pkl", "rb") as f:
            uf = pickle.load(f)  # this run's own dump
    cluster = docs.id.map(lambda doc: uf.find(doc) if doc in uf.parent else doc)
    clusters_to_removed(docs.id, cluster, docs.id.isin(kept)).to_parquet(out / "removed.parquet")
    return seconds


def run_datatrove(corpus: Path, out: Path, args) -> float:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.hashing import HashConfig

    files = len(list(corpus.glob("part-*.jsonl")))
    with tempfile.TemporaryDirectory() as w:
        config = MinhashConfig(
            n_grams=args.width,
            num_buckets=args.bands,
            hashes_per_bucket=args.rows,
            hash_config=HashConfig(precision=64),
        )

        def read():
            return JsonlReader(str(corpus), glob_pattern="part-*.jsonl")

        steps = [
            ([read(), MinhashDedupSignature(output_folder=w + "/sigs", config=config)], files),
            ([MinhashDedupBuckets(input_folder=w + "/sigs", output_folder=w + "/buckets", config=config)], args.bands),
            (
                [
                    MinhashDedupCluster(
                        input_folder=w + "/buckets",
                        output_folder=w + "/remove_ids",
                        config=config,
                        save_cluster_id=True,
                    )
                ],
                1,
            ),
            (
                [
                    read(),
                    MinhashDedupFilter(
                        input_folder=w + "/remove_ids",
                        load_cluster_ids=True,
                        exclusion_writer=JsonlWriter(w + "/removed"),
                    ),
                    JsonlWriter(w + "/kept"),
                ],
                files,
            ),
        ]
        start = time.perf_counter()
        for i, (pipeline, tasks) in enumerate(steps):
            LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=2, logging_dir=f"{w}/logs{i}").run()
        seconds = time.perf_counter() - start
        rows = []
        for kind in ("kept", "removed"):
            for path in Path(w, kind).glob("*.jsonl.gz"):
                with gzip.open(path, "rt") as lines:
                    records = map(json.loads, lines)
                    rows += [(r["id"], r["metadata"]["minhash_cluster_id"], kind == "kept") for r in records]
    frame = pd.DataFrame(rows, columns=["id", "cluster", "kept"])
    # documents in no cluster have id -1: give each its own cluster
    frame["cluster"] = frame.cluster.where(frame.cluster >= 0, -1 - frame.index)
    clusters_to_removed(frame.id, frame.cluster, frame.kept).to_parquet(out / "removed.parquet")
    return seconds


TOOLS = {"datasketch": run_datasketch, "text-dedup": run_text_dedup, "datatrove": run_datatrove}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tool", choices=list(TOOLS))
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--ngram", choices=["char", "word"], required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--num-perm", type=int, required=True)
    parser.add_argument("--bands", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--threshold", type=float, default=0.8)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    seconds = TOOLS[args.tool](args.corpus, args.out, args)
    (args.out / "run.json").write_text(json.dumps({"seconds": seconds}) + "\n")


if __name__ == "__main__":
    main()
