#!/usr/bin/env python3
"""The Python package's overhead against the CLI, on the benchmark dump, in one run.

    cargo build --release
    (cd python && maturin develop --release)        # the package, built optimised
    python bench/python_overhead.py [--dump bench/data/dump.parquet] [--repeats 7]

Round robin, each timing after ``sync``; medians of wall time:

- ``cli``: ``advcalc run -e ESTIMATOR DUMP OUT`` as a process (what a shell script pays);
- ``py.run``: ``advcalc.run(DUMP, OUT, estimator=...)`` in this interpreter (the same job);
- ``py.compute(path)``: ``advcalc.compute(DUMP, ...)``, the job plus reading the result back
  as a pyarrow Table;
- ``cli+read``: the CLI, then ``pq.read_table(OUT)`` (what ``compute(path)`` replaces);
- ``py.compute(table)``: ``advcalc.compute(table)`` on the dump already read into memory
  (the engine in memory, no file written or read).

The outputs are checked to be equal before anything is timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

import advcalc

ROOT = Path(__file__).resolve().parent.parent


def timed(fn) -> float:
    os.sync()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", type=Path, default=ROOT / "bench" / "data" / "dump.parquet")
    ap.add_argument("--advcalc", type=Path, default=ROOT / "target" / "release" / "advcalc")
    ap.add_argument("--estimator", default="grpo")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    if not args.dump.exists():
        sys.exit(f"{args.dump}: missing; make it with bench/make_dump.py --rows 8192 --out {args.dump}")
    e = args.estimator
    scratch = Path(tempfile.mkdtemp(prefix="advcalc-bench-", dir=args.dump.parent))
    out = scratch / "out.parquet"
    table = pq.read_table(args.dump)

    def cli() -> None:
        subprocess.run([str(args.advcalc), "run", "-q", "-f", "-e", e, str(args.dump), str(out)],
                       check=True)

    def cli_read() -> None:
        cli()
        pq.read_table(out)

    commands = {
        "cli": cli,
        "py.run": lambda: advcalc.run(args.dump, out, estimator=e, force=True),
        "cli+read": cli_read,
        "py.compute(path)": lambda: advcalc.compute(args.dump, estimator=e),
        "py.compute(table)": lambda: advcalc.compute(table, estimator=e),
    }
    # same numbers first
    cli()
    want = pq.read_table(out).column("advantages")
    for name in ("py.compute(path)", "py.compute(table)"):
        got = commands[name]().column("advantages")
        assert got.equals(want), f"{name}: advantages differ from the CLI's"
    times = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, fn in commands.items():
            times[name].append(timed(fn))
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"dump: {args.dump.name}, {table.num_rows} rows, -e {e}, {args.repeats} runs each, medians\n")
    print("| command | wall median (s) | min (s) | ratio |")
    print("| --- | ---: | ---: | --- |")
    ratio_to = {"cli": None, "py.run": "cli", "cli+read": None, "py.compute(path)": "cli+read",
                "py.compute(table)": "cli"}
    for name, t in times.items():
        base = ratio_to[name]
        ratio = f"{med[name] / med[base]:.2f}× {base}" if base else ""
        print(f"| `{name}` | {med[name]:.3f} | {min(t):.3f} | {ratio} |")
    for p in scratch.iterdir():
        p.unlink()
    scratch.rmdir()


if __name__ == "__main__":
    main()
