"""Connected components of an in-memory edge list: scipy on the host, cuGraph's kernel on the device.

Both label every node with the smallest node of its component, so the labels do not depend on
the solver (each numbers components its own way; the smallest node is the same).
"""

import importlib

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import connected_components as _scipy_components


def _components(u, v, xp, sparse, connected_components):
    # Nodes relabelled 0..n-1 (sorted), solved as an undirected sparse graph.
    u, v = xp.asarray(u, dtype=xp.int64).ravel(), xp.asarray(v, dtype=xp.int64).ravel()
    if len(u) != len(v):
        raise ValueError(f"u and v differ in length: {len(u)} != {len(v)}")
    node, inv = xp.unique(xp.concatenate([u, v]), return_inverse=True)
    inv = inv.ravel()
    if len(node) == 0:
        return node, node.copy()
    graph = sparse.coo_matrix(
        (xp.ones(len(u), dtype=xp.float32), (inv[: len(u)], inv[len(u) :])), shape=(len(node), len(node))
    )
    _, labels = connected_components(graph, directed=False)
    # Nodes are sorted, so the first node carrying each label is its minimum; labels need not be 0..k-1.
    kinds, first = xp.unique(labels, return_index=True)
    return node, node[first[xp.searchsorted(kinds, labels)]]


def components_local(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Connected components of an in-memory edge list, by scipy.

    Parameters
    ----------
    u, v : numpy.ndarray of int64
        Edge endpoints, same length.

    Returns
    -------
    node : numpy.ndarray of int64
        Distinct nodes, ascending.
    component : numpy.ndarray of int64
        Smallest node of each node's component.

    Raises
    ------
    ValueError
        If `u` and `v` differ in length.

    Notes
    -----
    Nodes are relabelled to ``0..n-1`` with :func:`numpy.unique` and solved by
    :func:`scipy.sparse.csgraph.connected_components`.
    """
    return _components(u, v, np, scipy.sparse, _scipy_components)


def device_solver():
    """cupyx's ``connected_components`` when it can run, else None (solve on the host).

    CuPy's ``cupyx.scipy.sparse.csgraph.connected_components`` runs cuGraph's weakly connected
    components (``pylibcugraph``) on CuPy arrays; without pylibcugraph it raises, so it is
    chosen only where pylibcugraph imports (any cuGraph install has it; RAPIDS' cudf wheels do not).
    """
    try:
        importlib.import_module("pylibcugraph")
        return importlib.import_module("cupyx.scipy.sparse.csgraph").connected_components
    except ImportError:
        return None


def components_device(u, v) -> tuple[np.ndarray, np.ndarray]:
    """Connected components of an edge list in device memory, the labels of :func:`components_local`.

    On the device with cuGraph's weakly connected components (through
    :func:`device_solver`) when pylibcugraph is installed; otherwise the edges are copied to
    the host and solved by scipy.

    Parameters
    ----------
    u, v : cupy.ndarray of int64
        Edge endpoints, same length.

    Returns
    -------
    node, component : numpy.ndarray of int64
        As :func:`components_local` (host arrays: the labels are joined with host tables).

    Raises
    ------
    ValueError
        If `u` and `v` differ in length.
    """
    import cupy

    solver = device_solver()
    if solver is None:
        return components_local(cupy.asnumpy(u), cupy.asnumpy(v))
    sparse = importlib.import_module("cupyx.scipy.sparse")
    node, component = _components(u, v, cupy, sparse, solver)
    return cupy.asnumpy(node), cupy.asnumpy(component)
