"""One file of a dataset with pyarrow, as the CLI reads and writes it: Parquet or Arrow IPC
by extension, and the step of a `step=N` path as a `step` column when the file has none (the
CLI fills it the same way while decoding), or checked against the column when it has one."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ._errors import DataError

_ARROW_FILE = (".arrow", ".feather", ".ipc")


def read_file(path: str, step: Optional[int] = None, columns: Optional[List[str]] = None) -> pa.Table:
    """The file as a table; `columns` (when given) keeps only those that exist in it. A file
    that cannot be read, or whose `step` column disagrees with the `step=N` of its path, is a
    DataError naming it (as the CLI)."""
    try:
        table = _read(path, columns)
    except (OSError, pa.ArrowException) as e:
        raise DataError(f"{path}: cannot read it", None, [str(e)]) from None
    if step is not None and "step" in table.column_names:
        differs = pc.not_equal(table.column("step").cast(pa.int64()), pa.scalar(step, pa.int64()))
        bad = pc.index(differs, True).as_py()
        if bad >= 0:
            found = table.column("step")[bad].as_py()
            raise DataError(
                f"{path}: row {bad} has step {found}, but the file's path says step={step}"
            )
    elif step is not None:
        table = table.append_column("step", pa.array([step] * table.num_rows, pa.int64()))
    return table


def _read(path: str, columns: Optional[List[str]]) -> pa.Table:
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
    return table


def file_schema(path: str) -> pa.Schema:
    try:
        suffix = Path(path).suffix.lower()
        if suffix in _ARROW_FILE:
            return pa.ipc.open_file(path).schema
        if suffix == ".arrows":
            return pa.ipc.open_stream(path).schema
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as e:
        raise DataError(f"{path}: cannot read it", None, [str(e)]) from None


def file_rows(path: str) -> int:
    try:
        suffix = Path(path).suffix.lower()
        if suffix in _ARROW_FILE:
            reader = pa.ipc.open_file(path)
            return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        if suffix == ".arrows":
            return pa.ipc.open_stream(path).read_all().num_rows
        return pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException) as e:
        raise DataError(f"{path}: cannot read it", None, [str(e)]) from None


def write_file(table: pa.Table, path: Path, like: Path) -> None:
    """`table` to `path` in the format the extension of `like` names (the target of a
    temporary file); Parquet with zstd and no dictionaries — token lists of floats do not
    repeat, and dictionary encoding them first cost 2.5x the write time on the benchmark
    dump."""
    suffix = like.suffix.lower()
    if suffix in _ARROW_FILE or suffix == ".arrows":
        with open(path, "wb") as sink:
            opener = pa.ipc.new_stream if suffix == ".arrows" else pa.ipc.new_file
            with opener(sink, table.schema) as writer:
                writer.write_table(table)
    else:
        pq.write_table(table, path, compression="zstd", use_dictionary=False)
