"""Reading one file of a dataset with pyarrow, as the CLI reads it: Parquet or Arrow IPC by
extension, and the step of a `step=N` path as a `step` column when the file has none (the
CLI fills it the same way while decoding)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

_ARROW_FILE = (".arrow", ".feather", ".ipc")


def read_file(path: str, step: Optional[int] = None) -> pa.Table:
    suffix = Path(path).suffix.lower()
    if suffix in _ARROW_FILE:
        table = pa.ipc.open_file(path).read_all()
    elif suffix == ".arrows":
        table = pa.ipc.open_stream(path).read_all()
    else:
        table = pq.read_table(path)
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
