"""The backends' implementations agree in what they accept and how they write Parquet; checked without cudf.

The cudf side is read from the source (``ast``), so these run where cudf is not installed:
the first GPU run found ``jaccard_cudf`` without the ``x_keys`` parameter that verification
passes, a ``TypeError`` only a GPU would have shown.
"""

import ast
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from curate import backend

CURATE = Path(backend.__file__).parent
HOST, DEVICE = {"pandas", "numpy"}, {"cudf", "cupy"}


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


def _dispatches() -> list[str]:
    tree = ast.parse((CURATE / "backend.py").read_text())
    return [
        node.targets[0].id
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "id", "") == "Dispatch"
    ]


def _parameters(function: ast.FunctionDef) -> list[tuple]:
    """Name, kind and default (as source) of every parameter."""
    args = function.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + [ast.unparse(d) for d in args.defaults]
    out = [(a.arg, "positional", d) for a, d in zip(positional, defaults)]
    out += [
        (a.arg, "keyword", ast.unparse(d) if d is not None else None) for a, d in zip(args.kwonlyargs, args.kw_defaults)
    ]
    out += [("*" + a.arg, "var", None) for a in (args.vararg, args.kwarg) if a is not None]
    return out


def _implementation(functions: dict, op: str, kinds: set[str]) -> ast.FunctionDef:
    found = [functions[f"{op}_{kind}"] for kind in kinds if f"{op}_{kind}" in functions]
    assert len(found) == 1, f"{op}: expected one of {sorted(f'{op}_{k}' for k in kinds)}"
    return found[0]


@pytest.mark.parametrize("op", _dispatches())
def test_cudf_implementation_takes_the_parameters_of_the_pandas_one(op):
    host = _implementation(_functions(CURATE / "backend.py"), op, HOST)
    device = _implementation(_functions(CURATE / "backend_cudf.py"), op, DEVICE)
    # Names after the dispatched first argument, kinds and defaults: stages call one dispatcher.
    assert _parameters(device)[1:] == _parameters(host)[1:], f"{device.name} and {host.name} differ"


def test_every_dispatch_is_found():
    assert {"jaccard", "md5_hex", "minhash_signatures", "band_buckets", "parquet_engine", "to_host"} <= set(
        _dispatches()
    )


def test_collections_reach_parquet_only_through_backend_to_parquet():
    """One rule: a Parquet write states its engine, chosen by its partitions' type."""
    writers = []
    for path in CURATE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "to_parquet":
                writers.append(f"{path.relative_to(CURATE)}:{node.lineno}")
    assert len(writers) == 1 and writers[0].startswith("backend.py:"), writers


def test_host_partitions_are_written_with_pyarrow_on_the_gpu_backend(tmp_path):
    # Group tables are pandas on the GPU backend too. Left to Dask, the engine follows
    # dataframe.backend (cudf) and dask-cudf's engine fails on pandas partitions (here, without
    # dask-cudf installed, it fails importing it).
    frame = dd.from_pandas(pd.DataFrame({"_doc": [3, 1, 2], "_rep": [1, 1, 2]}), npartitions=2)
    with backend.use_backend("gpu"):
        dask.compute(backend.to_parquet(frame, str(tmp_path / "groups")), scheduler="sync")
    table = pq.read_table(tmp_path / "groups")
    assert sorted(table["_doc"].to_pylist()) == [1, 2, 3] and table.column_names == ["_doc", "_rep"]


class _DeviceSeries(pd.Series):
    """Stands in for a cudf series: a partition type that must not reach the client."""

    @property
    def _constructor(self):
        return _DeviceSeries

    @property
    def _constructor_expanddim(self):
        return _DeviceFrame


class _DeviceFrame(pd.DataFrame):
    """Stands in for a cudf frame (see :class:`_DeviceSeries`)."""

    @property
    def _constructor(self):
        return _DeviceFrame

    @property
    def _constructor_sliced(self):
        return _DeviceSeries


def test_only_host_objects_reach_the_client(tmp_path, monkeypatch):
    # A client without cudf's spill manager cannot rebuild the spillable frames of workers that
    # spill (the first H200 run), so every result is moved to the host before it is gathered.
    from curate.checkpoints import StageStore
    from curate.runner import Runner, Stats

    # Registered for this test only: a Dispatch travels to workers by value, and workers that
    # cannot import this module (tests/test_cluster.py's) could not load it.
    monkeypatch.setitem(backend.to_host._lookup, _DeviceFrame, pd.DataFrame)
    monkeypatch.setitem(backend.to_host._lookup, _DeviceSeries, pd.Series)

    frame = dd.from_pandas(_DeviceFrame({"a": [1, 2, 2], "b": [4, 5, 6]}), npartitions=2)
    assert type(frame._meta) is _DeviceFrame and type(frame["a"]._meta) is _DeviceSeries
    run = Runner(Stats(), False, StageStore(tmp_path, False))
    done = run("stage", table=frame, column=frame["a"][frame["b"] > 4], total=frame["b"].sum())
    assert type(done["table"]) is pd.DataFrame and done["table"]["a"].tolist() == [1, 2, 2]
    assert type(done["column"]) is pd.Series and done["column"].tolist() == [2, 2]
    assert done["total"] == 15


def test_gpu_backend_shuffles_by_tasks():
    # P2P shuffles take every partition through a host Arrow table, where cudf names an unnamed
    # RangeIndex `__index_level_0__` and any other unnamed index `index`: partitions of both
    # kinds came back with an extra `index` column (first H200 run). Task shuffles keep cudf.
    frame = dd.from_pandas(pd.DataFrame({"u": [3, 1, 2, 1], "v": [1, 2, 3, 4]}), npartitions=2)
    with backend.use_backend("gpu"):
        shuffled = frame.shuffle("u")
        merged = frame.merge(frame.rename(columns={"v": "w"}), on="u")
        assert dask.config.get("dataframe.shuffle.method") == "tasks"
        lowered = [type(e).__name__ for c in (shuffled, merged) for e in c.optimize().expr.lower_completely().walk()]
    assert "TaskShuffle" in lowered and not any("P2P" in name for name in lowered), lowered


def test_cudf_types_reach_their_implementations():
    # Where cudf imports (it does without a GPU; an empty DataFrame needs no device), the lazy
    # registration gives every dispatch its cudf implementation, and cudf metas dask-cudf's engine.
    cudf = pytest.importorskip("cudf")
    cupy = pytest.importorskip("cupy")
    from dask_cudf.io.parquet import CudfEngine

    import curate.backend_cudf as on_gpu

    # Each op on the device kind of what its pandas implementation takes (label_components: a frame).
    device = {pd.Series: cudf.Series, pd.DataFrame: cudf.DataFrame, pd.Index: cudf.Index, np.ndarray: cupy.ndarray}
    for op in _dispatches():
        dispatch = backend.__dict__[op]
        for kind in (k for k in list(dispatch._lookup) if k in device):
            implementation = dispatch.dispatch(device[kind])
            assert implementation is getattr(on_gpu, f"{op}_{'cupy' if kind is np.ndarray else 'cudf'}"), (op, kind)
    assert backend.parquet_engine(cudf.DataFrame()) is CudfEngine


def test_device_frames_are_the_ones_to_host_copies(monkeypatch):
    # curate.cluster.one_task_per_gpu restricts tasks only for frames on the device.
    monkeypatch.setitem(backend.to_host._lookup, _DeviceFrame, pd.DataFrame)
    assert backend.on_device(_DeviceFrame({"a": [1]})) and not backend.on_device(pd.DataFrame({"a": [1]}))


def test_member_pairs_host_step_answers_on_the_host(monkeypatch):
    # A host step runs beside GPU tasks on any thread (curate.cluster.task_resources); it built
    # its pairs as type(part), a cudf frame on the GPU backend: device memory from a host task.
    from curate.dedup.edges import _member_pairs

    monkeypatch.setitem(backend.to_host._lookup, _DeviceFrame, pd.DataFrame)
    # One bucket, anchor 0: members 1 and 2 failed against it (0.7, 0.75), 3 passed (0.85).
    rows = [(7, 0, v, np.nan, -1) for v in (1, 2, 3)] + [
        (0, 0, 1, 0.7, -1), (0, 0, 2, 0.75, -1), (0, 0, 3, 0.85, 0)
    ]  # fmt: skip
    part = _DeviceFrame(rows, columns=["_bucket", "u", "v", "jaccard", "_component"]).astype({"_bucket": "uint64"})
    pairs = _member_pairs(part, 0.8, 100)
    assert type(pairs) is pd.DataFrame
    assert sorted(zip(pairs.u.tolist(), pairs.v.tolist())) == [(1, 2), (1, 3), (2, 3)]
