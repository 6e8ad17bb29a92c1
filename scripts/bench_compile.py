"""Seconds numba takes to compile each CPU kernel on its first call, with an empty cache.

Usage: python scripts/bench_compile.py [--config NAME] [--rounds N]

A user's first run, and every fresh environment (a container, a CI job, a new node), compiles
the kernels it calls before using them; later runs load them from numba's cache.
This makes the calls of ``curate dedup``'s compile step (:func:`curate.dedup.warm.kernel_calls`,
for the named config and pandas' string dtype) one after the other in a fresh process, with
``NUMBA_CACHE_DIR`` a new empty folder (removed after), and prints the seconds of each first call
beside the estimate the step plans with, and their sum; a kernel a call compiles is loaded by
the calls after it. ``--rounds`` runs that many fresh processes, one after the other, and prints the
median of each. Run it with ``PYTHONPATH`` set to two checkouts in turn to compare them.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ONE_PROCESS = """
import json, sys, time
import numba, pandas as pd
from curate.config import load_config
from curate.dedup.warm import kernel_calls
start = time.perf_counter()
numba.njit(lambda x: x + 1)(1)
seconds = {"numba's own start": time.perf_counter() - start}
for name, (call, _, _) in kernel_calls(load_config(sys.argv[1] or None, {}).fuzzy, pd.StringDtype()).items():
    start = time.perf_counter()
    call()
    seconds[name] = time.perf_counter() - start
print(json.dumps(seconds))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="", help="a shipped config name (default: the default config)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    from curate.config import load_config
    from curate.dedup.warm import kernel_calls

    estimates = {
        name: seconds
        for name, (_, seconds, _) in kernel_calls(load_config(args.config or None, {}).fuzzy, "string").items()
    }
    rounds = []
    for _ in range(args.rounds):
        cache = tempfile.mkdtemp(prefix="numba-cache-")
        try:
            done = subprocess.run(
                [sys.executable, "-c", ONE_PROCESS, args.config],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "NUMBA_CACHE_DIR": cache},
            )
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        rounds.append(json.loads(done.stdout.splitlines()[-1]))
    print(f"{'kernel':26} {'seconds':>8} {'estimate':>9}")
    for name in rounds[0]:
        median = statistics.median(r[name] for r in rounds)
        estimate = f"{estimates[name]:9.1f}" if name in estimates else ""
        print(f"{name:26} {median:8.2f} {estimate}")
    print(f"{'all':26} {statistics.median(sum(r.values()) for r in rounds):8.2f}")


if __name__ == "__main__":
    main()
