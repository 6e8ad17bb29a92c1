"""Two fixes to Dask's expressions, applied when curate's stages are imported (the expression
cache, and substitution's cost on shared subexpressions: :func:`_substitute`), and a guard
for building graphs from several threads on Python 3.11 (:func:`one_at_a_time`).

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
import inspect
import sys
import threading
import weakref

from dask._expr import Expr, SingletonExpr


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


def _substitute(self, old, new, _seen):
    """``Expr._substitute`` with each node's result remembered (``_seen``: name -> result).

    Dask (2026.8) remembers only the nodes that did not change, so a node above the one replaced
    is rebuilt once per path that reaches it: exponential in a graph of shared subexpressions.
    Blockwise fusion substitutes once per fused group, and the Python API's ``kept`` frame of
    mode fuzzy or both (167 expressions, 54,874 paths) never finished ``persist()`` or
    ``optimize()``, nor a second ``curate.deduplicate`` of it. Otherwise Dask's own logic.
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
            value = operand._substitute(old, new, _seen)
        elif (
            "Fused" in type(self).__name__ and isinstance(operand, list) and all(isinstance(op, Expr) for op in operand)
        ):
            value = [op._substitute(old, new, _seen) for op in operand]  # Fused.exprs, as Dask does
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
    _seen[self._name] = result
    return result


def _substitute_all(self, old, new):
    return self._substitute(old, new, _seen={})


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


_LOCK = threading.RLock()


@contextlib.contextmanager
def one_at_a_time():
    """Run the block (or decorated function) in one thread at a time on Python 3.11; nothing on 3.12+.

    Python 3.11's ``functools.cached_property`` takes one lock per property, shared by all
    instances, and Dask's expressions compute their metas through such properties, in the
    caller's thread and in the distributed client's own: two threads of a pipeline reading and
    deduplicating at once each held one property's lock and waited for the other's, for ever
    (python/cpython#87634, fixed in 3.12 by removing the lock). The Python API's entry points
    (:func:`curate.deduplicate` and its ``compute``, :func:`curate.read_documents`,
    :func:`curate.add_doc_keys`) run under this.
    """
    if sys.version_info >= (3, 12):
        yield
        return
    with _LOCK:
        yield
