#!/usr/bin/env python3
"""Per-row reading speed of other trainers' dumps against verl's JSONL (issue: "reading a
dump is at least as fast per row as reading verl's JSONL"; docs/benchmarks.md).

Makes, in --dir, one dump per format with the same rows: --rows rows in groups of 8 over
--steps steps, responses of --tokens tokens (the verl JSONL's `output` holds as many words),
shaped after the files the trainers' own writers made (fixtures/trainers/dumps/), then times
`advcalc run` on each (grpo under the dump's convention; verl's JSONL: grpo), each a separate
process, alternating formats per round, and prints the median wall time per row.

    python bench/dump_read_bench.py --advcalc target/release/advcalc --rows 32768 --rounds 5

With --baseline OTHER_ADVCALC (another build, e.g. of an earlier commit), each format is also
timed with that binary in the same rounds (the two alternating), for a before/after table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

GROUP = 8


def words(rng: random.Random, n: int) -> str:
    return " ".join(f"w{rng.randrange(1000)}" for _ in range(n))


def verl_jsonl(d: Path, rows: int, steps: int, tokens: int) -> Path:
    """verl 0.9.1's V1 trainer lines: input, output, gts, score, step, uid."""
    rng = random.Random(1)
    out = d / "verl"
    out.mkdir(parents=True, exist_ok=True)
    per = rows // steps
    for s in range(1, steps + 1):
        with open(out / f"{s}.jsonl", "w") as f:
            for i in range(per):
                g = i // GROUP
                line = {"input": f"prompt {s} {g} " + words(rng, 32), "output": words(rng, tokens),
                        "gts": "42", "score": float(rng.random() < 0.5), "step": s,
                        "uid": f"u{s}-{g}_0_0"}
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return out


def trl(d: Path, rows: int, steps: int, tokens: int) -> Path:
    """GRPOTrainer.log's table as TRL's pandas writes it (large_string text, double rewards)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(2)
    out = d / "trl" / "completions"
    out.mkdir(parents=True, exist_ok=True)
    per = rows // steps
    for s in range(1, steps + 1):
        prompts = [f"prompt {s} {i // GROUP} " + words(rng, 32) for i in range(per)]
        table = pa.table({
            "step": pa.array([s] * per, pa.int64()),
            "prompt": pa.array(prompts, pa.large_string()),
            "completion": pa.array([words(rng, tokens) for _ in range(per)], pa.large_string()),
            "length_reward": [float(rng.random() < 0.5) for _ in range(per)],
            "keyword_reward": [float(rng.random() < 0.5) for _ in range(per)],
            "advantage": [0.0] * per})
        pq.write_table(table, out / f"completions_{s:05d}.parquet", compression="snappy")
    return out.parent


def nemo_rl(d: Path, rows: int, steps: int, tokens: int) -> Path:
    """Logger.log_batched_dict_as_jsonl's lines: every value in a batch of 1."""
    rng = random.Random(3)
    out = d / "nemo" / "exp_001"
    out.mkdir(parents=True, exist_ok=True)
    per = rows // steps
    prompt_len = 32
    for s in range(1, steps + 1):
        with open(out / f"train_data_step{s}.jsonl", "w") as f:
            for i in range(per):
                g = i // GROUP
                prompt = [1, 11, 3] + [100 + (g * 7 + k) % 500 for k in range(prompt_len - 3)]
                resp = [rng.randrange(100, 600) for _ in range(tokens)]
                n = prompt_len + tokens
                mask = [0] * prompt_len + [1] * tokens
                lp = [0.0] * prompt_len + [round(-rng.random() * 3, 4) for _ in range(tokens)]
                line = {"content": [["q " + words(rng, 8), "a " + words(rng, 8)]],
                        "rewards": [float(rng.random() < 0.5)], "input_lengths": [n],
                        "token_ids": [prompt + resp], "token_loss_mask": [mask],
                        "sample_loss_mask": [1.0], "advantages": [[0.5] * n],
                        "generation_logprobs": [lp], "prev_logprobs": [lp], "idx": i}
                f.write(json.dumps(line) + "\n")
    return out


def open_instruct(d: Path, rows: int, steps: int, tokens: int) -> Path:
    """RolloutRecord lines (rl_utils._save_rollouts)."""
    rng = random.Random(4)
    out = d / "open-instruct"
    out.mkdir(parents=True, exist_ok=True)
    per = rows // steps
    with open(out / "bench_rollouts_000000.jsonl", "w") as f:
        for s in range(steps):
            for i in range(per):
                line = {"step": s, "sample_idx": i, "prompt_idx": i // GROUP,
                        "prompt_tokens": [1] + [100 + k for k in range(31)],
                        "response_tokens": [rng.randrange(100, 600) for _ in range(tokens)],
                        "reward": float(rng.random() < 0.5), "advantage": 0.0,
                        "finish_reason": "stop", "dataset": "gsm8k", "ground_truth": "3",
                        "request_info": {"num_calls": 0, "timeouts": 0, "tool_errors": "",
                                         "tool_outputs": "", "tool_runtimes": 0.0,
                                         "tool_calleds": False, "tool_call_stats": [],
                                         "rollout_state": {"rewards": [1.0], "step_count": 1,
                                                           "done": True, "info": {}}},
                        "logprobs": [round(-rng.random() * 3, 4) for _ in range(tokens)]}
                f.write(json.dumps(line) + "\n")
    return out


def prime_rl(d: Path, rows: int, steps: int, tokens: int, fixture: Path) -> Path:
    """The fixture's effective traces (written by prime-rl's FileMonitor), each episode's
    sampled node stretched to `tokens` tokens and given a fresh group id per 8 rows."""
    template = [json.loads(l) for l in (fixture / "rollouts/step_1/train/effective/traces.jsonl")
                .read_text().splitlines() if l.strip()]
    rng = random.Random(5)
    per = rows // steps
    for s in range(1, steps + 1):
        out = d / "prime" / "rollouts" / f"step_{s}" / "train" / "effective"
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "traces.jsonl", "w") as f:
            for i in range(per):
                ep = json.loads(json.dumps(template[i % len(template)]))
                ep["group"]["id"] = f"g-{s}-{i // GROUP}"
                ep.setdefault("run", {}).setdefault("work", {})["step"] = s
                for node in ep["traces"][0]["nodes"]:
                    if node.get("sampled") and node.get("logprobs"):
                        adv = (node.get("advantages") or [0.0])[0]
                        node["token_ids"] = [rng.randrange(100, 600) for _ in range(tokens)]
                        node["mask"] = [True] * tokens
                        node["logprobs"] = [round(-rng.random() * 3, 4) for _ in range(tokens)]
                        node["advantages"] = [adv] * tokens
                f.write(json.dumps(ep, separators=(",", ":")) + "\n")
    return d / "prime"


def timed(cmd: list) -> float:
    subprocess.run(["sync"])
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return wall


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--advcalc", default="target/release/advcalc")
    p.add_argument("--dir", default="bench/data/dumps")
    p.add_argument("--rows", type=int, default=32768)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", nargs="*", help="formats to time (default: all)")
    p.add_argument("--baseline", help="another advcalc binary to time in the same rounds")
    args = p.parse_args()
    d = Path(args.dir)
    fixture = Path(__file__).resolve().parents[1] / "fixtures/trainers/dumps/prime-rl/run1"
    makers = {
        "verl JSONL": lambda: verl_jsonl(d, args.rows, args.steps, args.tokens),
        "TRL": lambda: trl(d, args.rows, args.steps, args.tokens),
        "NeMo-RL": lambda: nemo_rl(d, args.rows, args.steps, args.tokens),
        "prime-rl": lambda: prime_rl(d, args.rows, args.steps, args.tokens, fixture),
        "open-instruct": lambda: open_instruct(d, args.rows, args.steps, args.tokens),
    }
    if args.only:
        makers = {k: v for k, v in makers.items() if k in args.only}
    inputs = {}
    for name, make in makers.items():
        inputs[name] = make()
        size = sum(f.stat().st_size for f in inputs[name].rglob("*") if f.is_file())
        print(f"{name}: {inputs[name]} ({size / 2**20:.1f} MiB)", file=sys.stderr)
    times = {name: [] for name in inputs}
    before = {name: [] for name in inputs}
    out = d / "out.parquet"
    names = list(inputs)
    binaries = [(args.advcalc, times)] + ([(args.baseline, before)] if args.baseline else [])
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            for exe, into in (binaries if r % 2 == 0 else binaries[::-1]):
                cmd = [exe, "run", "-q", "-f", "--allow-nonfinite", str(inputs[name]), str(out)]
                if name == "verl JSONL":
                    cmd[2:2] = ["-e", "grpo"]
                into[name].append(timed(cmd))
    print(f"rows {args.rows}, steps {args.steps}, response tokens {args.tokens}, "
          f"rounds {args.rounds}, {os.cpu_count()} CPUs")
    print("| format | size (MiB) | wall median (s) | µs per row | per row vs verl JSONL "
          "| ms per MiB | per MiB vs verl JSONL |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    def mib(name: str) -> float:
        return sum(f.stat().st_size for f in inputs[name].rglob("*") if f.is_file()) / 2**20

    base = statistics.median(times["verl JSONL"]) if "verl JSONL" in times else None
    base_mib = base / mib("verl JSONL") if base else None
    for name in names:
        m = statistics.median(times[name])
        size = mib(name)
        ratio = f"{m / base:.2f}" if base else "-"
        per_mib = m / size
        ratio_mib = f"{per_mib / base_mib:.2f}" if base_mib else "-"
        print(f"| {name} | {size:.1f} | {m:.3f} | {m / args.rows * 1e6:.1f} | {ratio} "
              f"| {per_mib * 1e3:.1f} | {ratio_mib} |")
    if args.baseline:
        print()
        print("| format | --baseline: wall median (s) | --advcalc: wall median (s) | --advcalc / --baseline |")
        print("| --- | ---: | ---: | ---: |")
        for name in names:
            a, b = statistics.median(before[name]), statistics.median(times[name])
            print(f"| {name} | {a:.3f} | {b:.3f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
