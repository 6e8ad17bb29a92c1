"""What a run measures about itself: peak resident and device memory, bytes spilled, library versions.

Peak RSS is read from ``/proc/self/status`` (``VmHWM``) in the client and in every worker, and
restarted after each stage (``/proc/self/clear_refs``), so ``summary.json`` gives each stage its
own peak. Peak device memory is what RMM's statistics count on each GPU worker, with new
counters per stage (:func:`_take_device_peak`). Spilled bytes are the workers' own counters
(``distributed``'s ``SpillBuffer`` for disk, cuDF's spill statistics for device to host).
"""

import importlib
import logging
import os
import platform
import resource
import sys
from importlib import metadata

from curate.cluster import current_client, run_on_workers

logger = logging.getLogger(__name__)


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


_counted = None  # the RMM statistics adaptor this process pushed its counters on (_take_device_peak)


def _take_device_peak() -> int | None:
    """The most bytes allocated through RMM on this GPU worker's device since the last call
    (then new counters), or None where RMM is not imported or cannot count.

    For GPU runs only (the client decides: distributed imports RMM in every worker where it is
    installed). The first call puts RMM's ``StatisticsResourceAdaptor`` (``rmm.statistics``) on
    the current device resource unless one is there, and pushes counters of its own; it
    returns 0. cuDF's spilling, CuPy and numba allocate through that resource, so their
    allocations count; bytes allocated before the first call do not.
    """
    global _counted
    rmm = sys.modules.get("rmm")  # imported by dask-cuda's worker setup; never imported here
    if rmm is None:
        return None
    try:
        spilling = sys.modules.get("cudf.core.buffer.spill_manager")
        if _counted is None and spilling is not None:
            # cuDF puts its spill-on-demand adaptor on the resource when its first spillable
            # buffer appears, in a task's thread; done now, it cannot race with the wrapping below.
            spilling.get_global_manager()
        stack = [rmm.mr.get_current_device_resource()]
        while hasattr(stack[-1], "upstream_mr"):  # cuDF may put its spill-on-demand adaptor above ours
            stack.append(stack[-1].upstream_mr)
        adaptor = next((mr for mr in stack if isinstance(mr, rmm.mr.StatisticsResourceAdaptor)), None)
        if adaptor is None:
            adaptor = rmm.mr.StatisticsResourceAdaptor(stack[0])
            rmm.mr.set_current_device_resource(adaptor)
        if adaptor is not _counted:
            adaptor.push_counters()
            _counted = adaptor
            return 0
        # A popped stage's counters start at 0 and merge into those below, so what was allocated
        # when the stage began is the base's bytes now less the stage's own.
        ended = adaptor.pop_counters()
        base = adaptor.push_counters()
        return base.current_bytes - ended.current_bytes + ended.peak_bytes
    except Exception as err:  # a measurement never stops a run
        logger.debug("no device memory statistics: %s", err)
        return None


def _answers(function, *args) -> dict:
    """``function(*args)`` on the current client's workers: the results of those that ran it,
    by address; none without a client. A count is no reason to stop a run: a worker that
    cannot run it (it lacks curate: the run names it) or does not answer (frozen: the run's
    watch names it) is left out of it."""
    client = current_client()
    try:
        found = {} if client is None else run_on_workers(client, function, *args)
    except TimeoutError:
        return {}
    return {worker: got for worker, got in found.items() if not isinstance(got, BaseException)}


def _take_worker_peaks(device: bool) -> tuple[int, int, int | None]:
    return (*_take_process_peak(), _take_device_peak() if device else None)


def take_peaks(device: bool = False) -> tuple[dict, dict | None]:
    """Peak resident (and, with ``device``, device) memory in bytes since the last call, then
    start new peaks.

    Returns ``(rss, device)``: ``rss`` is ``{"client": bytes, "workers": {address: bytes},
    "total": bytes}``, ``total`` summing the distinct processes (in-process workers share the
    client's); ``device`` is ``{"workers": {address: bytes}, "total": bytes}`` for the workers
    that hold a GPU through RMM (:func:`_take_device_peak`), None without ``device`` or where
    none does.
    """
    pid, own = _take_process_peak()
    workers = _answers(_take_worker_peaks, device)
    per_process = {pid: own, **{p: rss for p, rss, _ in workers.values()}}
    rss = {"client": own, "workers": {w: rss for w, (_, rss, _) in workers.items()}, "total": sum(per_process.values())}
    device = {w: peak for w, (_, _, peak) in workers.items() if peak is not None}
    return rss, ({"workers": device, "total": sum(device.values())} if device else None)


def max_peaks(a: dict | None, b: dict) -> dict:
    """Per-process maximum of two results of :func:`take_peaks` (both ``rss`` or both ``device``);
    ``total`` is the larger total."""
    if a is None:
        return b
    workers = {w: max(a["workers"].get(w, 0), b["workers"].get(w, 0)) for w in {**a["workers"], **b["workers"]}}
    client = {"client": max(a["client"], b["client"])} if "client" in b else {}
    return {**client, "workers": workers, "total": max(a["total"], b["total"])}


def _device_spilled() -> int | None:
    """Bytes cuDF spilled from this process's GPU to host memory so far (its buffers, not
    dask-cuda's moves of whole results), or None where cuDF does not count them (not imported
    here, its spilling off, or its ``spill_stats`` option 0)."""
    spilling = sys.modules.get("cudf.core.buffer.spill_manager")  # imported with cuDF; never imported here
    if spilling is None:
        return None
    try:
        manager = spilling.get_global_manager()
        if manager is None or manager.statistics.level < 1:
            return None
        return int(manager.statistics.spill_totals.get(("gpu", "cpu"), (0, 0.0))[0])
    except Exception as err:  # a measurement never stops a run
        logger.debug("no cuDF spill statistics: %s", err)
        return None


def _worker_spilled(device: bool, dask_worker) -> tuple[int, int | None]:
    # SpillBuffer (the worker's data store when a memory limit is set) counts what it wrote to
    # disk; dask-cuda's DeviceHostFile (a GPU worker's, with a memory limit) counts nothing.
    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    return int(metrics.get(("disk-write", "bytes"), 0)), _device_spilled() if device else None


def spilled_bytes(device: bool = False) -> tuple[int, int | None]:
    """Bytes the workers spilled in their lifetime so far: ``(disk, device)``.

    ``disk``: to their local directory (0 without a client or a memory limit); ``device`` (for
    a GPU run: ``device`` true): from their GPUs to host memory, as cuDF counts them
    (dask-cuda's ``cudf_spill_stats``), None where no worker counts them.
    """
    per_worker = _answers(_worker_spilled, device).values()
    device = [spilled for _, spilled in per_worker if spilled is not None]
    return sum(disk for disk, _ in per_worker), (sum(device) if device else None)


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
