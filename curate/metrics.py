"""What a run measures about itself: peak resident memory, bytes spilled, library versions.

Peak RSS is read from ``/proc/self/status`` (``VmHWM``) in the client and in every worker, and
restarted after each stage (``/proc/self/clear_refs``), so ``summary.json`` gives each stage its
own peak. Spilled bytes are the workers' own counters (``distributed``'s ``SpillBuffer``).
"""

import importlib
import os
import platform
import resource
from importlib import metadata

from curate.cluster import current_client


def _process_peak() -> tuple[int, int]:
    # VmHWM is this process's own peak. ru_maxrss is not: Linux carries it across fork + exec,
    # so a process started by a large parent would report the parent's size.
    try:
        with open("/proc/self/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return os.getpid(), kib * 1024


def _take_process_peak() -> tuple[int, int]:
    pid, peak = _process_peak()
    try:  # Linux: writing 5 to clear_refs restarts VmHWM from the current RSS
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:  # elsewhere each value stays the process's peak since it started
        pass
    return pid, peak


def take_peaks() -> dict:
    """Peak resident memory in bytes since the last call, then start new peaks.

    Returns ``{"client": bytes, "workers": {address: bytes}, "total": bytes}``; ``total`` sums
    the distinct processes (in-process workers share the client's).
    """
    pid, own = _take_process_peak()
    client = current_client()
    workers = {} if client is None else client.run(_take_process_peak)
    per_process = {pid: own, **dict(workers.values())}
    return {"client": own, "workers": {w: rss for w, (_, rss) in workers.items()}, "total": sum(per_process.values())}


def max_peaks(a: dict | None, b: dict) -> dict:
    """Per-process maximum of two :func:`take_peaks` results; ``total`` is the larger total."""
    if a is None:
        return b
    workers = {w: max(a["workers"].get(w, 0), b["workers"].get(w, 0)) for w in {**a["workers"], **b["workers"]}}
    return {"client": max(a["client"], b["client"]), "workers": workers, "total": max(a["total"], b["total"])}


def _worker_spilled(dask_worker) -> int:
    # SpillBuffer (the worker's data store when a memory limit is set) counts what it wrote to disk.
    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    return int(metrics.get(("disk-write", "bytes"), 0))


def spilled_bytes() -> int:
    """Bytes the workers spilled to their local directory so far (0 without a client or memory limit)."""
    client = current_client()
    return 0 if client is None else sum(client.run(_worker_spilled).values())


def versions(gpu: bool = False) -> dict:
    """Versions of curate and the libraries that decide its results; on the GPU backend also
    those that compute there (by module name: their distributions are named per CUDA version)."""
    names = ["curate", "dask", "distributed", "pandas", "pyarrow", "numba", "numpy"]
    found = {"python": platform.python_version(), **{n: metadata.version(n) for n in names}}
    if gpu:
        for module in ("cudf", "dask_cudf", "dask_cuda", "cupy", "rmm", "numba_cuda"):
            found[module] = importlib.import_module(module).__version__
    return found


__all__ = ["max_peaks", "spilled_bytes", "take_peaks", "versions"]
