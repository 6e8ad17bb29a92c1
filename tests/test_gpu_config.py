"""GPU configuration and backend selection: checked without a GPU."""

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

import curate.backend
from curate.cli import main
from curate.cluster import local_cuda_cluster_options
from curate.config import load_config
from tests.conftest import FIXTURES


def gpu(**options):
    return load_config(None, {"cluster": {"gpu": options}}).cluster


def test_defaults_follow_rapids_best_practice():
    cluster = gpu()
    assert cluster.gpu.use_async and cluster.gpu.enable_cudf_spill and cluster.gpu.protocol == "tcp"
    assert local_cuda_cluster_options(cluster) == {
        "threads_per_worker": 1,
        "memory_limit": "auto",
        "protocol": "tcp",
        "rmm_async": True,
        "enable_cudf_spill": True,
        "dashboard_address": None,
    }


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
    options = local_cuda_cluster_options(cluster)
    assert options["CUDA_VISIBLE_DEVICES"] == "0,1" and options["n_workers"] == 2 and options["protocol"] == "ucx"
    assert options["rmm_release_threshold"] == "30GB" and options["local_directory"] == "/scratch"
    # cuDF spilling hides cuDF buffers from dask-cuda's limit, so the limit also goes to cuDF.
    assert options["device_memory_limit"] == "20GB" and options["env"] == {"CUDF_SPILL_DEVICE_LIMIT": "20000000000"}
    no_spill = local_cuda_cluster_options(gpu(enable_cudf_spill=False, device_memory_limit=0.5, rmm_pool_size="40GB"))
    assert no_spill["device_memory_limit"] == 0.5 and "env" not in no_spill  # a fraction, as dask-cuda takes it
    assert no_spill["rmm_async"] is False and no_spill["rmm_pool_size"] == "40GB"


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


def test_gpu_options_are_refused_when_joining_a_cluster():
    with pytest.raises(ValidationError, match="gpu.rmm_pool_size configures the embedded GPU cluster"):
        load_config(
            None,
            {"cluster": {"scheduler_file": "s.json", "gpu": {"rmm_pool_size": "4GB"}}},
        )
    assert load_config(None, {"cluster": {"scheduler_file": "s.json", "gpu": {"protocol": "tcp"}}})  # the default


def test_yaml_gpu_section(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("backend: auto\ncluster:\n  gpu:\n    device_memory_limit: 20000000000\n    protocol: ucx\n")
    config = load_config(path, {"cluster": {"gpu": {"protocol": None}}})  # None: flag not given
    assert config.backend == "auto" and config.cluster.gpu.device_memory_limit == "20000000000"
    assert config.cluster.gpu.protocol == "ucx"


def test_backend_gpu_without_packages_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(curate.backend, "missing_gpu_packages", lambda: ["cudf", "dask_cuda"])
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
    assert "backend 'gpu' needs cudf, dask_cuda, not installed: pip install 'curate[gpu-cu13]'" in result.output
    assert not (tmp_path / "o").exists()


def test_backend_gpu_without_device_is_refused(monkeypatch):
    monkeypatch.setattr(curate.backend, "missing_gpu_packages", list)
    monkeypatch.setattr(curate.backend, "gpu_usable", lambda: False)
    with pytest.raises(ValueError, match="no usable CUDA device"):
        curate.backend.resolve_backend("gpu")
    assert curate.backend.resolve_backend("auto") == "cpu"
    monkeypatch.setattr(curate.backend, "gpu_usable", lambda: True)
    assert curate.backend.resolve_backend("auto") == "gpu"


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
    assert "curate[gpu-cu13]" in result.output or "no usable CUDA device" in result.output


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

    with pytest.raises(ValueError, match=r"needs dask-cuda .*curate\[gpu-cu13\]"):
        local_cuda_cluster(gpu())
