"""Names of the columns that curate adds to the documents and passes between its stages.

Imports nothing: every layer (``io``, ``dedup``, the pipeline, review) takes the names from
here, so none has to import another just for a column name.
"""

DOC = "_doc"  # int64 document key, unique and increasing in input order (curate.dedup.keys)
POSITION_BITS = 40  # _doc = file_index << POSITION_BITS | position (byte offset or row)
# Columns of a skip-mode read: the record's line (JSONL, 1-based) or row (Parquet, 0-based), and,
# for a rejected record, what is wrong (kind, field, reason) and the record itself (bytes).
REJECT_COLUMNS = ("_line", "_kind", "_field", "_reason", "_record")

__all__ = ["DOC", "POSITION_BITS", "REJECT_COLUMNS"]
