import logging

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curate.dedup.components import components_distributed, components_local, connected_components

BOTH_PATHS = pytest.mark.parametrize("local_max_edges", [0, 10**9], ids=["distributed", "local"])
CONVERGED = "converged after"


def _edges(u, v, npartitions=1):
    pdf = pd.DataFrame({"u": np.asarray(u, np.int64), "v": np.asarray(v, np.int64)})
    return dd.from_pandas(pdf, npartitions=npartitions)


def _run(edges, **kw):
    # The edge count given, as curate dedup gives it: past local_max_edges, the distributed path.
    out = connected_components(edges, n_edges=len(edges), **kw).compute()
    return out.sort_values("node").reset_index(drop=True)


def _union_find(u, v):
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(u.tolist(), v.tolist()):
        ra, rb = find(a), find(b)
        if ra != rb:  # keep the smaller id as root so the root is the component minimum
            parent[max(ra, rb)] = min(ra, rb)
    nodes = sorted(parent)
    return pd.DataFrame({"node": nodes, "component": [find(x) for x in nodes]}, dtype="int64")


def _random_graph(seed, n_nodes=300, n_edges=250):
    rng = np.random.default_rng(seed)
    ids = rng.choice(2**62, n_nodes, replace=False).astype(np.int64)
    u, v = rng.choice(ids, n_edges), rng.choice(ids, n_edges)
    # Append reversed edges, duplicates and self-loops.
    u, v = np.concatenate([u, v[:40], u[:30], ids[:20]]), np.concatenate([v, u[:40], v[:30], ids[:20]])
    return u, v


@BOTH_PATHS
def test_hand_made_graph(local_max_edges):
    u, v = zip(*[(10, 3), (3, 7), (7, 7), (21, 20), (20, 21), (21, 20), (100, 100), (6, 5), (2**62, 5)])
    got = _run(_edges(u, v, npartitions=2), local_max_edges=local_max_edges)
    expected = pd.DataFrame(
        {"node": [3, 5, 6, 7, 10, 20, 21, 100, 2**62], "component": [3, 5, 5, 3, 3, 20, 20, 100, 5]},
        dtype="int64",
    )
    pd.testing.assert_frame_equal(got, expected)


@BOTH_PATHS
def test_long_path_in_random_id_order(local_max_edges, caplog):
    rng = np.random.default_rng(7)
    ids = rng.permutation(rng.choice(2**62, 2000, replace=False).astype(np.int64))
    with caplog.at_level(logging.INFO, logger="curate.dedup.components"):
        got = _run(_edges(ids[:-1], ids[1:], npartitions=4), local_max_edges=local_max_edges)
    assert len(got) == 2000
    assert (got["component"] == ids.min()).all()
    assert (CONVERGED in caplog.text) == (local_max_edges == 0)


@BOTH_PATHS
def test_star_with_large_center(local_max_edges):
    leaves = np.arange(1, 501, dtype=np.int64) * 7919
    center = np.full_like(leaves, 10**15)
    got = _run(_edges(center, leaves, npartitions=3), local_max_edges=local_max_edges)
    assert got["node"].tolist() == sorted([*leaves.tolist(), 10**15])
    assert (got["component"] == 7919).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_graphs_match_union_find_for_any_partitioning(seed):
    u, v = _random_graph(seed)
    expected = _union_find(u, v)
    assert expected["component"].nunique() > 10  # sanity: the graph is not one blob
    node, comp = components_local(u, v)
    pd.testing.assert_frame_equal(pd.DataFrame({"node": node, "component": comp}), expected)
    for nparts in (1, 3, 7):
        got = _run(_edges(u, v, npartitions=nparts), local_max_edges=0)
        pd.testing.assert_frame_equal(got, expected)
        got = _run(_edges(u, v, npartitions=nparts))
        pd.testing.assert_frame_equal(got, expected)


@settings(max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_distributed_matches_union_find_hypothesis(data):
    ids = data.draw(st.lists(st.integers(0, 2**62), min_size=1, max_size=25, unique=True))
    index = st.integers(0, len(ids) - 1)
    pairs = data.draw(st.lists(st.tuples(index, index), max_size=50))
    nparts = data.draw(st.integers(1, 4))
    u = np.array([ids[a] for a, _ in pairs], np.int64)
    v = np.array([ids[b] for _, b in pairs], np.int64)
    got = components_distributed(_edges(u, v, npartitions=nparts)).compute()
    got = got.sort_values("node").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, _union_find(u, v), check_index_type=False)


def test_under_distributed_client():
    distributed = pytest.importorskip("distributed")
    u, v = _random_graph(5, n_nodes=200, n_edges=150)
    cluster = dict(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None)
    with distributed.Client(**cluster):
        got = _run(_edges(u, v, npartitions=3), local_max_edges=0)
    pd.testing.assert_frame_equal(got, _union_find(u, v))


@BOTH_PATHS
def test_empty_edges(local_max_edges):
    empty = _edges([], [], npartitions=1)
    for got in (connected_components(empty, local_max_edges=local_max_edges, n_edges=0), components_distributed(empty)):
        got = got.compute()
        assert list(got.columns) == ["node", "component"]
        assert (got.dtypes == "int64").all() and len(got) == 0
    node, comp = components_local(np.array([], np.int64), np.array([], np.int64))
    assert node.dtype == comp.dtype == np.int64 and len(node) == len(comp) == 0


def test_bad_input():
    pdf = pd.DataFrame({"u": [1, 2], "v": [2, 3]})
    with pytest.raises(ValueError, match="'v'"):
        connected_components(dd.from_pandas(pdf[["u"]], npartitions=1))
    with pytest.raises(ValueError, match=r"\['u', 'v'\]"):
        components_distributed(dd.from_pandas(pdf.set_axis(["a", "b"], axis=1), npartitions=1))
    with pytest.raises(ValueError, match="local_max_edges"):
        connected_components(dd.from_pandas(pdf, npartitions=1), local_max_edges=-1)
    with pytest.raises(TypeError):
        connected_components(pdf)
    with pytest.raises(TypeError, match="integer"):
        connected_components(dd.from_pandas(pdf.astype("float64"), npartitions=1))
    with pytest.raises(ValueError, match="length"):
        components_local(np.array([1, 2]), np.array([1]))


def test_without_an_edge_count_one_lazy_task_refuses_too_many_edges():
    # Nothing is computed to choose the path (the API builds its graph without computing): the
    # one task solves up to local_max_edges and names the limit past it.
    edges = _edges([1, 2, 3], [2, 3, 4], npartitions=2)
    with dask.config.set(scheduler=lambda *args, **kwargs: pytest.fail("computed while building")):
        small, large = connected_components(edges, local_max_edges=3), connected_components(edges, local_max_edges=2)
    assert small.compute().component.tolist() == [1, 1, 1, 1]
    with pytest.raises(ValueError, match=r"3 verified edges exceed local_components_max_edges \(2\)"):
        large.compute()


def test_local_path_output_is_a_dask_frame_with_int64_columns():
    out = connected_components(_edges([1, 2], [2, 3], npartitions=2))
    assert isinstance(out, dd.DataFrame) and out.npartitions >= 1
    assert out.dtypes.to_dict() == {"node": np.dtype("int64"), "component": np.dtype("int64")}


# ---------------------------------------------------------------------------------------------
# The device solver, chosen by what imports; run here with numpy and scipy standing in for CuPy.


def _stand_ins(monkeypatch, with_pylibcugraph: bool) -> list:
    """Fake cupy (numpy), cupyx.scipy.sparse (scipy.sparse) and, if asked, pylibcugraph; the calls of
    the stand-in for cupyx's connected_components are recorded in the returned list."""
    import sys
    import types

    import scipy.sparse
    from scipy.sparse.csgraph import connected_components as scipy_components

    calls = []

    def device_components(graph, directed):
        calls.append(graph.shape)
        n, labels = scipy_components(graph, directed=directed)
        return n, (labels * 7 + 3)  # other numbers than scipy's: only the smallest node may count

    cupy = types.ModuleType("cupy")
    cupy.__getattr__ = lambda name: getattr(np, name)
    cupy.asnumpy = np.asarray
    csgraph = types.ModuleType("cupyx.scipy.sparse.csgraph")
    csgraph.connected_components = device_components
    modules = {
        "cupy": cupy,
        "cupyx": types.ModuleType("cupyx"),
        "cupyx.scipy": types.ModuleType("cupyx.scipy"),
        "cupyx.scipy.sparse": scipy.sparse,
        "cupyx.scipy.sparse.csgraph": csgraph,
        "pylibcugraph": types.ModuleType("pylibcugraph") if with_pylibcugraph else None,  # None: ImportError
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return calls


@pytest.mark.parametrize("with_pylibcugraph", [True, False], ids=["cugraph-kernel", "host-fallback"])
def test_device_components_choose_the_solver_and_label_by_smallest_node(monkeypatch, with_pylibcugraph):
    from curate.kernels import components

    calls = _stand_ins(monkeypatch, with_pylibcugraph)
    assert (components.device_solver() is not None) == with_pylibcugraph
    u, v = _random_graph(3)
    node, component = components.components_device(u, v)
    # On the device when pylibcugraph imports (one call, on a graph of every distinct node), else scipy.
    assert calls == ([(len(np.unique(np.r_[u, v])),) * 2] if with_pylibcugraph else [])
    truth = _union_find(u, v)
    assert node.tolist() == truth["node"].tolist() and component.tolist() == truth["component"].tolist()
    empty = components.components_device(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert [len(a) for a in empty] == [0, 0]
