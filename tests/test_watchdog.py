"""A run that cannot finish stops with a message naming what to change; it never hangs silently."""

import logging
import os
import signal
import threading
import time
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster
from distributed.core import Status

import curate.cluster
from curate.cluster import ClusterError, check_workers, gather, with_huge_pages, worker_memory, worker_settings
from curate.config import ClusterConfig
from curate.metrics import spilled_bytes, take_peaks
from curate.runner import Stats


def test_shuffle_buffers_fit_the_memory_limit():
    # Distributed's default lets a worker buffer 1 GiB of P2P shards: a 1 GB worker was
    # restarted again and again while shuffling.
    small = ClusterConfig(n_workers=2, threads_per_worker=1, memory_limit="1GB")
    assert worker_memory(small) == 10**9
    assert worker_settings(small)["distributed.p2p.comm.buffer"] == 125_000_000
    big = ClusterConfig(n_workers=1, memory_limit="64GB")
    assert worker_settings(big)["distributed.p2p.comm.buffer"] == 2**30
    assert "distributed.p2p.comm.buffer" not in worker_settings(ClusterConfig(memory_limit=None))


THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")  # e.g. "always [madvise] never"
HUGE_PAGES = THP.exists() and "[never]" not in THP.read_text()


def test_embedded_workers_take_the_buffer_and_allocator_settings():
    from curate.cluster import connect

    with connect(ClusterConfig(n_workers=1, threads_per_worker=1, memory_limit="1GB")) as client:
        (buffer,) = client.run(lambda: dask.config.get("distributed.p2p.comm.buffer")).values()
        (pool,) = client.run(_arrow_pool_and_trim).values()
        (faults,) = client.run(_faults_writing_fresh_memory, 64 * 2**20).values()
    assert buffer == 125_000_000
    # Arrow allocates with malloc, which gives freed memory back (Dask's trim threshold is kept):
    # with pyarrow's default (mimalloc) the verification stage's workers stood ~40% higher on enron_spam.
    assert pool == ("system", "65536")
    # An Arrow buffer past malloc's mmap threshold is fresh memory, faulted in page by page when
    # first written: 16,384 faults for 64 MiB in 4 KiB pages, 32 in 2 MiB ones. (Not a numpy
    # array: numpy asks for huge pages itself.) Room is left for the kernel falling back to small
    # pages now and then; a kernel with huge pages off gives none.
    if HUGE_PAGES:
        assert faults < 16_384 // 2, faults


def _arrow_pool_and_trim():
    import pyarrow as pa  # in the worker: its pool is chosen when pyarrow is first imported there

    return pa.default_memory_pool().backend_name, os.environ.get("MALLOC_TRIM_THRESHOLD_")


def _faults_writing_fresh_memory(size):
    import resource

    import numpy as np
    import pyarrow as pa

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    np.frombuffer(pa.allocate_buffer(size), dtype=np.uint8).fill(1)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_huge_pages_are_added_to_the_tunables_a_worker_would_have(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert with_huge_pages("") == "glibc.malloc.hugetlb=1"
    assert with_huge_pages("glibc.malloc.arena_max=2") == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    assert with_huge_pages("glibc.malloc.hugetlb=0") == "glibc.malloc.hugetlb=0"  # the user's choice stands

    def environ():
        return worker_settings(ClusterConfig())["distributed.nanny.pre-spawn-environ"]["GLIBC_TUNABLES"]

    assert environ() == "glibc.malloc.hugetlb=1"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")  # the shell's, which the setting would replace
    assert environ() == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    with dask.config.set({"distributed.nanny.pre-spawn-environ.GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}):
        assert environ() == "glibc.malloc.tcache_count=0:glibc.malloc.hugetlb=1"  # Dask's setting wins over the shell's


@pytest.fixture(scope="module")
def lonely():
    """One single-threaded worker process of its own (these tests stall or kill it); a task that
    kills its worker fails at once (the scheduler reads allowed-failures when it starts)."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as c:
            check_workers(c)  # as a run's first stage does: a worker frozen later is not asked again
            yield c


def _idle(seconds):
    time.sleep(seconds)  # holds its thread without computing, like a worker paused at its memory limit
    return seconds


def test_stall_stops_with_the_hint(lonely):
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"no progress for 3 s: no worker is computing; raise it"):
        gather(lonely, [dask.delayed(_idle)(60)], stall_timeout=3, hint="raise it")
    assert time.monotonic() - started < 20
    lonely.restart()


def test_busy_worker_is_not_a_stall(lonely):
    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        return seconds

    assert gather(lonely, [dask.delayed(spin)(12)], stall_timeout=4) == [12]


def _pause_and_spin(seconds, dask_worker):
    # As a worker paused at its memory limit: it starts no task, and uses CPU now and then
    # (collecting garbage, spilling); here in a thread of its own, for `seconds`.
    def spin():
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    dask_worker.memory_manager.memory_pause_fraction = False  # else its memory monitor resumes it
    dask_worker.status = Status.paused  # tells the scheduler too
    threading.Thread(target=spin, daemon=True).start()


def test_a_paused_worker_using_cpu_is_a_stall():
    # A paused worker's CPU use counted as computing: a stall on paused workers outlived
    # --stall-timeout (300 s) by minutes, or for ever, as their garbage collection came round.
    # A cluster of its own: the paused worker is not given back to the others' tests.
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        check_workers(client)
        client.run(_pause_and_spin, 30)
        started = time.monotonic()
        with pytest.raises(
            ClusterError,
            match=r"^no progress for 4 s: worker\(s\) paused at their memory limit: tcp://\S+ \(.+\); raise it$",
        ):
            gather(client, [dask.delayed(_idle)(1, dask_key_name="waiting")], stall_timeout=4, hint="raise it")
        assert time.monotonic() - started < 20


def test_a_frozen_worker_is_a_stall(lonely):
    # A worker that stops answering (SIGSTOP here; a hung node, a lost network) kept the CPU use
    # of its last heartbeat, so the run counted it as computing and waited for ever.
    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    (pid,) = lonely.run(os.getpid).values()
    future = lonely.compute(dask.delayed(spin)(40, dask_key_name="spin"))
    time.sleep(3)  # heartbeats report it computing
    os.kill(pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        with pytest.raises(
            ClusterError,
            match=r"no progress for 4 s: no word from worker\(s\) tcp://\S+ \(\d+ s\) \(frozen, or their node lost\): "
            r"restart them, then run the same command with --resume: finished stages are kept$",
        ):
            gather(lonely, [dask.delayed(_idle)(1, dask_key_name="idle")], stall_timeout=4, hint="raise it")
        assert time.monotonic() - started < 20
    finally:
        os.kill(pid, signal.SIGCONT)
        del future
        lonely.restart()


def test_counts_on_the_workers_leave_out_a_frozen_worker(lonely, monkeypatch):
    # The run's peak-memory count (Client.run on every worker, after each stage) waited for ever
    # on a frozen worker: a stall past --stall-timeout hung instead of stopping.
    (pid,) = lonely.run(os.getpid).values()
    with lonely.as_current():  # the client the counts ask (another test's may be Dask's current one)
        assert list(take_peaks()[0]["workers"]) == list(lonely.scheduler_info()["workers"])
    monkeypatch.setattr(curate.cluster, "ANSWER_TIMEOUT", 2)  # for the frozen worker: a busy machine answers slower
    os.kill(pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        with lonely.as_current():
            assert take_peaks()[0]["workers"] == {} and spilled_bytes() == (0, None)
        with pytest.raises(ClusterError, match=r"a worker of the scheduler at \S+ did not answer within 2 s \(frozen"):
            check_workers(lonely)
        assert time.monotonic() - started < 15
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_failed_stage_is_not_held_back_by_a_frozen_worker(lonely):
    # After a stage's error (a stall naming a frozen worker) the run still counted every
    # worker's peak memory, for a summary a failed run never writes: the frozen worker held the
    # error back by the count's 30 s timeout.
    stats = Stats()
    (pid,) = lonely.run(os.getpid).values()
    try:
        with lonely.as_current(), pytest.raises(ClusterError, match="^stalled$"), stats.timed("minhash"):
            os.kill(pid, signal.SIGSTOP)
            started = time.monotonic()
            raise ClusterError("stalled")
        assert time.monotonic() - started < 10 and "minhash" in stats.seconds
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_worker_that_joins_mid_run_is_checked(monkeypatch):
    # A worker without curate that joined mid-run crashed the run with a traceback at its next
    # count of peaks; one with other code ran tasks. Here the client's code is the other.
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        check_workers(client)  # the first worker, at the start
        monkeypatch.setattr(curate.cluster, "code_fingerprint", lambda: "another checkout")
        threading.Timer(1, cluster.scale, args=(2,)).start()
        started = time.monotonic()
        with pytest.raises(
            ClusterError,  # it said "1 of 1 workers" of the joined ones alone
            match=r"^1 of 2 workers \(tcp://\S+\) lack the curate .*: the first runs other code; .*; finished stages are kept for --resume$",
        ):
            gather(client, [dask.delayed(_idle)(60)], stall_timeout=60)
        assert time.monotonic() - started < 30


def test_a_worker_that_joins_between_stages_is_checked(monkeypatch):
    # Each stage's watch took the workers present at its start as checked, and looked only after
    # 5 s: a worker with other code that joined between stages, or during a short one, computed
    # unchecked (a trial's removed.parquet changed, with no word).
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        check_workers(client)
        assert gather(client, [dask.delayed(_idle)(0.1)], stall_timeout=60) == [0.1]
        monkeypatch.setattr(curate.cluster, "code_fingerprint", lambda: "another checkout")
        cluster.scale(2)
        client.wait_for_workers(2)
        with pytest.raises(ClusterError, match=r"^1 of 2 workers \(tcp://\S+\) lack the curate .*runs other code"):
            gather(client, [dask.delayed(_idle)(0.1)], stall_timeout=60)


def test_progress_is_not_a_stall(lonely):
    # No single task lasts the timeout, but together they outlast it many times.
    steps = [dask.delayed(_idle)(0.5, dask_key_name=f"step-{i}") for i in range(16)]
    assert gather(lonely, steps, stall_timeout=2) == [0.5] * 16


def test_a_worker_restarted_mid_run_is_named(tmp_path, caplog):
    # A worker restarted by its nanny (past 95% of its memory limit) was said nowhere: distributed's
    # own loggers are quiet without -v, and the run only counted the deaths.
    died = tmp_path / "died"
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 3}),  # not lonely's 0 (module scope)
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        (address,) = client.scheduler_info()["workers"]
        with caplog.at_level(logging.WARNING, logger="curate.cluster"):
            assert gather(client, [dask.delayed(_die_once)(str(died), 8)], stall_timeout=60) == [8]
        assert curate.cluster.workers_left(client) == [address]  # summary.json's, where no warning is read
    assert f"1 worker(s) left the cluster ({address}): restarted past 95% of their memory limit" in caplog.text
    assert curate.cluster.workers_left(None) == []


def test_workers_retired_on_request_are_neither_deaths_nor_warned_of(caplog):
    # An adaptive cluster's scale-down (retire_workers) was warned of as workers "restarted past
    # 95% of their memory limit, or lost" and counted as deaths: scaling up and down a few times
    # stopped a long run with "workers died N times". A lost worker still counts.
    with LocalCluster(n_workers=3, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(3)
        first = sorted(client.scheduler_info()["workers"])
        with caplog.at_level(logging.WARNING, logger="curate.cluster"):
            assert curate.cluster._roll_call(client, first) == 0
            # As distributed's Adaptive scales down (a plain LocalCluster.scale closes the worker
            # unretired: its data is lost, and it counts).
            client.retire_workers(names=[cluster.scheduler_info["workers"][first[0]]["name"]], close_workers=True)
            while len(client.scheduler_info()["workers"]) > 2:
                time.sleep(0.1)
            assert curate.cluster._roll_call(client, client.run_on_scheduler(_workers)) == 0
            assert "left the cluster" not in caplog.text
            lost = sorted(client.scheduler_info()["workers"])[0]
            client.run_on_scheduler(_remove, address=lost)  # as the scheduler removes a worker whose comm closed
            assert curate.cluster._roll_call(client, client.run_on_scheduler(_workers)) == 1
            assert curate.cluster.workers_left(client) == [lost]  # not the one retired
        assert f"1 worker(s) left the cluster ({lost}): restarted past 95%" in caplog.text


def _workers(dask_scheduler):
    return list(dask_scheduler.workers)


async def _remove(dask_scheduler, address):
    await dask_scheduler.remove_worker(address, stimulus_id="lost-in-test")


def _die_once(flag, seconds):
    if not os.path.exists(flag):
        open(flag, "w").close()
        os._exit(1)
    return _idle(seconds)  # on the restarted worker: long enough for the run's next look (every 5 s)


def test_a_task_error_beside_a_frozen_worker_comes_at_once():
    # After a task's error the run asks the workers whether one lacks curate (the real cause
    # then): a frozen worker held the error back the 30 s of every call on the workers.
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
        check_workers(client)  # as a run does at its start: both answered then
        pids = client.run(os.getpid)
        healthy, frozen = sorted(pids)
        os.kill(pids[frozen], signal.SIGSTOP)
        try:
            with dask.annotate(workers=[healthy], allow_other_workers=False):
                failing = dask.delayed(_divide)(1, 0)
            started = time.monotonic()
            with pytest.raises(ZeroDivisionError):
                gather(client, [failing], stall_timeout=0)
            assert time.monotonic() - started < 15
        finally:
            os.kill(pids[frozen], signal.SIGCONT)


def _divide(a, b):
    return a / b


def test_dying_workers_stop_the_run(lonely):
    def die():
        os._exit(1)

    # The message named the task's key alone, Dask's steps (operation-sort_index-...), not the stage.
    with pytest.raises(ClusterError, match=r"^workers died running a task of stage verify \(.*\), .*; raise it$"):
        gather(lonely, [dask.delayed(die)()], stall_timeout=30, hint="raise it", stage="verify")
