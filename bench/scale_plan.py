#!/usr/bin/env python3
"""What the driver of advcalc.ray holds and does, per row, per group and per step.

    pip install ./python                     # the package, built optimised
    python bench/scale_plan.py [--rows 100000 1000000 10000000] [--step-rows 8192]

For each row count: synthetic rows (groups of 8, one token each: the planner never sees
tokens), in steps of --step-rows rows, one unit per step. Pass 1 runs on the units as a
worker would (timed apart); then what the driver does, timed: merge the units' statistics
and build the plan (`Engine.plan`), and cut one shard per unit (`Plan.shard`). Reported: the
bytes of the statistics (what pass 1 sends to the driver) and of the shards (what the object
store holds), the driver's time, and the growth of its resident memory while planning.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from advcalc import _native
from advcalc import _config_args, _read_args


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def units(rows: int, step_rows: int, rng: np.random.Generator):
    for first in range(0, rows, step_rows):
        n = min(step_rows, rows - first)
        step = first // step_rows + 1
        uid = pa.array([f"s{step}-q{i // 8}" for i in range(n)])
        offsets = pa.array(np.arange(n + 1, dtype=np.int32))
        mask = pa.ListArray.from_arrays(offsets, pa.array(np.ones(n, dtype=np.int8)))
        scores = pa.ListArray.from_arrays(offsets, pa.array(rng.integers(0, 2, n).astype(np.float32)))
        values = pa.ListArray.from_arrays(offsets, pa.array(rng.random(n, dtype=np.float32)))
        yield first, pa.table({"uid": uid, "step": pa.array(np.full(n, step, dtype=np.int64)),
                               "response_mask": mask, "rm_scores": scores, "values": values})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    ap.add_argument("--step-rows", type=int, default=8192)
    ap.add_argument("--estimators", nargs="+", default=["grpo", "gae"])
    args = ap.parse_args()
    print("| estimator | rows | steps | pass 1 on the units (s) | stats (bytes/row) | plan (s) | shards (s) | shards (bytes/row) | driver RSS growth (bytes/row) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for estimator in args.estimators:
        for rows in args.rows:
            rng = np.random.default_rng(0)
            cfg = _config_args(None, None, estimator, None)
            read = _read_args(None, "ragged", None, False)
            engine = None
            stats, unit_steps = [], []
            t = time.perf_counter()
            for first, table in units(rows, args.step_rows, rng):
                if engine is None:
                    engine = _native.Engine(cfg, table.schema, "synthetic", read)
                s, steps = engine.row_stats(table, first, None)
                stats.append(s)
                unit_steps.append(steps)
            pass1 = time.perf_counter() - t
            stats_bytes = sum(len(s) for s in stats)
            before = rss()
            t = time.perf_counter()
            plan = engine.plan(stats)
            planned = time.perf_counter() - t
            t = time.perf_counter()
            shards = [plan.shard(steps) for steps in unit_steps]
            cut = time.perf_counter() - t
            grown = rss() - before
            shard_bytes = sum(len(s) for s in shards)
            print(f"| {estimator} | {rows:,} | {len(stats):,} | {pass1:.2f} | {stats_bytes / rows:.1f} | "
                  f"{planned:.2f} | {cut:.2f} | {shard_bytes / rows:.1f} | {max(grown, 0) / rows:.0f} |",
                  flush=True)
            del plan, shards, stats


if __name__ == "__main__":
    main()
