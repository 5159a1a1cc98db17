#!/usr/bin/env python3
"""advcalc.ray from object storage against the CLI on the same S3 server (issue 40).

    cargo build --release --features cloud
    scripts/wheel && pip install --force-reinstall --no-deps target/wheels/release/advcalc_rl-*.whl
    python bench/ray_objects.py --moto <venv>/bin/moto_server [--rows 4096] [--repeats 3]

Starts ``moto_server`` (the tests' S3 server, bench/object_bench.py's ``Moto``) on a free port
of 127.0.0.1, makes the benchmark dump (``bench/make_dump.py --rows N``, in ``--data`` when
missing), splits it into one file per row group (``bench/split_steps.py``: 1024 rows a step,
so 4 steps for 4096 rows) and puts the step files under ``s3://advcalc-bench/dumps/``. Then,
alternating (odd rounds in the reverse order), each writing to a fresh prefix:

* **cli**: ``advcalc run -q -e grpo s3://…/dumps/ s3://…/adv-…/`` (a separate process; its
  wall time, process start included);
* **ray**: ``advcalc.ray.run(s3://…/dumps/, s3://…/adv-…/, estimator="grpo")`` on a local
  Ray with 2 CPUs started before timing (its start-up not counted): whole steps per task,
  each task reading its objects through the native IO layer (``per_step`` must be True);
* **ray two-pass**: the same with ``per_step=False`` (the plan on the driver), for reference.

Outputs are checked equal (the ``advantages`` and ``returns`` columns of every output) before
timing. Prints a Markdown table of medians; the server is stopped (by its PID) at the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moto", default=os.environ.get("ADVCALC_MOTO"), required=False,
                    help="the moto_server executable (default $ADVCALC_MOTO)")
    ap.add_argument("--advcalc", default=str(ROOT / "target/release/advcalc"),
                    help="advcalc built with --features cloud (default target/release/advcalc)")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", default=str(BENCH / "data"))
    args = ap.parse_args()
    if not args.moto:
        ap.error("--moto (or ADVCALC_MOTO) is required")
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq
    import ray

    import advcalc.ray
    from object_bench import BUCKET, Moto
    from run import ensure_dump, machine_description

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    dump = ensure_dump(sys.executable, args.rows, data)
    steps = Path(tempfile.mkdtemp(prefix="ray-objects-"))
    subprocess.run([sys.executable, str(BENCH / "split_steps.py"), str(dump), str(steps)], check=True)
    files = sorted(steps.glob("*.parquet"))
    server = Moto(args.moto)
    try:
        os.environ.update(server.env())
        fs, _ = pafs.FileSystem.from_uri(f"s3://{BUCKET}/")
        for f in files:
            pafs.copy_files(str(f), f"{BUCKET}/dumps/{f.name}", destination_filesystem=fs)
        src = f"s3://{BUCKET}/dumps/"
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": server.env()})
        # Ray Data's progress lines would bury the rounds
        ray.data.DataContext.get_current().enable_progress_bars = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        runs = {"n": 0}

        def fresh(name: str) -> str:
            runs["n"] += 1
            return f"s3://{BUCKET}/adv-{name}-{runs['n']}/"

        def cli() -> str:
            dst = fresh("cli")
            subprocess.run([args.advcalc, "run", "-q", "-e", "grpo", src, dst], check=True)
            return dst

        def on_ray(per_step: bool):
            def go() -> str:
                dst = fresh(f"ray-{per_step}")
                done = advcalc.ray.run(src, dst, estimator="grpo", per_step=per_step)
                assert done["per_step"] is per_step
                return dst

            return go

        commands = {
            "`advcalc run -q -e grpo s3://…/dumps/ s3://…/adv/`": cli,
            "`advcalc.ray.run(\"s3://…/dumps/\", \"s3://…/adv/\", estimator=\"grpo\")` (steps apart)": on_ray(True),
            "the same, `per_step=False` (two passes, plan on the driver)": on_ray(False),
        }
        # the same numbers first
        outs = {name: fn() for name, fn in commands.items()}
        want = None
        for name, dst in outs.items():
            got = [pq.read_table(f"{dst[5:]}{f.name}", filesystem=fs) for f in files]
            cols = [(t.column("advantages"), t.column("returns")) for t in got]
            if want is None:
                want = cols
            for (a, r), (wa, wr) in zip(cols, want):
                assert a.equals(wa) and r.equals(wr), f"{name}: outputs differ from the CLI's"
        times = {name: [] for name in commands}
        keys = list(commands)
        for r in range(args.repeats):
            for name in keys if r % 2 == 0 else keys[::-1]:
                os.sync()
                start = time.perf_counter()
                commands[name]()
                times[name].append(time.perf_counter() - start)
                print(f"round {r + 1}: {name}: {times[name][-1]:.2f} s", flush=True)
        med = {n: statistics.median(t) for n, t in times.items()}
        base = med[keys[0]]
        rows = sum(pq.read_metadata(f).num_rows for f in files)
        mib = sum(f.stat().st_size for f in files) / 2**20
        print()
        print(f"{rows} rows in {len(files)} step objects ({mib:.1f} MiB), {args.repeats} rounds, "
              f"alternating; machine: {machine_description()}\n")
        print("| command | wall median (s) | min (s) | max (s) | throughput vs the CLI |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, t in times.items():
            print(f"| {name} | {med[name]:.3f} | {min(t):.3f} | {max(t):.3f} | {base / med[name]:.2f}× |")
        ray.shutdown()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
