"""What a user's mistake and a Ctrl-C cost on the command line.

Usage:

    python scripts/bench_cli.py [--rounds 3] [--compare OTHER_TREE] [--corpus ../shared/data/enron_spam] [--interrupt-after 10]

Mistakes: `curate dedup` on a path that does not exist, on an empty folder, into an output
folder another run holds, and with a text field the input lacks (`--text-field body`), each run
``--rounds`` times in a new process (start-up included), rounds interleaved. Reported per
case: the median wall time (s), the exit status and the lines on stderr. ``--compare`` runs
the same cases with another checkout's ``curate`` (e.g. a worktree of main) in the same
rounds, through ``PYTHONPATH``.

Ctrl-C: `curate dedup CORPUS` in a session of its own; ``--interrupt-after`` seconds after the
start, SIGINT goes to its process group (what a terminal's Ctrl-C does). Reported per round:
seconds from the signal to the exit, the exit status, the lines printed, the processes of the
group still alive a second after the exit; then `--resume` runs and its outputs are compared,
byte for byte, with an uninterrupted run's.
"""

import argparse
import fcntl
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def curate(tree: Path, *args, **popen) -> subprocess.Popen:
    # In the tree's folder: `python -m` puts the working folder first on the path.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.Popen([sys.executable, "-m", "curate", *map(str, args)], env=env, cwd=tree, text=True, **popen)


def mistake(tree: Path, args: list) -> tuple[float, int, list[str]]:
    start = time.perf_counter()
    child = curate(tree, "dedup", *args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = child.communicate()
    return time.perf_counter() - start, child.returncode, err.splitlines()


def mistakes(trees: dict[str, Path], rounds: int, work: Path, data: Path) -> None:
    (work / "empty").mkdir()
    busy = work / "busy"
    busy.mkdir()
    held = os.open(busy, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # as a running curate holds its output folder
    (work / "previous" / "deduplicated").mkdir(parents=True)  # what a finished run leaves
    cases = {
        "input does not exist": ["does/not/exist", "-o", work / "x1"],
        "empty input folder": [work / "empty", "-o", work / "x2"],
        "output folder in use": [data, "-o", busy],  # compared trees without the lock would run: only this tree
        "output folder holds a run": [data, "-o", work / "previous"],
        "missing text field": [data, "-o", work / "x3", "--text-field", "body"],
    }
    results = {(name, case): [] for name in trees for case in cases}
    for _ in range(rounds):
        for case, args in cases.items():
            for name, tree in trees.items():
                if case != "output folder in use" or tree == REPO:
                    results[name, case].append(mistake(tree, args))
                for out in ("x1", "x2", "x3"):  # the old code starts the run and creates the folder
                    subprocess.run(["rm", "-rf", str(work / out)], check=True)
    print(f"| case | {' | '.join(f'{name}: median s, exit, stderr lines' for name in trees)} |")
    print(f"|---|{'---|' * len(trees)}")
    for case in cases:
        cells = []
        for name in trees:
            runs = results[name, case]
            cells.append(
                f"{statistics.median(s for s, _, _ in runs):.2f} s, {runs[0][1]}, {len(runs[0][2])}" if runs else "n/a"
            )
        print(f"| {case} | {' | '.join(cells)} |")
    for name in trees:
        for case in cases:
            if results[name, case]:
                print(f"[{name}] {case}: {' / '.join(results[name, case][0][2][-2:])}")
    os.close(held)


def group_alive(pgid: int) -> int:
    alive = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        alive += int(fields[2]) == pgid and fields[0] != "Z"
    return alive


def outputs(out: Path) -> dict[str, bytes]:
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    files["summary.json"] = json.dumps(json.loads(files["summary.json"])["counts"]).encode()
    return files


def interrupts(corpus: Path, rounds: int, after: float, work: Path) -> None:
    flags = ["--no-progress"]
    reference = work / "reference"
    done = curate(REPO, "dedup", corpus, "-o", reference, *flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert done.wait() == 0
    seconds = []
    for i in range(rounds):
        out = work / f"interrupted-{i}"
        child = curate(
            REPO,
            "dedup",
            corpus,
            "-o",
            out,
            *flags,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        time.sleep(after)
        sent = time.perf_counter()
        os.killpg(child.pid, signal.SIGINT)
        printed, _ = child.communicate()
        seconds.append(time.perf_counter() - sent)
        time.sleep(1)
        lines = printed.splitlines()
        print(
            f"round {i}: exit {child.returncode} after {seconds[-1]:.2f} s, {len(lines)} line(s), {group_alive(child.pid)} process(es) left"
        )
        for line in lines:
            print(f"    {line}")
        resumed = curate(
            REPO, "dedup", corpus, "-o", out, "--resume", *flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        assert resumed.wait() == 0
        same = outputs(out) == outputs(reference)
        reused = json.loads((out / "summary.json").read_text())["reused_stages"]
        print(
            f"    --resume: reused {len(reused)} stage(s) ({', '.join(reused)}); outputs byte-identical to an uninterrupted run: {same}"
        )
    print(f"median seconds from SIGINT to exit: {statistics.median(seconds):.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", type=Path, help="another checkout of curate, run the same way")
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "data" / "enron_spam")
    parser.add_argument("--interrupt-after", type=float, default=10.0, help="seconds")
    parser.add_argument("--skip-interrupt", action="store_true")
    args = parser.parse_args()
    trees = {"this tree": REPO, **({"compared": args.compare.resolve()} if args.compare else {})}
    with tempfile.TemporaryDirectory() as work:
        mistakes(trees, args.rounds, Path(work), args.corpus)
        if not args.skip_interrupt:
            interrupts(args.corpus, args.rounds, args.interrupt_after, Path(work))


if __name__ == "__main__":
    main()
