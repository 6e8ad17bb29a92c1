"""curate.dask_fixes: Dask's expression cache read in one step, and no cached_property lock on 3.11."""

import functools
import threading
import weakref

import pandas as pd
from dask._expr import Expr, SingletonExpr

import curate.backend  # noqa: F401  (applies the fix, as every stage module does)
from curate import dask_fixes


class _Emptied(weakref.WeakValueDictionary):
    """A cache whose entry dies between ``in`` and ``[]``, as when another thread drops the last reference."""

    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        raise KeyError(key)


class _Cached(SingletonExpr):
    pass


def test_an_entry_dying_between_check_and_read_is_not_an_error():
    assert dask_fixes.apply()
    _Cached._instances = _Emptied()
    made = _Cached(1, 2)  # before the fix: KeyError
    assert isinstance(made, _Cached) and made.operands == [1, 2]


def test_expressions_are_still_deduplicated():
    assert _Cached(3, 4) is _Cached(3, 4)
    frame = pd.DataFrame({"a": [1, 2]})
    import dask.dataframe as dd

    assert dd.from_pandas(frame, npartitions=1).expr is dd.from_pandas(frame, npartitions=1).expr


class _Crossing(Expr):
    """Two cached properties, each of which on one instance reads the other on a third, once two
    threads are inside them: with Python 3.11's one lock per property, each thread holds one
    lock and waits for the other's (as the caller optimizing a graph while a LocalCluster's
    scheduler, in the same process, built the graph of a frame persisted just before)."""

    _parameters = ["which"]

    @functools.cached_property
    def first(self):
        if self.which != "a":
            return 10
        _both_inside.wait(10)
        return _Crossing("c").second + 1

    @functools.cached_property
    def second(self):
        if self.which != "b":
            return 20
        _both_inside.wait(10)
        return _Crossing("c").first + 1


_both_inside = threading.Barrier(2)


def test_cached_properties_of_expressions_take_no_lock_across_threads():
    # A class defined after curate's import: Dask's are unlocked at import, later ones as defined.
    done = {}
    threads = [
        threading.Thread(target=lambda: done.setdefault("a.first", _Crossing("a").first), daemon=True),
        threading.Thread(target=lambda: done.setdefault("b.second", _Crossing("b").second), daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert done == {"a.first": 21, "b.second": 11}, "the two threads waited for each other's lock"


def _step(part, calls, name):
    calls.append(name)
    return part.assign(a=part.a + 1)


def test_collections_computed_together_fuse_their_chains_and_share_steps():
    # Dask (2026.8) computes without blockwise fusion: each partition-wise step was a task of its
    # own. fused() fuses the collections together: one task per partition for the chain, and the
    # chain computed once though both results use it.
    import dask
    import dask.dataframe as dd

    calls, graphs = [], []

    def recording_get(graph, keys, **kwargs):
        graphs.append(dict(graph.__dask_graph__()))
        return dask.get(graph, keys, **kwargs)

    frame = dd.from_pandas(pd.DataFrame({"a": range(12)}), npartitions=3)
    chain = frame.map_partitions(_step, calls, "f").map_partitions(_step, calls, "g")
    results = [chain.a.sum(), chain.a.max()]
    with dask.config.set(scheduler=recording_get):
        total, top = dask.compute(*dask_fixes.fused(results))
        assert (total, top) == (sum(range(12)) + 24, 13) and sorted(calls) == ["f"] * 3 + ["g"] * 3
        calls.clear()
        assert dask.compute(*results) == (total, top) and len(calls) == 6
    fused_graph, plain_graph = graphs
    # f, g and the column taken from them: one task per partition, not three.
    assert len(fused_graph) == len(plain_graph) - 6 == 14


def test_host_steps_stay_tasks_of_their_own():
    # A fused task is named after its first step, and a task named host-… runs without the GPU:
    # device steps after a host step must not fuse into it (curate.cluster.task_resources).
    import dask
    import dask.dataframe as dd

    calls = []
    frame = dd.from_pandas(pd.DataFrame({"a": range(12)}), npartitions=3)
    chain = (
        frame.map_partitions(_step, calls, "device")
        .map_partitions(_step, calls, "host", token="host-step")
        .map_partitions(_step, calls, "after")
    )
    (collection,) = dask_fixes.fused([chain.a.sum()])
    names = {key[0] if isinstance(key, tuple) else key for key in dict(collection.__dask_graph__())}
    hosts = [name for name in names if name.startswith("host-")]
    assert hosts and all(name.startswith("host-step-") for name in hosts)  # the step alone, not host-…-fused
    assert dask.compute(collection, scheduler="sync")[0] == sum(range(12)) + 36


def _add(part):
    return part.assign(a=part.a + 1)


def test_fusion_computes_no_meta_again(monkeypatch):
    # Blockwise fusion substitutes one group per pass (47 passes for the Python API's frames),
    # rebuilding every expression above it; each rebuilt one computed its meta again: 3 s of
    # the 7 s that fused() took on 20news, in the client. The rebuilt ones now keep their originals'.
    import dask
    import dask.dataframe as dd
    import dask.dataframe.dask_expr._expr as dataframe_expr
    from dask.base import collections_to_expr

    frame = dd.from_pandas(pd.DataFrame({"a": range(12), "b": range(12)}), npartitions=3)
    for i in range(4):  # four fused groups, each below the others' shuffles
        # tasks shuffles, whatever client an earlier test in this process left (P2P would need its workers)
        frame = frame.map_partitions(_add).map_partitions(_add)
        frame = frame.shuffle("ab"[i % 2], npartitions=2 + i % 2, shuffle_method="tasks")
    results = [frame.a.sum(), frame.b.max()]
    lowered = collections_to_expr(results).optimize()  # metas computed here, as fused() does first
    made, make = [], dataframe_expr._get_meta_map_partitions
    monkeypatch.setattr(dataframe_expr, "_get_meta_map_partitions", lambda *args: made.append(args) or make(*args))
    fused = dataframe_expr.optimize_blockwise_fusion(lowered)
    assert made == []  # before: 6, one per rebuilt map_partitions
    assert len(list(fused.find_operations(dataframe_expr.Fused))) == 6  # and fused as before
    assert dask.compute(*dask_fixes.fused(results), scheduler="sync") == (sum(range(12)) + 96, 11)


def test_an_expressions_depth_is_walked_once(monkeypatch):
    import dask.dataframe as dd

    frame = dd.from_pandas(pd.DataFrame({"a": range(4)}), npartitions=2)
    for _ in range(5):
        frame = frame.map_partitions(_add)
    assert frame.expr._depth() == 6
    walked, dependencies = [], Expr.dependencies
    monkeypatch.setattr(Expr, "dependencies", lambda self: walked.append(self) or dependencies(self))
    assert frame.expr._depth() == 6 and frame.expr.frame._depth() == 5
    assert walked == []  # before: the chain walked again, for each expression sorted by depth
