"""curate: exact and near-duplicate (MinHash + LSH) removal for text corpora, on Dask.

Pipeline: :mod:`curate.io` (read) -> :mod:`curate.dedup` (stages) -> :mod:`curate.io` (write),
orchestrated by :func:`curate.pipeline.dedup` and the ``curate`` command (:mod:`curate.cli`).
Backend-specific partition operations live in :mod:`curate.backend`; per-partition array
kernels in :mod:`curate.kernels`.
"""

from importlib.metadata import version

__version__ = version("curate")
