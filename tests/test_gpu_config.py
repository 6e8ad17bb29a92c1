"""GPU configuration and backend selection: checked without a GPU."""

import gzip
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner
from dask.dataframe.dask_expr._expr import RenameAxis
from dask.system import CPU_COUNT
from dask.utils import no_default
from distributed import Client, LocalCluster, SchedulerPlugin
from pydantic import ValidationError

import curate
import curate.backend
import curate.cluster
import curate.io.read
import curate.metrics
import curate.pipeline
import curate.runner
from curate.backend import host_step
from curate.cli import main
from curate.cluster import local_cuda_cluster_options, one_task_per_gpu, task_resources, worker_settings
from curate.config import load_config
from curate.dedup.representatives import _split
from curate.io.rejected import mark_listed
from curate.metrics import versions
from curate.pipeline import dedup
from tests.conftest import FIXTURES


def gpu(**options):
    return load_config(None, {"cluster": {"gpu": options}}).cluster


def test_defaults_follow_rapids_best_practice():
    cluster = gpu()
    assert cluster.gpu.use_async and cluster.gpu.enable_cudf_spill and cluster.gpu.protocol == "tcp"
    assert local_cuda_cluster_options(cluster, gpus=1) == {
        "threads_per_worker": CPU_COUNT,  # GPU tasks take the one GPU in turn; host steps use the rest
        "resources": {"GPU": 1},
        "memory_limit": "auto",
        "protocol": "tcp",
        "rmm_async": True,
        "enable_cudf_spill": True,
        "cudf_spill_stats": 1,  # the bytes spilled, for summary.json
        "rmm_allocator_external_lib_list": ["cupy"],  # and numba's through the environment
        "dashboard_address": None,
    }
    assert worker_settings(cluster, "gpu")["distributed.nanny.pre-spawn-environ"]["NUMBA_CUDA_MEMORY_MANAGER"] == (
        "rmm.allocators.numba"
    )
    given = load_config(None, {"cluster": {"threads_per_worker": 3}}).cluster
    assert local_cuda_cluster_options(given, gpus=1)["threads_per_worker"] == 3


def test_options_reach_local_cuda_cluster_as_dask_cuda_reads_them():
    cluster = load_config(
        None,
        {
            "cluster": {
                "n_workers": 2,
                "local_directory": "/scratch",
                "gpu": {
                    "devices": [0, 1],
                    "rmm_release_threshold": "30GB",
                    "device_memory_limit": "20GB",
                    "protocol": "ucxx",
                },
            }
        },
    ).cluster
    options = local_cuda_cluster_options(cluster, gpus=2)
    assert options["threads_per_worker"] == max(1, CPU_COUNT // 2) and options["resources"] == {"GPU": 1}
    assert options["CUDA_VISIBLE_DEVICES"] == "0,1" and options["n_workers"] == 2 and options["protocol"] == "ucx"
    assert options["rmm_release_threshold"] == "30GB" and options["local_directory"] == "/scratch"
    # cuDF spilling hides cuDF buffers from dask-cuda's limit, so the limit also goes to cuDF,
    # through the nannies' environment: dask-cuda replaces LocalCUDACluster's env per worker.
    assert options["device_memory_limit"] == "20GB" and "env" not in options
    environ = worker_settings(cluster, "gpu")["distributed.nanny.pre-spawn-environ"]
    assert environ["CUDF_SPILL_DEVICE_LIMIT"] == "20000000000"
    assert "CUDF_SPILL_DEVICE_LIMIT" not in worker_settings(cluster, "cpu")["distributed.nanny.pre-spawn-environ"]
    no_spill = local_cuda_cluster_options(
        gpu(enable_cudf_spill=False, device_memory_limit=0.5, rmm_pool_size="40GB"), gpus=CPU_COUNT + 1
    )
    assert no_spill["threads_per_worker"] == 1  # more GPUs than cores: still one thread each
    assert no_spill["device_memory_limit"] == 0.5 and "env" not in no_spill  # a fraction, as dask-cuda takes it
    assert no_spill["rmm_async"] is False and no_spill["rmm_pool_size"] == "40GB"


class _FakeStatistics:
    """RMM's StatisticsResourceAdaptor as librmm 26.10 counts bytes (statistics_resource_adaptor_impl.hpp):
    allocations change the top counters only; a pop merges them into those below."""

    def __init__(self, upstream):
        self.upstream_mr, self.stack = upstream, [[0, 0]]  # [current, peak] bytes

    def allocate(self, size):
        top = self.stack[-1]
        top[0] += size
        top[1] = max(top)
        return size

    def deallocate(self, pointer, size):
        self.stack[-1][0] -= size

    def push_counters(self):
        self.stack.append([0, 0])
        return types.SimpleNamespace(current_bytes=self.stack[-2][0], peak_bytes=self.stack[-2][1])

    def pop_counters(self):
        if len(self.stack) < 2:
            raise IndexError("fewer than two counters")
        (value, peak), base = self.stack.pop(), self.stack[-1]
        base[1] = max(base[1], base[0] + peak)
        base[0] += value
        return types.SimpleNamespace(current_bytes=value, peak_bytes=peak)


def _rmm_with_one_device(monkeypatch, real: bool):
    """RMM (the real one where installed, without a GPU: a host callback resource below its
    adaptors) or a fake, with the current device resource held in a dict."""
    if real:
        rmm = pytest.importorskip("rmm")
        base = rmm.mr.CallbackMemoryResource(lambda size, stream: 4096, lambda pointer, size, stream: None)
        spill_on_demand = lambda upstream: rmm.mr.FailureCallbackResourceAdaptor(upstream, lambda size: False)  # noqa: E731
    else:
        base = types.SimpleNamespace(allocate=lambda size: size, deallocate=lambda pointer, size: None)
        rmm = types.SimpleNamespace(mr=types.SimpleNamespace(StatisticsResourceAdaptor=_FakeStatistics))
        spill_on_demand = lambda upstream: types.SimpleNamespace(  # noqa: E731
            upstream_mr=upstream, allocate=upstream.allocate, deallocate=upstream.deallocate
        )
    device = {"mr": base}
    monkeypatch.setattr(rmm.mr, "get_current_device_resource", lambda: device["mr"], raising=False)
    monkeypatch.setattr(rmm.mr, "set_current_device_resource", lambda mr: device.update(mr=mr), raising=False)
    monkeypatch.setitem(sys.modules, "rmm", rmm)
    monkeypatch.setattr(curate.metrics, "_counted", None)
    return rmm, device, spill_on_demand


@pytest.mark.parametrize("real", [False, True], ids=["fake-rmm", "rmm"])
def test_device_peaks_count_each_stage_from_what_it_started_with(monkeypatch, real):
    # summary.json had no device memory: "peak device memory reported" is one of the GPU targets.
    rmm, device, spill_on_demand = _rmm_with_one_device(monkeypatch, real)
    take = curate.metrics._take_device_peak
    assert take() == 0  # the first call starts counting
    counting = device["mr"]
    assert isinstance(counting, rmm.mr.StatisticsResourceAdaptor)
    device["mr"] = top = spill_on_demand(counting)  # as cuDF's first spillable buffer does, later
    a, b = top.allocate(100), top.allocate(300)
    top.deallocate(b, 300)
    assert take() == 400
    c = top.allocate(50)
    top.deallocate(a, 100)
    assert take() == 150  # 100 held when the stage began
    assert take() == 50 and device["mr"] is top  # nothing allocated: what is held; no second adaptor
    top.deallocate(c, 50)
    assert take() == 50 and take() == 0
    monkeypatch.delitem(sys.modules, "rmm")
    assert take() is None  # RMM not imported: nothing to count


@pytest.mark.parametrize("real", [False, True], ids=["fake-rmm", "rmm"])
def test_device_peaks_are_taken_on_gpu_runs_only_and_under_cudfs_spilling(monkeypatch, real):
    # Distributed imports RMM in every worker where it is installed: a CPU run on a GPU host
    # wrapped each CPU worker's device resource and reported 0 bytes for each. And cuDF puts
    # its spill-on-demand adaptor on the resource when its first buffer appears, in a task's
    # thread: wrapping it meanwhile from another could lose one of the two.
    rmm, device, spill_on_demand = _rmm_with_one_device(monkeypatch, real)
    base = device["mr"]
    assert curate.metrics._take_worker_peaks(False)[2] is None and device["mr"] is base  # a CPU run's worker
    manager = None

    def get_global_manager():  # as cuDF's, on its first call
        nonlocal manager
        if manager is None:
            manager = "spill manager"
            device["mr"] = spill_on_demand(device["mr"])
        return manager

    spilling = types.SimpleNamespace(get_global_manager=get_global_manager)
    monkeypatch.setitem(sys.modules, "cudf.core.buffer.spill_manager", spilling)
    assert curate.metrics._take_worker_peaks(True)[2] == 0
    counting = device["mr"]  # cuDF's adaptor came first, below the counting one
    assert isinstance(counting, rmm.mr.StatisticsResourceAdaptor) and counting.upstream_mr.upstream_mr is base
    pointer = counting.allocate(64)
    assert curate.metrics._take_worker_peaks(True)[2] == 64 and get_global_manager() and device["mr"] is counting
    counting.deallocate(pointer, 64)


@pytest.mark.parametrize("real", [False, True], ids=["fake-cudf", "cudf"])
def test_device_spilling_is_counted_from_cudfs_statistics(monkeypatch, real):
    # spilled_bytes counted Dask's disk spilling only: what cuDF moved from a GPU to host memory
    # was nowhere, so a run could not show that a device limit made it spill.
    if real:
        spilling = pytest.importorskip("cudf.core.buffer.spill_manager")
        statistics = spilling.SpillStatistics
    else:

        class statistics(types.SimpleNamespace):
            def __init__(self, level):
                super().__init__(level=level, spill_totals={})

            def log_spill(self, src, dst, nbytes, time):
                if self.level >= 1:
                    done = self.spill_totals.get((src, dst), (0, 0.0))
                    self.spill_totals[(src, dst)] = (done[0] + nbytes, done[1] + time)

        spilling = types.SimpleNamespace()
        monkeypatch.setitem(sys.modules, "cudf.core.buffer.spill_manager", spilling)
    manager = types.SimpleNamespace(statistics=statistics(1))
    monkeypatch.setattr(spilling, "get_global_manager", lambda: manager, raising=False)
    assert curate.metrics._device_spilled() == 0
    manager.statistics.log_spill("gpu", "cpu", 300, 0.5)
    manager.statistics.log_spill("cpu", "gpu", 200, 0.5)  # unspilled again: not counted twice
    manager.statistics.log_spill("gpu", "cpu", 100, 0.5)
    assert curate.metrics._device_spilled() == 400
    manager.statistics = statistics(0)  # dask-cuda's default: cuDF counts nothing
    assert curate.metrics._device_spilled() is None
    monkeypatch.setattr(spilling, "get_global_manager", lambda: None)  # cuDF spilling off
    assert curate.metrics._device_spilled() is None
    monkeypatch.delitem(sys.modules, "cudf.core.buffer.spill_manager")
    assert curate.metrics._device_spilled() is None  # no cuDF in this process


def test_a_run_reports_device_peaks_per_stage(joined, tmp_path, monkeypatch):
    # Where workers hold GPUs, summary.json gives each worker's device peak, for the run and per
    # stage, and what cuDF spilled; the command's table shows them (a CPU run's: test_summary_lists_input_files_and_stage_peaks).
    peaks = iter(range(10**9, 10**12, 10**9))  # 1 GB more at each call
    spilled = iter([(5, 10**9), (5, 4 * 10**9)])  # the workers' lifetime counts, at the start and the end
    monkeypatch.setattr(curate.pipeline, "spilled_bytes", lambda gpu: next(spilled))

    def take_peaks(device=False):
        peak = next(peaks)
        return {"client": 1, "workers": {}, "total": 1}, {"workers": {"w0": peak, "w1": 2 * peak}, "total": 3 * peak}

    monkeypatch.setattr(curate.runner, "take_peaks", take_peaks)
    result = CliRunner().invoke(main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "gpu"), *joined])
    summary = json.loads((tmp_path / "gpu" / "summary.json").read_text())
    last = next(peaks) - 10**9
    assert summary["peak_device_bytes"] == {"workers": {"w0": last, "w1": 2 * last}, "total": 3 * last}
    stages = summary["stage_peak_device_bytes"]
    assert set(stages) == set(summary["seconds"]) - {"total"}
    assert all(p["total"] == 3 * p["workers"]["w0"] < 3 * last for p in stages.values())
    assert f"{last // 10**9}.00 GB / {2 * last // 10**9}.00 GB" in result.output
    assert (
        summary["spilled_bytes"] == 0
        and summary["device_spilled_bytes"] == 3 * 10**9
        and "3.00 GB" in result.output.split("spilled from GPUs to host (cuDF)")[1]
    )


def test_a_gpu_run_records_the_versions_of_what_computes_there(monkeypatch):
    # summary.json named pandas and numba only, not the libraries that computed a GPU run.
    for name in ("cudf", "dask_cudf", "dask_cuda", "cupy", "rmm", "numba_cuda"):
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(__version__=f"{name} 1.0"))
    found = versions(gpu=True)
    assert found["cudf"] == "cudf 1.0" and found["numba_cuda"] == "numba_cuda 1.0" and found.keys() > versions().keys()
    assert "cudf" not in versions()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"rmm_pool_size": "10GB", "rmm_async": True},
            "cannot combine an RMM pool with rmm_async",
        ),
        (
            {"rmm_release_threshold": "5GB", "rmm_async": False},
            "rmm_release_threshold only applies to the async allocator",
        ),
        ({"device_memory_limit": 0.5}, "with enable_cudf_spill give bytes"),
        ({"device_memory_limit": "lots"}, "'lots' is not a size"),
        ({"rmm_pool_size": "1.5"}, "must be in (0, 1]"),
        ({"jit_unspill": True}, "removed in 26.06; use enable_cudf_spill"),
        ({"rmm_managed_memory": True}, "does not support managed memory"),
        ({"protocol": "ucx-old"}, "UCX-Py) was removed in RAPIDS 25.10"),
        ({"devices": "0,gpu1"}, "is not a CUDA_VISIBLE_DEVICES list"),
    ],
)
def test_invalid_combinations_are_refused_with_a_reason(options, message):
    with pytest.raises(ValidationError, match="cluster.gpu") as err:
        gpu(**options)
    assert message in str(err.value)


def test_gpu_options_are_refused_when_joining_a_cluster(tmp_path):
    with pytest.raises(ValidationError, match="gpu.rmm_pool_size configures the embedded GPU cluster"):
        load_config(
            None,
            {"cluster": {"scheduler_file": "s.json", "gpu": {"rmm_pool_size": "4GB"}}},
        )
    assert load_config(None, {"cluster": {"scheduler_file": "s.json", "gpu": {"protocol": "tcp"}}})  # the default
    # The embedded cluster's own options were ignored without a word when joining.
    for option, value in [("memory_limit", "1GB"), ("n_workers", 4), ("local_directory", "/tmp/x")]:
        flag = "--" + option.replace("_", "-")  # the message names the flag, as the README promises
        with pytest.raises(ValidationError, match=f"{option} \\({flag}\\) configures the embedded cluster; a joined"):
            load_config(None, {"cluster": {"scheduler_address": "tcp://h:8786", option: value}})
    # Each named with where a joined cluster takes it: the dashboard is the scheduler's.
    with pytest.raises(ValidationError, match="takes it as `dask scheduler --dashboard-address`"):
        load_config(None, {"cluster": {"scheduler_address": "tcp://h:8786", "dashboard_address": ":8790"}})
    with pytest.raises(ValidationError, match=r"takes it as `dask worker --nthreads` / `dask cuda worker --nthreads`"):
        load_config(None, {"cluster": {"scheduler_address": "tcp://h:8786", "threads_per_worker": 2}})
    assert load_config(None, {"cluster": {"scheduler_address": "tcp://h:8786", "memory_limit": "auto"}})
    # The command named the flag twice: "n_workers (--n-workers) (--n-workers) configures ...".
    docs, out = str(FIXTURES / "docs.jsonl"), str(tmp_path / "out")
    joined = ["dedup", docs, "-o", out, "--scheduler-address", "tcp://h:1", "--n-workers", "2"]
    result = CliRunner().invoke(main, joined)
    assert result.exit_code == 2 and "cluster: n_workers (--n-workers) configures the embedded cluster" in result.output
    # Only the first option set was named: a run per option to find them all.
    result = CliRunner().invoke(main, [*joined, "--memory-limit", "1GB", "--rmm-pool-size", "2GB"])
    assert result.exit_code == 2 and (
        "cluster: n_workers (--n-workers); memory_limit (--memory-limit) configure the embedded cluster; a joined "
        "cluster takes them as, in turn, `dask worker --nworkers` (`dask cuda worker` starts one per GPU); "
        "`dask worker --memory-limit` / `dask cuda worker --memory-limit` (see docs/multi-node.md)"
    ) in " ".join(result.output.split())
    with pytest.raises(
        ValidationError, match=r"gpu.rmm_pool_size, gpu.protocol configure the embedded GPU cluster; .* them"
    ):
        load_config(None, {"cluster": {"scheduler_file": "s.json", "gpu": {"rmm_pool_size": "4GB", "protocol": "ucx"}}})


def test_yaml_gpu_section(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("backend: auto\ncluster:\n  gpu:\n    device_memory_limit: 20000000000\n    protocol: ucx\n")
    config = load_config(path, {"cluster": {"gpu": {"protocol": None}}})  # None: flag not given
    assert config.backend == "auto" and config.cluster.gpu.device_memory_limit == "20000000000"
    assert config.cluster.gpu.protocol == "ucx"


def test_backend_gpu_without_packages_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(curate.backend, "missing_gpu_packages", lambda: ["cudf", "dask_cuda"])
    monkeypatch.setattr(curate.backend, "driver_devices", lambda: 1)  # a GPU, without the packages
    result = CliRunner().invoke(
        main,
        [
            "dedup",
            str(FIXTURES / "docs.jsonl"),
            "-o",
            str(tmp_path / "o"),
            "--backend",
            "gpu",
        ],
    )
    assert result.exit_code == 1
    assert (
        "backend 'gpu' needs cudf, dask_cuda, not installed: in curate's checkout, pip install '.[gpu-cu13]'"
        in result.output
    )
    assert not (tmp_path / "o").exists()


def test_backend_gpu_without_device_is_refused(monkeypatch):
    monkeypatch.setattr(curate.backend, "missing_gpu_packages", list)
    monkeypatch.setattr(curate.backend, "gpu_usable", lambda: False)
    with pytest.raises(ValueError, match="no usable CUDA device"):
        curate.backend.resolve_backend("gpu")
    assert curate.backend.resolve_backend("auto") == "cpu"
    monkeypatch.setattr(curate.backend, "gpu_usable", lambda: True)
    assert curate.backend.resolve_backend("auto") == "gpu"


def test_the_command_itself_sees_only_the_devices_given(tmp_path, monkeypatch):
    # Only the workers were given --cuda-visible-devices: the command's own process (which
    # builds the graph's cudf metas) opened its CUDA context on GPU 0, the one left out.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setattr(curate.backend, "missing_gpu_packages", list)
    seen = []
    monkeypatch.setattr(curate.backend, "gpu_usable", lambda: seen.append(os.environ["CUDA_VISIBLE_DEVICES"]))
    docs = str(FIXTURES / "docs.jsonl")
    for backend in ("gpu", "auto", "cpu"):
        args = ["dedup", docs, "-o", str(tmp_path / backend), "--backend", backend, "--cuda-visible-devices", "2,3"]
        result = CliRunner().invoke(main, [*args, "--local-directory", "/proc/none"])  # stops before a cluster
        assert "gpu" in result.output if backend == "gpu" else "spill folder /proc/none" in result.output
        assert os.environ["CUDA_VISIBLE_DEVICES"] == ("2,3" if backend != "cpu" else "0,1,2,3")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert seen == ["2,3", "2,3"]  # when the device was asked for: the gpu and auto runs


def test_backend_gpu_on_this_machine(tmp_path):
    # The real check, no monkeypatching: here (no GPU) it must fail with a clear message.
    if curate.backend.gpu_usable() and not curate.backend.missing_gpu_packages():
        pytest.skip("a usable GPU: covered by tests/test_gpu.py")
    result = CliRunner().invoke(
        main,
        [
            "dedup",
            str(FIXTURES / "docs.jsonl"),
            "-o",
            str(tmp_path / "o"),
            "--backend",
            "gpu",
        ],
    )
    assert result.exit_code == 1 and "backend 'gpu'" in result.output
    if curate.backend.missing_gpu_packages() and not curate.backend.driver_devices():
        # Neither a device nor the packages (CI's machines): installing them would not help.
        assert "needs a CUDA device and none is here (no NVIDIA driver reports one)" in result.output
        assert "use --backend cpu (or auto, which takes a GPU where one is usable)" in result.output
        assert "pip install" not in result.output
    else:
        assert "pip install '.[gpu-cu13]'" in result.output or "no usable CUDA device" in result.output


def test_auto_runs_on_cpu_here_and_the_summary_names_it(tmp_path, monkeypatch):
    monkeypatch.setattr(curate.backend, "gpu_usable", lambda: False)
    out = tmp_path / "o"
    result = CliRunner().invoke(
        main,
        [
            "dedup",
            str(FIXTURES / "docs.jsonl"),
            "-o",
            str(out),
            "--backend",
            "auto",
            "--n-workers",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert '"backend": "cpu"' in (out / "summary.json").read_text()


def test_local_cuda_cluster_without_dask_cuda_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_dask_cuda(name, *args, **kwargs):
        if name == "dask_cuda":
            raise ImportError("No module named 'dask_cuda'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask_cuda)
    from curate.cluster import local_cuda_cluster

    with pytest.raises(ValueError, match=r"needs dask-cuda .*pip install '\.\[gpu-cu13\]'"):
        local_cuda_cluster(gpu())


# Every step curate runs as a host step (map_partitions(..., token=host_step(f))).
HOST_STEPS = {
    f"host-{name}"
    for name in [
        "both-directions", "exact-groups", "fingerprint", "large-star", "later", "locate", "member-pairs",
        "min-label", "orient", "over-cap", "read-documents", "read-stage", "self-labels", "small-star", "split", "write-part",
    ]
}  # fmt: skip


def test_task_resources_free_host_steps_only():
    assert task_resources((host_step(_split) + "-3f2a", 0)) == {} and host_step(_split) == "host-split"
    assert task_resources(("host-write-part-9c1e", 4)) == {}
    for key in [("minhash-3f2a", 0), ("shuffle-split-3f2a", 2), "finalize-3f2a", ("to_host-3f2a", 1)]:
        assert task_resources(key) == {"GPU": 1}, key
    # A task shuffle's pieces (a getitem on a dict): not a step named split (a map_partitions), nor its concatenation.
    assert (
        task_resources(("split-taskshuffle-9c1e", 3, 1))
        == task_resources(("split-stage-0-taskshuffle-9c1e", 1, (0, 2)))
        == {}
    )
    assert task_resources(("split-9c1e", 3)) == task_resources(("taskshuffle-9c1e", 3)) == {"GPU": 1}


def needs_gpu(key) -> bool:
    """Whether a task holds the GPU: every one but the host steps and a task shuffle's pieces."""
    piece = isinstance(key, tuple) and len(key) == 3 and key_name(key).startswith("split-")
    return not (key_name(key).startswith("host-") or piece)


@pytest.fixture(scope="module")
def gpu_workers():
    """A cluster whose one worker declares a GPU resource and has two threads, as the embedded
    LocalCUDACluster's workers do (without a GPU here), recording each task's resource
    restrictions as it starts; task shuffles, as on the GPU backend."""
    restrictions = {}

    class Record(SchedulerPlugin):
        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "processing":
                restrictions[key] = cluster.scheduler.tasks[key].resource_restrictions

    with (
        LocalCluster(n_workers=1, threads_per_worker=2, resources={"GPU": 1}, dashboard_address=None) as cluster,
        Client(cluster) as client,
        dask.config.set({"dataframe.shuffle.method": "tasks"}),
    ):
        cluster.scheduler.add_plugin(Record())
        yield client, restrictions


@pytest.fixture
def as_if_on_device(monkeypatch):
    """The run's partitions count as cudf ones (they are pandas here: no GPU)."""
    monkeypatch.setattr(curate.cluster, "_runs_on_device", lambda frame: True)


def key_name(key) -> str:
    return key[0] if isinstance(key, tuple) else key


def host_names(restrictions: dict) -> set[str]:
    """The host steps' names (keys without their token) among the recorded tasks."""
    return {key_name(key).rsplit("-", 1)[0] for key in restrictions if key_name(key).startswith("host-")}


def test_gpu_workers_take_the_gpu_one_task_at_a_time_and_host_steps_run_beside(gpu_workers, as_if_on_device, tmp_path):
    client, restrictions = gpu_workers
    config = load_config(None, {"fuzzy": {"local_components_max_edges": 0}})  # the distributed path too
    restrictions.clear()
    dedup([str(FIXTURES / "docs.jsonl")], str(tmp_path / "gpu"), config)
    host = host_names(restrictions)
    # Host steps that follow another step in a fused task (the large-/small-star steps) hold the GPU.
    assert {"host-exact-groups", "host-split", "host-member-pairs", "host-write-part", "host-min-label"} <= host
    assert "host-read-documents" in host  # the last pass's read (pandas), beside the GPU's task
    assert "host-later" in host  # the repeated ids' host step held the GPU
    # Dask names a fused task after its steps, first first: a host step followed by device work
    # in one task would be named host-… too. None is: every host-named task is one host step.
    assert host <= HOST_STEPS, host - HOST_STEPS
    for key, needs in restrictions.items():
        assert needs == ({"GPU": 1} if needs_gpu(key) else {}), key
    # The task shuffles' pieces (n² per shuffle of n partitions) ran without waiting for the GPU.
    assert any(key_name(key).startswith("split-taskshuffle") and not needs for key, needs in restrictions.items())
    # The same bytes as without GPU resources.
    with dask.config.set(scheduler="sync"):
        dedup([str(FIXTURES / "docs.jsonl")], str(tmp_path / "sync"), config)
    for name in ["removed.parquet", "duplicates.parquet", "deduplicated/part.00000.jsonl"]:
        assert (tmp_path / "gpu" / name).read_bytes() == (tmp_path / "sync" / name).read_bytes(), name


def test_a_device_read_parses_on_the_host_beside_the_gpus_task(gpu_workers, as_if_on_device, monkeypatch):
    # A read into device partitions, built as for cudf (pandas stand in: the reader's from_arrow
    # gives pandas, and its meta counts as on the device).
    client, restrictions = gpu_workers
    path = str(FIXTURES / "docs.jsonl")
    with monkeypatch.context() as patch, dask.config.set({"dataframe.backend": "cudf"}):
        patch.setattr(curate.io.read, "from_arrow", lambda table, backend: table.to_pandas())
        patch.setattr(curate.backend, "on_device", lambda frame: True)
        docs = curate.io.read.read_documents(path, blocksize=600)
    lengths = docs.map_partitions(len)  # a later step, which Dask would fuse into the read's task
    graph = dict(lengths.optimize().__dask_graph__())
    reads = {key: task for key, task in graph.items() if key_name(key).startswith("host-read-documents")}
    # Each host-named task parses one partition's records, or names such a task's result (an
    # alias): no later step is fused into it.
    parses = [task[0] if isinstance(task, tuple) else task.func for task in reads.values() if not is_alias(task)]
    assert docs.npartitions > 1 and len(parses) == docs.npartitions and len(reads) == 2 * docs.npartitions
    assert all(func.__name__ == "read" for func in parses)
    restrictions.clear()
    client.run(lambda: setattr(curate.io.read, "from_arrow", lambda table, backend: table.to_pandas()))
    try:
        with client.as_current(), one_task_per_gpu():
            device_read = docs.compute()
    finally:
        client.run(lambda: setattr(curate.io.read, "from_arrow", curate.backend.from_arrow))
    assert {key: needs for key, needs in restrictions.items() if key_name(key).startswith("host-")}
    for key, needs in restrictions.items():  # the parse beside the GPU's task; the copy to the device holds it
        assert needs == ({} if key_name(key).startswith("host-read-documents") else {"GPU": 1}), key
    assert any(key_name(key).startswith("read-documents") for key in restrictions)
    # The same documents as a pandas read (the stand-in's string dtypes differ).
    pd.testing.assert_frame_equal(device_read, curate.io.read.read_documents(path).compute(), check_dtype=False)


def test_a_device_partition_is_parsed_in_pieces_beside_the_gpus_task(
    gpu_workers, as_if_on_device, monkeypatch, tmp_path
):
    # Device partitions larger than a parse piece (curate.io.read.PARSE_PIECE, 64 MB; here 1,000
    # bytes): a byte range of a large file and a run of small compressed files, each parsed in
    # pieces, each piece a host step, joined on the host. The same documents, assigned ids, line
    # numbers and rejected records as the pandas read, whose partitions are read whole.
    client, restrictions = gpu_workers
    texts = [" ".join(f"w{(i * 7 + j) % 50}" for j in range(i % 23 + 2)) for i in range(160)]
    lines = [json.dumps({"text": text}) for text in texts]
    lines[131] = '{"text": 5}'  # in a later piece of the big file: its line number is counted
    (tmp_path / "big.jsonl").write_text("\n".join(lines[:140]) + "\n")
    for n in range(4):
        (tmp_path / f"small{n}.jsonl.gz").write_bytes(
            gzip.compress(("\n".join(lines[140 + 5 * n : 145 + 5 * n]) + "\n").encode())
        )
    options = {"blocksize": 4000, "on_error": "skip"}  # (no id field: ids are assigned from the lines)

    def stand_in(table, backend):
        return table.to_pandas()

    with monkeypatch.context() as patch, dask.config.set({"dataframe.backend": "cudf"}):
        patch.setattr(curate.io.read, "from_arrow", stand_in)
        patch.setattr(curate.backend, "on_device", lambda frame: True)
        patch.setattr(curate.io.read, "PARSE_PIECE", 1000)
        docs = curate.io.read.read_documents(str(tmp_path), **options)
    graph = dict(docs.__dask_graph__())
    parsing = {key: task for key, task in graph.items() if key_name(key).startswith("host-read") and not is_alias(task)}
    funcs = [(task[0] if isinstance(task, tuple) else task.func).__name__ for task in parsing.values()]
    reads, joins = funcs.count("read"), funcs.count("_joined")
    assert reads + joins == len(parsing) and 2 <= joins <= docs.npartitions < reads
    restrictions.clear()
    client.run(lambda: setattr(curate.io.read, "from_arrow", stand_in))
    try:
        with client.as_current(), one_task_per_gpu():
            device_read = docs.compute()
    finally:
        client.run(lambda: setattr(curate.io.read, "from_arrow", curate.backend.from_arrow))
    for key, needs in restrictions.items():
        assert needs == ({} if key_name(key).startswith("host-read-documents") else {"GPU": 1}), key
    assert set(parsing) <= set(restrictions)  # each piece's parse and each join ran as a task of its own
    expected = curate.io.read.read_documents(str(tmp_path), **options)
    assert expected.divisions == docs.divisions
    with dask.config.set(scheduler="sync"):
        expected = expected.compute().drop(columns="_record", errors="ignore")
    pd.testing.assert_frame_equal(device_read, expected, check_dtype=False)
    assert device_read.loc[device_read._kind.notnull(), "_line"].tolist() == [132]
    assert device_read.id.iloc[-1] == "small3.jsonl.gz:5" and len(device_read) == 160


def is_alias(task) -> bool:
    return type(task).__name__ == "Alias"


def test_the_api_takes_the_gpu_one_task_at_a_time(gpu_workers, as_if_on_device, fixture_docs):
    client, restrictions = gpu_workers
    docs = dd.from_pandas(pd.DataFrame(fixture_docs), npartitions=2)
    restrictions.clear()
    result = curate.deduplicate(docs, threshold=0.8)
    kept, removed, _ = result.compute()
    assert restrictions and all(needs == ({"GPU": 1} if needs_gpu(key) else {}) for key, needs in restrictions.items())
    host = host_names(restrictions)
    assert {"host-exact-groups", "host-split"} <= host <= HOST_STEPS, host
    assert len(kept) + len(removed) == len(fixture_docs) and len(removed) == result.counts["removed"] > 0


def test_pandas_partitions_keep_every_thread_of_gpu_workers(gpu_workers):
    # A CPU run on GPU workers: restricting its tasks would leave all threads but one idle.
    client, _ = gpu_workers
    docs = dd.from_pandas(pd.DataFrame({"text": ["a b c", "a b c"]}), npartitions=1)
    with client.as_current():
        for context in (one_task_per_gpu(), one_task_per_gpu(docs)):  # dataframe.backend; the frame's partitions
            with context:
                assert "resources" not in dask.get_annotations()


def test_workers_without_a_gpu_resource_get_no_restrictions(client, as_if_on_device):
    with client.as_current(), one_task_per_gpu():
        assert "resources" not in dask.get_annotations()


def test_a_skip_mode_read_for_the_device_leaves_the_records_bytes_on_the_host(tmp_path, monkeypatch):
    # cudf has no binary type (rapidsai/cudf#23492), so `--on-error skip --backend gpu` failed at
    # its first read: each bad record's line (_record, binary) went to cudf.DataFrame.from_arrow.
    tables = []

    def from_arrow(table, frame_backend):  # cudf's conversion, as far as types go
        assert frame_backend == "cudf"
        tables.append(table)
        if any(pa.types.is_binary(t) or pa.types.is_large_binary(t) for t in table.schema.types):
            raise TypeError("cudf cannot hold binary columns")
        return table.to_pandas()

    monkeypatch.setattr(curate.io.read, "from_arrow", from_arrow)
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{"id": "b", "text": 5}\n{"id": "a", "text": "y"}\n')
    with dask.config.set({"dataframe.backend": "cudf"}):
        docs = curate.read_documents(str(path), on_error="skip")
    with dask.config.set(scheduler="sync"):  # (pandas partitions here: dask_cudf's dispatch is not installed)
        result = curate.deduplicate(docs)  # the later "a" is marked on partitions without _record
        kept, _, _ = result.compute()
        rejected = result.rejected.compute()
    assert len(tables) > 1 and "_record" not in docs.columns
    assert kept.id.tolist() == ["a"] and rejected._kind.tolist() == ["wrong-type", "duplicate-id"]


class _CudfLikeFrame(pd.DataFrame):
    """A pandas frame whose ``.loc[rows, column] = values`` fails for host strings as cudf's does:
    cudf hands the values to ``cupy.asarray``, which has no object dtype."""

    @property
    def _constructor(self):
        return _CudfLikeFrame

    @property
    def loc(self):
        frame = self

        class Loc:
            def __getitem__(self, key):
                return pd.DataFrame.loc.__get__(frame)[key]

            def __setitem__(self, key, value):
                if isinstance(value, np.ndarray) and value.dtype == object:
                    raise TypeError("Unsupported dtype object")  # cupy.asarray's error
                pd.DataFrame.loc.__get__(frame)[key] = value

        return Loc()


def test_repeated_ids_are_marked_on_device_partitions_without_host_string_arrays():
    # `--on-error skip --backend gpu` with a repeated id: the mark set each reason with
    # part.loc[hit, "_reason"] = <numpy object array>, which cudf cannot take (read in cudf 26.10's
    # _DataFrameLocIndexer._setitem_tuple_arg; no device here to run it).
    part = _CudfLikeFrame(
        {
            "_doc": [1, 2, 3, 4],
            "id": ["a", "b", "a", "b"],
            "_kind": pd.array([None, None, None, "wrong-type"], dtype="str"),
            "_field": pd.array([None, None, None, "text"], dtype="str"),
            "_reason": pd.array([None, None, None, "not a string"], dtype="str"),
        }
    )
    listed = pd.DataFrame({"_doc": [3], "reason": ["duplicate id 'a': first at in.jsonl:1"]})
    marked = mark_listed(part, listed, "id")
    assert marked._kind.fillna("-").tolist() == ["-", "-", "duplicate-id", "wrong-type"]
    assert marked._field.fillna("-").tolist() == ["-", "-", "id", "text"]
    assert marked._reason.fillna("-").tolist() == ["-", "-", "duplicate id 'a': first at in.jsonl:1", "not a string"]
    assert (marked.dtypes == part.dtypes).all()


def test_document_frames_are_keyed_as_dask_cudf_renames_an_index(monkeypatch, fixture_docs):
    # dask_cudf's rename_axis (RenameAxisCudf, 26.10: read, no device here) takes index= only:
    # rename_axis(None) raised NotImplementedError as the graph was built, so add_doc_keys and
    # deduplicate failed at the call on any cudf frame without _doc.
    def operation(df, index=no_default, **kwargs):  # RenameAxisCudf.operation
        if index is no_default:
            raise NotImplementedError("Only `index` is supported for the cudf backend")
        df.index.name = index
        return df

    monkeypatch.setattr(RenameAxis, "operation", staticmethod(operation))
    docs = dd.from_pandas(pd.DataFrame(fixture_docs)[["id", "text"]], npartitions=2)
    with dask.config.set(scheduler="sync"):
        kept, removed, _ = curate.deduplicate(docs, id_field="id").compute()
        keyed = curate.add_doc_keys(docs).compute()
    assert len(kept) + len(removed) == len(fixture_docs) and len(removed) > 0
    assert keyed.index.name is None and keyed._doc.is_monotonic_increasing


def test_the_gpu_check_runs_pytest_without_the_plugin_pyprojects_addopts_need():
    # pyproject.toml's addopts (--numprocesses, pytest-xdist's) made every pytest call of
    # scripts/gpu_check.sh fail on a host without pytest-xdist ("unrecognized arguments"): the
    # device session would have run no test. Its one pytest call drops them.
    repo = Path(__file__).resolve().parents[1]
    script = (repo / "scripts" / "gpu_check.sh").read_text().splitlines()
    calls = [line for line in script if "-m pytest" in line and not line.lstrip().startswith("#")]
    assert len(calls) == 1 and "-o addopts=" in calls[0], calls
    run = subprocess.run(  # and pytest without the plugin then runs: collects this file's tests
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:xdist", "-p", "no:cacheprovider",
         "--collect-only", "-q", __file__],
        capture_output=True, text=True, cwd=repo, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0 and "test_the_gpu_check_runs_pytest" in run.stdout, run.stdout + run.stderr
    assert re.search(r"--no-deps pytest-xdist execnet", (repo / "scripts" / "fetch_gpu_wheels.sh").read_text())
