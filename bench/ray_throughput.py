#!/usr/bin/env python3
"""advcalc.ray on a local Ray (2 CPUs) against the CLI, on the benchmark dump as 8 step files.

    cargo build --release
    pip install ./python "ray[data]==2.60.0"          # the package, built optimised
    python bench/split_steps.py bench/data/dump.parquet bench/data/steps --whole bench/data/whole.parquet
    python bench/ray_throughput.py [--repeats 5]

Round robin, medians of wall time, for GRPO and the full chain (bench/run.py's
FULL_CHAIN_YAML): the CLI on the whole file, the CLI on the step files (a dataset), and
``advcalc.ray.run`` on the step files with Ray already started (``ray.init(num_cpus=2)``; its
start-up, about 5 s, is not counted): by default (steps run apart, one task per CPU) and with
``per_step=False`` (the two passes over the files with the plan on the driver, the path of an
adaptive KL controller). Outputs are checked to be equal first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import ray

import advcalc.ray

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from run import FULL_CHAIN_YAML  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT / "bench" / "data")
    ap.add_argument("--advcalc", type=Path, default=ROOT / "target" / "release" / "advcalc")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    steps, whole = args.data / "steps", args.data / "whole.parquet"
    if not whole.exists():
        sys.exit(f"{whole}: missing; see the docstring (bench/split_steps.py)")
    cfg = args.data / "full_chain.yaml"
    cfg.write_text(FULL_CHAIN_YAML)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    scratch = args.data / "ray-bench"

    def fresh(name: str) -> Path:
        p = scratch / name
        shutil.rmtree(p, ignore_errors=True)
        return p

    def jobs(chain: str):
        opts = ["-e", "grpo"] if chain == "grpo" else ["--config", str(cfg)]
        kw = {"estimator": "grpo"} if chain == "grpo" else {"config": cfg}

        def cli_file():
            out = fresh(f"{chain}-file")
            out.mkdir(parents=True)
            subprocess.run([str(args.advcalc), "run", "-q", *opts, str(whole), str(out / "out.parquet")], check=True)
            return [out / "out.parquet"]

        def cli_dataset():
            out = fresh(f"{chain}-dataset")
            subprocess.run([str(args.advcalc), "run", "-q", *opts, str(steps), str(out)], check=True)
            return sorted(out.iterdir(), key=lambda p: int(p.stem.split("=")[1]))

        def on_ray(per_step):
            def go():
                out = fresh(f"{chain}-ray-{per_step}")
                done = advcalc.ray.run(steps, out, per_step=per_step, **kw)
                assert done["per_step"] is per_step
                return [Path(p) for p in done["outputs"]]

            return go

        return {
            f"cli file {chain}": cli_file,
            f"cli dataset {chain}": cli_dataset,
            f"ray {chain}": on_ray(True),
            f"ray two-pass {chain}": on_ray(False),
        }

    commands = {**jobs("grpo"), **jobs("full")}
    for chain in ("grpo", "full"):
        tables = {}
        for name in (f"cli file {chain}", f"cli dataset {chain}", f"ray {chain}", f"ray two-pass {chain}"):
            tables[name] = pa.concat_tables([pq.read_table(p) for p in commands[name]()])
        want = tables[f"cli file {chain}"].column("advantages")
        for name, t in tables.items():
            assert t.column("advantages").equals(want), f"{name}: advantages differ"
    times = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, fn in commands.items():
            os.sync()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {n: statistics.median(t) for n, t in times.items()}
    rows = pq.read_metadata(whole).num_rows
    print(f"{rows} rows in {len(list(steps.iterdir()))} step files, {args.repeats} runs each, medians\n")
    print("| command | wall median (s) | min (s) | throughput vs `cli file` |")
    print("| --- | ---: | ---: | ---: |")
    for name, t in times.items():
        base = med[f"cli file {name.split()[-1]}"]
        print(f"| `{name}` | {med[name]:.3f} | {min(t):.3f} | {base / med[name]:.2f}× |")
    shutil.rmtree(scratch, ignore_errors=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
