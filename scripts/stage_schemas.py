"""Whether the Parquet files of each stage under OUT/_stages agree on their Arrow schema.

    python scripts/stage_schemas.py OUT/_stages

Run after ``curate dedup ... --keep-stages``: one line per stage folder (files, rows, "same" or
"differ"), and for a folder whose files differ, each file's rows and schema. Reads footers only.
Used by ``scripts/gpu_check.sh`` to show what a GPU run's stage files hold.
"""

import sys
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq


def main(root: Path) -> None:
    folders = defaultdict(list)
    for file in sorted(root.rglob("part.*.parquet"), key=lambda f: (f.parent, int(f.name.split(".")[1]))):
        folders[file.parent].append(
            (file.name, pq.read_metadata(file).num_rows, pq.read_schema(file).remove_metadata())
        )
    for folder, files in folders.items():
        schemas = {str(schema) for _, _, schema in files}
        rows = sum(n for _, n, _ in files)
        print(
            f"{folder.relative_to(root)}: {len(files)} files, {rows} rows, {'same' if len(schemas) == 1 else 'differ'}"
        )
        if len(schemas) > 1:
            for name, n, schema in files:
                print(f"  {name} ({n} rows): {str(schema).replace(chr(10), '; ')}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
