"""Joining a cluster started from the command line, as under SLURM (see scripts/slurm/)."""

import contextlib
import gzip
import itertools
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import pandas as pd
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster, get_task_stream
from distributed.client import FutureCancelledError
from distributed.comm.core import CommClosedError

from curate.cli import main
from curate.cluster import ClusterError, _lacking_curate, check_files, check_workers, code_fingerprint, connect, gather
from curate.config import ClusterConfig
from tests.conftest import FIXTURES, SHARED

REPO = Path(__file__).resolve().parents[1]
DASK = Path(sys.executable).parent / "dask"


def corpus_slice(tmp_path: Path, n_lines: int = 1500) -> Path:
    """The first ``n_lines`` Reuters records (exact and near duplicates, empty texts), else the fixture."""
    shard = SHARED / "reuters" / "part-00000.jsonl.gz"
    if not shard.exists():
        return FIXTURES / "docs.jsonl"
    path = tmp_path / "reuters-slice.jsonl"
    with gzip.open(shard, "rt", encoding="utf-8") as src:
        path.write_text("".join(itertools.islice(src, n_lines)), encoding="utf-8")
    return path


def _start(args: list[str], log: Path) -> subprocess.Popen:
    # A session of its own, so that stopping it also stops the worker process a nanny spawns.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        args,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env=env,
        cwd=REPO,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def cli_cluster(tmp_path: Path, n_workers: int = 2):
    """``dask scheduler --scheduler-file F`` and ``n_workers`` ``dask worker --scheduler-file F``
    processes; yields ``F`` once every worker has joined, and stops them all on exit."""
    scheduler_file = tmp_path / "scheduler.json"
    procs = [
        _start(
            [
                str(DASK),
                "scheduler",
                "--scheduler-file",
                str(scheduler_file),
                "--port",
                "0",
                "--no-dashboard",
            ],
            tmp_path / "scheduler.log",
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists():
            if procs[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"scheduler did not start: {(tmp_path / 'scheduler.log').read_text()}")
            time.sleep(0.2)
        for i in range(n_workers):
            args = [
                "worker",
                "--scheduler-file",
                str(scheduler_file),
                "--nworkers",
                "1",
                "--nthreads",
                "1",
                "--no-dashboard",
                "--memory-limit",
                "2GB",
                "--local-directory",
                str(tmp_path / f"worker-{i}"),
            ]
            procs.append(_start([str(DASK), *args], tmp_path / f"worker-{i}.log"))
        if n_workers:
            with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
                client.wait_for_workers(n_workers, timeout=120)
        yield scheduler_file
    finally:
        for proc in reversed(procs):
            _stop(proc)


def dedup_joining(tmp_path: Path, *flags: str, connect_timeout: str = "30s") -> subprocess.CompletedProcess:
    """``curate dedup`` of the fixture into ``tmp_path/o`` in a new interpreter, joining a cluster
    by ``flags``, with Dask's connect timeout set."""
    command = [sys.executable, "-m", "curate", "dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "o")]
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": connect_timeout}
    return subprocess.run([*command, *flags], capture_output=True, text=True, env=env, timeout=120)


def test_a_scheduler_file_that_never_appears_stops_the_run_naming_it(tmp_path):
    # distributed's Client waits for ever for the file (a user's typo hung silently for 11 min).
    missing = tmp_path / "no-such-scheduler.json"
    run = dedup_joining(tmp_path, "--scheduler-file", str(missing), connect_timeout="1s")
    assert run.returncode == 1, run.stderr
    assert (
        f"no scheduler file {missing} after 1 s: start the scheduler with `dask scheduler --scheduler-file"
        in run.stderr
    )


@pytest.mark.parametrize(
    ("content", "why"),
    [("", "not JSON: Expecting value: line 1 column 1 (char 0)"), ('{"type": "Scheduler"}', "no address in it"),
     ("2026-12-03 worker log\n", "not JSON: Extra data: line 1 column 5 (char 4)"), (None, "a folder")],
)  # fmt: skip
def test_a_file_that_is_no_scheduler_file_is_named(tmp_path, content, why):
    # json's own words (or a KeyError traceback) named no file: an empty file, a worker's log.
    given = tmp_path / "scheduler.json"
    given.mkdir() if content is None else given.write_text(content)
    run = dedup_joining(tmp_path, "--scheduler-file", str(given), connect_timeout="1s")
    assert run.returncode == 1, run.stderr
    assert run.stderr.splitlines()[-1] == (
        f"Error: {given} is not a Dask scheduler file ({why}): name the file that "
        "`dask scheduler --scheduler-file FILE` writes"
    )


def test_an_address_where_no_scheduler_answers_stops_the_run_naming_it(tmp_path):
    # A port that accepts connections and never answers (a user gave the dashboard's): the
    # Client waited for ever, whatever its timeout (12 silent minutes, then a Ctrl-C).
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        run = dedup_joining(tmp_path, "--scheduler-address", address, connect_timeout="1s")
    assert run.returncode == 1, run.stderr
    assert f"no Dask scheduler answered at {address} within 1 s (no answer): give the address of the" in run.stderr
    assert not (tmp_path / "o").exists()  # an empty output folder was left behind


def test_an_address_where_another_server_answers_stops_the_run_naming_it(tmp_path):
    # An HTTP server (a dashboard, a proxy) answering the probe's bytes: its reply, read as a
    # message length, made distributed allocate 3.07 EiB: a MemoryError traceback.
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"

        def answer():
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = server.accept()
                    conn.recv(1024)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 64)

        threading.Thread(target=answer, daemon=True).start()
        run = dedup_joining(tmp_path, "--scheduler-address", address, connect_timeout="5s")
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    # It said "within 5 s" of an answer that came at once, and named the MemoryError.
    assert (
        f"Error: no Dask scheduler answered at {address} (something answered, not as a Dask scheduler: a web "
        "server or a proxy?)" in run.stderr
    )


def test_an_address_where_nothing_listens_is_named_so(tmp_path):
    # A refused connection was said as "(no answer)", as a silent port is.
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"  # free once closed
    run = dedup_joining(tmp_path, "--scheduler-address", address, connect_timeout="1s")
    assert run.returncode == 1, run.stderr
    assert (
        f"no Dask scheduler answered at {address} within 1 s (connection refused: nothing listens there): "
        "give the address of the" in run.stderr
    )


def test_a_scheduler_file_left_by_a_stopped_scheduler_is_named_at_once(tmp_path):
    # The run waited Dask's whole connect timeout, then told to give the scheduler's address.
    with cli_cluster(tmp_path, n_workers=0) as scheduler_file:
        written = scheduler_file.read_text()
    scheduler_file.write_text(written)  # as a killed scheduler (a lost node) leaves it
    address = json.loads(written)["address"]
    start = time.monotonic()
    run = dedup_joining(tmp_path, "--scheduler-file", str(scheduler_file), connect_timeout="60s")
    assert run.returncode == 1 and time.monotonic() - start < 30, run.stderr
    assert run.stderr.endswith(
        f"Error: nothing listens at {address}, which {scheduler_file} names: the scheduler that wrote "
        f"{scheduler_file} has stopped: start it again (it writes the file anew)\n"
    )


def test_scheduler_addresses_distributed_cannot_use_are_refused_naming_the_flag(tmp_path):
    # Each was distributed's words without the flag, a traceback, or a 30 s wait.
    good = ["h:1", "tcp://127.0.0.1:8786", "[::1]:8786", "tls://10.0.0.5:8786", "ucx://node-01.cluster:1"]
    bad = ["foo", "tcp://host", "h:0", "h:65536", "http://h:1", "tcp://tcp://h:1", "://h:1", "::1:1", "[:1"]
    bad += ["tcp://h:１２", "a:b:1", " h:1", "tcp://user@h:1"]
    assert [a for a in good if _refused(a)] == [] and [a for a in bad if not _refused(a)] == []
    for address, message in [
        ("ucx://127.0.0.1:1", "Error: protocol 'ucx' needs distributed-ucxx: "),
        ("tls://127.0.0.1:1", "): a tls:// scheduler needs the client's certificates in Dask's configuration"),
    ]:
        run = dedup_joining(tmp_path, "--scheduler-address", address, connect_timeout="2s")
        assert run.returncode == 1 and message in run.stderr and "Traceback" not in run.stderr, run.stderr


def _refused(address: str) -> bool:
    try:
        ClusterConfig(scheduler_address=address)
    except ValueError as err:
        return f"{address!r} is not an address: give [PROTOCOL://]HOST:PORT" in str(err)
    return False


def test_a_scheduler_without_workers_is_named_not_memory(tmp_path):
    # The stall message blamed memory ("raise the workers' memory limit") and said nothing until
    # then; later the wait was the first stage's time, and the stall named no stage to resume.
    with cli_cluster(tmp_path, n_workers=0) as scheduler_file:
        run = dedup_joining(tmp_path, "--scheduler-file", str(scheduler_file), "--stall-timeout", "3", "--no-progress")
    assert run.returncode == 75, run.stderr  # the cluster's, not the input's: run again once workers joined
    assert "has no worker yet; waiting up to 3 s (--stall-timeout) for one" in run.stderr
    assert re.search(
        r"Error: no worker joined the scheduler at tcp://\S+ in 3 s \(--stall-timeout\): start workers", run.stderr
    )
    assert "memory" not in run.stderr and not (tmp_path / "o" / "_stages").exists()  # before any stage


def test_a_lost_scheduler_is_one_line_naming_it_and_resume(tmp_path):
    # A killed scheduler gave Dask's reconnect tracebacks (distributed.client's own log level),
    # then "Error: Timed out trying to connect to tcp://...".
    with cli_cluster(tmp_path, n_workers=0) as scheduler_file:
        log = tmp_path / "curate.log"
        command = [sys.executable, "-m", "curate", "dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "o")]
        env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
        with log.open("wb") as stderr:
            run = subprocess.Popen(
                [*command, "--scheduler-file", str(scheduler_file), "--no-progress"], stderr=stderr, env=env
            )
            deadline = time.monotonic() + 60
            while "for one" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.2)
            address = scheduler_file.read_text()
    rc = run.wait(timeout=60)  # the scheduler is stopped
    text = log.read_text()
    assert rc == 75, text  # the cluster's: start it again, then --resume
    assert "Error: lost the scheduler at tcp://" in text and "run the same command with --resume" in text
    assert "Traceback" not in text and "ERROR" not in text and text.split("tcp://")[1][:5] in address


def test_a_scheduler_lost_before_the_client_notices_is_named_not_a_connection_error(tmp_path):
    # The run's own calls to the scheduler (its looks at the workers, at each stage's edges and
    # every 5 s) raised distributed's CommClosedError when the scheduler stopped just before one,
    # ahead of the client's own notice: a traceback in place of "lost the scheduler".
    with cli_cluster(tmp_path, n_workers=1) as scheduler_file:
        config = ClusterConfig(scheduler_file=str(scheduler_file))
        with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
            with pytest.raises(OSError, match="disk full"), connect(config) as client:
                # The run's own error stands, even where the scheduler is too busy to answer in time.
                scheduler_pid = client.run_on_scheduler(os.getpid)
                os.kill(scheduler_pid, signal.SIGSTOP)
                resume = threading.Timer(4, os.kill, (scheduler_pid, signal.SIGCONT))
                resume.start()
                raise OSError("disk full")
            resume.join()
            with (
                pytest.raises(ClusterError, match=r"lost the scheduler at tcp://.*--resume"),
                connect(config) as client,
            ):
                scheduler_pid = client.run_on_scheduler(os.getpid)
                client.loop.add_callback(time.sleep, 3)  # the client notices nothing meanwhile
                os.kill(scheduler_pid, signal.SIGKILL)
                raise CommClosedError("in <TCP (closed) ConnectionPool.run_function local=tcp://... remote=...>")


def test_a_lost_scheduler_mid_gather_keeps_dasks_error(tmp_path):
    # After a task's error the run asks the workers whether one lacks curate: with the scheduler
    # gone that question's own OSError ("Timed out trying to connect") replaced Dask's error.
    with cli_cluster(tmp_path, n_workers=1) as scheduler_file:
        with (
            dask.config.set({"distributed.comm.timeouts.connect": "2s"}),
            Client(scheduler_file=str(scheduler_file)) as client,
        ):
            scheduler_pid = client.run_on_scheduler(os.getpid)
            with pytest.raises(FutureCancelledError, match="scheduler-connection-lost"):
                # killed by the task, once the computation runs (a timer raced the run's own calls)
                gather(client, [dask.delayed(os.kill)(scheduler_pid, signal.SIGKILL)], stall_timeout=0)


def test_workers_without_curate_or_with_other_code_are_refused():
    # A worker without curate (or with an older one) crashed the run with a traceback
    # (ModuleNotFoundError; "_worker_spilled() got multiple values for argument").
    for worker_change, why in [(_forget_curate, "cannot run it"), (_other_code, "runs other code")]:
        env = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
        with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None, env=env) as cluster:
            with Client(cluster) as client:
                check_workers(client)  # the same code: nothing to say
                client.run(worker_change)
                with pytest.raises(
                    ClusterError,
                    match=rf"1 of 1 workers \(tcp://.*\) lack the curate this command runs .*: the first {why}",
                ):
                    check_workers(client)


def test_a_task_failed_by_a_worker_without_curate_names_the_worker():
    # A worker without curate that joined after the last check (they run every 5 s) failed its
    # first task: the run stopped with that task's ModuleNotFoundError, not the refusal naming it.
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            client.run(_forget_curate)
            with pytest.raises(
                ClusterError,
                match=r"^1 of 1 workers \(tcp://\S+\) lack the curate .*: the first cannot run it \(.*ModuleNotFoundError"
                r".*; finished stages are kept for --resume$",
            ):
                gather(client, [dask.delayed(_fingerprint)()], stall_timeout=0)
            client.restart()  # the worker has curate again: a task's own error is the task's
            with pytest.raises(ZeroDivisionError):
                gather(client, [dask.delayed(_divide)(1, 0)], stall_timeout=0)


def _fingerprint():
    # A task of this module (its function unpickles on the worker) that imports curate as it runs.
    from curate.cluster import code_fingerprint

    return code_fingerprint()


def _divide(a, b):
    return a / b


def test_a_worker_gone_while_it_is_checked_is_not_refused():
    # A worker killed while the run asked it answered with CommClosedError, which the check took
    # for a worker that cannot run curate: the run stopped, blaming it.
    ours = (None, code_fingerprint())
    gone = CommClosedError("in <TCP (closed) Scheduler Broadcast>: Stream is closed")
    assert _lacking_curate({"tcp://a:1": ours, "tcp://b:2": gone}) is None
    lacking = _lacking_curate({"tcp://a:1": ours, "tcp://b:2": gone, "tcp://c:3": ModuleNotFoundError("curate")})
    assert lacking.startswith("1 of 3 workers (tcp://c:3) lack the curate")


def _other_code():
    import curate.cluster

    curate.cluster.code_fingerprint = lambda: "another checkout"


def _forget_curate():
    # The worker imported curate to unpickle this function; a worker without it fails as this does.
    import sys as worker_sys

    for name in [n for n in worker_sys.modules if n == "curate" or n.startswith("curate.")]:
        del worker_sys.modules[name]
    worker_sys.meta_path.insert(0, _NoCurate())


class _NoCurate:
    def find_spec(self, name, path=None, target=None):
        if name == "curate" or name.startswith("curate."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_a_worker_that_sees_other_files_is_refused(tmp_path):
    # A node with its own copy of an input (other size or time) read it as its own: exit 0 and
    # a wrong result, or "ids appear more than once" naming no place. An input only the client
    # saw, or an output folder a node could not write, stopped the run with a bare OSError.
    from curate.checkpoints import input_fingerprint
    from curate.cluster import check_files
    from curate.config import load_config
    from curate.pipeline import dedup

    data = tmp_path / "in.jsonl"
    data.write_bytes((FIXTURES / "docs.jsonl").read_bytes())
    env = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None, env=env) as cluster:
        with Client(cluster) as client:
            files = input_fingerprint([str(data)])
            check_files(client, files, tmp_path)  # the same view: nothing to say
            refused = r"^1 of 1 workers \(tcp://\S+\) do not see the files as this process does: the first "
            shared = "; every worker must see the input files and the output folder at the same paths"
            with pytest.raises(ClusterError, match=refused + rf"cannot see input file {tmp_path}/gone\.jsonl "):
                check_files(client, [(str(tmp_path / "gone.jsonl"), 1, "0")], tmp_path)
            with pytest.raises(ClusterError, match=refused + rf"cannot write to the output folder {tmp_path}/no "):
                check_files(client, files, tmp_path / "no")
            client.run(_stale_copy, str(data))
            size = f"{data.stat().st_size:,}"
            with pytest.raises(
                ClusterError,
                match=refused + rf"sees another input file {data}: 1 bytes, modified \S+ there; {size} bytes, "
                rf"modified \S+ here{shared}",
            ):
                dedup([str(data)], str(tmp_path / "out"), load_config(None, {}))  # the run, on this client
            assert not (tmp_path / "out" / "_stages").exists()  # refused before the stages' folder is made


def _stale_copy(path: str):
    # This worker's view of ``path``: a file of 1 byte (a node's own stale copy).
    import fsspec.implementations.local

    info = fsspec.implementations.local.LocalFileSystem.info

    def stale(self, name, **kwargs):
        found = info(self, name, **kwargs)
        return {**found, "size": 1} if str(name) == path else found

    fsspec.implementations.local.LocalFileSystem.info = stale


def test_workers_without_the_system_arrow_pool_are_named(monkeypatch, caplog):
    # The docs ask joined workers for ARROW_DEFAULT_MEMORY_POOL=system: nothing checked it, then
    # the check read the client's environment (os.environ.get travelled pickled with it).
    def warnings_with(client_pool: str | None, worker_pool: str) -> str:
        if client_pool is None:
            monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
        else:
            monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", client_pool)
        env = {"ARROW_DEFAULT_MEMORY_POOL": worker_pool}
        with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None, env=env) as cluster:
            with Client(cluster) as client, caplog.at_level(logging.WARNING, logger="curate.cluster"):
                caplog.clear()
                check_workers(client)
                return caplog.text

    text = warnings_with("system", "mimalloc")
    assert "1 of 1 workers (tcp://" in text and "lack ARROW_DEFAULT_MEMORY_POOL=system" in text
    assert warnings_with(None, "system") == ""


def test_each_worker_is_warned_of_once_counted_among_all(tmp_path, caplog):
    # The run checks the workers when it joins and again once it knows its files: each warning
    # was printed twice; a worker that joined later was "1 of 1 workers" among two.
    with LocalCluster(
        n_workers=1, threads_per_worker=1, dashboard_address=None, env={"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}
    ) as cluster:
        with Client(cluster) as client, caplog.at_level(logging.WARNING, logger="curate.cluster"):
            caplog.clear()
            check_workers(client)
            check_files(client, [], tmp_path)
            assert caplog.text.count("lack ARROW_DEFAULT_MEMORY_POOL=system") == 1, caplog.text
            assert "1 of 1 workers (tcp://" in caplog.text
            first = set(client.scheduler_info()["workers"])
            cluster.scale(2)
            client.wait_for_workers(2)
            caplog.clear()
            check_workers(client, sorted(set(client.scheduler_info()["workers"]) - first))
            assert caplog.text.count("lack ARROW_DEFAULT_MEMORY_POOL=system") == 1, caplog.text
            assert "1 of 2 workers (tcp://" in caplog.text


def test_joined_workers_with_too_little_memory_are_named(caplog):
    # curate dedup refuses --memory-limit under 512MB for its own workers; joined ones were not
    # looked at, and the run stalled for --stall-timeout, then blamed --blocksize.
    env = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
    for limit, said in [("450MB", True), ("600MB", False)]:
        with LocalCluster(
            n_workers=1, threads_per_worker=1, dashboard_address=None, env=env, memory_limit=limit
        ) as cluster:
            with Client(cluster) as client, caplog.at_level(logging.WARNING, logger="curate.cluster"):
                caplog.clear()
                check_workers(client)
        assert (
            "1 of 1 workers (tcp://" in caplog.text
            and "memory limit under 512 MB (the first has 450 MB)" in caplog.text
        ) == said, caplog.text


def test_scheduler_file_run_matches_embedded_cluster(tmp_path, monkeypatch):
    data = corpus_slice(tmp_path)
    common = ["dedup", str(data), "--output-format", "parquet", "--no-progress"]
    embedded = CliRunner().invoke(
        main,
        [
            *common,
            "-o",
            str(tmp_path / "embedded"),
            "--n-workers",
            "2",
            "--threads-per-worker",
            "1",
        ],
    )
    assert embedded.exit_code == 0, embedded.output
    with cli_cluster(tmp_path) as scheduler_file:
        # -o relative to a folder that is not the workers' (the repository): the workers wrote
        # and read the stages under their own working folder.
        monkeypatch.chdir(tmp_path)
        joined = CliRunner().invoke(
            main,
            [
                *common,
                "-o",
                "joined",
                "--scheduler-file",
                str(scheduler_file),
            ],
        )
        assert joined.exit_code == 0, joined.output
    removed = (tmp_path / "embedded" / "removed.parquet").read_bytes()
    assert (tmp_path / "joined" / "removed.parquet").read_bytes() == removed
    assert (tmp_path / "joined" / "duplicates.parquet").read_bytes() == (
        tmp_path / "embedded" / "duplicates.parquet"
    ).read_bytes()
    frame = pd.read_parquet(tmp_path / "joined" / "removed.parquet")
    texts = pd.read_json(data, lines=True, dtype=False)["text"]
    assert (frame.kind == "exact").sum() == texts.duplicated().sum()  # 124 of the 1500 Reuters records
    if data.name.startswith("reuters"):
        assert (frame.kind == "fuzzy").sum() == 12  # measured on the CPU path, embedded cluster


def test_a_dashboard_address_without_bokeh_is_a_warning(monkeypatch):
    # --dashboard-address was ignored without a word where bokeh is not installed (-v only said so).
    import importlib.util

    from curate.cluster import connect

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *args: None if name == "bokeh" else find_spec(name, *args)
    )
    seen, handler = [], logging.Handler(logging.WARNING)
    handler.emit = seen.append
    logging.getLogger("curate.cluster").addHandler(handler)
    try:
        with connect(ClusterConfig(n_workers=1, threads_per_worker=1, dashboard_address=":0")):
            pass
    finally:
        logging.getLogger("curate.cluster").removeHandler(handler)
    assert [r.getMessage() for r in seen] == [
        "--dashboard-address :0: no dashboard, it needs bokeh (pip install bokeh)"
    ]


def test_a_run_inside_another_clients_block_computes_on_its_own_cluster(client, tmp_path):
    # Inside a `with Client(...)` block (the session's here) that client stayed Dask's current
    # one: the run started its cluster, then ran every task on the other.
    args = ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "out"), "--n-workers", "1", "--no-progress"]
    with get_task_stream(client) as tasks:
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert tasks.data == [] and (tmp_path / "out" / "summary.json").exists()


def test_a_worker_that_ends_as_the_cluster_starts_is_one_error_line(monkeypatch):
    # A worker killed while the embedded cluster started: a 71-line "RuntimeError: Nanny failed
    # to start." traceback with no Error line.
    import curate.cluster

    def failing(*args, **kwargs):
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(curate.cluster, "_local_cluster", failing)
    with pytest.raises(ClusterError) as err, connect(ClusterConfig(n_workers=1)):
        pass
    assert str(err.value) == (
        "the cluster did not start (Nanny failed to start: a worker process failed as it started, killed, out of "
        "memory or by an error of its own, which -v logs); run the same command again"
    )
    # Under `ulimit -n 24` the workers failed for "Too many open files" (seen only under -v), and
    # running the command again failed the same way: a low limit is named.
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (24, 24))
    with pytest.raises(ClusterError) as err, connect(ClusterConfig(n_workers=1)):
        pass
    assert str(err.value) == (
        "the cluster did not start (Nanny failed to start: a worker process failed as it started, killed, out of "
        "memory or by an error of its own, which -v logs); the open-file limit is 24 (ulimit -n), which the "
        "workers may have passed: raise it (ulimit -n 1024); run the same command again"
    )


def test_a_dashboard_moved_off_the_port_asked_for_is_warned_of(monkeypatch, caplog):
    # A second run given --dashboard-address :8787, held by the first, served it on another port
    # and said so only under -v.
    import importlib.util

    import curate.cluster

    class Client:
        dashboard_link = "http://127.0.0.1:40419/status"

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # as if bokeh were installed
    with caplog.at_level("WARNING", logger="curate"):
        curate.cluster._dashboard_moved(Client(), ":8787")
        curate.cluster._dashboard_moved(Client(), "127.0.0.1:40419")  # as asked
        curate.cluster._dashboard_moved(Client(), ":0")  # any port
        curate.cluster._dashboard_moved(Client(), None)  # none asked for
    assert [r.getMessage() for r in caplog.records] == [
        "--dashboard-address :8787: that port is taken; the dashboard is at http://127.0.0.1:40419/status"
    ]


def test_a_sigterm_as_the_cluster_starts_lands_once_it_has():
    # Raised inside LocalCluster's start, a SIGTERM left a cluster half started, whose close at
    # exit printed "Exception ignored in atexit callback ... AssertionError: Status.closing_gracefully".
    import curate.cluster

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop

    old = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(Stop), curate.cluster._sigterm_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)  # (a handler runs between bytecodes: here, had it not been deferred)
            landed_inside = False
        assert landed_inside is False
    finally:
        signal.signal(signal.SIGTERM, old)
    assert signal.getsignal(signal.SIGTERM) is old
