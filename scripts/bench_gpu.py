"""GPU benchmark: per-partition throughput (GB/s) against the targets, and end-to-end dedup (MB/s per GPU).

    python scripts/bench_gpu.py --data ../shared/data --out results/bench_gpu.json [--shards 8] [--copies 2]
        [--corpus DIR] [--steps kernels,corpus,corpus-cached,corpus-1GB,corpus-256MB,gutenberg,copies,one-thread]

Per-partition operations (MinHash + bands, md5, Jaccard verification, normalisation) on the first ``--shards`` gutenberg shards
(whole books: the case where one thread per document starves the GPU) and on 20news (short
posts). End to end: ``curate dedup`` on the gutenberg shards, and with ``--copies N`` on those
plus N edited copies of them (every copy replaces about 1% of the words of each book, so the
copies are near duplicates), and with ``--corpus DIR`` on a ready corpus (e.g. one GB from
``scripts/make_edited_corpus.py``), then with ``--cache-input``, then in partitions of another
size (step ``corpus-<SIZE>``, e.g. ``corpus-1GB``: ``--blocksize 1GB``; a GPU takes one task at a
time, so fewer, larger partitions mean fewer tasks, while the input is still parsed in 64 MB pieces
on the host). ``--steps`` runs a subset; the figures merge into an
existing ``--out``, which is rewritten after each one, so a time limit keeps what was measured. On the GPU, the gutenberg run once more with one thread per
worker (``--threads-per-worker 1``: the layout before host steps ran beside the GPU task).
Figures are text bytes (UTF-8) per second of wall time; the end-to-end figure is divided by
the number of workers. ``--backend cpu`` runs the same measurements on the CPU path (used to
check the script without a GPU).
"""

import argparse
import json
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from curate import backend
from curate.kernels.minhash import permutations


def read_texts(shards: list[Path]) -> pd.Series:
    return pd.concat(
        [pd.read_json(s, lines=True, dtype=False)["text"] for s in shards],
        ignore_index=True,
    ).astype("str")


# Targets for one H200 (issue 12), text bytes per second, on gutenberg (whole books).
TARGETS_GB_PER_S = {"minhash_char24x260+bands20x13": 2.0, "minhash_word5x112+bands14x8": 2.0, "md5": 1.0}


def kernel_rates(texts: pd.Series, on_gpu: bool, repeats: int = 3, save=None) -> dict:
    """Best of ``repeats`` timings of each per-partition operation the targets name, in GB/s.

    The series is one batch, as a partition is: MinHash (char 24-grams x 260 through cudf's
    ``str.minhash``; word 5-grams x 112 through curate's numba.cuda kernel) with its LSH bands,
    and the exact stage's digest. ``within_target`` compares with TARGETS_GB_PER_S.
    """
    char_a, char_b = permutations(260, 42, 32)
    word_a, word_b = permutations(112, 42, 32)
    operations = {
        "minhash_char24x260+bands20x13": lambda s: backend.band_buckets(
            backend.minhash_signatures(s, 42, char_a, char_b, 24, False)[0], 20, 13
        ),
        "minhash_word5x112+bands14x8": lambda s: backend.band_buckets(
            backend.minhash_signatures(s, 42, word_a, word_b, 5, True)[0], 14, 8
        ),
        "md5": backend.md5_hex,
        # Verification as a partition runs it: every text's set built once, each text paired with
        # the next and the one 7 further (pairs sorted by x), char 24-grams and word 5-grams.
        "jaccard_char24": lambda s: backend.jaccard(s, *_pairs(len(s)), 24, False),
        "jaccard_word5": lambda s: backend.jaccard(s, *_pairs(len(s)), 5, True),
        "normalize_lower+punct+space": lambda s: backend.normalize_text(
            s, lowercase=True, whitespace=True, punctuation=True, nfkc=False
        ),
    }
    series, sync = texts, lambda: None  # on the CPU there is nothing to wait for
    n_bytes = int(texts.map(lambda t: len(t.encode("utf-8"))).sum())
    if on_gpu:
        import cudf
        import cupy

        series = cudf.Series(texts)
        sync = cupy.cuda.runtime.deviceSynchronize
        # The device Jaccard's sort of every shingle by (document, hash), one per text byte:
        # cupy's lexsort as it was until 2026-12-04, and the two stable radix sorts that replaced it.
        ends = cupy.asarray(np.cumsum(texts.map(lambda t: len(t.encode("utf-8"))).to_numpy()))
        doc = cupy.searchsorted(ends, cupy.arange(n_bytes), side="right")  # each byte's text, as in the kernel
        hashes = cupy.arange(n_bytes, dtype=cupy.uint64) * cupy.uint64(0x9E3779B97F4A7C15)  # spread like hashes

        def radix(_):
            by_hash = cupy.argsort(hashes, kind="stable")
            return by_hash[cupy.argsort(doc.astype(cupy.int32)[by_hash], kind="stable")]

        operations["sort_doc_hash_lexsort"] = lambda _: cupy.lexsort(cupy.stack([hashes, doc.astype(cupy.uint64)]))
        operations["sort_doc_hash_radix"] = radix
    rates = {"documents": len(texts), "bytes": n_bytes}
    for name, operation in operations.items():
        operation(series.iloc[:64])  # compile
        sync()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            operation(series)
            sync()
            best = min(best, time.perf_counter() - start)
        rate = n_bytes / best / 1e9
        target = TARGETS_GB_PER_S.get(name)  # none yet for verification and normalisation
        rates[name] = {"seconds": best, "GB_per_s": rate, "within_target": None if target is None else rate >= target}
        print(name, rates[name], flush=True)
        if save:
            save(rates)  # each figure survives a timeout in the next operation
    return rates


def _pairs(n: int):
    x = np.repeat(np.arange(n), 2)
    return x, (x + np.tile([1, 7], n)) % max(n, 1)


def edited_copies(shards: list[Path], copies: int, out: Path) -> Path:
    """``copies`` edited copies of the shards' books as JSONL under ``out`` (about 1% of words replaced)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    for k in range(copies):
        path = out / f"copy-{k:02d}.jsonl"
        if path.exists():
            continue
        frame = pd.concat(
            [pd.read_json(s, lines=True, dtype=False) for s in shards],
            ignore_index=True,
        )
        frame["id"] = frame["id"] + f"-copy{k}"

        def edit(text: str) -> str:
            words = text.split(" ")
            for i in rng.sample(range(len(words)), len(words) // 100):
                words[i] = "edited"
            return " ".join(words)

        frame["text"] = frame["text"].map(edit)
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    return out


def end_to_end(inputs: list[Path], out: Path, backend_name: str, n_workers: int, *options: str, log: Path) -> dict:
    """Wall time of ``curate dedup`` (a fresh process, cluster start included, with ``options``) and MB/s per worker.

    The run's verbose log (each stage's start and end, a failure's traceback) goes to ``log`` as
    it is written, so a run cut by a time limit still shows how far it got and what each stage took.
    """
    command = [
        sys.executable,
        "-m",
        "curate",
        "dedup",
        *(str(p.resolve()) for p in inputs),  # it runs in the project's folder
        "-o",
        str(out.resolve()),
        "--overwrite",
        "--no-progress",
        "--verbose",
        "--backend",
        backend_name,
    ]
    if backend_name == "cpu":
        command += ["--n-workers", str(n_workers), "--threads-per-worker", "1"]
    command += options
    # Counted before the run, so that a time limit during the count cannot lose a finished run.
    text_bytes = _text_bytes(inputs)
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("w") as written:
        done = subprocess.run(
            command, cwd=Path(__file__).resolve().parents[1], stdout=written, stderr=subprocess.STDOUT, check=False
        )
    seconds = time.perf_counter() - start
    if done.returncode:  # recorded, not fatal: the runs after it still get their figures
        tail = log.read_text(errors="replace")[-4000:]
        print(f"curate dedup failed ({' '.join(command[3:])}), its log in {log}:\n{tail}", flush=True)
        return {"error": tail, "seconds": seconds}
    summary = json.loads((out / "summary.json").read_text())
    return {
        "documents": summary["counts"]["input"]["documents"],
        "removed": summary["counts"]["output"]["removed"],
        "text_bytes": text_bytes,
        "seconds": seconds,
        "stage_seconds": summary["seconds"],
        "stage_task_seconds": summary.get("stage_task_seconds"),  # compute seconds per kind of task
        "peak_rss_bytes": summary["peak_rss_bytes"]["total"],
        # Per GPU worker: the most bytes allocated through RMM (None on the CPU backend).
        "peak_device_bytes": summary.get("peak_device_bytes"),
        "workers": n_workers,
        "MB_per_s_per_worker": text_bytes / seconds / 1e6 / n_workers,
    }


def _text_bytes(inputs: list[Path]) -> int:
    """UTF-8 bytes of the ``text`` fields of the JSONL files (or folders of them) ``inputs``;
    pyarrow reads a GB in seconds, where pandas would take the end-to-end step's time."""
    total = 0
    for path in inputs:
        for file in sorted(path.glob("*.json*")) if path.is_dir() else [path]:
            with pa.input_stream(str(file), compression="detect") as stream:
                table = pa_json.read_json(stream, read_options=pa_json.ReadOptions(block_size=64 << 20))
            total += pc.sum(pc.binary_length(table["text"])).as_py() or 0
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "shared" / "data",
    )
    parser.add_argument("--out", type=Path, default=Path("results/bench_gpu.json"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/curate-bench-gpu"))
    parser.add_argument(
        "--shards",
        type=int,
        default=8,
        help="gutenberg shards (8: 127 MB of text, 393 books; 29 = all, 450 MB)",
    )
    parser.add_argument("--copies", type=int, default=0, help="edited copies in a larger corpus (0: no such run)")
    parser.add_argument("--backend", choices=["gpu", "cpu"], default="gpu")
    parser.add_argument(
        "--corpus", type=Path, help="a ready corpus folder (scripts/make_edited_corpus.py) run end to end"
    )
    parser.add_argument(
        "--steps",
        default="kernels,corpus,corpus-cached,corpus-1GB,corpus-256MB,gutenberg,copies,one-thread",
        help="comma-separated subset, run in this order; results merge into an existing --out",
    )
    args = parser.parse_args()
    steps = args.steps.split(",")
    logs = args.out.parent / "runs"  # each end-to-end run's log, beside the figures
    shards = sorted((args.data / "gutenberg").glob("part-*.jsonl.zst"))[: args.shards]
    if not shards:
        sys.exit(f"no gutenberg shards under {args.data}")
    on_gpu = args.backend == "gpu"
    n_workers = 2
    if on_gpu:
        import cupy

        n_workers = cupy.cuda.runtime.getDeviceCount()
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.update(backend=args.backend, python=platform.python_version(), workers=n_workers, shards=len(shards))
    results["targets_GB_per_s"] = TARGETS_GB_PER_S
    if "kernels" in steps:
        for key, paths in (
            ("kernels_gutenberg", shards),
            ("kernels_20news", sorted((args.data / "20news").glob("part-*.jsonl*"))),
        ):
            if paths:
                results[key] = kernel_rates(
                    read_texts(paths), on_gpu, save=lambda rates, key=key: _save({**results, key: rates}, args.out)
                )
                _save(results, args.out)
    if "corpus" in steps and args.corpus:
        results["corpus"] = end_to_end(
            [args.corpus], args.work / "out-corpus", args.backend, n_workers, log=logs / "corpus.log"
        )
        print("corpus", args.corpus, results["corpus"], flush=True)
        _save(results, args.out)
    if "corpus-cached" in steps and args.corpus:  # the same run with --cache-input, right after
        results["corpus_cached"] = end_to_end(
            [args.corpus],
            args.work / "out-corpus-cached",
            args.backend,
            n_workers,
            "--cache-input",
            log=logs / "corpus-cached.log",
        )
        print("corpus, --cache-input", args.corpus, results["corpus_cached"], flush=True)
        _save(results, args.out)
    for step in steps:  # corpus-<SIZE>: partitions of SIZE instead of 64 MB: fewer tasks, each larger
        if step.startswith("corpus-") and step != "corpus-cached" and args.corpus:
            size = step.removeprefix("corpus-")
            results[f"corpus_{size}"] = end_to_end(
                [args.corpus],
                args.work / f"out-{step}",
                args.backend,
                n_workers,
                "--blocksize",
                size,
                log=logs / f"{step}.log",
            )
            print(f"corpus, --blocksize {size}", args.corpus, results[f"corpus_{size}"], flush=True)
            _save(results, args.out)
    if "gutenberg" in steps:
        results["gutenberg"] = end_to_end(
            shards, args.work / "out-gutenberg", args.backend, n_workers, log=logs / "gutenberg.log"
        )
        print("gutenberg", results["gutenberg"], flush=True)
        _save(results, args.out)
    if args.copies and "copies" in steps:
        larger = edited_copies(shards, args.copies, args.work / "edited")
        results["gutenberg_edited_copies"] = end_to_end(
            [*shards, larger], args.work / "out-edited", args.backend, n_workers, log=logs / "copies.log"
        )
        print("gutenberg + edited copies", results["gutenberg_edited_copies"], flush=True)
        _save(results, args.out)
    if on_gpu and "one-thread" in steps:
        # The GPU worker's old layout: one thread, so host steps (group tables, writing) wait
        # for the GPU and the GPU for them; the default gives them the node's other cores.
        results["gutenberg_one_thread"] = end_to_end(
            shards,
            args.work / "out-one-thread",
            args.backend,
            n_workers,
            "--threads-per-worker",
            "1",
            log=logs / "one-thread.log",
        )
        print("gutenberg, one thread per GPU worker", results["gutenberg_one_thread"], flush=True)
        _save(results, args.out)


def _save(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
