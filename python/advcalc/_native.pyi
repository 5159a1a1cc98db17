"""Type stub of the native module: the engine's bridge, called only by advcalc/__init__.py,
which holds the documented API. Configuration and read arguments arrive as dicts built
there (``_config_args``, ``_read_args``)."""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import pyarrow as pa

__version__: str

ConfigArgs = Dict[str, Any]  # config_file, config_text, sets, estimator, convention
ReadArgs = Dict[str, Any]  # input_format, layout, threads, allow_nonfinite

def compute_stream(
    data: Any, config: ConfigArgs, read: ReadArgs, metrics: bool
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
) -> Tuple[int, int, int, List[str], List[str]]:
    """``advcalc run``: (rows, row_groups, batches, warnings, notes)."""

def inspect(src: str, config: ConfigArgs, read: ReadArgs) -> str:
    """``advcalc inspect --json`` (JSON text)."""

def compare(
    src: str, variants: Sequence[Tuple[str, ConfigArgs]], read: ReadArgs, correct_above: float
) -> str:
    """``advcalc compare --json`` (JSON text)."""

def estimators() -> str:
    """``advcalc estimators --json`` (JSON text)."""

def estimator_name(config: ConfigArgs) -> str:
    """The name of the estimator a configuration selects."""
