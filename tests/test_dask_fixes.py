"""Dask's expression cache read in one step (curate.dask_fixes)."""

import weakref

import pandas as pd
from dask._expr import SingletonExpr

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
