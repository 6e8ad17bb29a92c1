"""Dedup stages: Dask DataFrame in, Dask DataFrame out, whatever the partitions are made of."""

from curate.dedup.exact import ExactDedup
from curate.dedup.fuzzy import FuzzyDedup
from curate.dedup.keep import KeepPolicy
from curate.dedup.removal import drop_keys, select_keys, write_keys

__all__ = ["ExactDedup", "FuzzyDedup", "KeepPolicy", "drop_keys", "select_keys", "write_keys"]
