"""Compile the CPU kernels of a fuzzy run before its stages, each on one worker, all at once.

A first run, and every fresh environment (a container, a CI job, a new node), compiles the numba
kernels it calls. Each worker process compiled each kernel when its first task reached it, at
the same time as the other workers: on 2 cores about 10 s of a 15 s first run, the same work
twice. Here every kernel is compiled by one worker of each host into numba's cache
(``cache=True``, a folder on the host), the workers in parallel, and the stages then load it.
The shingle hashes, which MinHash, the verification's Jaccard and the representatives' split
all call, are compiled first, while other workers compile what does not call them; the rest
then load them rather than compile them again.

Each kernel is called as its stage calls it, on two tiny documents of the documents' own text
dtype, so that its compiled signature is the stage's (a test checks that a run after this
compiles nothing). With the cache warm, this loads each kernel on one worker (a fraction of a
second in all). CPU workers only: a GPU run's kernels are numba.cuda's.
"""

import time
import uuid

import numpy as np
import pandas as pd
from distributed import Client, get_worker

from curate.backend import band_buckets, greedy_representatives, jaccard, minhash_signatures, text_buffers
from curate.config import FuzzyConfig
from curate.dedup.text import prepare_text
from curate.io.records import MAX_DEPTH
from curate.kernels.jaccard import _score_pairs, _split_rest, shingle_sets
from curate.kernels.minhash import permutations
from curate.kernels.nesting import nested_deeper
from curate.kernels.shingles import shingle_hashes, window_scratch

_RECORD = np.frombuffer(b'{"a": 1}', np.uint8)  # read-only, as the parser's view of its block
_TEXTS = ["a few words, to shingle", "a few words, to shingle once more"]


def kernel_calls(config: FuzzyConfig, text_dtype) -> dict[str, tuple]:
    """The fuzzy stages' kernel calls on tiny documents: ``{name: (call, seconds, after)}``.

    ``seconds``: what compiling took on 2 cores of an x86 machine, with the kernels named in
    ``after`` (a tuple) compiled and cached; they are those it calls, so that compiling them
    first spares compiling them again. Parameters: the run's ``config`` and the pandas dtype of
    its text column (calls with other argument types would compile other signatures).
    """
    texts = pd.Series(_TEXTS, dtype=text_dtype)
    words, width, threshold = config.ngram == "word", config.width, float(config.threshold)
    a, b = permutations(config.num_hashes, config.seed, config.hash_bits)
    i64, u64, f64 = np.zeros(1, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.float64)

    def shingles():
        offsets, data = text_buffers(texts)
        n = int(offsets[1] - offsets[0])
        wide, seed = config.hash_bits == 64, np.uint64(config.seed)
        shingle_hashes(
            data, offsets[0], offsets[1], width, words, seed, wide, window_scratch(n), np.empty(n, np.uint64)
        )

    def text():
        return prepare_text(texts, config)  # normalised where the stages normalise

    calls = {
        "shingle hashes": (shingles, 3.1, ()),
        "LSH bands": (
            lambda: band_buckets(np.zeros((1, len(a)), a.dtype), config.num_bands, config.rows_per_band),
            0.9,
            (),
        ),
        "normalisation": (text, 0.5, ()),
        "JSON nesting check": (lambda: nested_deeper(_RECORD, np.array([0]), np.array([8]), MAX_DEPTH), 0.9, ()),
        # The Jaccard's and the representatives' kernels that take sets, not texts, called as
        # jaccard_indexed and greedy_representatives call them, on no rows.
        "set scores": (lambda: _score_pairs(i64, u64, i64[:0], i64[:0], threshold, f64), 0.6, ()),
        "representatives' split": (
            lambda: _split_rest(
                i64, u64, *[i64[:0]] * 3, u64, i64[:0], i64, threshold, i64[:0], f64, i64[:0], np.zeros(0, np.bool_)
            ),
            1.1,
            (),
        ),
        "shingle sets": (lambda: shingle_sets(*text_buffers(texts), width, words), 1.7, ("shingle hashes",)),
        "MinHash": (lambda: minhash_signatures(text(), config.seed, a, b, width, words), 1.2, ("shingle hashes",)),
        "Jaccard": (
            lambda: jaccard(text(), np.array([0]), np.array([1]), width, words, threshold),
            0.3,
            ("shingle sets", "set scores"),
        ),
        "representatives": (
            lambda: greedy_representatives(text(), np.array([0, 2]), threshold, width, words, np.full(2, np.nan)),
            0.2,
            ("shingle sets", "set scores", "representatives' split"),
        ),
    }
    if not config.normalizes:
        del calls["normalisation"]
    if not config.verify:  # no Jaccard is computed
        for name in ("set scores", "representatives' split", "shingle sets", "Jaccard", "representatives"):
            del calls[name]
    return calls


def compile_kernels(client: Client, config: FuzzyConfig, text_dtype) -> list[tuple[str, str, float, float]]:
    """Compile the fuzzy stages' CPU kernels (:func:`kernel_calls`) on ``client``'s workers, and wait.

    Every host compiles every kernel once, spread over its own workers (:func:`plan`): numba's
    cache is a host's own folder, so a kernel compiled on one node would be compiled again by
    each worker of another when its first task called it.

    Returns
    -------
    list of tuple
        ``(kernel name, worker address, start, stop)`` for each call, in :func:`plan`'s order;
        ``start`` and ``stop`` in seconds since the epoch, by the worker's clock.

    Raises
    ------
    Exception
        The error of a call that failed (a kernel that does not compile).
    """
    workers = client.scheduler_info(n_workers=-1)["workers"]
    calls = kernel_calls(config, text_dtype)
    futures = {}
    for name, worker, after in plan(calls, {address: info["host"] for address, info in workers.items()}):
        # By name: each worker makes its own calls. A kernel sent from here (in a closure)
        # arrives as a new dispatcher, which neither uses nor fills numba's cache.
        futures[name, worker] = client.submit(
            _compiled,
            name,
            config,
            text_dtype,
            *[futures[first] for first in after],
            key=f"compile {name}-{uuid.uuid4().hex}",
            workers=[worker],
            allow_other_workers=True,  # elsewhere if that worker has gone
        )
    return [(name, *ran) for (name, _), ran in zip(futures, client.gather(list(futures.values())))]


def plan(calls: dict[str, tuple], hosts: dict[str, str]) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """Which worker compiles each kernel of ``calls`` (:func:`kernel_calls`), once on every host.

    On each host, in the order of ``calls``, each kernel goes to the host's worker that can start
    it soonest, by the estimated seconds of the kernels given out before it and of those it
    comes after (list scheduling).

    Parameters
    ----------
    calls : dict
        ``{name: (call, seconds, after)}``.
    hosts : dict
        ``{worker address: host}``.

    Returns
    -------
    list of tuple
        ``(name, worker, after)``, host by host; ``after``: the ``(name, worker)`` entries, on
        the same host, that this one waits for.
    """
    by_host: dict[str, list[str]] = {}
    for worker in sorted(hosts):
        by_host.setdefault(hosts[worker], []).append(worker)
    planned = []
    for workers in by_host.values():
        free, done, where = dict.fromkeys(workers, 0.0), {}, {}
        for name, (_, seconds, after) in calls.items():
            ready = max((done[first] for first in after), default=0.0)
            worker = min(free, key=lambda w: max(free[w], ready))
            done[name] = free[worker] = max(free[worker], ready) + seconds
            where[name] = worker
            planned.append((name, worker, [(first, where[first]) for first in after]))
    return planned


def _compiled(name: str, config: FuzzyConfig, text_dtype, *after) -> tuple[str, float, float]:
    start = time.time()
    kernel_calls(config, text_dtype)[name][0]()  # its result (of tiny documents) stays here
    return get_worker().address, start, time.time()


__all__ = ["compile_kernels", "kernel_calls", "plan"]
