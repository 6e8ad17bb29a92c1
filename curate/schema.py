"""Names of the columns that curate adds to the documents and passes between its stages, and of
the part files it writes.

Imports nothing: every layer (``io``, ``dedup``, the pipeline, review) takes the names from
here, so none has to import another just for a column name.
"""

DOC = "_doc"  # int64 document key, unique and increasing in input order (curate.dedup.keys)
POSITION_BITS = 40  # _doc = file_index << POSITION_BITS | position (byte offset or row)
# Columns of a skip-mode read: the record's line (JSONL, 1-based) or row (Parquet, 0-based), and,
# for a rejected record, what is wrong (kind, field, reason) and the record itself (bytes).
REJECT_COLUMNS = ("_line", "_kind", "_field", "_reason", "_record")
# Columns the stages add beside the id, the text and the keep column, which therefore may not be
# so named: exact dedup's digests and UTF-8 lengths, a fuzzy document's connected component.
MD5, SHA256, LENGTH, COMPONENT = "_md5", "_sha256", "_length", "component"
WORKING_COLUMNS = (MD5, SHA256, LENGTH, COMPONENT)
# Digits of an output part's number at least (part.00000.jsonl, as datatrove's and Hugging Face's
# shards are numbered): parts sort by name in the frame's order (curate.io.write_documents).
PART_DIGITS = 5

__all__ = [
    "COMPONENT",
    "DOC",
    "LENGTH",
    "MD5",
    "PART_DIGITS",
    "POSITION_BITS",
    "REJECT_COLUMNS",
    "SHA256",
    "WORKING_COLUMNS",
]
