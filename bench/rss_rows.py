#!/usr/bin/env python3
"""Peak RSS against the dump's row count at a fixed ``--memory`` (issue #40), for every
command that reads a dump: ``run`` (GRPO and the full chain), ``loss``, ``inspect``,
``compare`` and ``report``.

    python bench/rss_rows.py [--advcalc target/release/advcalc] [--memory 64M] [--rounds 3]
                             [--rows 8192 32768 65536]

Dumps of 8192, 32768 and 65536 rows (``bench/make_dump.py``: ~1k tokens a row, row groups
of 1024 rows) are made in ``--data`` if missing. Each command runs ``--rounds`` times per
dump, alternating; the table gives the median peak RSS (``os.wait4``'s ``ru_maxrss``, the
number ``/usr/bin/time -v`` prints), once as users run it and once with mimalloc's delayed
purge off (``MIMALLOC_PURGE_DELAY=0``), which shows what advcalc holds rather than how long
the allocator waits before returning freed pages.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = [8192, 32768, 65536]


def peak_rss_kib(argv, env, cwd) -> int:
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{argv} failed: {p.stderr.read().decode()[-2000:]}")
    return ru.ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--advcalc", default=str(ROOT / "target/release/advcalc"))
    ap.add_argument("--data", default=str(ROOT / "bench/data"))
    ap.add_argument("--memory", default="64M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, nargs="+", default=ROWS, help="the dumps' row counts")
    a = ap.parse_args()
    rows_list = a.rows
    data = Path(a.data)
    data.mkdir(parents=True, exist_ok=True)
    dumps = []
    for rows in rows_list:
        path = data / f"dump_{rows}.parquet"
        if not path.exists():
            subprocess.run([sys.executable, str(ROOT / "bench/make_dump.py"), "--rows", str(rows), "--out", str(path)], check=True)
        dumps.append(path)
    budget = ["--threads", "2", "--memory", a.memory]
    commands = {
        "run -e grpo": ["run", "-q", "-f", "-e", "grpo", *budget, "{in}", "out.parquet"],
        "run -c full_chain.yaml": ["run", "-q", "-f", "-c", str(ROOT / "bench/full_chain.yaml"), *budget, "{in}", "out.parquet"],
        "loss -c loss.yaml": ["loss", "-q", "-f", "-c", str(ROOT / "bench/loss.yaml"), *budget, "{in}", "out.parquet"],
        "inspect -e grpo": ["inspect", "-e", "grpo", "--threads", "2", "{in}"],
        "compare -e grpo,rloo": ["compare", "-q", "-e", "grpo,rloo", "--threads", "2", "{in}"],
        "report -e grpo": ["report", "-q", "-f", "-e", "grpo", "--threads", "2", "{in}", "-o", "r.html"],
        "report -e grpo,rloo": ["report", "-q", "-f", "-e", "grpo,rloo", "--threads", "2", "{in}", "-o", "r.html"],
    }
    envs = {"as run": dict(os.environ), "purge 0": {**os.environ, "MIMALLOC_PURGE_DELAY": "0"}}
    got = {(c, e, r): [] for c in commands for e in envs for r in rows_list}
    for _ in range(a.rounds):
        for c, argv in commands.items():
            for e, env in envs.items():
                for rows, path in zip(rows_list, dumps):
                    args = [a.advcalc] + [str(path) if x == "{in}" else x for x in argv]
                    got[(c, e, rows)].append(peak_rss_kib(args, env, data))
    print(f"Peak RSS (MiB, median of {a.rounds} (least–most)), `--threads 2`, `--memory {a.memory}` where the command takes it:\n")
    ratios = [f"{b // 1024}k / {s // 1024}k" for s, b in zip(rows_list, rows_list[1:])]
    print("| command | allocator | " + " | ".join(f"{r // 1024}k rows" for r in rows_list) + " | " + " | ".join(ratios) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in rows_list + ratios) + " |")
    for c in commands:
        for e in envs:
            m = [statistics.median(got[(c, e, r)]) / 1024 for r in rows_list]
            spread = [f"{x:.0f} ({min(got[(c, e, r)]) / 1024:.0f}–{max(got[(c, e, r)]) / 1024:.0f})" for x, r in zip(m, rows_list)]
            print(f"| `{c}` | {e} | " + " | ".join(spread) + " | " + " | ".join(f"{b / s:.2f}" for s, b in zip(m, m[1:])) + " |")


if __name__ == "__main__":
    main()
