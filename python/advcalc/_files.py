"""Reading one file of a dataset with pyarrow, as the CLI reads it: Parquet or Arrow IPC by
extension, and the step of a `step=N` path as a `step` column when the file has none (the
CLI fills it the same way while decoding)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import pyarrow as pa
import pyarrow.parquet as pq

_ARROW_FILE = (".arrow", ".feather", ".ipc")


def read_file(path: str, step: Optional[int] = None, columns: Optional[List[str]] = None) -> pa.Table:
    """The file as a table; `columns` (when given) keeps only those that exist in it."""
    suffix = Path(path).suffix.lower()
    if suffix in _ARROW_FILE:
        table = pa.ipc.open_file(path).read_all()
    elif suffix == ".arrows":
        table = pa.ipc.open_stream(path).read_all()
    else:
        table = None
        if columns is not None:
            names = pq.read_schema(path).names
            table = pq.read_table(path, columns=[c for c in columns if c in names])
        else:
            table = pq.read_table(path)
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    if step is not None and "step" not in table.column_names:
        table = table.append_column("step", pa.array([step] * table.num_rows, pa.int64()))
    return table


def file_schema(path: str) -> pa.Schema:
    suffix = Path(path).suffix.lower()
    if suffix in _ARROW_FILE:
        return pa.ipc.open_file(path).schema
    if suffix == ".arrows":
        return pa.ipc.open_stream(path).schema
    return pq.read_schema(path)
