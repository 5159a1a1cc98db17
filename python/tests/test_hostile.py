"""Hostile arguments from Python (issue #36): ``metrics=`` follows DST's rules (never SRC
or DST, create-only unless ``force``), and ``threads=`` is capped as the CLI's ``-j``."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import advcalc

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.parquet"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    p = tmp_path / "in.parquet"
    shutil.copy(DEMO, p)
    return p


def test_metrics_never_overwrites_src_or_dst(src: Path, tmp_path: Path) -> None:
    before = src.read_bytes()
    os.symlink(src, tmp_path / "alias.parquet")
    for metrics in (src, tmp_path / "alias.parquet"):
        with pytest.raises(advcalc.UsageError, match="is IN"):
            advcalc.run(src, tmp_path / "out.parquet", estimator="grpo", metrics=metrics)
        assert src.read_bytes() == before
    with pytest.raises(advcalc.UsageError, match="is OUT"):
        advcalc.run(src, tmp_path / "out.parquet", estimator="grpo", metrics=tmp_path / "out.parquet", force=True)
    assert not (tmp_path / "out.parquet").exists()


def test_metrics_is_create_only_unless_forced(src: Path, tmp_path: Path) -> None:
    m = tmp_path / "m.json"
    m.write_text("earlier")
    with pytest.raises(advcalc.UsageError, match="already exists"):
        advcalc.run(src, tmp_path / "out.parquet", estimator="grpo", metrics=m)
    assert m.read_text() == "earlier"
    advcalc.run(src, tmp_path / "out.parquet", estimator="grpo", metrics=m, force=True)
    assert json.loads(m.read_text())["advcalc/rows"] == 256


def test_threads_are_capped(src: Path) -> None:
    # 100000 threads would each be started; the cap keeps it a normal run
    table = advcalc.compute(str(src), estimator="grpo", threads=100000)
    assert table.num_rows == 256
