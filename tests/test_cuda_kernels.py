"""numba.cuda kernels equal the CPU kernels: under the CUDA simulator here, on the device with a GPU;
and numba types them as the integer code they are, which the simulator cannot show."""

import json
import os
import subprocess
import sys
import types as pytypes
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FIXTURES

CHECK = Path(__file__).with_name("cuda_simulator_check.py")


SHARED_RACE = """
import sys, threading
import numpy as np
from numba import cuda
from numba.cuda.simulator import kernelapi
sys.path.insert(0, sys.argv[1])
import cuda_simulator_check

class Slow:  # every thread switched out inside the lookup of a shared array, as load may do
    all_in = threading.Barrier(8, timeout=30)  # the block's 8 threads
    def __getattr__(self, name):
        return getattr(np, name)
    def empty(self, *args, **kwargs):
        self.all_in.wait()
        return np.empty(*args, **kwargs)

kernelapi.np = cuda_simulator_check.np = Slow()  # the fix makes its array with a switch too
if sys.argv[2] == "fixed":
    cuda_simulator_check.one_shared_array_per_line()
arrays = []  # the arrays themselves: an id alone may be a freed array's, reused

@cuda.jit
def kernel(out):
    arrays.append(cuda.shared.array(8, np.uint64))

kernel[1, 8](np.zeros(1))
print(len({id(a) for a in arrays}))
"""


def test_the_simulator_gives_a_launch_one_shared_array():
    # Under load, threads of one block got different shared arrays: the MinHash check failed.
    pytest.importorskip("numba.cuda.simulator", reason="numba-cuda provides the CUDA simulator")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}

    def arrays(mode):
        run = subprocess.run(
            [sys.executable, "-c", SHARED_RACE, str(CHECK.parent), mode], env=env, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        return int(run.stdout)

    assert arrays("racy") == 8  # the race this guards against, forced (if it stops, the fix can go)
    assert arrays("fixed") == 1


def test_cuda_kernels_match_cpu_kernels_under_the_simulator():
    pytest.importorskip(
        "numba.cuda.simulator", reason="numba-cuda (pip install numba-cuda) provides the CUDA simulator"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONWARNINGS": "ignore::RuntimeWarning"}

    def check(parts):
        return subprocess.run(
            [sys.executable, str(CHECK), *parts], env=env, capture_output=True, text=True, timeout=900, check=False
        )

    # The simulator holds the GIL (a Python thread per GPU thread): two processes use two cores.
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(check, [("32", "jaccard"), ("64",)]))
    lines = []
    for result in results:
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.splitlines()[-1] == "ok"
        lines += result.stdout.splitlines()
    # 2 hash widths x (8 shingle settings + 3 on a slice), and 2 x 3 band layouts.
    assert sum(line.startswith("minhash") for line in lines) == 22
    assert sum(line.startswith("band_buckets") for line in lines) == 6
    # 5 shingle settings x (the fixture, a slice with int32 offsets, near duplicates, the fixture in tiles).
    assert sum(line.startswith("jaccard") for line in lines) == 20


def _kernel_signatures():
    """Argument types of every launch in curate.kernels.cuda, as numba types them (Python ints are
    int64, numpy bools boolean), for each dtype the launches take."""
    from numba import typeof, types

    def arr(dtype, ndim=1):
        return typeof(np.zeros((1,) * ndim, dtype))

    i64, u64, boolean = types.int64, types.uint64, types.boolean
    sigs = {"_band_kernel": [(arr(np.uint8, 2), i64, i64, arr(np.uint64, 2))]}
    for word in (np.uint32, np.uint64):  # the 32- and 64-bit schemes
        sigs.setdefault("_fill_kernel", []).append((arr(word, 2), arr(np.int64), typeof(word(0))))
        sigs.setdefault("_empty_rows_kernel", []).append((arr(word, 2), arr(np.int64)))
        for offsets in (np.int32, np.int64):  # cudf string columns hold either
            sigs.setdefault("_shingle_hash_kernel", []).append(
                (arr(offsets), arr(np.uint8), i64, u64, i64, boolean, boolean, arr(word))
            )
            sigs.setdefault("_min_kernel", []).append(
                (arr(offsets), arr(word), i64, arr(word), arr(word), boolean, arr(word, 2), arr(np.int64))
            )
    for offsets in (np.int32, np.int64):
        sigs.setdefault("_set_hash_kernel", []).append(
            (arr(offsets), arr(np.uint8), i64, i64, boolean, arr(np.uint64), arr(np.uint8))
        )
    sigs["_intersect_kernel"] = [
        (arr(np.int64), arr(np.int64), arr(np.int64), arr(np.int64), arr(np.int64), arr(np.uint64), arr(np.int64))
    ]
    return sigs


def _typemaps(cres, seen):
    """The typemap of a compiled function and of every device function it calls, recursively."""
    from numba.core.types import Dispatcher

    yield cres.fndesc.qualname, cres.type_annotation.typemap
    for value in cres.type_annotation.typemap.values():
        if isinstance(value, Dispatcher) and value.dispatcher not in seen:
            seen.add(value.dispatcher)
            for callee in value.dispatcher.overloads.values():
                yield from _typemaps(callee, seen)


def test_cuda_kernels_are_typed_as_integer_code(monkeypatch):
    """No value in any CUDA kernel or device function is typed as a float.

    The first run on an H200 found 64-bit signatures off by a few units in the last place: the
    kernel ended with ``out[i, j] = m if n > 0 else 0``, and numba unifies the uint64 ``m`` with
    the int64 literal ``0`` to float64 (as numpy's promotion of uint64 with int64), so every
    value above 2**53 was rounded. The CUDA simulator runs that line as Python on numpy scalars,
    where the conditional expression never converts anything, so the simulator test passed.
    Compiling the kernels with numba-cuda's typing (no device needed) shows every such
    conversion; curate's kernels are integer code, so any float is that kind of bug.
    """
    pytest.importorskip("numba.cuda", reason="numba-cuda provides the CUDA target")
    from numba import cuda, types
    from numba.cuda import compiler, dispatcher

    if cuda.is_available() or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("types are checked where no device or simulator replaces the compiler")
    # Device functions ask the current device for its compute capability; there is none here.
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))
    from curate.kernels import cuda as kernels

    launched = {
        name
        for name, obj in vars(kernels).items()
        if isinstance(obj, dispatcher.CUDADispatcher) and not obj.targetoptions["device"]
    }
    signatures = _kernel_signatures()
    assert launched == set(signatures), "every kernel needs its launch signatures in _kernel_signatures"
    checked, floats = set(), []
    for name, sigs in signatures.items():
        for sig in sigs:
            cres = compiler.compile_cuda(getattr(kernels, name).py_func, types.void, sig, cc=(9, 0))
            for function, typemap in _typemaps(cres, set()):
                checked.add(function.split(".")[-1])
                floats += [
                    f"{function}: {var} is {ty}"
                    for var, ty in typemap.items()
                    if isinstance(ty, (types.Float, types.Complex))
                ]
    assert not floats, "\n".join(sorted(set(floats)))
    # The device functions were reached, so their bodies were checked too.
    assert {"murmur3_32", "murmur3_64", "_fmix64", "_rotl64", "window_at", "mod_mersenne61", "_doc_of"} <= checked


def test_cuda_kernels_are_cached_on_disk(monkeypatch):
    # Each run's new worker processes compiled every kernel anew (the first whole runs on the
    # H200 paid it in every run); the CPU kernels were already cached.
    pytest.importorskip("numba.cuda", reason="numba-cuda provides the CUDA target")
    from numba.cuda import dispatcher

    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("the simulator compiles nothing")
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: pytypes.SimpleNamespace(compute_capability=(9, 0)))
    from curate.kernels import cuda as kernels

    launched = {
        name: obj
        for name, obj in vars(kernels).items()
        if isinstance(obj, dispatcher.CUDADispatcher) and not obj.targetoptions["device"]
    }
    assert set(launched) == set(_kernel_signatures())
    assert {name for name, kernel in launched.items() if not isinstance(kernel._cache, dispatcher.CUDACache)} == set()


def test_device_jaccard_takes_pairs_tile_by_tile(monkeypatch):
    # The device kernel built every shingle set of its buffer at once, about 60 bytes of device
    # memory a text byte, and the second round's partitions may hold the texts of nearly every
    # candidate. Above its budget it now takes the pairs tile by tile. The set kernels are the
    # CPU kernel here (the simulator test holds them to it): what is tested is the tiling.
    pytest.importorskip("numba.cuda", reason="numba-cuda provides the CUDA target")
    from curate.kernels import cuda as kernels
    from curate.kernels.jaccard import jaccard_indexed

    calls = []

    def on_host(offsets, data, x, y, width, words, xp):
        offsets = np.asarray(offsets, dtype=np.int64)
        calls.append((int(offsets[-1] - offsets[0]), len(x)))
        return jaccard_indexed(offsets, data, x, y, width, words)

    monkeypatch.setattr(kernels, "_jaccard_sets", on_host)
    rng = np.random.default_rng(3)
    lines = [json.loads(line)["text"] for line in (FIXTURES / "docs.jsonl").read_text().splitlines()]
    texts = lines + [t[: len(t) // 2] + "é" + t[len(t) // 2 + 3 :] for t in lines] + ["", "ab"]
    encoded = [t.encode() for t in rng.permutation(np.array(texts, dtype=object))]
    offsets = np.r_[7, 7 + np.cumsum([len(e) for e in encoded])].astype(np.int32)  # a slice: from byte 7
    data = np.frombuffer(b"x" * 7 + b"".join(encoded), dtype=np.uint8)
    x, y = rng.integers(0, len(texts), 3000), rng.integers(0, len(texts), 3000)
    x[: len(texts)] = y[: len(texts)] = np.arange(len(texts))  # each with itself too
    total, longest = int(offsets[-1] - offsets[0]), max(len(e) for e in encoded)
    budget = total // 5
    assert 2 * longest <= budget
    for width, words in ((24, False), (3, True)):
        calls.clear()
        expected = jaccard_indexed(offsets.astype(np.int64), data, x, y, width, words)
        got = kernels.jaccard_cuda(offsets, data, x, y, width, words, xp=np, budget=budget)
        assert np.array_equal(got, expected) and len(set(expected.tolist())) > 10
        assert len(calls) > 5 and max(held for held, _ in calls) <= budget and sum(n for _, n in calls) == len(x)
        calls.clear()
        assert np.array_equal(kernels.jaccard_cuda(offsets, data, x, y, width, words, xp=np), expected)
        assert calls == [(total, len(x))]  # under the budget: one call, as before
