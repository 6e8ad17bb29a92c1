"""What the second verification round costs: two versions of curate on the same corpora, interleaved.

Usage:

    python scripts/bench_members.py --before DIR [--after DIR] [--rounds 3]
        [--corpora 20news,enron_spam,reuters,bible/chapters,bible/verses,gutenberg,templated]
        [--threshold 0.8] [--data ../shared/data] [--templated-docs 400]

``--before`` and ``--after`` are source trees of curate (e.g. ``git archive <commit> | tar -x
-C DIR``; ``--after`` defaults to this checkout). Each round runs ``python -m curate dedup`` on
each corpus with each tree first on ``PYTHONPATH`` (so the CLI and its Dask workers import that
tree), one after the other, so that machine load hits both alike. ``templated`` is the corpus
of ``scripts/make_templated_corpus.py`` (``--templated-docs`` documents, 12 pairs, seed 0), written to a
temporary folder. Reported per corpus and version: the fuzzy counts of ``summary.json``
(candidate edges, member pairs compared in the second round, verified edges, buckets over the
cap, fuzzy removals), and the median seconds of the stages that changed (``minhash+lsh``,
``verify``, the second round: ``member_pairs`` + ``member_nodes`` + ``verify_members``) and
of the pipeline total (read to write, no cluster start-up).
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Seconds per column: the stages that changed; "second round" is member_pairs + member_nodes + verify_members.
STAGES = {
    "minhash+lsh": ("minhash+lsh",),
    "verify": ("verify",),
    "second round": ("member_pairs", "member_nodes", "verify_members"),
    "total": ("total",),
}
COUNTS = ("candidate_edges", "member_pairs", "verified_edges", "buckets_over_cap", "removed")


def templated_corpus(folder: Path, docs: int) -> Path:
    spec = importlib.util.spec_from_file_location(
        "make_templated_corpus", ROOT / "scripts" / "make_templated_corpus.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = folder / "templated" / "docs.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in module.templated_documents(docs)))
    return path.parent


def run(tree: Path, corpus: Path, out: Path, threshold: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [
        sys.executable,
        "-m",
        "curate",
        "dedup",
        str(corpus),
        "-o",
        str(out),
        "--overwrite",
        "--no-progress",
        "--threshold",
        str(threshold),
    ]
    subprocess.run(args, check=True, env=env, cwd=tree, capture_output=True)
    return json.loads((out / "summary.json").read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=ROOT)
    parser.add_argument(
        "--corpora", default="20news,enron_spam,reuters,bible/chapters,bible/verses,gutenberg,templated"
    )
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--templated-docs", type=int, default=400)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        templated = templated_corpus(scratch, args.templated_docs)
        print(f"threshold {args.threshold}, median of {args.rounds} interleaved runs, seconds")
        print(f"| corpus | version | {' | '.join(COUNTS)} | {' | '.join(STAGES)} |")
        print("|---|---|" + "---:|" * (len(COUNTS) + len(STAGES)))
        for name in args.corpora.split(","):
            corpus = templated if name == "templated" else (args.data / name).resolve()
            summaries = {version: [] for version in trees}
            for _ in range(args.rounds):
                for version, tree in trees.items():
                    summaries[version].append(run(tree, corpus, scratch / "out", args.threshold))
            for version, runs in summaries.items():
                counts = runs[-1]["counts"]["fuzzy"]
                cells = [f"{counts[c]:,}" if c in counts else "–" for c in COUNTS]
                for parts in STAGES.values():
                    ran = any(stage in runs[-1]["seconds"] for stage in parts)
                    cells.append(
                        f"{statistics.median(sum(r['seconds'].get(s, 0.0) for s in parts) for r in runs):.2f}"
                        if ran
                        else "–"
                    )
                print(f"| {name} | {version} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
