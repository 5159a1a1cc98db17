#!/usr/bin/env python3
"""`advcalc loss` against `advcalc run` (same config) and verl's own loss functions on CPU.

    cargo build --release
    CUDA_VISIBLE_DEVICES= python bench/loss_bench.py --verl-path <wheel-dir>/verl-0.9.1 [--rounds 7] [--verl-runs 3]

1. makes the input if missing (``--data``, default ``bench/data/``): the ``--rows`` dump of
   ``bench/make_dump.py`` plus a ``log_probs`` column (``bench/make_loss_dump.py``);
2. runs ``advcalc run -q -f -c bench/loss.yaml IN OUT`` and ``advcalc loss -q -f -c
   bench/loss.yaml IN OUT`` in ``--rounds`` rounds, alternating which goes first, and
   ``bench/verl_loss_baseline.py`` (verl's GRPO advantages + ``ppo_loss`` / ``backward`` per
   micro-batch) ``--verl-runs`` times spread over the rounds; each a separate process after
   ``sync``, measured as ``bench/run.py`` measures (whole-process wall, CPU, peak RSS, other
   load); verl's script also reports its own phase times (compute = advantages + loss);
3. checks advcalc loss's outputs against verl's (largest |difference| per column, tokens
   beyond 2e-5 + 2e-4 |verl|);
4. prints a Markdown report and writes it to ``--report`` (default ``bench/results-loss.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from run import (QUIET, ROOT, Cmd, compare_outputs, dump_stats, fmt, machine_description, measure,  # noqa: E402
                 rel, show_argv, versions, wait_for_quiet, warm)


def ensure_loss_dump(python, rows, data: Path) -> Path:
    dump = data / f"dump_{rows}.parquet"
    loss_in = data / f"loss_{rows}.parquet"
    if not loss_in.exists():
        if not dump.exists():
            subprocess.run([python, str(BENCH / "make_dump.py"), "--rows", str(rows), "--out", str(dump)],
                           check=True, cwd=ROOT)
        subprocess.run([python, str(BENCH / "make_loss_dump.py"), str(dump), str(loss_in)], check=True, cwd=ROOT)
    return loss_in


def main(argv=None):
    ap = argparse.ArgumentParser(description="advcalc loss benchmark (see bench/README.md)")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--input", help="the loss input (default: <data>/loss_<rows>.parquet, made if missing)")
    ap.add_argument("--config", default=str(BENCH / "loss.yaml"))
    ap.add_argument("--rounds", type=int, default=7, help="rounds of advcalc run + loss (default 7)")
    ap.add_argument("--verl-runs", type=int, default=3, help="runs of the verl baseline (default 3; 0: none)")
    ap.add_argument("--advcalc", default=str(ROOT / "target" / "release" / "advcalc"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--verl-path", default=os.environ.get("VERL_PATH"))
    ap.add_argument("--data", default=str(BENCH / "data"))
    ap.add_argument("--report", default=str(BENCH / "results-loss.md"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S")
    args = ap.parse_args(argv)

    advcalc = str(Path(args.advcalc).resolve())
    py = args.python
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    inp = Path(args.input) if args.input else ensure_loss_dump(py, args.rows, data)
    cfg = str(Path(args.config).resolve())
    verl_env = {"CUDA_VISIBLE_DEVICES": "", "VERL_FORCE_DEVICE": "cpu"}
    if args.verl_path:
        verl_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(args.verl_path).resolve()), os.environ.get("PYTHONPATH")) if p)

    def out(name):
        return data / f"out_loss_{name}.parquet"

    run_c = Cmd("advcalc run", [advcalc, "run", "-q", "-f", "-c", cfg, str(inp), str(out("run"))], out("run"),
                args.rounds)
    loss_c = Cmd("advcalc loss", [advcalc, "loss", "-q", "-f", "-c", cfg, str(inp), str(out("loss"))], out("loss"),
                 args.rounds)
    times_file = data / "verl_loss_times.json"
    verl_c = Cmd("verl (advantages + ppo_loss + backward)",
                 [py, str(BENCH / "verl_loss_baseline.py"), str(inp), str(out("verl")), "--config", cfg,
                  "--times", str(times_file)], out("verl"), args.verl_runs, env=verl_env)
    verl_phases = []
    # verl's runs spread over the rounds (first, last, evenly between)
    vr = args.verl_runs
    verl_rounds = set() if vr <= 0 else {round(i * (args.rounds - 1) / max(vr - 1, 1)) for i in range(vr)}

    def one(c, label):
        c.output.unlink(missing_ok=True)
        os.sync()
        if args.wait_quiet > 0:
            wait_for_quiet(args.wait_quiet)
        wall, rss, cpu, other, rc, err = measure(c.argv, c.env, args.timeout)
        if rc != 0:
            c.failed = f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
            print(f"  [{label}] {c.name}: FAILED ({c.failed})", flush=True)
            return
        c.walls.append(wall)
        c.rss_kib.append(rss)
        c.cpu.append(cpu)
        if other is not None:
            c.other.append(other)
        c.out_bytes = c.output.stat().st_size if c.output.exists() else None
        print(f"  [{label}] {c.name}: {wall:.2f} s, CPU {cpu:.2f} s, {rss / 1024:.0f} MiB"
              + ("" if other is None else f", other {other:.2f} cores"), flush=True)

    warm(inp)
    t_start = time.perf_counter()
    for r in range(args.rounds):
        for c in ((run_c, loss_c) if r % 2 == 0 else (loss_c, run_c)):
            one(c, f"{r + 1}/{args.rounds}")
        if r in verl_rounds and not verl_c.failed:
            times_file.unlink(missing_ok=True)
            one(verl_c, f"{r + 1}/{args.rounds}")
            if times_file.exists() and len(verl_phases) < len(verl_c.walls):
                verl_phases.append(json.loads(times_file.read_text()))
    total = time.perf_counter() - t_start

    checks = None
    if verl_c.walls and loss_c.walls:
        checks = compare_outputs(py, loss_c.output, verl_c.output,
                                 ["advantages", "returns", "pg_losses", "grad_weights", "kl_losses"])

    # ---- report ---------------------------------------------------------------------------
    rows, rgs, toks = dump_stats(py, inp)
    L = ["# advcalc loss benchmark results\n",
         f"- machine: {machine_description()}",
         f"- software: advcalc {subprocess.run([advcalc, '--version'], capture_output=True, text=True).stdout.split()[-1]}, "
         f"{versions(py, verl_env)}",
         f"- input: `{rel(inp)}`: {rows} rows, {toks} tokens, {rgs} row groups, {inp.stat().st_size / 2**20:.1f} MiB; "
         f"config `{rel(cfg)}`",
         f"- runs: {args.rounds} rounds of advcalc run / loss (order alternating), verl {len(verl_c.walls)}x; "
         f"whole-process wall, CPU (user + system), peak RSS; medians over the clean runs "
         f"(other load < {QUIET} cores; all runs if none is clean); took {total:.0f} s\n",
         "| command | runs (clean) | wall median (s) | wall min (s) | CPU median (s) | peak RSS (MiB) | output (MiB) "
         "| other load max (cores) |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in (run_c, loss_c, verl_c):
        if not c.walls:
            L.append(f"| {c.name} | 0 | {c.failed or 'not run'} | | | | | |")
            continue
        n_clean = sum(o < QUIET for o in c.other)
        L.append(f"| {c.name} | {len(c.walls)} ({n_clean}) | {fmt(c.median_wall())} | {fmt(min(c.walls))} | "
                 f"{fmt(c.median_cpu())} | {fmt(c.median_rss_mib(), 0)} | "
                 f"{fmt(c.out_bytes / 2**20 if c.out_bytes else None, 1)} | {fmt(max(c.other) if c.other else None)} |")
    # verl's phases, over the same (clean) runs as its wall median
    kept_phases = [verl_phases[i] for i in verl_c.kept() if i < len(verl_phases)] if verl_phases else []
    verl_compute_med = verl_compute_min = None
    if kept_phases:
        keys = list(kept_phases[0])
        med = {k: statistics.median(p[k] for p in kept_phases) for k in keys}
        verl_compute_med = med["compute"]
        verl_compute_min = min(p["compute"] for p in verl_phases)
        L.append(f"\nverl's phases (s, inside the process, medians over the {len(kept_phases)} run(s) its wall "
                 "median uses): " + ", ".join(f"{k} {med[k]:.2f}" for k in keys)
                 + "; compute over all runs: " + ", ".join(f"{p['compute']:.2f}" for p in verl_phases) + ". "
                 "compute = advantages + loss (building each micro-batch's inputs, ppo_loss, backward, "
                 "the per-token results copied out).")
    ratios = []
    if run_c.walls and loss_c.walls:
        ratios.append(("loss / run, wall median", loss_c.median_wall() / run_c.median_wall(), 1.3))
        ratios.append(("loss / run, wall min", min(loss_c.walls) / min(run_c.walls), None))
        ratios.append(("loss / run, CPU median", loss_c.median_cpu() / run_c.median_cpu(), None))
        # per-round pairs: the two commands of one round ran back to back
        pairs = [lw / rw for lw, rw in zip(loss_c.walls, run_c.walls)]
        ratios.append(("loss / run, median of the per-round ratios", statistics.median(pairs), None))
    if loss_c.walls and verl_compute_med:
        ratios.append(("advcalc loss wall median / verl compute median", loss_c.median_wall() / verl_compute_med,
                       0.05))
        ratios.append(("advcalc loss wall median / verl's fastest compute", loss_c.median_wall() / verl_compute_min,
                       None))
    if loss_c.walls and verl_c.walls:
        ratios.append(("advcalc loss wall / verl whole process (median)",
                       loss_c.median_wall() / verl_c.median_wall(), None))
    L.append("\n| ratio | measured | limit | met? |\n| --- | ---: | ---: | --- |")
    for name, v, lim in ratios:
        L.append(f"| {name} | {v:.3f} | {'' if lim is None else f'<= {lim}'} | "
                 f"{'' if lim is None else ('yes' if v <= lim else 'no')} |")
    if checks:
        L.append("\nadvcalc loss vs verl, per column: largest |difference|, tokens beyond 2e-5 + 2e-4 |verl|: "
                 + "; ".join(f"{c} {v if isinstance(v, str) else f'{v[0]:.2e}, {v[1]}'}" for c, v in checks.items()))
    L.append("\nCommands:\n")
    for c in (run_c, loss_c, verl_c):
        L.append(f"    {show_argv(c.argv)}")
    text = "\n".join(L) + "\n"
    print("\n" + text)
    Path(args.report).write_text(text)


if __name__ == "__main__":
    main()
