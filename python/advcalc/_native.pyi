"""Type stub of the native module: the engine's bridge, called only by advcalc/__init__.py,
which holds the documented API. Configuration and read arguments arrive as dicts built
there (``_config_args``, ``_read_args``)."""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

__version__: str

ConfigArgs = Dict[str, Any]  # config_file, config_text, config_name, sets, estimator, convention
ReadArgs = Dict[str, Any]  # input_format, layout, threads, allow_nonfinite

def compute_stream(
    data: Any, config: ConfigArgs, read: ReadArgs, metrics: bool, name: Optional[str] = None
) -> Tuple[pa.Table, Optional[str], List[str], List[str]]:
    """The engine on an Arrow C stream: (table, metrics JSON, warnings, notes)."""

def compute_path(
    src: str, config: ConfigArgs, read: ReadArgs, metrics: bool
) -> Optional[Tuple[pa.Table, Optional[str], List[str], List[str]]]:
    """The engine on a Parquet or Arrow IPC file read into memory; None for a JSONL dump."""

def run(
    src: str,
    dst: str,
    config: ConfigArgs,
    read: ReadArgs,
    output_format: Optional[str],
    force: bool,
    metrics: Optional[str],
    memory: Optional[int],
) -> Tuple[int, int, int, List[str], List[str]]:
    """``advcalc run``: (rows, row_groups, batches, warnings, notes)."""

def inspect(src: str, config: ConfigArgs, read: ReadArgs) -> str:
    """``advcalc inspect --json`` (JSON text)."""

def compare(
    src: str, variants: Sequence[Tuple[str, ConfigArgs]], read: ReadArgs, correct_above: float
) -> str:
    """``advcalc compare --json`` (JSON text)."""

def dataset_parts(src: str) -> List[Tuple[str, str, Optional[int], int]]:
    """A dataset's files in the CLI's order: (path, relative path, step of the path, rows);
    empty when src is one file."""

def run_parts(
    name: str, base: str, rels: Sequence[str], dst: str, config: ConfigArgs, read: ReadArgs
) -> Tuple[int, List[str]]:
    """The files ``rels`` under ``base``, in that order, run as one dataset named ``name``
    (the CLI's dataset run: pass 1, plan, pass 2, its writer), outputs at ``dst/rel``,
    overwritten; (rows, warnings)."""

def run_object_parts(
    name: str,
    base: str,
    rels: Sequence[str],
    dst: str,
    config: ConfigArgs,
    read: ReadArgs,
    force: bool,
) -> Tuple[int, List[str]]:
    """``run_parts`` on objects under the prefix ``base``, outputs under ``dst`` (a prefix or
    a local directory), put as ``advcalc run s3://… s3://…`` puts them; (rows, warnings)."""

def remove_stale_temporaries(dir: str) -> None:
    """Remove the temporary outputs in ``dir`` that killed processes of this host left."""

def temp_prefix_for(pid: int) -> str:
    """The start of the names of the temporary outputs process ``pid`` of this host writes."""

def merge_stats(parts: Sequence[bytes]) -> bytes:
    """Units' statistics appended in input order."""

class Plan:
    """The plan of pass 2, on the driver."""

    warnings: List[str]
    def steps(self) -> List[Optional[int]]: ...
    def shard(self, steps: Sequence[Optional[int]]) -> bytes: ...

class Engine:
    """The passes on record batches, for runners across processes (advcalc.ray)."""

    def __init__(self, config: ConfigArgs, schema: pa.Schema, name: str, read: ReadArgs) -> None: ...
    def needs_prepass(self) -> bool: ...
    def carries_across_steps(self) -> bool: ...
    def pass1_columns(self) -> List[str]: ...
    def prepass_stats(self, data: Any, first_row: int) -> bytes: ...
    def row_stats(
        self, data: Any, first_row: int, prepass: Optional[bytes]
    ) -> Tuple[bytes, List[Optional[int]]]: ...
    def plan(self, stats: Sequence[bytes]) -> Plan: ...
    def token_outputs(self, data: Any, first_row: int, shard: bytes) -> pa.Table: ...
    def file_stats(
        self,
        src: str,
        step: Optional[int],
        first_row: int,
        prepass: bool,
        pre: Optional[bytes],
        version: Optional[str],
        threads: Optional[int],
    ) -> Tuple[bytes, List[Optional[int]], int, Optional[str]]:
        """The pre-pass or pass 1 of a file or object read by the CLI's IO layer: (statistics,
        steps, rows, the file's version)."""
    def file_outputs(
        self,
        dataset: str,
        src: str,
        step: Optional[int],
        first_row: int,
        shard: bytes,
        dst: str,
        version: Optional[str],
        threads: Optional[int],
    ) -> int:
        """Pass 2 of a file or object with its plan shard, written to the local path ``dst``
        by the CLI's writer; the rows written."""

def cli(args: Sequence[str]) -> int: ...
def estimators() -> str:
    """``advcalc estimators --json`` (JSON text)."""

def estimator_name(config: ConfigArgs) -> str:
    """The name of the estimator a configuration selects."""

def put_object(local: str, url: str, force: bool) -> None:
    """The finished local file put at the object URL: visible only when complete,
    create-only unless ``force``."""
