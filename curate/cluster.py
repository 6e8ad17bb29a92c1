"""Start or join the Dask cluster a run uses."""

import contextlib
import logging

from distributed import Client, LocalCluster

from curate.config import ClusterConfig

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def connect(config: ClusterConfig):
    """A distributed ``Client`` for the run, closed (and the embedded cluster stopped) on exit.

    Joins ``config.scheduler_file`` / ``config.scheduler_address`` when given (a cluster the
    user started, e.g. ``dask scheduler`` + ``dask worker`` under SLURM); otherwise starts a
    ``LocalCluster`` of worker processes with the given workers, threads, memory limit (bytes
    or a string such as ``"8GB"``, per worker) and local (spill and shuffle scratch) directory.

    Yields
    ------
    distributed.Client

    Raises
    ------
    OSError
        If the scheduler cannot be reached.
    """
    # P2P shuffles log every start and stop at WARNING; that is progress, not a problem.
    logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)
    if config.scheduler_file or config.scheduler_address:
        client = Client(address=config.scheduler_address, scheduler_file=config.scheduler_file)
        logger.info("joined %s", client.scheduler.address)
        try:
            yield client
        finally:
            client.close()
        return
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
