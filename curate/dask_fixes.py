"""A fix to Dask's expression cache, applied when curate's stages are imported, and a guard
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
