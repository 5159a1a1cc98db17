#!/usr/bin/env python3
"""Alternative 2: GRPO written in Python polars, the way a competent user would.

    python bench/polars_grpo.py IN OUT

No explode: each row's outcome score is ``rm_scores.list.sum()`` (verl sums the token
rewards over every position), the group mean and unbiased std come from window expressions
``.over("uid")``, a singleton group gets mean 0 and std 1 (verl's rule), the row advantage
``(s - mean) / (std + 1e-6)`` is broadcast onto the mask with list arithmetic, and the
result is written with ``write_parquet`` (zstd, polars' defaults otherwise).

Output: the input columns + ``token_level_rewards`` (= rm_scores), ``advantages`` and
``returns`` (= advantages), all list<float32>, the same columns advcalc writes for
``-e grpo`` minus ``loss_mask``.
"""

from __future__ import annotations

import argparse

import polars as pl

EPS = 1e-6


def grpo(lf: pl.LazyFrame) -> pl.LazyFrame:
    s = pl.col("rm_scores").list.sum().cast(pl.Float64)
    n = pl.len().over("uid")
    mean = s.mean().over("uid")
    std = s.std(ddof=1).over("uid")
    adv = (
        pl.when(n > 1).then((s - mean) / (std + EPS)).otherwise(s / (1.0 + EPS)).cast(pl.Float32)
    )
    mask = pl.col("response_mask").cast(pl.List(pl.Float32))
    return lf.with_columns(
        pl.col("rm_scores").cast(pl.List(pl.Float32)).alias("token_level_rewards"),
        (mask * adv).alias("advantages"),
    ).with_columns(pl.col("advantages").alias("returns"))


def main(argv=None):
    ap = argparse.ArgumentParser(description="GRPO in polars (benchmark baseline)")
    ap.add_argument("input")
    ap.add_argument("output")
    args = ap.parse_args(argv)
    df = grpo(pl.scan_parquet(args.input)).collect()
    df.write_parquet(args.output, compression="zstd")


if __name__ == "__main__":
    main()
