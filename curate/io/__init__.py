"""Input and output: documents from JSONL/Parquet via fsspec, result tables."""

from curate.io.read import DOC, read_documents
from curate.io.write import count_rows, write_documents, write_table

__all__ = ["DOC", "read_documents", "write_documents", "write_table", "count_rows"]
