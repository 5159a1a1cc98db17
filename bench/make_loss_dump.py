#!/usr/bin/env python3
"""The input of the `advcalc loss` benchmark: the benchmark dump plus a `log_probs` column.

    python bench/make_loss_dump.py IN OUT [--seed 1] [--noise 0.02]

IN is a dump from ``bench/make_dump.py``. ``log_probs`` (the current policy's log-probs) is
``old_log_probs + N(0, noise)``, capped at -1e-4 (so <= 0), float32, with the same list
offsets as ``old_log_probs``; if IN has no ``old_log_probs`` it gets one first (as
make_dump.py makes it: -Gamma(0.6, 0.5) floored at -12, capped at -1e-4). Every other column,
the row order and the row groups (1024 rows, zstd) are kept. Deterministic for a given IN and
--seed.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROW_GROUP = 1024


def with_log_probs(table: pa.Table, seed: int, noise: float) -> pa.Table:
    rng = np.random.default_rng(seed)
    mask = table.column("response_mask").combine_chunks()
    offsets = mask.offsets
    n_tok = len(mask.flatten())
    if "old_log_probs" not in table.column_names:
        old = np.minimum(np.maximum(-rng.gamma(0.6, 0.5, size=n_tok), -12.0), -1e-4).astype(np.float32)
        table = table.append_column("old_log_probs", pa.ListArray.from_arrays(offsets, pa.array(old)))
    old_col = table.column("old_log_probs").combine_chunks()
    assert pc.all(pc.equal(old_col.offsets, offsets)).as_py(), "old_log_probs and response_mask differ in lengths"
    old = old_col.flatten().to_numpy(zero_copy_only=False)
    cur = np.minimum(old + rng.normal(0.0, noise, size=n_tok).astype(np.float32), np.float32(-1e-4))
    cur = cur.astype(np.float32)
    return table.append_column("log_probs", pa.ListArray.from_arrays(old_col.offsets, pa.array(cur)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.02, help="std of log_probs - old_log_probs (default 0.02)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    table = with_log_probs(pq.read_table(args.input), args.seed, args.noise)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    try:
        pq.write_table(table, tmp, row_group_size=ROW_GROUP, compression="zstd")
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    print(f"wrote {out}: {table.num_rows} rows, {out.stat().st_size / 2**20:.1f} MiB "
          f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
