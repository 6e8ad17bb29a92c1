"""Start or join the Dask cluster a run uses."""

import contextlib
import logging
import warnings

from dask.utils import parse_bytes
from distributed import Client, LocalCluster

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
