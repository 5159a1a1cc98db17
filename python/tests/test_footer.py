"""OUT's footer as pyarrow (Arrow C++) reads it: the min/max statistics of every column OUT
copies from IN are there and equal IN's (parquet 60 marks float columns IEEE 754 total order,
under which Arrow C++ drops them; advcalc writes the type-defined order IN's writer used)."""

from __future__ import annotations

import pyarrow.parquet as pq

from conftest import DEMO, cli


def test_pyarrow_reads_in_s_statistics_from_out(tmp_path):
    cli("run", "-q", "-e", "grpo", DEMO, tmp_path / "out.parquet")
    a = pq.ParquetFile(DEMO).metadata
    b = pq.ParquetFile(tmp_path / "out.parquet").metadata
    for rg in range(a.num_row_groups):
        for i in range(a.num_columns):
            sa = a.row_group(rg).column(i).statistics
            sb = b.row_group(rg).column(i).statistics
            assert sb is not None and sb.has_min_max, a.row_group(rg).column(i).path_in_schema
            assert sa.to_dict() == sb.to_dict()
    # a float column advcalc writes itself keeps its min/max too
    names = [b.row_group(0).column(i).path_in_schema for i in range(b.num_columns)]
    rewards = b.row_group(0).column(names.index("token_level_rewards.list.element")).statistics
    assert rewards is not None and rewards.has_min_max
