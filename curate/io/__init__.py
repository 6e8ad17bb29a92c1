"""Input and output: documents from JSONL/Parquet via fsspec, result tables."""

from curate.io.read import DOC, read_documents, read_records, split_rejected
from curate.io.write import count_rows, write_documents, write_table

__all__ = ["DOC", "count_rows", "read_documents", "read_records", "split_rejected", "write_documents", "write_table"]
