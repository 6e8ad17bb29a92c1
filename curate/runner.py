"""Running a stage's Dask collections: computed together, timed, with their peak memory and counts.

:class:`Runner` is what :func:`curate.pipeline.dedup` computes every stage with (through
:class:`curate.checkpoints.Checkpoints` where the stage's results go to disk); :class:`Stats`
holds what it measured, for ``summary.json``.
"""

import logging
import sys
import time
import warnings
from collections import defaultdict
from contextlib import contextmanager

import dask
from dask.utils import key_split
from distributed import get_task_stream

from curate.backend import on_host
from curate.checkpoints import StageStore
from curate.cluster import current_client, gather
from curate.dask_fixes import fused, fused_kinds
from curate.metrics import max_peaks, take_peaks

logger = logging.getLogger(__name__)


class Stats:
    """Counts (``int``), timings (seconds, ``float``) and peak memory (bytes) per stage, written to ``summary.json``."""

    def __init__(self):
        self.counts: dict[str, dict[str, int]] = {}
        self.seconds: dict[str, float] = {}
        self.peaks: dict[str, dict] = {}  # stage -> peak RSS while it ran (see take_peaks)
        self.overall: dict | None = None  # peak RSS over the whole run
        self.device_peaks: dict[str, dict] = {}  # the same for device memory, on GPU workers
        self.device_overall: dict | None = None
        self.tasks: dict[str, dict[str, dict]] = {}  # stage -> task_times() of its tasks, on a cluster
        self.reused: list[str] = []  # stages taken from a previous run (--resume)

    def count(self, stage: str, **values) -> None:
        """Record integer counts under ``stage`` (e.g. ``count("exact", removed=3)``)."""
        self.counts.setdefault(stage, {}).update({k: int(v) for k, v in values.items()})

    def group_rows(self, kind: str) -> int:
        """Rows of the ``kind`` ("exact"/"fuzzy") group table: its groups' representatives and removed members."""
        counts = self.counts.get(kind, {})
        return counts.get("groups", 0) + counts.get("removed", 0)

    @contextmanager
    def timed(self, stage: str):
        """Context manager adding the wall time (seconds) of its block to ``stage`` and its peak RSS to ``stage``'s."""
        self.take_peaks()  # what ran since the last stage counts for the run, not for this stage
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start
        # Not after a failed stage: no summary takes them, and asking every worker would hold
        # the error back (a frozen worker's stall by the probe's 30 s timeout).
        self.take_peaks(stage)

    def take_peaks(self, stage: str | None = None) -> dict:
        """Fold the peak RSS (and device memory) of every process since the last call into the
        run's (and ``stage``'s) peaks; returns the run's peak RSS."""
        peaks, device = take_peaks(device=dask.config.get("dataframe.backend", "pandas") == "cudf")
        self.overall = max_peaks(self.overall, peaks)
        if stage is not None:
            self.peaks[stage] = max_peaks(self.peaks.get(stage), peaks)
        if device is not None:
            self.device_overall = max_peaks(self.device_overall, device)
            if stage is not None:
                self.device_peaks[stage] = max_peaks(self.device_peaks.get(stage), device)
        return self.overall


class Runner:
    """Computes a stage's collections together (shared reads), timed, with an optional progress bar.

    Stages with results on disk go through :meth:`stage` (and :class:`curate.checkpoints.Checkpoints`),
    which skips the work when ``store`` holds the stage finished with the same key.

    Parameters
    ----------
    stats : Stats
        Where each stage's seconds and peak RSS (bytes) go.
    show_progress : bool
        Draw a progress bar per stage on stderr.
    store : curate.checkpoints.StageStore
    stall_timeout : float, default=0
        Seconds without progress before the run stops (see :func:`curate.cluster.gather`; 0: never).
    hint : str, default=""
        What to do, appended to the message of a stall or of dying workers.
    """

    def __init__(self, stats: Stats, show_progress: bool, store: StageStore, stall_timeout: float = 0, hint: str = ""):
        self.stats, self.show_progress, self.store = stats, show_progress, store
        self.stall_timeout, self.hint = stall_timeout, hint  # see curate.cluster.gather
        self._early: dict[str, tuple] = {}  # stage -> (task stream, kinds) begun by persist

    def persist(self, stage: str, frame):
        """``frame`` computed now and kept in the workers' memory (Dask's persist), its tasks
        counted with those of stage ``stage`` (its next call), which they may finish before."""
        (frame,) = fused([frame])  # as the stages' tasks are, and named so
        client = current_client()
        if client is not None:
            stream = get_task_stream(client)
            stream.__enter__()
            self._early[stage] = stream, fused_kinds([frame])
        return frame.persist()

    def __call__(self, stage: str, **collections) -> dict:
        """Compute ``collections`` (Dask collections by name) together as stage ``stage``, on the
        client Dask computes with (:func:`curate.cluster.current_client`; else :func:`dask.compute`
        on the scheduler set in ``dask.config``); returns ``{name: result}``, partitions
        copied to the host (pandas). Raises :class:`curate.cluster.ClusterError` when the cluster
        stalls or its workers keep dying."""
        names = list(collections)
        with self.stats.timed(stage):
            client = current_client()
            with warnings.catch_warnings():
                # to_parquet(compute=False) is graph-backed, counts are expressions; mixing is fine.
                warnings.filterwarnings("ignore", "Computing mixed collections", UserWarning)
                todo = fused([on_host(c) for c in collections.values()])
                if client is None:
                    results = dask.compute(*todo)
                else:
                    if self.show_progress:
                        print(f"[{stage}]", file=sys.stderr)
                    stream, kinds = self._early.pop(stage, None) or (get_task_stream(client).__enter__(), {})
                    try:
                        results = gather(
                            client,
                            todo,
                            stall_timeout=self.stall_timeout,
                            show_progress=self.show_progress,
                            hint=self.hint,
                            stage=stage,
                        )
                    finally:
                        stream.__exit__(None, None, None)
                    if self.show_progress:
                        print(file=sys.stderr)
                    times = self.stats.tasks[stage] = task_times(stream.data, {**kinds, **fused_kinds(todo)})
                    shown = ", ".join(
                        f"{name} {t['seconds']:.1f} s ({t['tasks']})" for name, t in list(times.items())[:6]
                    )
                    logger.info("time %s: compute seconds by kind of task (tasks): %s", stage, shown or "no tasks")
        return dict(zip(names, results))

    def stage(self, name: str, key: str, compute, made_of: dict, also: tuple = ()) -> dict:
        """Counts of stage ``name``: reused if finished with ``key``, else ``compute(folder)``, which
        writes the stage's files into ``folder`` and returns its counts (JSON-able), then published
        with ``made_of`` (the stage's part of the key: :meth:`curate.checkpoints.StageStore.finished`)
        and the fingerprints of its files and of ``also`` (files it wrote beside its folder)."""
        counts = self.store.finished(name, key, made_of)
        if counts is not None:
            self.stats.reused.append(name)
            return counts
        counts = compute(self.store.begin(name))
        self.store.publish(name, key, counts, made_of, also)
        return counts


def task_times(records: list[dict], kinds: dict[str, str] | None = None) -> dict[str, dict]:
    """Compute time per kind of task, from Dask's task stream (:func:`distributed.get_task_stream`).

    Parameters
    ----------
    records : list of dict
        The stream's records: ``key`` and ``startstops`` (spans with ``action``, ``start`` and
        ``stop`` in seconds) per task run.
    kinds : dict, optional
        The kind of the tasks of a key name, where :func:`dask.utils.key_split` would not say it
        (fused steps: :func:`curate.dask_fixes.fused_kinds`).

    Returns
    -------
    dict
        ``{kind: {"tasks": int, "seconds": float}}``, largest ``seconds`` first: a kind is the
        task key's name without its token (:func:`dask.utils.key_split`, e.g. ``host-split``) or
        given by ``kinds`` (``read-documents+to_string_dtype+fingerprints``), seconds the sum of its tasks' compute spans (not transfers or disk
        reads), rounded to milliseconds.
    """
    tasks, seconds = defaultdict(int), defaultdict(float)
    for record in records:
        key = record["key"]
        kind = (kinds or {}).get(key[0] if isinstance(key, tuple) else key) or key_split(key)
        tasks[kind] += 1
        seconds[kind] += sum(s["stop"] - s["start"] for s in record.get("startstops", ()) if s["action"] == "compute")
    order = sorted(tasks, key=lambda kind: -seconds[kind])
    return {kind: {"tasks": tasks[kind], "seconds": round(seconds[kind], 3)} for kind in order}


__all__ = ["Runner", "Stats", "task_times"]
