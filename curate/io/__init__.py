"""Input and output: documents from JSONL/Parquet via fsspec, result tables.

The names below are imported on first use (PEP 562), so that :mod:`curate.io.files` (paths,
formats, fields) loads without Dask and pandas: the command line checks its inputs with it
before anything heavy is imported.
"""

import importlib

_HOMES = {
    "DOC": "curate.schema",  # kept here for `from curate.io import DOC`
    "read_documents": "read",
    "locate": "lookup",
    "read_records": "lookup",
    "split_rejected": "read",
    "count_rows": "write",
    "write_documents": "write",
    "write_table": "write",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'curate.io' has no attribute {name!r}")
    home = _HOMES[name]
    return getattr(importlib.import_module(home if "." in home else f"curate.io.{home}"), name)


__all__ = sorted(_HOMES)
