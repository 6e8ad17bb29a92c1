"""Fixes to Dask's expressions, applied when curate's stages are imported: the expression
cache, substitution's cost on shared subexpressions and the metas it computed again
(:func:`_substitute`), depths walked again (:func:`_depth`), Python 3.11's locks on their
cached properties (:func:`apply_unlocked`), host steps kept out of blockwise fusion
(:func:`apply_host_steps_unfused`); and :func:`fused`, the fusion that Dask's compute leaves out.

Dask (2026.8) deduplicates expressions in a :class:`weakref.WeakValueDictionary` per class
(``SingletonExpr._instances``) and reads it in two steps: ``name in cache``, then
``cache[name]``. When the last reference to the cached expression dies between the two (the
scheduler and the client share the cache, in one process, on every ``LocalCluster``), the second
step raises ``KeyError: 'getitem-…'`` and the run fails with "Error during deserialization of the
task graph". It was seen three times in this test suite, in ordinary runs. The fix reads the cache
once (``get``), as a weak dictionary must be read; it is applied only where Dask's code still
has the two-step read.
"""

import contextlib
import functools
import inspect
import sys
import weakref

import dask.dataframe.dask_expr._expr as dataframe_expr
from dask._expr import Expr, SingletonExpr, _ExprSequence
from dask.base import collections_to_expr
from dask.dataframe.dask_expr._collection import FrameBase, new_collection
from dask.utils import key_split

# Key prefix of a step that computes on the host whatever the backend (curate.backend.host_step).
HOST_STEP = "host-"


def _new(cls, *args, _determ_token=None, **kwargs):
    # SingletonExpr.__new__ with a one-step read: same instances, same cache.
    if not hasattr(cls, "_instances"):
        cls._instances = weakref.WeakValueDictionary()
    inst = super(SingletonExpr, cls).__new__(cls, *args, _determ_token=_determ_token, **kwargs)
    if cls.__init__ == object.__init__:
        cached = cls._instances.get(inst._name)
        if cached is not None:
            return cached
    cls._instances[inst._name] = inst
    return inst


def apply() -> bool:
    """Replace ``SingletonExpr.__new__`` if it still reads its cache in two steps; True if replaced."""
    if SingletonExpr.__new__ is _new:
        return True
    try:
        source = inspect.getsource(SingletonExpr.__new__)
    except (OSError, TypeError):  # no source to read (a frozen install): leave Dask as it is
        return False
    if "in cls._instances" not in source:
        return False
    SingletonExpr.__new__ = staticmethod(_new)
    return True


apply()


def _substitute(self, old, new, _seen, _same=False):
    """``Expr._substitute`` with each node's result remembered (``_seen``: name -> result).

    Dask (2026.8) remembers only the nodes that did not change, so a node above the one replaced
    is rebuilt once per path that reaches it: exponential in a graph of shared subexpressions.
    Blockwise fusion substitutes once per fused group, and the Python API's ``kept`` frame of
    mode fuzzy or both (167 expressions, 54,874 paths) never finished ``persist()`` or
    ``optimize()``, nor a second ``curate.deduplicate`` of it. Otherwise Dask's own logic.

    Where ``new`` computes what ``old`` does (``_same``: a ``Fused`` group that ``old`` heads, as
    blockwise fusion substitutes), each rebuilt node keeps the meta and divisions its original
    had computed (:data:`_KEPT`): fusion computed them again for every node above each group, in
    each of its passes (47 for the Python API's frames), 3 s of the 7 s it took on 20news.
    """
    if not isinstance(_seen, dict):  # a caller of Dask's own kind (a set of names): start afresh
        _seen = {}
    if self._name in _seen:
        return _seen[self._name]
    substitute_literal = not isinstance(old, Expr)
    if substitute_literal and isinstance(old, bool):
        raise TypeError("Arguments to `substitute` cannot be bool.")
    if not substitute_literal and self._name == old._name:
        _seen[self._name] = new
        return new
    operands, update = [], False
    for operand in self.operands:
        if isinstance(operand, Expr):
            value = operand._substitute(old, new, _seen, _same)
        elif (
            "Fused" in type(self).__name__ and isinstance(operand, list) and all(isinstance(op, Expr) for op in operand)
        ):
            value = [op._substitute(old, new, _seen, _same) for op in operand]  # Fused.exprs, as Dask does
            update |= any(v._name != op._name for v, op in zip(value, operand))
            operands.append(value)
            continue
        elif substitute_literal and not isinstance(operand, bool) and isinstance(operand, type(old)) and operand == old:
            value, update = new, True
            operands.append(value)
            continue
        else:
            value = operand
        update |= isinstance(operand, Expr) and value._name != operand._name
        operands.append(value)
    result = type(self)(*operands) if update else self
    if update and _same:
        for name in _KEPT:
            if name in vars(self):
                vars(result).setdefault(name, vars(self)[name])
    _seen[self._name] = result
    return result


# What a node computes from its operands' results, not their expressions (which ``args`` and
# the like hold): the same when an operand is replaced by one that computes the same.
_KEPT = ("_meta", "divisions")


def _substitute_all(self, old, new):
    same = isinstance(new, dataframe_expr.Fused) and isinstance(old, Expr) and new.exprs[0]._name == old._name
    return self._substitute(old, new, _seen={}, _same=same)


def apply_substitute() -> bool:
    """Replace ``Expr._substitute`` where Dask's still remembers unchanged nodes only; True if replaced."""
    if Expr._substitute is _substitute:
        return True
    try:
        source = inspect.getsource(Expr._substitute)
    except (OSError, TypeError):
        return False
    if "_seen.add(self._name)" not in source:  # Dask remembers results now, or changed otherwise
        return False
    Expr._substitute, Expr.substitute = _substitute, _substitute_all
    return True


apply_substitute()


def _depth(self, cache=None):
    """``Expr._depth`` (the longest path to a leaf, counted in expressions) remembered on the
    expression, which is immutable: Dask's remembers it for one call only, and blockwise fusion
    names each fused group after its steps sorted by depth (``Fused.__str__``), walking the graph
    below every step of every group again: 0.45 s of the 1.45 s that fusing the Python API's
    frames took on 20news."""
    depth = vars(self).get("_curate_depth")
    if depth is None:
        depth = max((dependency._depth() + 1 for dependency in self.dependencies()), default=1)
        vars(self)["_curate_depth"] = depth
    return depth


def apply_depth() -> bool:
    """Replace ``Expr._depth`` where Dask's still takes a cache for one call; True if replaced."""
    if Expr._depth is _depth:
        return True
    if list(inspect.signature(Expr._depth).parameters) != ["self", "cache"]:
        return False
    Expr._depth = _depth
    return True


apply_depth()


def _unlocked(cls: type) -> None:
    # Each of the class's own cached properties computes without its lock, as on Python 3.12
    # (where two threads may compute one value twice, and keep one: Dask's metas are pure).
    for value in vars(cls).values():
        if isinstance(value, functools.cached_property):
            value.lock = contextlib.nullcontext()


def _init_subclass(cls, **kwargs):
    super(Expr, cls).__init_subclass__(**kwargs)
    _unlocked(cls)


def apply_unlocked() -> bool:
    """Take Python 3.11's locks off the cached properties of Dask's expressions, and of those
    defined later; True if done (Python 3.11), False on 3.12+, which has no such lock.

    Python 3.11's ``functools.cached_property`` takes one lock per property, shared by all
    instances (python/cpython#87634, removed in 3.12), and Dask's expressions compute their metas
    and tasks through such properties, in every thread that builds a graph: the caller's, and on
    a ``LocalCluster`` the scheduler's, which builds a persisted frame's graph while the caller
    optimizes the next. Two such threads each held one property's lock and waited for the
    other's, for ever: ``result.kept.persist()`` then ``result.removed.persist()``, or two
    threads of a pipeline deduplicating at once.
    """
    if sys.version_info >= (3, 12):
        return False
    if "__init_subclass__" not in vars(Expr):  # a Dask with its own: classes defined later keep their locks
        Expr.__init_subclass__ = classmethod(_init_subclass)
    classes = [Expr]
    while classes:
        cls = classes.pop()
        _unlocked(cls)
        classes += cls.__subclasses__()
    return True


apply_unlocked()


_blockwise_op = dataframe_expr.is_valid_blockwise_op


def _fusable(expr) -> bool:
    return _blockwise_op(expr) and not expr._name.startswith(HOST_STEP)


def apply_host_steps_unfused() -> bool:
    """Keep host steps (expressions named ``host-…``) out of Dask's blockwise fusion; True if done.

    A fused task is named after its first step (``Fused.__str__``), and on GPU workers a task named
    ``host-…`` runs without the GPU (:func:`curate.cluster.task_resources`): a host step fused with
    device steps after it would run them beside the GPU's task. Unfused, each host step is a task
    of its own, as :func:`curate.backend.host_step` describes, and the device steps before and
    after it fuse among themselves. Dask (2026.8) asks ``is_valid_blockwise_op`` which
    expressions may fuse; it is replaced where it is still that function.
    """
    if dataframe_expr.is_valid_blockwise_op is _fusable:
        return True
    if dataframe_expr.is_valid_blockwise_op is not _blockwise_op or not hasattr(
        dataframe_expr, "optimize_blockwise_fusion"
    ):
        return False
    dataframe_expr.is_valid_blockwise_op = _fusable
    return True


apply_host_steps_unfused()


def fused(collections: list) -> list:
    """``collections`` with their chains of partition-wise steps fused into one task per partition,
    as Dask fuses a collection it persists or optimizes on its own.

    Dask (2026.8) computes without blockwise fusion (``Client.compute`` and ``dask.compute``
    optimize to the "simplified-physical" stage only: dask/distributed#8833), so every step of a
    partition was a task of its own, stored between steps, each a scheduler round trip: 16,861
    tasks in a 20-partition run, where a GPU worker takes its tasks one at a time. The collections
    are fused together, so a step that several of them use stays one task (optimized one by one,
    it would be computed once for each); host steps stay tasks of their own
    (:func:`apply_host_steps_unfused`). Collections that are not Dask DataFrame expressions
    (delayed objects) are returned as they are.

    Parameters
    ----------
    collections : list
        Dask collections, to be computed together.

    Returns
    -------
    list
        The same results, in the same order, for ``dask.compute`` or ``Client.compute``.
    """
    frames = [i for i, collection in enumerate(collections) if isinstance(collection, FrameBase)]
    if not frames:
        return list(collections)
    expr = collections_to_expr([collections[i] for i in frames]).optimize()  # lowered, as compute does
    expr = dataframe_expr.optimize_blockwise_fusion(expr)
    exprs = expr.operands if isinstance(expr, _ExprSequence) else [expr]
    out = list(collections)
    for i, fused_expr in zip(frames, exprs, strict=True):
        out[i] = new_collection(fused_expr)
    return out


def fused_kinds(collections: list) -> dict[str, str]:
    """A kind of task for each fused step in ``collections`` (from :func:`fused`), by the name of
    its tasks' keys: its kinds of steps (:func:`dask.utils.key_split`), each once, first first, e.g.
    ``{"read-fused-operation-<token>": "read-documents+to_string_dtype+fingerprints+operation"}``.

    Dask names a fused task after its first and last steps' first words only (``read`` for
    ``read-documents`` and ``read-stage`` alike), which hides where a stage's time goes.
    """
    kinds = {}
    for collection in collections:
        if isinstance(collection, FrameBase):
            for expr in collection.expr.find_operations(dataframe_expr.Fused):
                steps = [
                    key_split(step._name).strip("_") for step in sorted(expr.exprs, key=lambda step: step._depth())
                ]
                kinds[expr._name] = "+".join(dict.fromkeys(steps))  # each kind of step once
    return kinds
