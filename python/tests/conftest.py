"""Shared test helpers: where the repository and the CLI binary are, and how to run it.

The Python package must give the CLI's numbers, so most tests run the real `advcalc`
binary on the same input and compare. `ADVCALC_BIN` names it; by default the debug build
that the README's test command makes first (`target/debug/advcalc`).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import List, Optional

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "fixtures" / "demo.parquet"
CASES = REPO / "fixtures" / "verl" / "cases"


def advcalc_bin() -> Path:
    found = Path(os.environ.get("ADVCALC_BIN", REPO / "target" / "debug" / "advcalc"))
    if not found.exists():
        pytest.skip(f"no advcalc binary at {found}: run `cargo build` (or set ADVCALC_BIN)")
    return found


def cli(*args: str, check: bool = True, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """Run the CLI; with `check`, fail the test on a non-zero exit, showing its stderr."""
    done = subprocess.run(
        [str(advcalc_bin()), *map(str, args)], capture_output=True, text=True, timeout=300,
        cwd=cwd,
    )
    if check and done.returncode != 0:
        pytest.fail(f"advcalc {' '.join(map(str, args))} exited {done.returncode}:\n{done.stderr}")
    return done


def cli_run(src: Path, out: Path, args: List[str], cwd: Optional[Path] = None) -> pa.Table:
    cli("run", "-q", *args, src, out, cwd=cwd)
    return pq.read_table(out)


def cli_json(*args: str) -> object:
    return json.loads(cli(*args).stdout)


def same_columns(got: pa.Table, want: pa.Table) -> None:
    """Every column of `want` is in `got` with the same type and the same values, bit for
    bit (NaN equal to NaN), in the same order; schema metadata (provenance) is ignored."""
    assert got.column_names == want.column_names
    for name in want.column_names:
        g, w = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        assert g.type == w.type, f"{name}: {g.type} != {w.type}"
        assert g.equals(w) or _equal_with_nan(g, w), f"{name} differs"


def _equal_with_nan(g: pa.Array, w: pa.Array) -> bool:
    import math

    def norm(v):
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        return v

    return norm(g.to_pylist()) == norm(w.to_pylist())
