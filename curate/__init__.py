"""curate: exact and near-duplicate (MinHash + LSH) removal for text corpora, on Dask.

Pipeline: :mod:`curate.io` (read) -> :mod:`curate.dedup` (stages) -> :mod:`curate.io` (write),
orchestrated by :func:`curate.pipeline.dedup` and the ``curate`` command (:mod:`curate.cli`).
The Python API, :func:`deduplicate` (:mod:`curate.api`), runs the same stages on a Dask DataFrame.
Backend-specific partition operations live in :mod:`curate.backend`; per-partition array
kernels in :mod:`curate.kernels`.
"""

from importlib import import_module
from importlib.metadata import version

__version__ = version("curate")

# Imported when first used, so that `import curate` (and the command line's start) stays light.
_API = {
    "AccountingError": "curate.api",
    "deduplicate": "curate.api",
    "Deduplication": "curate.api",
    "add_doc_keys": "curate.dedup.keys",
    "one_task_per_gpu": "curate.cluster",
    "read_documents": "curate.io",
}


def __getattr__(name: str):
    if name in _API:
        return getattr(import_module(_API[name]), name)
    raise AttributeError(f"module 'curate' has no attribute {name!r}")


__all__ = [
    "AccountingError",
    "Deduplication",
    "__version__",
    "add_doc_keys",
    "deduplicate",
    "one_task_per_gpu",
    "read_documents",
]
