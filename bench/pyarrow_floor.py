#!/usr/bin/env python3
"""Alternative 3: the I/O floor. pyarrow reads the dump and writes it back with three extra
list<float32> columns, and does no maths.

    python bench/pyarrow_floor.py IN OUT

The three columns stand for ``token_level_rewards``, ``advantages`` and ``returns``: the
first is ``rm_scores`` itself, the other two are zeros with ``rm_scores``' offsets (so they
cost a full column to encode and compress, though zeros compress far better than real
advantages). Written with zstd, row groups of 1024 rows as the input. Any estimator has to
do at least this much work.
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def main(argv=None):
    ap = argparse.ArgumentParser(description="pyarrow read + write with three extra columns (I/O floor)")
    ap.add_argument("input")
    ap.add_argument("output")
    args = ap.parse_args(argv)

    table = pq.read_table(args.input)
    rm = table.column("rm_scores")
    lengths = pc.list_value_length(rm).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    zeros = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                     pa.array(np.zeros(int(offsets[-1]), dtype=np.float32)))
    table = (table.append_column("token_level_rewards", rm)
                  .append_column("advantages", zeros)
                  .append_column("returns", zeros))
    pq.write_table(table, args.output, row_group_size=1024, compression="zstd")


if __name__ == "__main__":
    main()
