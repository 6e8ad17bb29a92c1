"""Dedup stages: Dask DataFrame in, Dask DataFrame out, whatever the partitions are made of.

Documents are a Dask DataFrame keyed by ``_doc`` (:mod:`curate.dedup.keys`). Exact dedup
(:class:`ExactDedup`), fuzzy dedup (:class:`FuzzyDedup`) and their resolution
(:func:`curate.dedup.resolve.resolve`) run their stages through a ``stage`` hook
(:mod:`curate.dedup.stages`): one lazy graph for the Python API, written stage by stage for
``curate dedup``.
"""

from curate.dedup.exact import ExactDedup
from curate.dedup.fuzzy import FuzzyDedup
from curate.dedup.keep import KeepPolicy
from curate.dedup.keys import add_doc_keys, drop, select

__all__ = ["ExactDedup", "FuzzyDedup", "KeepPolicy", "add_doc_keys", "drop", "select"]
