"""One file of a dataset with pyarrow, as the CLI reads and writes it: Parquet or Arrow IPC
by extension, and the step of a `step=N` path as a `step` column when the file has none (the
CLI fills it the same way while decoding), or checked against the column when it has one.
A path may be an object URL (``s3://...``), read through pyarrow's filesystem for it
(``_remote``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import _remote
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


def _source(path: str) -> Any:
    """What pyarrow's readers take for ``path``: a local path as it is, an object URL opened
    through its filesystem (a random-access file, closed when pyarrow drops it)."""
    return _remote.open_input(path) if _remote.is_url(path) else path


def _suffix(path: str) -> str:
    # not Path(path): pathlib would shorten a URL's `//`; the name's extension is the same
    return os.path.splitext(path.rsplit("/", 1)[-1])[1].lower()


def _read(path: str, columns: Optional[List[str]]) -> pa.Table:
    suffix = _suffix(path)
    if suffix in _ARROW_FILE:
        table = pa.ipc.open_file(_source(path)).read_all()
    elif suffix == ".arrows":
        table = pa.ipc.open_stream(_source(path)).read_all()
    else:
        table = None
        if columns is not None:
            source = _source(path)
            names = pq.read_schema(source).names
            table = pq.read_table(source, columns=[c for c in columns if c in names])
        else:
            table = pq.read_table(_source(path))
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    return table


def file_schema(path: str) -> pa.Schema:
    try:
        suffix = _suffix(path)
        if suffix in _ARROW_FILE:
            return pa.ipc.open_file(_source(path)).schema
        if suffix == ".arrows":
            return pa.ipc.open_stream(_source(path)).schema
        return pq.read_schema(_source(path))
    except (OSError, pa.ArrowException) as e:
        raise DataError(f"{path}: cannot read it", None, [str(e)]) from None


def file_rows(path: str) -> int:
    try:
        suffix = _suffix(path)
        if suffix in _ARROW_FILE:
            reader = pa.ipc.open_file(_source(path))
            return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        if suffix == ".arrows":
            return pa.ipc.open_stream(_source(path)).read_all().num_rows
        return pq.read_metadata(_source(path)).num_rows
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
