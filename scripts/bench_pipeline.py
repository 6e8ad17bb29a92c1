"""End-to-end fuzzy dedup, curate against datatrove and text-dedup, same data and parameters.

Usage (peers from ``pip install '.[bench]'``):

    python scripts/bench_pipeline.py --corpus ../shared/data/enron_spam [--tools curate,datatrove,text-dedup]

Parameters shared by all three: word 5-grams, 112 hashes as 14 bands x 8 rows (FineWeb's
setting; neither peer has character n-grams), Jaccard threshold 0.8, 2 processes. curate runs
with its defaults otherwise (exact dedup first, then fuzzy with verification). datatrove runs
its four MinHash steps (signature, buckets, cluster, filter) with the local executor, 2 tasks
each; text-dedup runs ``python -m text_dedup.minhash`` with ``--num_proc 2`` (loading the JSONL through HF ``datasets``).

Each tool runs as a fresh process tree. Wall time is measured around it; peak memory is the
largest sum of RSS over the tree, sampled every 0.1 s with psutil (the same for every tool).
Removed = documents in - documents out.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

from curate.io import read_documents

NGRAM, BANDS, ROWS, THRESHOLD = 5, 14, 8, 0.8


def run_tree(command: list[str], log: Path) -> tuple[float, float]:
    """Run ``command``; return (wall seconds, peak summed RSS in bytes of its process tree)."""
    peak = 0
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.1)
        wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"exit status {proc.returncode}")
    return wall, peak


def curate(corpus: str, work: Path) -> tuple[list[str], callable]:
    out = work / "curate"
    command = [
        sys.executable,
        "-m",
        "curate",
        "dedup",
        corpus,
        "-o",
        str(out),
        "--overwrite",
        "--no-progress",
        "--ngram",
        "word",
        "--width",
        str(NGRAM),
        "--num-bands",
        str(BANDS),
        "--rows-per-band",
        str(ROWS),
        "--threshold",
        str(THRESHOLD),
        "--n-workers",
        "2",
        "--threads-per-worker",
        "1",
    ]

    def kept():
        return json.loads((out / "summary.json").read_text())["counts"]["output"]["kept"]

    return command, kept


def datatrove(corpus: str, work: Path) -> tuple[list[str], callable]:
    script = textwrap.dedent(f"""
        from datatrove.executor import LocalPipelineExecutor
        from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                                      MinhashDedupFilter, MinhashDedupSignature)
        from datatrove.pipeline.readers import JsonlReader
        from datatrove.pipeline.writers import JsonlWriter
        from datatrove.utils.hashing import HashConfig
        w = {str(work / "datatrove")!r}
        config = MinhashConfig(n_grams={NGRAM}, num_buckets={BANDS}, hashes_per_bucket={ROWS},
                               hash_config=HashConfig(precision=64))
        read = lambda: JsonlReader({corpus!r}, glob_pattern="*.jsonl*")
        steps = [
            [read(), MinhashDedupSignature(output_folder=w + "/sigs", config=config)],
            [MinhashDedupBuckets(input_folder=w + "/sigs", output_folder=w + "/buckets", config=config)],
            [MinhashDedupCluster(input_folder=w + "/buckets", output_folder=w + "/remove_ids", config=config)],
            [read(), MinhashDedupFilter(input_folder=w + "/remove_ids"), JsonlWriter(w + "/out")],
        ]
        tasks = [2, {BANDS}, 1, 2]
        for i, (step, n) in enumerate(zip(steps, tasks)):
            LocalPipelineExecutor(pipeline=step, tasks=n, workers=2, logging_dir=w + f"/logs{{i}}").run()
    """)

    def kept():
        import gzip

        return sum(1 for f in (work / "datatrove" / "out").glob("*.jsonl.gz") for _ in gzip.open(f, "rt"))

    return [sys.executable, "-c", script], kept


def text_dedup(corpus: str, work: Path) -> tuple[list[str], callable]:
    out = work / "text-dedup"
    command = [
        sys.executable,
        "-m",
        "text_dedup.minhash",
        "--path",
        "json",
        "--data_files",
        f"{corpus}/*.jsonl*",
        "--split",
        "train",
        "--cache_dir",
        str(work / "hf-cache"),
        "--output",
        str(out),
        "--column",
        "text",
        "--ngram",
        str(NGRAM),
        "--num_perm",
        str(BANDS * ROWS),
        "--b",
        str(BANDS),
        "--r",
        str(ROWS),
        "--threshold",
        str(THRESHOLD),
        "--num_proc",
        "2",
    ]

    def kept():
        from datasets import load_from_disk

        return len(load_from_disk(str(out)))

    return command, kept


TOOLS = {"curate": curate, "datatrove": datatrove, "text-dedup": text_dedup}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="../shared/data/enron_spam")
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args()
    corpus = str(Path(args.corpus).resolve())
    docs = read_documents(corpus).compute()
    mb = docs.text.str.encode("utf-8").str.len().sum() / 1e6
    print(
        f"{args.corpus}: {len(docs)} documents, {mb:.1f} MB of text; word {NGRAM}-grams, {BANDS}x{ROWS}, threshold {THRESHOLD}"
    )
    print(f"{'tool':<11} {'wall s':>8} {'MB/s':>7} {'peak GB':>8} {'removed':>8} {'curate is':>10}")
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.tools.split(","):
            command, kept = TOOLS[name](corpus, Path(scratch))
            try:
                wall, peak = run_tree(command, Path(scratch) / f"{name}.log")
                results[name] = wall
                speedup = results[name] / results["curate"] if "curate" in results else float("nan")
                print(
                    f"{name:<11} {wall:8.1f} {mb / wall:7.2f} {peak / 1e9:8.2f} {len(docs) - kept():8d} {speedup:9.1f}x",
                    flush=True,
                )
            except (RuntimeError, ImportError, OSError) as err:
                print(
                    f"{name:<11} failed: {err}; log: {(Path(scratch) / f'{name}.log').read_text()[-2000:]}", flush=True
                )


if __name__ == "__main__":
    main()
