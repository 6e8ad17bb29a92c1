"""The warm-up compiles the kernels a run calls, with the run's signatures (curate.dedup.warm)."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from curate.config import FuzzyConfig
from curate.dedup.warm import compile_kernels, kernel_calls, plan
from curate.io import read_documents

# In a fresh interpreter: what compiled before is not there to hide a signature the warm-up misses.
SCRIPT = """
import json, sys
import dask
from numba.core.registry import CPUDispatcher
from curate.config import load_config
from curate.dedup.warm import kernel_calls
from curate.kernels import jaccard, lsh, minhash, nesting, normalize, shingles
from curate.pipeline import dedup

def compiled():
    return {
        f"{module.__name__}.{name}": [str(s) for s in kernel.signatures]
        for module in (jaccard, lsh, minhash, nesting, normalize, shingles)
        for name, kernel in vars(module).items()
        if isinstance(kernel, CPUDispatcher)
    }

name, overrides, out, text_dtype = sys.argv[1] or None, json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
config = load_config(name, overrides)
calls = kernel_calls(config.fuzzy, text_dtype)
(hash_shingles, _, _), *rest = calls.values()
hash_shingles()
first = compiled()  # the shingle hashes alone
for call, _, _ in rest:
    call()
warmed = compiled()
with dask.config.set(scheduler="sync"):
    summary = dedup(["tests/data/docs.jsonl"], out, config)
print(json.dumps({
    "calls": list(calls), "first": first, "warmed": warmed, "after": compiled(), "fuzzy": summary["counts"]["fuzzy"]
}))
"""


SETS = ["set scores", "representatives' split", "shingle sets"]


@pytest.mark.parametrize(
    "name, overrides, names, cold",
    [
        (None, {}, ["shingle hashes", "LSH bands", "JSON nesting check", *SETS, "MinHash", "Jaccard", "representatives"], True),
        ("datatrove", {}, ["shingle hashes", "LSH bands", "normalisation", "JSON nesting check", *SETS, "MinHash", "Jaccard", "representatives"], False),
        (None, {"fuzzy": {"verify": False}}, ["shingle hashes", "LSH bands", "JSON nesting check", "MinHash"], False),
    ],
)  # fmt: skip
def test_a_run_after_the_warm_up_compiles_nothing(tmp_path, name, overrides, names, cold):
    # Each kernel is compiled by one worker when the signature it is called with is the one the
    # stages call it with; a call of another makes every worker compile the stage's as before.
    # With numba's cache empty (cold: about 10 s), the kernels that call the shingle hashes
    # compile them with their own signature, which the first call must have compiled.
    env = {**os.environ, **({"NUMBA_CACHE_DIR": str(tmp_path / "numba")} if cold else {})}
    # Read here: the script's own read would compile the parser's nesting check before the warm-up.
    text_dtype = str(read_documents("tests/data/docs.jsonl")._meta["text"].dtype)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, name or "", json.dumps(overrides), str(tmp_path / "out"), text_dtype],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["calls"] == names
    assert found["fuzzy"]["candidate_edges"] > 0 and found["fuzzy"]["groups"] > 0  # every stage ran
    used = {kernel for kernel, signatures in found["after"].items() if signatures}
    assert {"curate.kernels.shingles.shingle_hashes", "curate.kernels.minhash._minhash"} <= used
    assert ("curate.kernels.jaccard._split_rest" in used) == (overrides == {})  # only with verification
    assert ("curate.kernels.normalize._map_and_collapse" in used) == (name == "datatrove")
    assert found["after"] == found["warmed"]
    shingles = "curate.kernels.shingles.shingle_hashes"
    assert found["warmed"][shingles] == found["first"][shingles]
    # A kernel one call compiles and another calls (from compiled code or from Python): one
    # signature, or the second compiled its own.
    shared = [shingles, *(f"curate.kernels.jaccard.{k}" for k in ("_hash_documents", "_score_pairs", "_split_rest"))]
    assert {kernel: len(found["warmed"][kernel]) for kernel in shared if kernel in used} == dict.fromkeys(
        [kernel for kernel in shared if kernel in used], 1
    )


def test_kernels_that_call_others_compile_after_them_on_every_worker(client):
    # MinHash, the Jaccard and the representatives' split compiled the shingle hashes again
    # where they started before those were compiled and cached.
    config = FuzzyConfig()
    ran = compile_kernels(client, config, pd.StringDtype())
    calls = kernel_calls(config, pd.StringDtype())
    assert [name for name, *_ in ran] == list(calls)  # one host: each kernel once
    spans = {name: (start, stop) for name, _, start, stop in ran}
    for name, (_, _, after) in calls.items():
        for first in after:  # the workers' clocks are the machine's
            assert spans[name][0] >= spans[first][1], (name, first)
    assert {worker for _, worker, _, _ in ran} == set(client.scheduler_info(n_workers=-1)["workers"])


def test_every_host_compiles_every_kernel_on_its_own_workers():
    # numba's cache is a folder on each host: a kernel compiled on one node only was compiled
    # again by every worker of the others, at once, when their first tasks called it.
    calls = {"a": (None, 3.0, ()), "b": (None, 1.0, ()), "c": (None, 2.0, ("a",)), "d": (None, 1.0, ("a", "b"))}
    hosts = {"tcp://10.0.0.1:1": "10.0.0.1", "tcp://10.0.0.2:1": "10.0.0.2", "tcp://10.0.0.1:2": "10.0.0.1"}
    planned = plan(calls, hosts)
    assert planned == [
        ("a", "tcp://10.0.0.1:1", []),
        ("b", "tcp://10.0.0.1:2", []),
        ("c", "tcp://10.0.0.1:1", [("a", "tcp://10.0.0.1:1")]),
        ("d", "tcp://10.0.0.1:2", [("a", "tcp://10.0.0.1:1"), ("b", "tcp://10.0.0.1:2")]),
        ("a", "tcp://10.0.0.2:1", []),
        ("b", "tcp://10.0.0.2:1", []),
        ("c", "tcp://10.0.0.2:1", [("a", "tcp://10.0.0.2:1")]),
        ("d", "tcp://10.0.0.2:1", [("a", "tcp://10.0.0.2:1"), ("b", "tcp://10.0.0.2:1")]),
    ]
