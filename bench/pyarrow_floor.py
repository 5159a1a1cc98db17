#!/usr/bin/env python3
"""Alternative 3: the I/O floor. pyarrow reads the dump and writes it back with three extra
list<float32> columns, and does no maths.

    python bench/pyarrow_floor.py IN OUT [--pyarrow-defaults]

The three columns stand for ``token_level_rewards``, ``advantages`` and ``returns``: the
first is ``rm_scores`` itself, the other two are zeros with ``rm_scores``' offsets (so they
cost a full column to encode and compress, though zeros compress far better than real
advantages). Written with zstd, row groups of 1024 rows as the input. Any estimator has to
do at least this much work.

By default only ``uid`` is dictionary-encoded: pyarrow's default (dictionary-encode every
column) spends about a second on the 8192-row dump building dictionaries of float token
values that overflow and fall back to plain pages, and makes the file ~15% larger, which is
not I/O cost. ``--pyarrow-defaults`` writes with pyarrow's defaults instead (what a plain
``pq.write_table(table, out, compression="zstd")`` gives).
"""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def with_output_columns(table: pa.Table) -> pa.Table:
    """`table` plus the three list<float32> columns advcalc writes (zeros, but for
    `token_level_rewards` = `rm_scores`): what the floor writes."""
    rm = table.column("rm_scores")
    lengths = pc.list_value_length(rm).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    zeros = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                     pa.array(np.zeros(int(offsets[-1]), dtype=np.float32)))
    return (table.append_column("token_level_rewards", rm)
                 .append_column("advantages", zeros)
                 .append_column("returns", zeros))


def main(argv=None):
    ap = argparse.ArgumentParser(description="pyarrow read + write with three extra columns (I/O floor)")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--pyarrow-defaults", action="store_true",
                    help="dictionary-encode every column (pyarrow's default) instead of only uid")
    args = ap.parse_args(argv)

    table = with_output_columns(pq.read_table(args.input))
    dictionary = True if args.pyarrow_defaults else [c for c in ("uid",) if c in table.column_names]
    pq.write_table(table, args.output, row_group_size=1024, compression="zstd", use_dictionary=dictionary)


if __name__ == "__main__":
    main()
