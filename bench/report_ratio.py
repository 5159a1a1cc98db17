#!/usr/bin/env python3
"""The report issue's ratio: `report` against `compare` (and `inspect`) with the same three
estimators, measured in rounds that alternate the commands, so that a shared machine's load
falls on all of them alike. Prints each command's median and the median of the per-round
report/compare ratios.

    <venv>/bin/python bench/report_ratio.py [--rounds 15] [--advcalc A [--advcalc B]] [--uncompressed]
        [DUMP]

DUMP defaults to bench/data/dump_8192.parquet (bench/run.py makes it). With two --advcalc
binaries (say the previous commit's release build and this one's) each round runs both.
--uncompressed also measures a copy of DUMP written without compression (same row groups and
encodings; pyarrow, which bench/requirements.txt installs), next to DUMP: the difference is
what decompressing the columns costs.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ESTIMATORS = "grpo,rloo,drgrpo"


def uncompressed_copy(dump: str, directory: str) -> str:
    import pyarrow.parquet as pq

    source = pq.ParquetFile(dump)
    rows = source.metadata.row_group(0).num_rows
    path = os.path.join(directory, "uncompressed.parquet")
    pq.write_table(source.read(), path, compression="none", row_group_size=rows)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", nargs="?", default="bench/data/dump_8192.parquet")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--advcalc", action="append")
    parser.add_argument("--uncompressed", action="store_true")
    args = parser.parse_args()
    binaries = args.advcalc or ["target/release/advcalc"]

    with tempfile.TemporaryDirectory() as scratch:
        dumps = {"dump": args.dump}
        if args.uncompressed:
            dumps["uncompressed"] = uncompressed_copy(args.dump, scratch)
        page = os.path.join(scratch, "report.html")
        commands = {
            "compare": ["compare", "-q", "-e", ESTIMATORS],
            "report": ["report", "-q", "-f", "-e", ESTIMATORS, "-o", page],
            "inspect": ["inspect", "-q"],
        }
        cases = [(b, d) for b in binaries for d in dumps]
        times = {(b, d, c): [] for (b, d) in cases for c in commands}
        for i in range(args.rounds):
            # the order of the cases flips each round
            for b, d in cases if i % 2 == 0 else cases[::-1]:
                for c, argv in commands.items():
                    start = time.perf_counter()
                    subprocess.run(
                        [b, *argv, dumps[d]], check=True, stdout=subprocess.DEVNULL
                    )
                    times[(b, d, c)].append(time.perf_counter() - start)

    for b, d in cases:
        print(f"{b} on {d} ({args.rounds} rounds):")
        for c in commands:
            t = times[(b, d, c)]
            print(f"  {c:8} median {statistics.median(t):.3f} s  min {min(t):.3f} s")
        ratios = [r / c for r, c in zip(times[(b, d, "report")], times[(b, d, "compare")])]
        print(f"  report / compare: {statistics.median(ratios):.2f} (median of the rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
