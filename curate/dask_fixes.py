"""A fix to Dask's expression cache, applied when curate's stages are imported.

Dask (2026.8) deduplicates expressions in a :class:`weakref.WeakValueDictionary` per class
(``SingletonExpr._instances``) and reads it in two steps: ``name in cache``, then
``cache[name]``. When the last reference to the cached expression dies between the two (the
scheduler and the client share the cache, in one process, on every ``LocalCluster``), the second
step raises ``KeyError: 'getitem-…'`` and the run fails with "Error during deserialization of the
task graph". It was seen three times in this test suite, in ordinary runs. The fix reads the cache
once (``get``), as a weak dictionary must be read; it is applied only where Dask's code still
has the two-step read.
"""

import inspect
import weakref

from dask._expr import SingletonExpr


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
