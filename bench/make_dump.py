#!/usr/bin/env python3
"""Write a synthetic rollout dump of realistic shape for advcalc's benchmark.

    python bench/make_dump.py --rows 8192 --out bench/data/dump_8192.parquet [--seed 0]

pyarrow + numpy only; the same --rows/--seed always gives the same file.

Shape (the benchmark issue's specification):

* one row per response, ``--rows`` rows (a multiple of 8): ``rows / 8`` prompts, 8 responses
  each, string uids ``prompt-000000``...;
* response lengths uniform in 256..1792 tokens (inclusive);
* half the rows (chosen at random) are multi-turn: one tool span (``response_mask`` 0) of
  32..L/4 tokens starting somewhere between L/4 and L/2;
* ``rm_scores``: 0/1 correctness (per-prompt success rate uniform in 0.1..0.9) at the row's
  last position, 0 elsewhere;
* ``old_log_probs``: negative, heavy-tailed (-Gamma(0.6, 0.5), floored at -12);
  ``ref_log_prob`` = old + N(0, 0.05); ``rollout_log_probs`` = old +- U(0.01, 0.1), with
  0.2% of tokens off by N(0, 1.5) (the tokens rejection sampling exists for), and 0 on tool
  tokens (inference engines report nothing there); all log-probs capped at -1e-4;
* ``values`` ~ N(0, 0.5);
* rows shuffled, so every group is scattered over the row groups; row groups of 1024 rows;
  zstd.

Columns: ``uid`` string, ``response_mask`` list<int8>, ``rm_scores``, ``old_log_probs``,
``ref_log_prob``, ``rollout_log_probs``, ``values`` list<float32>.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

GROUP = 8
MIN_LEN, MAX_LEN = 256, 1792
ROW_GROUP = 1024


def make_table(rows: int, seed: int) -> pa.Table:
    if rows <= 0 or rows % GROUP:
        raise SystemExit(f"--rows must be a positive multiple of {GROUP}, got {rows}")
    rng = np.random.default_rng(seed)
    n_prompts = rows // GROUP

    # ---- per-row attributes, in group order, then shuffled ------------------------------
    uid = np.repeat(np.array([f"prompt-{p:06d}" for p in range(n_prompts)], dtype=object), GROUP)
    success = np.repeat(rng.uniform(0.1, 0.9, size=n_prompts), GROUP)
    score = (rng.random(rows) < success).astype(np.float32)
    length = rng.integers(MIN_LEN, MAX_LEN + 1, size=rows)
    has_tool = np.zeros(rows, dtype=bool)
    has_tool[rng.choice(rows, size=rows // 2, replace=False)] = True
    span_start = np.where(has_tool, (length // 4 + rng.random(rows) * (length // 4)).astype(np.int64), 0)
    span_len = np.where(has_tool, rng.integers(32, length // 4 + 1), 0)

    perm = rng.permutation(rows)
    uid, score, length, span_start, span_len = (a[perm] for a in (uid, score, length, span_start, span_len))

    # ---- token arrays, flat -------------------------------------------------------------
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    n_tok = int(offsets[-1])
    row_of = np.repeat(np.arange(rows), length)
    pos = np.arange(n_tok, dtype=np.int64) - offsets[:-1][row_of]
    start_t = span_start[row_of]
    tool = (pos >= start_t) & (pos < start_t + span_len[row_of])
    del row_of, pos, start_t
    mask = (~tool).astype(np.int8)

    rm = np.zeros(n_tok, dtype=np.float32)
    rm[offsets[1:] - 1] = score

    old = np.maximum(-rng.gamma(0.6, 0.5, size=n_tok), -12.0).astype(np.float32)
    ref = np.minimum(old + rng.normal(0.0, 0.05, size=n_tok).astype(np.float32), -1e-4).astype(np.float32)
    delta = rng.uniform(0.01, 0.1, size=n_tok) * rng.choice(np.array([-1.0, 1.0]), size=n_tok)
    big = rng.random(n_tok) < 0.002
    delta[big] = rng.normal(0.0, 1.5, size=int(big.sum()))
    rollout = np.minimum(old + delta.astype(np.float32), -1e-4).astype(np.float32)
    rollout[tool] = 0.0
    del delta, big, tool
    values = rng.normal(0.0, 0.5, size=n_tok).astype(np.float32)

    off32 = pa.array(offsets.astype(np.int32))

    def lst(values_np):
        return pa.ListArray.from_arrays(off32, pa.array(values_np))

    return pa.table({
        "uid": pa.array(uid.tolist(), pa.string()),
        "response_mask": lst(mask),
        "rm_scores": lst(rm),
        "old_log_probs": lst(old),
        "ref_log_prob": lst(ref),
        "rollout_log_probs": lst(rollout),
        "values": lst(values),
    })


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=8192, help="rows (responses), a multiple of 8 (default 8192)")
    ap.add_argument("--out", required=True, help="output Parquet path")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    table = make_table(args.rows, args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    try:
        pq.write_table(table, tmp, row_group_size=ROW_GROUP, compression="zstd")
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    n_tok = len(table.column("response_mask").combine_chunks().flatten())
    print(f"wrote {out}: {table.num_rows} rows, {n_tok} tokens, {out.stat().st_size / 2**20:.1f} MiB "
          f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
