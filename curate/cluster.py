"""Start or join the Dask cluster a run uses."""

import contextlib
import logging
import threading
import time
import warnings

import dask
from dask.utils import format_bytes, parse_bytes
from distributed import Client, LocalCluster, progress, wait
from distributed.deploy.utils import nprocesses_nthreads
from distributed.scheduler import KilledWorker
from dask.system import CPU_COUNT
from distributed.system import MEMORY_LIMIT

from curate.backend import GPU_INSTALL_HINT
from curate.config import ClusterConfig, GPUConfig, is_fraction

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def connect(config: ClusterConfig, backend: str = "cpu"):
    """A distributed ``Client`` for the run, closed (and the embedded cluster stopped) on exit.

    Joins ``config.scheduler_file`` / ``config.scheduler_address`` when given (a cluster the
    user started, e.g. ``dask scheduler`` + ``dask worker`` / ``dask cuda worker`` under SLURM);
    otherwise starts a ``LocalCluster`` of worker processes (backend ``cpu``) or a
    ``dask_cuda.LocalCUDACluster``, one worker per GPU (backend ``gpu``, see
    :func:`local_cuda_cluster`), with the given workers, threads, host memory limit (bytes or a
    string such as ``"8GB"``, per worker) and local (spill and shuffle scratch) directory.

    The client process's cudf options (spilling) are left as they are: curate gathers only host
    objects (:func:`curate.backend.on_host`), so the client never rebuilds the workers' spillable
    cudf buffers.

    Parameters
    ----------
    config : ClusterConfig
    backend : {"cpu", "gpu"}, default="cpu"
        A resolved backend (see :func:`curate.backend.resolve_backend`).

    Yields
    ------
    distributed.Client

    Raises
    ------
    OSError
        If the scheduler cannot be reached.
    ValueError
        If backend ``gpu`` lacks dask-cuda (or distributed-ucxx for ``protocol: ucx``).
    """
    # P2P shuffles log every start and stop at WARNING; that is progress, not a problem.
    logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)
    # The dashboard is off, but the scheduler's small HTTP server (health, metrics) still tries
    # port 8787 and warns when another cluster holds it before taking a free port: harmless.
    warnings.filterwarnings("ignore", "Port 8787 is already in use", UserWarning)
    if config.scheduler_file or config.scheduler_address:
        client = Client(address=config.scheduler_address, scheduler_file=config.scheduler_file)
        logger.info("joined %s", client.scheduler.address)
        try:
            yield client
        finally:
            client.close()
        return
    # Worker processes take the dask config as it is when they start (a restarted one too).
    with dask.config.set(worker_settings(config, backend)):
        if backend == "gpu":
            cluster = local_cuda_cluster(config)
        else:
            cluster = LocalCluster(
                n_workers=config.n_workers,
                threads_per_worker=config.threads_per_worker,
                memory_limit=config.memory_limit,
                local_directory=config.local_directory,
                dashboard_address=None,
            )
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def worker_memory(config: ClusterConfig, backend: str = "cpu") -> int | None:
    """Host memory limit in bytes of each embedded worker, as ``LocalCluster`` will set it; None: no limit.

    ``memory_limit: auto`` gives each worker the machine's memory times its share of the cores.
    """
    if config.memory_limit in (None, 0, "0"):
        return None
    if backend == "gpu":
        threads, cores = config.threads_per_worker or 1, 1
    else:
        workers, threads = config.n_workers, config.threads_per_worker
        if workers is None and threads is None:
            workers, threads = nprocesses_nthreads()
        elif workers is None:
            workers = max(1, CPU_COUNT // threads)
        elif threads is None:
            threads = max(1, -(-CPU_COUNT // workers))
        cores = CPU_COUNT
    if config.memory_limit == "auto":
        return min(MEMORY_LIMIT, int(MEMORY_LIMIT * min(1, threads / cores)))
    return parse_bytes(config.memory_limit)


def worker_settings(config: ClusterConfig, backend: str = "cpu") -> dict:
    """Dask settings for the embedded workers: P2P shuffle buffers that fit their memory limit.

    Distributed lets a worker buffer up to 1 GiB of outgoing P2P shuffle shards
    (``distributed.p2p.comm.buffer``) whatever its memory limit, so a 1 GB worker passed its
    limit while shuffling and was restarted again and again. An eighth of the limit keeps
    the buffer, a partition being read and the worker's own ~0.3 GB inside it.
    """
    limit = worker_memory(config, backend)
    if limit is None:
        return {}
    return {"distributed.p2p.comm.buffer": min(parse_bytes("1 GiB"), limit // 8)}


class ClusterError(RuntimeError):
    """The cluster cannot finish the run: workers keep dying, or nothing progresses."""


def _cluster_state(dask_scheduler) -> dict:
    workers = {
        address: {"paused": ws.status.name == "paused", "cpu": ws.metrics.get("cpu", 0.0), "memory": ws.memory.process, "limit": ws.memory_limit}
        for address, ws in dask_scheduler.workers.items()
    }
    return {"transitions": dask_scheduler.transition_counter, "workers": workers}


def gather(client: Client, collections: list, *, stall_timeout: float = 300, show_progress: bool = False, hint: str = "") -> list:
    """Compute ``collections`` on ``client`` and return their results; never hang silently.

    Every few seconds the scheduler is asked how the run stands. The run stops with
    :class:`ClusterError` when no task has finished and no worker has used CPU for
    ``stall_timeout`` seconds (e.g. workers paused at their memory limit, holding data that
    the others wait for), or when workers died more than twice as many times as there are
    workers (the nanny restarts a worker that passes 95% of its memory limit). ``hint`` (which
    flags to change) ends the message.

    Parameters
    ----------
    client : distributed.Client
    collections : list of dask collections
    stall_timeout : float, default=300
        Seconds without progress before giving up; 0 waits for ever.
    show_progress : bool, default=False
        Draw Dask's progress bar on the terminal meanwhile.
    hint : str, default=""

    Returns
    -------
    list
        The results, in the order of ``collections``.

    Raises
    ------
    ClusterError
        As above, or when a task killed its workers (:class:`distributed.KilledWorker`).
    """
    futures = client.compute(collections)
    bar = threading.Thread(target=progress, args=(futures,), daemon=True)  # it blocks until the end
    if show_progress:
        bar.start()
    try:
        if stall_timeout:
            _watch(client, futures, stall_timeout, hint)
        results = client.gather(futures)
    except KilledWorker as err:
        raise ClusterError(f"workers died running a task ({err.task}); {hint}") from None
    if show_progress:
        bar.join(timeout=2)  # let it draw the finished bar
    return results


def _watch(client: Client, futures, stall_timeout: float, hint: str) -> None:
    seen, last, since, deaths, most = None, None, time.monotonic(), 0, 1
    while True:
        try:
            wait(futures, timeout=min(5.0, stall_timeout))
            return
        except TimeoutError:
            pass
        state = client.run_on_scheduler(_cluster_state)
        workers = state["workers"]
        if seen is not None:  # a restarted worker comes back under a new address
            deaths += len(seen - set(workers))
        seen, most = set(workers), max(most, len(workers))
        if deaths > 2 * most:
            raise ClusterError(f"workers died {deaths} times (a worker is restarted when it passes 95% of its memory limit); {hint}")
        busy = any(w["cpu"] > 10 for w in workers.values())
        if state["transitions"] != last or busy:
            last, since = state["transitions"], time.monotonic()
        elif time.monotonic() - since > stall_timeout:
            paused = [f"{address} ({format_bytes(w['memory'])} of {format_bytes(w['limit'] or 0)})" for address, w in workers.items() if w["paused"]]
            why = f"worker(s) paused at their memory limit: {', '.join(paused)}" if paused else "no worker is computing"
            raise ClusterError(f"no progress for {stall_timeout:.0f} s: {why}; {hint}")


def local_cuda_cluster_options(config: ClusterConfig) -> dict:
    """Keyword arguments for ``dask_cuda.LocalCUDACluster`` (dask-cuda 26.x) from ``config``.

    Sizes are passed as dask-cuda reads them: a string with a ``.`` is a fraction of device
    memory, anything else bytes. With cuDF spilling on, ``device_memory_limit`` also becomes
    each worker's ``CUDF_SPILL_DEVICE_LIMIT``: dask-cuda's own spilling ignores cuDF buffers
    when cuDF spills them, so without it the limit would not bound the tables.
    """
    gpu: GPUConfig = config.gpu
    options = {
        "CUDA_VISIBLE_DEVICES": gpu.devices,
        "n_workers": config.n_workers,
        "threads_per_worker": config.threads_per_worker or 1,
        "memory_limit": config.memory_limit,
        "local_directory": config.local_directory,
        "protocol": gpu.protocol,
        "rmm_async": gpu.use_async,
        "rmm_pool_size": _size(gpu.rmm_pool_size),
        "rmm_release_threshold": _size(gpu.rmm_release_threshold),
        "enable_cudf_spill": gpu.enable_cudf_spill,
    }
    if gpu.device_memory_limit is not None:
        options["device_memory_limit"] = _size(gpu.device_memory_limit)
        if gpu.enable_cudf_spill:
            options["env"] = {"CUDF_SPILL_DEVICE_LIMIT": str(parse_bytes(gpu.device_memory_limit))}
    # None means "dask-cuda's default" and is left out; the dashboard is off, as on the CPU path.
    return {key: value for key, value in options.items() if value is not None} | {"dashboard_address": None}


def local_cuda_cluster(config: ClusterConfig):
    """A ``dask_cuda.LocalCUDACluster`` built from ``config`` (imported here: the CPU install lacks it).

    Raises
    ------
    ValueError
        If dask-cuda, or distributed-ucxx for ``protocol: ucx``, is not installed.
    """
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as err:
        raise ValueError(f"backend 'gpu' needs dask-cuda ({err}): {GPU_INSTALL_HINT}") from None
    if config.gpu.protocol == "ucx":
        try:
            import distributed_ucxx  # noqa: F401  (registers the ucx:// transport)
        except ImportError:
            raise ValueError(f"protocol 'ucx' needs distributed-ucxx: {GPU_INSTALL_HINT}") from None
    options = local_cuda_cluster_options(config)
    logger.info("starting LocalCUDACluster(%s)", options)
    return LocalCUDACluster(**options)


def _size(value: str | None):
    if value is None:
        return None
    return float(value) if is_fraction(value) else value
