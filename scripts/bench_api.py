"""Issue 13, before and after: bytes exact dedup shuffles, end-to-end time, verification's peak memory.

Usage:

    python scripts/bench_api.py [--old REV] [--exact-old REV] [--rounds 3] [--data ../shared/data]

The old revisions are checked out as detached git worktrees in a temporary folder and imported
through ``PYTHONPATH`` by this same virtualenv (their worker processes inherit it); each
measurement runs old and new one after the other in fresh processes, so that machine load hits
both alike. Three measurements:

- **exact bytes** (gutenberg): ``ExactDedup()(read_documents(corpus))`` computed on a
  LocalCluster of 2 single-threaded workers; bytes moved between workers = the scheduler's
  cumulative P2P shard bytes (``("p2p", "foreground", "shards", "bytes")``) plus the workers'
  task-transfer bytes (``transfer_outgoing_bytes_total``). ``--exact-old`` is the commit before
  exact dedup stopped shuffling texts.
- **end to end** (gutenberg, enron_spam): ``curate dedup CORPUS -o OUT --overwrite --no-progress``;
  the median over ``--rounds`` of ``summary.json``'s total seconds (read to write) and of the
  command's wall time (cluster start included).
- **verification memory** (enron_spam, from the same runs): ``summary.json``'s peak RSS of the
  worker processes (sum over workers) during the verification stages (names holding ``verify``),
  median over rounds.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

EXACT_BYTES = """
import sys
from distributed import Client, LocalCluster
from curate.dedup import ExactDedup
from curate.io import read_documents

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        groups = ExactDedup()(read_documents(sys.argv[1]))
        n = len(client.compute(groups, sync=True))
        metrics = client.run_on_scheduler(lambda dask_scheduler: dict(dask_scheduler.cumulative_worker_metrics))
        p2p = int(metrics.get(("p2p", "foreground", "shards", "bytes"), 0))
        transfer = sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values())
        print(n, p2p, transfer)
"""


def checkout(rev: str, folder: Path) -> Path:
    path = folder / rev
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), rev], check=True, capture_output=True
    )
    return path


def environment(tree: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONWARNINGS": "ignore"}


def exact_bytes(tree: Path, corpus: Path) -> tuple[int, int, int]:
    run = subprocess.run(
        [sys.executable, "-c", EXACT_BYTES, str(corpus)],
        env=environment(tree),
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    rows, p2p, transfer = map(int, run.stdout.split()[-3:])
    return rows, p2p, transfer


def dedup(tree: Path, corpus: Path, out: Path) -> tuple[float, float, int]:
    started = time.perf_counter()
    command = [
        sys.executable,
        "-c",
        "from curate.cli import main; main()",
        "dedup",
        str(corpus),
        "-o",
        str(out),
        "--overwrite",
        "--no-progress",
    ]
    subprocess.run(command, env=environment(tree), cwd=tree, capture_output=True, check=True)
    wall = time.perf_counter() - started
    summary = json.loads((out / "summary.json").read_text())
    stages = summary.get("stage_peak_rss_bytes", {})
    verify = max((sum(peaks["workers"].values()) for name, peaks in stages.items() if "verify" in name), default=0)
    return summary["seconds"]["total"], wall, verify


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--old", default="c1e4ca7", help="the revision before the API change (end to end, verification)"
    )
    parser.add_argument("--exact-old", default="d2ded3e", help="the revision before exact dedup shuffled digests only")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--skip-exact", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        trees = {"old": checkout(args.old, scratch), "new": ROOT}
        if not args.skip_exact:
            exact_trees = {"old": checkout(args.exact_old, scratch), "new": ROOT}
            moved = {name: exact_bytes(tree, args.data / "gutenberg") for name, tree in exact_trees.items()}
            print(f"exact dedup on gutenberg, bytes between workers (P2P shards + task transfers): {moved}")
            old, new = (sum(moved[k][1:]) for k in ("old", "new"))
            print(
                f"  old {old / 1e6:.1f} MB, new {new / 1e6:.3f} MB, {old / max(new, 1):.0f}x less; group rows {moved['old'][0]} / {moved['new'][0]}"
            )
        for corpus in ("gutenberg", "enron_spam"):
            figures = {name: [] for name in trees}
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    figures[name].append(dedup(tree, args.data / corpus, scratch / f"out-{name}"))
            med = {name: [statistics.median(values) for values in zip(*runs)] for name, runs in figures.items()}
            print(
                f"{corpus}: median of {args.rounds} alternating runs, pipeline total s / command wall s / verify workers' peak RSS MB"
            )
            for name in trees:
                total, wall, verify = med[name]
                print(f"  {name}: {total:.1f} / {wall:.1f} / {verify / 1e6:.0f}")
            print(
                f"  new / old: total {med['new'][0] / med['old'][0]:.2f}, wall {med['new'][1] / med['old'][1]:.2f}, verify peak {med['new'][2] / max(med['old'][2], 1):.2f}"
            )
        for tree in trees.values():
            if tree != ROOT:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        if not args.skip_exact:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(exact_trees["old"])], check=False
            )


if __name__ == "__main__":
    main()
