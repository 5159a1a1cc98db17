#!/usr/bin/env python3
"""advcalc's scaling with threads: GRPO and the full chain at 1, 2, 4, 8, 16 threads.

    cargo build --release
    python bench/threads.py [--threads 1 2 4 8 16] [--rows 8192] [--rounds 5] [--data DIR]

Makes the benchmark dump when missing (``bench/make_dump.py``, in ``--data``), then runs,
round robin over ``--rounds`` rounds (every other round in reverse order), ``advcalc run -q
-f --threads N`` for each N, for GRPO (``-e grpo``) and the full chain (``bench/run.py``'s
``FULL_CHAIN_YAML``: low_var_kl in the reward, token IS with token_k1 rejection, GAE), each
after ``sync`` so that no run waits on another's writeback. Reports per command and N the
median wall time, the CPU time (user + system, from ``wait4``), the speed-up over one thread
and the parallel efficiency (speed-up / N), and the share of CPU spent in the kernel (page
cache copies and faults: what threads share least). Thread counts above the machine's
logical CPUs are run too, but marked: they measure oversubscription, not scaling.

Put ``--data`` on tmpfs (``/dev/shm``) to take the disk out: then what stops the scaling is
the CPU work and memory bandwidth alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))


def timed(cmd: list) -> tuple:
    """(wall, user, system) seconds of one process."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err}")
    return wall, usage.ru_utime, usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", default=str(BENCH / "data"))
    ap.add_argument("--advcalc", default=str(ROOT / "target" / "release" / "advcalc"))
    args = ap.parse_args()
    from run import FULL_CHAIN_YAML, ensure_dump, machine_description

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    dump = ensure_dump(sys.executable, args.rows, data)
    chain = data / "threads_full_chain.yaml"
    chain.write_text(FULL_CHAIN_YAML)
    out = data / "out_threads.parquet"
    jobs = {"GRPO": ["-e", "grpo"], "full chain": ["--config", str(chain)]}
    cpus = os.cpu_count() or 1
    runs: dict = {(job, n): [] for job in jobs for n in args.threads}
    order = list(runs)
    for r in range(args.rounds):
        for job, n in order if r % 2 == 0 else order[::-1]:
            os.sync()
            cmd = [args.advcalc, "run", "-q", "-f", "--threads", str(n), *jobs[job], str(dump), str(out)]
            runs[(job, n)].append(timed(cmd))
            print(f"round {r + 1}: {job}, {n} threads: {runs[(job, n)][-1][0]:.3f} s", file=sys.stderr)
    out.unlink(missing_ok=True)

    print(f"{args.rows} rows ({dump.stat().st_size / 2**20:.1f} MiB), {args.rounds} rounds, "
          f"round robin; machine: {machine_description()}; data in {data}\n")
    print("| command | threads | wall median (s) | CPU median (s) | speed-up vs 1 thread | efficiency | kernel share of CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for job in jobs:
        base = None
        for n in args.threads:
            wall = statistics.median(w for w, _, _ in runs[(job, n)])
            cpu = statistics.median(u + s for _, u, s in runs[(job, n)])
            sys_share = statistics.median(s / (u + s) for _, u, s in runs[(job, n)] if u + s > 0)
            base = wall if n == args.threads[0] and n == 1 else base
            speed = f"{base / wall:.2f}×" if base else "n/a"
            eff = f"{base / wall / n:.2f}" if base else "n/a"
            mark = " (more threads than CPUs)" if n > cpus else ""
            print(f"| {job} | {n}{mark} | {wall:.3f} | {cpu:.3f} | {speed} | {eff} | {sys_share:.0%} |")


if __name__ == "__main__":
    main()
