"""Start or join the Dask cluster a run uses."""

import asyncio
import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import os
import signal
import socket
import tempfile
import threading
import time
import warnings
import weakref
from multiprocessing import resource_tracker
from pathlib import Path

import dask
import fsspec
from dask.system import CPU_COUNT
from dask.utils import format_bytes, parse_bytes, parse_timedelta
from distributed import Client, LocalCluster, WorkerPlugin, get_client, progress, wait
from distributed.comm.addressing import parse_host_port
from distributed.comm.core import CommClosedError
from distributed.core import rpc
from distributed.deploy.utils import nprocesses_nthreads
from distributed.scheduler import KilledWorker
from distributed.security import Security
from distributed.system import MEMORY_LIMIT

from curate.backend import GPU_INSTALL_HINT, HOST_STEP, on_device
from curate.config import MIN_WORKER_MEMORY, ClusterConfig, GPUConfig, is_fraction, thread_room
from curate.io.files import first_few

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def connect(config: ClusterConfig, backend: str = "cpu", *, quiet: bool = True):
    """A distributed ``Client`` for the run, closed (and the embedded cluster stopped) on exit.

    Joins ``config.scheduler_file`` / ``config.scheduler_address`` when given (a cluster the
    user started, e.g. ``dask scheduler`` + ``dask worker`` / ``dask cuda worker`` under SLURM);
    otherwise starts a ``LocalCluster`` of worker processes (backend ``cpu``) or a
    ``dask_cuda.LocalCUDACluster``, one worker per GPU (backend ``gpu``, see
    :func:`local_cuda_cluster`), with the given workers, threads, host memory limit (bytes or a
    string such as ``"8GB"``, per worker), local (spill and shuffle scratch) directory and
    dashboard address. Logs (INFO) what it started or joined and where the dashboard is.

    The embedded workers never see SIGINT: a Ctrl-C in the terminal reaches the whole process
    group, and workers that raised ``KeyboardInterrupt`` printed a traceback each while the
    client was still stopping them. They are started with SIGINT blocked (processes inherit the
    blocked mask of the thread that starts them, and the cluster's event-loop thread, which
    also restarts workers, is started with it blocked), so only this process is interrupted. When the ``with``
    block raises (an interrupt, an error), the embedded workers are stopped at once rather
    than after their running tasks.

    An embedded ``LocalCUDACluster`` with cuDF spilling on turns it on in this process too
    (dask-cuda 26.10 sets cudf's ``spill`` and ``spill_stats`` options for the client, and
    leaves them so); a joined cluster leaves them as they are. Either way curate gathers only
    host objects (:func:`curate.backend.on_host`), so the client never rebuilds the workers'
    spillable cudf buffers.

    Parameters
    ----------
    config : ClusterConfig
    backend : {"cpu", "gpu"}, default="cpu"
        A resolved backend (see :func:`curate.backend.resolve_backend`).
    quiet : bool, default=True
        Silence the embedded cluster's logs (workers and scheduler: ``silence_logs``), whose
        errors reach the client as exceptions anyway, and the Python warnings of its workers
        (:class:`QuietWarnings`); False shows its log warnings and Python warnings.

    Yields
    ------
    distributed.Client

    Raises
    ------
    OSError
        If the scheduler cannot be reached, or its scheduler file does not appear within Dask's
        connect timeout (``distributed.comm.timeouts.connect``, 30 s by default).
    ValueError
        If backend ``gpu`` lacks dask-cuda (or distributed-ucxx for ``protocol: ucx``).
    """
    # P2P shuffles log every start and stop at WARNING; that is progress, not a problem.
    logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)
    # The scheduler's small HTTP server (health, metrics) tries port 8787 and warns when another
    # cluster holds it before taking a free port: harmless.
    warnings.filterwarnings("ignore", "Port 8787 is already in use", UserWarning)
    if config.scheduler_file or config.scheduler_address:
        timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"))
        if config.scheduler_file:
            _wait_for(config.scheduler_file, timeout)
        address = config.scheduler_address or _address_in(config.scheduler_file)
        if address.startswith("ucx://"):  # distributed's traceback of an abstract class otherwise
            _ucx_transport()
        _answering(address, timeout, config.scheduler_file)
        client = Client(address=config.scheduler_address, scheduler_file=config.scheduler_file)
        address = client.scheduler.address
        logger.info(
            "joined the scheduler at %s: %s; dashboard %s",
            client.scheduler.address,
            _workers(client),
            _dashboard(client),
        )
        try:
            _first_worker(client, config.stall_timeout)
            check_workers(client)
            with client.as_current():  # see below
                yield client
        except (Exception, asyncio.CancelledError) as err:
            if isinstance(err, ClusterError) or (client.status == "running" and not _lost(err, address, timeout)):
                raise
            # distributed's client gave up reconnecting (Dask's connect timeout) and closed; what
            # it raises then says only "Timed out trying to connect", or nothing.
            raise ClusterError(
                f"lost the scheduler at {address}: it stopped or its node was lost (it no longer answers); "
                "finished stages are kept: start the cluster again and run the same command with --resume"
            ) from None
        finally:
            client.close()  # our tasks are released; the cluster stays up
        return
    cluster = client = None
    try:
        # Worker processes take the dask config as it is when they start (a restarted one too).
        with dask.config.set(worker_settings(config, backend)), _sigint_blocked(), _sigterm_deferred():
            try:
                cluster = _local_cluster(config, backend, logging.CRITICAL if quiet else logging.WARNING)
            except RuntimeError as err:  # "Nanny failed to start.": a 71-line traceback, no Error line
                raise ClusterError(
                    f"the cluster did not start ({str(err).rstrip('.')}: a worker process failed as it started, "
                    f"killed, out of memory or by an error of its own, which -v logs){_few_files()}; run the same "
                    "command again"
                ) from err
            client = Client(cluster)
            if quiet:
                client.register_plugin(QuietWarnings())
        # (a Ctrl-C pressed while the cluster started is raised here, once SIGINT is let through)
        if config.dashboard_address is not None and importlib.util.find_spec("bokeh") is None:
            logger.warning(
                "--dashboard-address %s: no dashboard, it needs bokeh (pip install bokeh)", config.dashboard_address
            )
        _dashboard_moved(client, config.dashboard_address)
        logger.info(
            "started %s: %s; dashboard %s",
            type(cluster).__name__,
            _workers(client),
            _dashboard(client, config.dashboard_address),
        )
        # The run's client, even inside another's `with Client(...)` block: that one would stay
        # Dask's current client (a context variable) and run every task.
        with client.as_current():
            yield client
    except BaseException:
        if cluster is not None:
            with _sigint_ignored():  # a second Ctrl-C must not cut the shutdown short
                stop_workers(cluster)
                _close(client, cluster)
        raise
    with _sigint_ignored():  # the run is over: a Ctrl-C now would leave the cluster half closed
        _close(client, cluster)


def _wait_for(scheduler_file: str, timeout: float) -> None:
    """Wait up to ``timeout`` seconds (Dask's connect timeout) for a scheduler file that a
    starting scheduler has yet to write; distributed's ``Client`` waits for ever."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(scheduler_file):
        if time.monotonic() > deadline:
            raise OSError(
                f"no scheduler file {scheduler_file} after {timeout:.0f} s: start the scheduler with "
                f"`dask scheduler --scheduler-file {scheduler_file}` (it writes the file), or name its file"
            )
        time.sleep(0.1)


# A frozen worker (SIGSTOP, a lost node) never answers distributed's Client.run, which then
# waits for ever (a run stalled past --stall-timeout hung in its peak-memory count): calls on
# the workers give up after this many seconds (Dask's default connect timeout).
ANSWER_TIMEOUT = 30


def run_on_workers(client: Client, function, *args, workers: list[str] | None = None, timeout: float = 0) -> dict:
    """``client.run(function, *args)`` on every worker (or ``workers``): ``{address: result,
    or the exception it raised}``.

    Raises
    ------
    TimeoutError
        Where a worker has not answered within ``timeout`` seconds (0: :data:`ANSWER_TIMEOUT`).
    """
    return client.run(function, *args, workers=workers, on_error="return", callback_timeout=timeout or ANSWER_TIMEOUT)


def check_workers(client: Client, workers: list[str] | None = None) -> None:
    """Check a joined cluster's workers: refuse (:class:`ClusterError`, naming them) workers
    that cannot import curate's code or hold other code than this process (another version or
    checkout: its tasks would fail, or differ, in ways that do not say so); warn (log) where
    some lack ``ARROW_DEFAULT_MEMORY_POOL=system`` in their environment, which the embedded cluster sets:
    pyarrow's default pool keeps what each stage freed, so their memory only grows from stage
    to stage (docs/multi-node.md). Once the run has named its files (:func:`check_files`),
    refuse workers that do not see them as this process does. ``workers``: those to check
    (default all: at the start; the run checks those that join later as they come, :func:`gather`)."""
    roll = _ROLL.setdefault(client, _Roll())
    try:
        found = run_on_workers(client, _worker_setup, roll.files, roll.out, workers=workers)
    except TimeoutError:
        raise ClusterError(
            f"a worker of the scheduler at {client.scheduler.address} did not answer within {ANSWER_TIMEOUT} s "
            "(frozen, or its node lost): restart it"
        ) from None
    total = len(found) if workers is None else len(client.scheduler_info()["workers"])
    if lacking := _lacking_curate(found, total):
        raise ClusterError(lacking)
    found = {worker: got for worker, got in found.items() if not _gone(got)}
    if blind := sorted((worker, problem) for worker, (_, _, problem) in found.items() if problem):
        # Else a node with another copy of a file read it as its own: a wrong result, or an
        # error blaming the data ("ids appear more than once"), or a bare OSError.
        raise ClusterError(
            f"{len(blind)} of {total} workers ({first_few([worker for worker, _ in blind], sep=', ')}) do not see the files as "
            f"this process does: the first {blind[0][1]}; every worker must see the input files and the output "
            "folder at the same paths (a shared file system, docs/multi-node.md)"
        )
    roll.checked.update(found)
    # Each worker is warned of once: the run checks them all again once it knows its files.
    fresh = {worker: got for worker, got in found.items() if worker not in roll.warned}
    roll.warned.update(found)
    limits = {address: info.get("memory_limit") or 0 for address, info in client.scheduler_info()["workers"].items()}
    if small := sorted(worker for worker in fresh if 0 < limits.get(worker, 0) < MIN_WORKER_MEMORY):
        logger.warning(
            "%d of %d workers (%s) have a memory limit under %.0f MB (the first has %.0f MB): a worker holds "
            "about 300 MB before any data and pauses at 80%% of its limit, so the run may stall once a task lands "
            "on them, and stop after --stall-timeout whatever the other workers do; give them more (`dask worker "
            "--memory-limit`) or stop them",
            len(small),
            total,
            first_few(small, sep=", "),
            MIN_WORKER_MEMORY / 1e6,
            limits[small[0]] / 1e6,
        )
    if lacking := sorted(worker for worker, (pool, _, _) in fresh.items() if pool != "system"):
        logger.warning(
            "%d of %d workers (%s) lack ARROW_DEFAULT_MEMORY_POOL=system in their environment: their memory "
            "will only grow from stage to stage (docs/multi-node.md)",
            len(lacking),
            total,
            first_few(lacking, sep=", "),
        )


def check_files(client: Client | None, files: list[tuple[str, int, str]], out: Path) -> None:
    """Check that every worker sees the input ``files`` (``(path, size in bytes, modified)``,
    as :func:`curate.checkpoints.input_fingerprint` gives them: local paths; pass none for an
    object store) as this process does and can write to the output folder ``out``; workers
    that join later are checked as they come (:func:`gather`). Nothing where ``client`` is None.

    Raises
    ------
    ClusterError
        Naming the workers and the first file one of them does not see so (missing, another
        size or modification time: a node's own copy) or the folder it cannot write to.
    """
    if client is None:
        return
    roll = _ROLL.setdefault(client, _Roll())
    roll.files, roll.out, roll.checked = list(files), str(out), set()
    check_workers(client)


def _gone(answer) -> bool:
    # A worker that left while it was asked (killed, restarted) answers with a connection error
    # (distributed's CommClosedError, an OSError): the run's looks say it left; curate it may have.
    return isinstance(answer, OSError)


def _lacking_curate(found: dict, total: int | None = None) -> str | None:
    """What :func:`check_workers` says of the workers that cannot run this curate, given each
    worker's :func:`_worker_setup` (or the exception it raised) and how many workers there are
    (default: those in ``found``); None where all can."""
    ours = code_fingerprint()
    other = {
        worker: got
        for worker, got in found.items()
        if (isinstance(got, BaseException) or got[1] != ours) and not _gone(got)
    }
    if not other:
        return None
    worker, got = sorted(other.items())[0]
    # distributed wraps an error raised while unpickling the function in a plain Exception
    error = str(got) if type(got) is Exception else f"{type(got).__name__}: {got}"
    why = f"cannot run it ({error})" if isinstance(got, BaseException) else "runs other code"
    return (
        f"{len(other)} of {total or len(found)} workers ({first_few(sorted(other), sep=', ')}) lack the curate "
        f"this command runs ({Path(__file__).parent}): the first {why}; every worker needs the same curate "
        "(docs/multi-node.md)"
    )


def _first_worker(client: Client, timeout: float) -> None:
    """Wait up to ``timeout`` seconds (0: for ever) for a joined cluster's first worker: a job
    script may start the workers after the scheduler. Waited for here, it is not counted as
    the first stage's time, and a cluster without workers is named as such."""
    if client.scheduler_info()["workers"]:
        return
    logger.warning(
        "the scheduler at %s has no worker yet; waiting %s for one (start them with "
        "`dask worker` or `dask cuda worker` and the scheduler's address or file)",
        client.scheduler.address,
        f"up to {timeout:.0f} s (--stall-timeout)" if timeout else "for ever (--stall-timeout 0)",
    )
    try:
        client.wait_for_workers(1, timeout=timeout or None)
    except TimeoutError:
        raise ClusterError(
            f"no worker joined the scheduler at {client.scheduler.address} in {timeout:.0f} s (--stall-timeout): "
            "start workers (`dask worker` or `dask cuda worker` with its address or file)"
        ) from None


def _worker_setup(files: list = (), out: str | None = None) -> tuple[str | None, str, str | None]:
    # A function of this module, imported on the worker: os.environ.get itself would be
    # pickled with the client's environment and read that.
    return os.environ.get("ARROW_DEFAULT_MEMORY_POOL"), code_fingerprint(), _file_problem(files, out)


def _file_problem(files: list, out: str | None) -> str | None:
    """How this process (a worker) sees ``files`` or ``out`` otherwise than the client, or None."""
    from curate.checkpoints import modified  # fsspec's view, as the client's fingerprint took it

    local = fsspec.filesystem("file")
    for path, size, when in files:
        try:
            info = local.info(path)
        except OSError as err:
            return f"cannot see input file {path} ({err.strerror or type(err).__name__})"
        if (int(info["size"]), modified(info)) != (size, when):
            return (
                f"sees another input file {path}: {int(info['size']):,} bytes, modified {modified(info)} there; "
                f"{size:,} bytes, modified {when} here"
            )
    if out is not None:
        try:
            with tempfile.TemporaryFile(dir=out):
                pass
        except OSError as err:
            return f"cannot write to the output folder {out} ({err.strerror or type(err).__name__})"
    return None


@functools.cache
def code_fingerprint() -> str:
    """SHA-256 (hex) of curate's Python files (their paths in the package and bytes): equal
    where the code is, whatever the version string or the folder it is installed in."""
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _address_in(scheduler_file: str) -> str:
    """The scheduler's address in ``scheduler_file``, read again for a second while it is no such
    file (a scheduler writing it, or a slow shared file system); then OSError naming the file."""
    for attempt in range(11):
        try:
            with open(scheduler_file) as f:
                info = json.load(f)
            if isinstance(info, dict) and isinstance(info.get("address"), str):
                return info["address"]
            why = "no address in it"
        except IsADirectoryError:
            why = "a folder"
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            why = f"not JSON: {err}"
        if attempt < 10:
            time.sleep(0.1)
    raise OSError(
        f"{scheduler_file} is not a Dask scheduler file ({why}): name the file that "
        "`dask scheduler --scheduler-file FILE` writes"
    )


def _lost(err: BaseException, address: str, timeout: float) -> bool:
    """Whether ``err``, raised while the client still took the scheduler for connected, came
    from its loss: distributed's CommClosedError where no scheduler answers at ``address``
    within ``timeout`` seconds. One of the run's own calls to the scheduler (its looks at the
    workers) fails so when the scheduler stops just before it. The run's own errors (a full
    disk) are not connection errors, so a busy scheduler never hides them. Only tcp:// and
    tls:// addresses are probed (:func:`_answering`); on the others the error stands."""
    if not isinstance(err, CommClosedError):
        return False
    try:
        _answering(address, timeout)
    except OSError:
        return True
    except Exception:  # the probe itself failed (an answer that is no Dask message): cannot tell
        return False
    return False  # it answers (UCX and the others: not probed)


def _answering(address: str, timeout: float, scheduler_file: str | None = None) -> None:
    """Raise OSError unless a Dask scheduler answers at ``address`` (read from
    ``scheduler_file`` when given) within ``timeout`` seconds (Dask's connect timeout).

    distributed's ``Client`` waits for ever, whatever its timeout, on a port where something
    else listens, such as the scheduler's dashboard (a user's mix-up: 12 silent minutes).
    """
    if "://" in address and address.split("://")[0] not in ("tcp", "tls"):
        return  # UCX and the others: left to the Client, which sets their transport up
    fix = "give the address of the `Scheduler at:` line of its log (not the dashboard's port), or its --scheduler-file"
    if scheduler_file:
        fix = f"the scheduler that wrote {scheduler_file} has stopped: start it again (it writes the file anew)"
        # A scheduler writes its file once it listens, so a refused connection is a stopped one
        # (a file left behind): said at once, where Dask retries for the whole timeout.
        try:
            socket.create_connection(parse_host_port(address.split("://")[-1]), timeout).close()
        except ConnectionRefusedError:
            raise OSError(f"nothing listens at {address}, which {scheduler_file} names: {fix}") from None
        except OSError:
            pass  # a slow or unreachable network: the wait below names it

    async def identity() -> dict:
        scheduler = rpc(address, connection_args=Security().get_connection_args("client"))
        try:
            return await asyncio.wait_for(scheduler.identity(), timeout)
        finally:
            await scheduler.close_rpc()

    def probe(outcome: list) -> None:
        try:
            outcome.append(asyncio.run(identity()))
        except BaseException as err:  # raised in the caller's thread below
            outcome.append(err)

    # In a daemon thread of its own: the caller may be running an event loop, and a Ctrl-C ends
    # the wait at once (an executor's thread is joined at exit: the probe's whole timeout).
    outcome: list = []
    thread = threading.Thread(target=probe, args=(outcome,), daemon=True)
    thread.start()
    thread.join()
    reply, waited = outcome[0], False
    if isinstance(reply, OSError):  # TimeoutError among them
        reply, waited = {"error": _refused(address) or str(reply) or "no answer"}, True
    elif isinstance(reply, TypeError):  # tls:// without certificates in Dask's configuration: a traceback
        raise OSError(
            f"cannot connect to {address} ({reply}): a tls:// scheduler needs the client's certificates in "
            "Dask's configuration (distributed.comm.tls.*)"
        ) from None
    elif isinstance(reply, ValueError):  # a malformed address, naming it
        raise reply
    elif isinstance(reply, Exception):  # something else answered: an HTTP server's bytes read as a
        # message length made distributed allocate exbibytes (a MemoryError traceback)
        reply = {"error": "something answered, not as a Dask scheduler: a web server or a proxy?"}
    elif isinstance(reply, BaseException):  # KeyboardInterrupt
        raise reply
    if reply.get("type") != "Scheduler":
        raise OSError(
            f"no Dask scheduler answered at {address}{f' within {timeout:.0f} s' if waited else ''} "
            f"({reply.get('error', reply)}): {fix}"
        )


def _refused(address: str) -> str | None:
    """ "connection refused: nothing listens there" where that is why ``address`` did not answer
    (Dask's retries end in "no answer" whatever the reason); None otherwise."""
    try:
        socket.create_connection(parse_host_port(address.split("://")[-1]), 5).close()
    except ConnectionRefusedError:
        return "connection refused: nothing listens there"
    except (OSError, ValueError):
        pass
    return None


class QuietWarnings(WorkerPlugin):
    """Python warnings ignored in a worker process, which otherwise prints them to the terminal
    the run was started from (libraries' deprecation notes, e.g. pandas' about Dask's Parquet
    reader): nothing a user of the command can act on. Applied to restarted workers too."""

    name = "curate-quiet-warnings"

    def setup(self, worker):
        """Ignore every Python warning in ``worker``'s process (``warnings.simplefilter("ignore")``)."""
        warnings.simplefilter("ignore")


def _local_cluster(config: ClusterConfig, backend: str, silence_logs: int):
    if backend == "gpu":
        return local_cuda_cluster(config, silence_logs)
    return LocalCluster(
        n_workers=config.n_workers,
        threads_per_worker=config.threads_per_worker,
        memory_limit=config.memory_limit,
        local_directory=config.local_directory,
        dashboard_address=config.dashboard_address,
        silence_logs=silence_logs,
    )


def _close(client: Client | None, cluster) -> None:
    if client is not None:
        client.close()
    cluster.close()
    logger.info("closed %s", type(cluster).__name__)


@contextlib.contextmanager
def _sigint_blocked():
    """SIGINT held back in this thread (and in the threads and processes started meanwhile); delivered after."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows
        yield
        return
    # multiprocessing starts its resource tracker with the first queue (a nanny's, in the
    # cluster's event-loop thread) and then *unblocks* SIGINT in that thread: start it now.
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _sigterm_deferred():
    """A SIGTERM that lands meanwhile is delivered after (main thread only). Raised inside
    ``LocalCluster``'s start it left a cluster half started, whose close at exit printed a
    28-line "AssertionError: Status.closing_gracefully"; after, the cluster is there to stop.
    Not blocked as SIGINT is: worker processes would inherit the mask, and nannies stop them
    with SIGTERM."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    landed = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: landed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        if landed:
            signal.raise_signal(signal.SIGTERM)


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored meanwhile (main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def stop_workers(cluster, timeout: float = 1.0) -> None:
    """Stop the workers of an embedded cluster now, running tasks and all (for a run given up).

    A nanny otherwise waits 5 s for its worker's running task before killing it; here it waits
    ``timeout`` seconds (the worker is killed after ``0.8 * timeout``). Closing the nannies
    first keeps them from restarting their workers.
    """

    async def close(workers):
        await asyncio.gather(
            *(w.close(timeout=timeout, reason="curate-stopped") for w in workers), return_exceptions=True
        )

    with contextlib.suppress(Exception):  # the cluster is closed next in any case
        cluster.sync(close, list(cluster.workers.values()))


def _workers(client: Client) -> str:
    workers = client.scheduler_info(n_workers=-1)["workers"].values()
    threads = sum(w["nthreads"] for w in workers)
    limits = {format_bytes(w["memory_limit"]) if w["memory_limit"] else "none" for w in workers}
    scratch = {w.get("local_directory", "?") for w in workers}
    return (
        f"{len(workers)} worker(s), {threads} thread(s) in all, memory limit {' / '.join(sorted(limits)) or 'none'} "
        f"per worker, scratch {', '.join(sorted(scratch))}"
    )


# Fewer open files than a cluster takes: under `ulimit -n 24` the workers failed to start
# ("Too many open files", seen only under -v) and the advice was to run the command again.
FEW_FILES = 256


def _few_files() -> str:
    """Where the open-file limit is under :data:`FEW_FILES`, words saying it may be why workers
    failed to start (``""`` otherwise)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= FEW_FILES:
        return ""
    return f"; the open-file limit is {soft} (ulimit -n), which the workers may have passed: raise it (ulimit -n 1024)"


def _dashboard_moved(client: Client, address: str | None) -> None:
    """A warning where the dashboard asked for at ``address`` (``--dashboard-address``) serves
    on another port, its own being taken (another run's): it moved without a word, its link
    logged only under -v."""
    if address is None or importlib.util.find_spec("bokeh") is None:
        return
    asked = address.rpartition(":")[2]
    try:
        link = client.dashboard_link
    except KeyError:
        return
    port = link.split("://", 1)[-1].split("/", 1)[0].rpartition(":")[2]
    if asked not in ("", "0") and port != asked:
        logger.warning("--dashboard-address %s: that port is taken; the dashboard is at %s", address, link)


def _dashboard(client: Client, address: str | None = "joined") -> str:
    """Where the dashboard is: the scheduler always serves HTTP (health, metrics), but the
    dashboard itself only with an address and bokeh installed."""
    if address is None:
        return "off (--dashboard-address :8787 starts one; it needs bokeh)"
    if address != "joined" and importlib.util.find_spec("bokeh") is None:
        return "off: it needs bokeh (pip install bokeh)"
    try:
        return client.dashboard_link
    except KeyError:  # a joined scheduler without one
        return "off"


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
    """Dask settings for the embedded workers: Arrow on the C allocator, backed by huge pages, and
    P2P shuffle buffers that fit their memory limit.

    Pyarrow's default allocator (mimalloc in pyarrow 26) keeps the memory a stage freed for
    later allocations, so a worker's resident size only grows from stage to stage: on enron_spam
    the verification stage's workers stood at 0.94–1.11 GB against 0.73–0.78 GB with ``glibc`` malloc, which
    the nanny's ``MALLOC_TRIM_THRESHOLD_`` makes give freed memory back (docs/benchmarks.md).
    ``ARROW_DEFAULT_MEMORY_POOL`` is read when pyarrow is imported, so it goes into the worker
    processes' environment (``distributed.nanny.pre-spawn-environ``) before they start.

    Memory given back is memory the next buffer takes afresh, one 4 KiB page fault at a time (a
    partition's texts are copied whole by each Arrow conversion, shuffle and sort): on a 1.1 GB
    corpus of books the workers took 15 million faults, 50 s of system time in 90 s. So glibc's
    malloc asks for transparent huge pages (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``, glibc
    2.35 and later; older ones and other C libraries ignore it, as does a kernel whose huge pages
    are off): 2.5 million faults, 27 s, the run 1.25x faster at the same peak memory
    (docs/benchmarks.md). A ``GLIBC_TUNABLES`` the workers would have is kept, the setting added.

    GPU workers get ``NUMBA_CUDA_MEMORY_MANAGER`` there, so that the kernels' arrays come from
    RMM, where cuDF can spill to make room for them, and with cuDF spilling
    ``CUDF_SPILL_DEVICE_LIMIT`` (read when cuDF is imported): dask-cuda's own spilling does not
    see the buffers cuDF spills, so without it ``device_memory_limit`` would not bound the
    tables. (Not LocalCUDACluster's ``env``: dask-cuda 26.x replaces that per worker with
    ``CUDA_VISIBLE_DEVICES`` alone.)

    Distributed lets a worker buffer up to 1 GiB of outgoing P2P shuffle shards
    (``distributed.p2p.comm.buffer``) whatever its memory limit, so a 1 GB worker passed its
    limit while shuffling and was restarted again and again. An eighth of the limit keeps
    the buffer, a partition being read and the worker's own ~0.3 GB inside it.
    """
    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), "ARROW_DEFAULT_MEMORY_POOL": "system"}
    environ["GLIBC_TUNABLES"] = with_huge_pages(environ.get("GLIBC_TUNABLES", os.environ.get("GLIBC_TUNABLES", "")))
    if backend == "gpu":
        environ["NUMBA_CUDA_MEMORY_MANAGER"] = "rmm.allocators.numba"  # CuPy's: local_cuda_cluster_options
        gpu = config.gpu
        if gpu.enable_cudf_spill and gpu.device_memory_limit is not None:
            environ["CUDF_SPILL_DEVICE_LIMIT"] = str(parse_bytes(gpu.device_memory_limit))
    settings = {"distributed.nanny.pre-spawn-environ": environ}
    limit = worker_memory(config, backend)
    if limit is not None:
        settings["distributed.p2p.comm.buffer"] = min(parse_bytes("1 GiB"), limit // 8)
    return settings


def with_huge_pages(tunables: str) -> str:
    """``GLIBC_TUNABLES`` (colon-separated ``name=value``) with malloc on transparent huge pages:
    ``glibc.malloc.hugetlb=1`` added unless ``tunables`` sets it already (see :func:`worker_settings`)."""
    settings = [item for item in str(tunables).split(":") if item]
    if not any(item.split("=")[0] == "glibc.malloc.hugetlb" for item in settings):
        settings.append("glibc.malloc.hugetlb=1")
    return ":".join(settings)


def current_client() -> Client | None:
    """The ``distributed.Client`` that Dask computes with here, or None (a local scheduler).

    Dask's own precedence (:func:`dask.base.get_scheduler`): a scheduler set in ``dask.config``
    (``"sync"``, ``"threads"``, ``"processes"``) wins over the default client, so a run inside
    ``dask.config.set(scheduler="sync")`` computes in this process even where a client exists,
    as ``dask.compute`` would.
    """
    scheduler = dask.config.get("scheduler", None)
    if isinstance(scheduler, Client):
        return scheduler
    if scheduler is not None and scheduler not in ("dask.distributed", "distributed"):
        return None
    return _default_client()


def _default_client() -> Client | None:
    try:
        return get_client()
    except ValueError:  # no client
        return None


def worker_specs(client: Client | None) -> dict[str, dict]:
    """``client``'s workers by address, each ``{"nthreads": int, "memory_limit": int | None}``
    (bytes; None: no limit), as the scheduler knows them now; {} without a client. For
    ``summary.json``: a joined cluster's workers get their threads and limits outside curate
    (``dask worker``), where the run's config holds only the embedded cluster's flags."""
    if client is None:
        return {}
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {
        address: {"nthreads": w["nthreads"], "memory_limit": w.get("memory_limit") or None}
        for address, w in sorted(workers.items())
    }


def partition_slots(workers: dict[str, dict], gpu: bool) -> int:
    """How many partitions the ``workers`` (:func:`worker_specs`) compute at once: all their
    threads, or on the GPU backend one per worker (its GPU takes one task at a time); 1 without
    any."""
    return max(1, len(workers) if gpu else sum(w["nthreads"] for w in workers.values()))


# A thread's room over a partition's bytes: on a corpus of books and 9 rounds of edited copies
# (docs/benchmarks.md, thirty-seventh session) workers of 1 GB peaked at 639-672 MB with
# partitions of 16 MB, 729-762 MB with 32 MB (about 7 times the partition's bytes more), and were
# restarted at 64 MB (95% of the limit) until the run stopped. 24 times keeps such a worker under
# its pause at 80%.
PARTITION_PEAK = 24

# What a document takes in MinHash + LSH a band, whatever its length: its buckets, shuffled and
# grouped. In a user's trial one partition of 493,084 lines (50.6 MB of JSONL) took a worker to
# 2.25 GB, one of 265,000 paragraphs to 1.38 GB: about 4 KB a document at 28 bands over the
# worker at rest, where 24 times the bytes gave 1.2 GB and 1 GB partitions of lines restarted
# their workers; at 476 bands (--num-perm 10000) the Bible verses took workers to 4.2 GB. Twice
# that, as the bytes' 24 keeps a margin: at 143 a band, workers of 1 GB with the input cached
# and the shuffle's buffers beside a partition reached 90-96 % and once were restarted.
BAND_PEAK = 286


def memory_blocksize(
    workers: dict[str, dict], gpu: bool, record_bytes: float | None = None, num_bands: int = 0
) -> int | None:
    """The largest partition (bytes as read) that the ``workers``' (:func:`worker_specs`) host
    memory limits hold: a thread's room (:func:`curate.config.thread_room`) over
    :data:`PARTITION_PEAK` a byte, plus :data:`BAND_PEAK` a band a record where the records' size
    (``record_bytes``, bytes as read; None: not counted) is given; the smallest over the workers,
    at least 4 MB. None without workers, where a worker has no limit, or on the GPU backend
    (device memory bounds its partitions).
    """
    workers = [] if gpu else workers.values()
    if not workers or not all(w["memory_limit"] for w in workers):
        return None
    room = min(thread_room(w["memory_limit"], w["nthreads"]) for w in workers)
    per_byte = PARTITION_PEAK + (BAND_PEAK * num_bands / record_bytes if record_bytes else 0)
    return max(4_000_000, int(room / per_byte))


# What MinHash takes for a document at once, a byte of its text: the window scratch (16, see
# curate.kernels.shingles.window_scratch), its shingle hashes (8) and their 32-bit copy (4);
# verification's shingle sets take 8 a byte beside the same scratch.
DOCUMENT_PEAK = 28


def document_too_large(workers: dict[str, dict], gpu: bool, longest: int | None) -> int | None:
    """Bytes the ``longest`` document (characters, about its bytes) takes in MinHash
    (:data:`DOCUMENT_PEAK` a byte) where that is more than a thread's room
    (:func:`curate.config.thread_room`) on one of the ``workers`` (:func:`worker_specs`), else
    None (also without workers or limits, and on the GPU backend, whose device memory holds it)."""
    workers = [] if gpu or not longest else workers.values()
    if not workers or not all(w["memory_limit"] for w in workers):
        return None
    need = DOCUMENT_PEAK * longest
    room = min(thread_room(w["memory_limit"], w["nthreads"]) for w in workers)
    return need if need > room else None


def shuffles_need_workers() -> bool:
    """True where a graph built now gets P2P shuffles, which run only on a client's workers: a
    client computes (:func:`current_client`) and ``dask.config`` names no other shuffle method."""
    return current_client() is not None and dask.config.get("dataframe.shuffle.method", None) in (None, "p2p")


@contextlib.contextmanager
def local_shuffles():
    """Disk shuffles meanwhile where a client exists but Dask computes without it (a scheduler
    set in ``dask.config``, see :func:`current_client`) and ``dask.config`` names no shuffle
    method: Dask picks P2P whenever a client exists, and P2P needs the client's workers. Without
    any client nothing changes (Dask picks the method when it computes). Usable as a decorator."""
    beside = _default_client() is not None and current_client() is None
    local = beside and dask.config.get("dataframe.shuffle.method", None) is None
    with dask.config.set({"dataframe.shuffle.method": "disk"} if local else {}):
        yield


GPU = "GPU"


def task_resources(key) -> dict[str, int]:
    """The worker resources a task needs where workers declare ``GPU`` (see :func:`one_task_per_gpu`):
    none for a host step (key ``host-…``, :func:`curate.backend.host_step`), one GPU for any other task.

    Every task that is not named a host step holds the GPU, Dask's own (shuffles, concatenations,
    conversions) included: they may run on cudf partitions; but not a task shuffle's ``split-…``
    tasks, which take a piece out of a dict and compute nothing. Dask names a task fused from a
    chain of partition-wise steps after its first step, so a host step fused with device steps
    after it would take them along: host steps are never fused
    (:func:`curate.dask_fixes.apply_host_steps_unfused`; ``tests/test_gpu_config.py`` checks
    that every ``host-`` task is a single host step).
    """
    name = str(key[0] if isinstance(key, tuple) else key)
    if name.startswith(HOST_STEP) or _shuffle_piece(key, name):
        return {}
    return {GPU: 1}


def _shuffle_piece(key, name: str) -> bool:
    # Dask's task shuffle: a `group-…` task splits a partition into a dict of pieces, one per
    # output partition, and a `split-…` task per piece takes it out of the dict
    # (operator.getitem, key (name, output, input)): nothing reaches the device. Holding the GPU,
    # each waited for its turn and a scheduler round trip: a shuffle of n partitions has n² of
    # them: 8,521 of the 16,861 tasks of a 20-partition run (docs/benchmarks.md).
    return isinstance(key, tuple) and len(key) == 3 and name.startswith("split-")


@contextlib.contextmanager
def one_task_per_gpu(frame=None):
    """Meanwhile, where the run's partitions are cudf and the client Dask computes with has
    workers that declare a ``GPU`` resource (the embedded ``LocalCUDACluster``;
    ``dask cuda worker --resources GPU=1``), every task it runs needs :func:`task_resources`:
    one GPU task at a time per worker, while host steps run on the worker's other threads. This
    is the Dask GPU page's advice (worker resources, ``dask.annotate``) for workers with more
    threads than GPUs. Elsewhere nothing changes: a run of pandas partitions on such workers
    keeps all their threads. Usable as a decorator.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame, optional
        The collection to be computed: its partition type says whether the run is on the
        device. Default: ``dask.config``'s ``dataframe.backend`` (``cudf``), as
        :func:`curate.pipeline.dedup` reads its input.

    The annotation is read when a graph is submitted (``Client.compute``/``persist``), so it
    covers the stages' graphs although Dask DataFrame ignores annotations while it builds one
    (and says so once: that warning is silenced here).
    """
    client = current_client() if _runs_on_device(frame) else None
    workers = client.scheduler_info(n_workers=-1)["workers"].values() if client is not None else ()
    if not any(GPU in (worker.get("resources") or {}) for worker in workers):
        yield
        return
    with warnings.catch_warnings(), dask.annotate(resources=task_resources):
        warnings.filterwarnings("ignore", "Dask annotations .* detected", UserWarning)
        yield


def _runs_on_device(frame) -> bool:
    return dask.config.get("dataframe.backend") == "cudf" if frame is None else on_device(frame._meta)


class ClusterError(RuntimeError):
    """The cluster cannot finish the run: workers keep dying, or nothing progresses."""


def _cluster_state(dask_scheduler) -> dict:
    now = time.time()  # distributed's clock for last_seen
    workers = {
        address: {
            "paused": ws.status.name == "paused",
            "cpu": ws.metrics.get("cpu", 0.0),  # as of its last heartbeat
            "executing": len(ws.executing),  # tasks running in its threads, as of that heartbeat
            "silent": now - ws.last_seen,  # seconds since that heartbeat
            "memory": ws.memory.process,
            "limit": ws.memory_limit,
        }
        for address, ws in dask_scheduler.workers.items()
    }
    return {"transitions": dask_scheduler.transition_counter, "workers": workers}


def gather(
    client: Client,
    collections: list,
    *,
    stall_timeout: float = 300,
    show_progress: bool = False,
    hint: str = "",
    stage: str = "",
) -> list:
    """Compute ``collections`` on ``client`` and return their results; never hang silently.

    Every few seconds the scheduler is asked how the run stands. The run stops with
    :class:`ClusterError` when no task has finished and no worker has reported running a task
    with CPU use for ``stall_timeout`` seconds (e.g. workers paused at their memory limit, holding data that
    the others wait for, or a worker that stopped answering: a frozen process or a lost node
    is not computing, whatever its last heartbeat said), or when workers died more than twice
    as many times as there are workers (the nanny restarts a worker that passes 95% of its
    memory limit). ``hint`` (which flags to change) ends the message.

    Parameters
    ----------
    client : distributed.Client
    collections : list of dask collections
    stall_timeout : float, default=300
        Seconds without progress before giving up; 0 waits for ever.
    show_progress : bool, default=False
        Draw Dask's progress bar on the terminal meanwhile.
    hint : str, default=""
    stage : str, default=""
        The stage computed, named where workers died (a task's key names Dask's steps, not curate's).

    Returns
    -------
    list
        The results, in the order of ``collections``.

    Raises
    ------
    ClusterError
        As above, when a task killed its workers (:class:`distributed.KilledWorker`), or when
        a task failed where some worker cannot run this curate (:func:`check_workers`).
    Exception
        What a task raised, otherwise.
    """
    # Workers that joined since the last look are checked before they compute, those that join
    # meanwhile at the watch's looks and after the computation, before its results are taken.
    _roll_call(client, client.run_on_scheduler(_cluster_state)["workers"])
    futures = client.compute(collections)
    bar = threading.Thread(target=progress, args=(futures,), daemon=True)  # it blocks until the end
    if show_progress:
        bar.start()
    try:
        if stall_timeout:
            _watch(client, futures, stall_timeout, hint)
        results = _results(client, futures)
    except KilledWorker as err:
        of = f" of stage {stage}" if stage else ""
        raise ClusterError(f"workers died running a task{of} ({err.task}), most often out of memory; {hint}") from None
    _roll_call(client, client.run_on_scheduler(_cluster_state)["workers"])
    if show_progress:
        bar.join(timeout=2)  # let it draw the finished bar
    return results


class _Roll:
    """The workers of a client's cluster as the run last saw them, and those checked
    (:func:`check_workers`) so far: each is checked once, whichever stage it joins in."""

    def __init__(self):
        self.seen: set[str] = set()
        self.checked: set[str] = set()
        self.warned: set[str] = set()  # those warned of (memory limit, Arrow's pool) if need be
        self.files: list[tuple[str, int, str]] = []  # what every worker must see (check_files)
        self.out: str | None = None
        self.left: list[str] = []  # those that left unasked (lost, or restarted), as seen


def workers_left(client: Client | None) -> list[str]:
    """Addresses of the workers of ``client``'s cluster that left it unasked while its runs
    computed (lost, or restarted past their memory limit: Dask ran their tasks again), in the
    order seen; [] without a client."""
    return list(_ROLL[client].left) if client in _ROLL else []


_ROLL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _roll_call(client: Client, workers) -> int:
    """Compare ``workers`` (the scheduler's, now) with those the run last saw: warn of those
    that left unasked (lost, or restarted by their nanny; not those retired on request) and
    check those not checked yet, before their results are taken. Returns how many left unasked.

    Raises
    ------
    ClusterError
        Where a worker not checked before cannot run this curate (:func:`check_workers`).
    """
    roll = _ROLL.setdefault(client, _Roll())
    gone = sorted(roll.seen - set(workers))  # a restarted worker comes back under a new address
    # A worker retired on request (an adaptive cluster's scale-down) lost no work: neither a
    # warning nor a death, or scaling up and down stopped a long run as "workers died".
    retired = set(client.run_on_scheduler(_retired, addresses=gone)) if gone else set()
    if left := [address for address in gone if address not in retired]:
        logger.warning(
            "%d worker(s) left the cluster (%s): restarted past 95%% of their memory limit, or lost; "
            "Dask runs their tasks again",
            len(left),
            first_few(left, sep=", "),
        )
    roll.seen, roll.left = set(workers), roll.left + left
    if new := sorted(set(workers) - roll.checked):
        try:
            check_workers(client, new)
        except ClusterError as err:
            raise ClusterError(f"{err}; finished stages are kept for --resume") from None
    return len(left)


def _retired(dask_scheduler, addresses: list[str]) -> list[str]:
    """Those of ``addresses`` (workers no longer in the cluster) that the scheduler retired on
    request (``retire_workers``, as an adaptive cluster's scale-down does): their last removal
    event says ``expected``; a lost or restarted worker's does not. Read from the ``all`` topic,
    which keeps them (a worker's own topic is dropped an hour after it leaves)."""
    expected = {
        msg["worker"]: bool(msg.get("expected"))
        for _, msg in dask_scheduler.get_events("all")
        if isinstance(msg, dict) and msg.get("action") == "remove-worker" and msg.get("worker") in addresses
    }
    return [address for address in addresses if expected.get(address)]


def _results(client: Client, futures) -> list:
    """``client.gather(futures)``; where a task failed and some worker cannot run this curate,
    :class:`ClusterError` naming it in place of the task's error. Such a worker, joined since
    the last check (every 5 s), may fail a task first with an error that does not say why
    (ModuleNotFoundError: curate)."""
    try:
        return client.gather(futures)
    except KilledWorker:
        raise
    except Exception:
        if client.status != "running":  # the scheduler is lost: no worker can be asked
            raise
        try:  # briefly: a frozen worker would hold the task's error back
            lacking = _lacking_curate(run_on_workers(client, _worker_setup, timeout=5))
        except Exception:  # the workers cannot be asked: the task's error stands
            lacking = None
        if lacking:
            raise ClusterError(f"{lacking}; finished stages are kept for --resume") from None
        raise


def _watch(client: Client, futures, stall_timeout: float, hint: str) -> None:
    last, since, deaths, most = None, time.monotonic(), 0, 1
    while True:
        try:
            wait(futures, timeout=min(5.0, stall_timeout))
            return
        except TimeoutError:
            pass
        state = client.run_on_scheduler(_cluster_state)
        workers = state["workers"]
        deaths += _roll_call(client, workers)
        most = max(most, len(workers))
        if deaths > 2 * most:
            raise ClusterError(
                f"workers died {deaths} times (a worker is restarted when it passes 95% of its memory limit); {hint}"
            )
        now = time.monotonic()
        if state["transitions"] != last:
            last, since = state["transitions"], now
        # When a worker last reported computing: running a task and using CPU. A worker that
        # stopped sending heartbeats keeps the CPU use of its last one for ever; one paused at its
        # memory limit runs no task but uses CPU now and then (collecting garbage, spilling): a
        # stall on such workers outlived --stall-timeout of 300 s by minutes, or for ever.
        since = max([since] + [now - w["silent"] for w in workers.values() if w["cpu"] > 10 and w["executing"]])
        if now - since > stall_timeout:
            paused = [
                f"{address} ({format_bytes(w['memory'])} of {format_bytes(w['limit'] or 0)})"
                for address, w in workers.items()
                if w["paused"]
            ]
            if not workers:  # nothing to do with memory: the hint would mislead
                raise ClusterError(
                    f"no progress for {stall_timeout:.0f} s: no worker is connected to the scheduler; "
                    "start workers (`dask worker` or `dask cuda worker` with its address or file), "
                    "then run the same command with --resume: finished stages are kept"
                )
            silent = [
                f"{address} ({w['silent']:.0f} s)" for address, w in workers.items() if w["silent"] >= stall_timeout
            ]
            if silent and not paused:  # memory advice would mislead
                raise ClusterError(
                    f"no progress for {stall_timeout:.0f} s: no word from worker(s) {', '.join(silent)} (frozen, or "
                    "their node lost): restart them, then run the same command with --resume: finished stages are kept"
                )
            why = f"worker(s) paused at their memory limit: {', '.join(paused)}" if paused else "no worker is computing"
            raise ClusterError(f"no progress for {stall_timeout:.0f} s: {why}; {hint}")


def local_cuda_cluster_options(config: ClusterConfig, gpus: int) -> dict:
    """Keyword arguments for ``dask_cuda.LocalCUDACluster`` (dask-cuda 26.x) from ``config``,
    for a cluster of ``gpus`` workers (one per GPU).

    Sizes are passed as dask-cuda reads them: a string with a ``.`` is a fraction of device
    memory, anything else bytes. With cuDF spilling on, ``device_memory_limit`` also becomes
    each worker's ``CUDF_SPILL_DEVICE_LIMIT``, through :func:`worker_settings`.

    Each worker declares one ``GPU`` resource and has the node's cores shared among the
    workers as threads (unless ``threads_per_worker`` is given): the run then takes the GPU
    one task at a time while its host steps use the other threads (:func:`one_task_per_gpu`).
    """
    gpu: GPUConfig = config.gpu
    options = {
        "CUDA_VISIBLE_DEVICES": gpu.devices,
        "n_workers": config.n_workers,
        "threads_per_worker": config.threads_per_worker or max(1, CPU_COUNT // gpus),
        "resources": {GPU: 1},
        "memory_limit": config.memory_limit,
        "local_directory": config.local_directory,
        "protocol": gpu.protocol,
        "rmm_async": gpu.use_async,
        "rmm_pool_size": _size(gpu.rmm_pool_size),
        "rmm_release_threshold": _size(gpu.rmm_release_threshold),
        "enable_cudf_spill": gpu.enable_cudf_spill,
        # cuDF counts the bytes it spills (summary.json's device_spilled_bytes) at level 1: "very low overhead".
        "cudf_spill_stats": 1 if gpu.enable_cudf_spill else None,
        # CuPy's own pool keeps what it freed where RMM (and cuDF's spilling on demand) cannot
        # see it; numba's arrays go to RMM through the workers' environment (worker_settings).
        "rmm_allocator_external_lib_list": ["cupy"],
    }
    if gpu.device_memory_limit is not None:
        options["device_memory_limit"] = _size(gpu.device_memory_limit)
    # None means "dask-cuda's default" and is left out; the dashboard as on the CPU path.
    return {key: value for key, value in options.items() if value is not None} | {
        "dashboard_address": config.dashboard_address
    }


def local_cuda_cluster(config: ClusterConfig, silence_logs: int = logging.WARNING):
    """A ``dask_cuda.LocalCUDACluster`` built from ``config`` (imported here: the CPU install lacks it).

    ``silence_logs``: the level below which the cluster's logs are dropped (see :func:`connect`).

    Raises
    ------
    ValueError
        If dask-cuda, or distributed-ucxx for ``protocol: ucx``, is not installed.
    """
    try:
        from dask_cuda import LocalCUDACluster
        from dask_cuda.utils import get_n_gpus  # CUDA_VISIBLE_DEVICES' count, else the node's
    except ImportError as err:
        raise ValueError(f"backend 'gpu' needs dask-cuda ({err}): {GPU_INSTALL_HINT}") from None
    if config.gpu.protocol == "ucx":
        _ucx_transport()
    gpus = config.n_workers or (len(config.gpu.devices.split(",")) if config.gpu.devices else get_n_gpus())
    options = local_cuda_cluster_options(config, gpus)
    logger.info("starting LocalCUDACluster(%s)", options)
    return LocalCUDACluster(**options, silence_logs=silence_logs)


def _ucx_transport() -> None:
    """Raise ValueError unless distributed-ucxx, which registers the ``ucx://`` transport, is installed."""
    try:
        import distributed_ucxx  # noqa: F401
    except ImportError:
        raise ValueError(f"protocol 'ucx' needs distributed-ucxx: {GPU_INSTALL_HINT}") from None


def _size(value: str | None):
    if value is None:
        return None
    return float(value) if is_fraction(value) else value
