"""verl's text dumps (rollout_data_dir) from Python: the same results as the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advcalc
from conftest import cli, cli_json, cli_run, same_columns


def dump_generations(directory: Path, step: int, inputs, outputs, scores, extra) -> None:
    """verl 0.9.1's RayPPOTrainer._dump_generations, as it writes a step's file."""
    n = len(inputs)
    base_data = {"input": inputs, "output": outputs, "gts": [None] * n, "score": scores,
                 "step": [step] * n}
    for k, v in extra.items():
        if len(v) == n:
            base_data[k] = v
    lines = []
    for i in range(n):
        entry = {k: v[i] for k, v in base_data.items()}
        lines.append(json.dumps(entry, ensure_ascii=False))
    with open(directory / f"{step}.jsonl", "w") as f:
        f.write("\n".join(lines) + "\n")


@pytest.fixture
def rollout_dir(tmp_path: Path) -> Path:
    d = tmp_path / "rollout_data_dir"
    d.mkdir()
    prompts = ["What is 2+2?", "Résumé: list three primes", "Say hi"]
    for step in (1, 2):
        inputs = [p for p in prompts for _ in range(4)]
        scores = [float((i * 7 + step) % 3 == 0) for i in range(len(inputs))]
        dump_generations(d, step, inputs, [f"answer {i}" for i in range(len(inputs))], scores,
                         {"acc": [s > 0 for s in scores], "pred": ["x"] * len(inputs)})
    return d


def test_compute_on_a_rollout_dir_equals_the_cli(tmp_path: Path, rollout_dir: Path) -> None:
    for estimator in ("grpo", "rloo", "drgrpo"):
        want = cli_run(rollout_dir, tmp_path / f"{estimator}.parquet", ["-e", estimator])
        got = advcalc.compute(rollout_dir, estimator=estimator)
        same_columns(got, want)
        assert "advantage" in got.column_names and "advantages" not in got.column_names
    one = advcalc.compute(rollout_dir / "2.jsonl", estimator="grpo")
    assert one.column("step").to_pylist() == [2] * 12


def test_inspect_and_compare_on_a_rollout_dir_are_the_cli_json(rollout_dir: Path) -> None:
    assert advcalc.inspect(rollout_dir) == cli_json("inspect", "--json", rollout_dir)
    assert advcalc.compare(rollout_dir, estimators=["grpo", "rloo"]) == cli_json(
        "compare", "--json", "-e", "grpo,rloo", rollout_dir
    )


def test_token_level_estimators_refuse_a_text_dump(tmp_path: Path, rollout_dir: Path) -> None:
    done = cli("run", "-e", "gae", rollout_dir, tmp_path / "out.parquet", check=False)
    with pytest.raises(advcalc.Error) as raised:
        advcalc.compute(rollout_dir, estimator="gae")
    assert raised.value.exit_code == done.returncode != 0
    assert done.stderr.startswith(f"error: {raised.value.message}")
    assert raised.value.hint and "verl.md" in raised.value.hint


def test_a_malformed_line_names_file_and_line(tmp_path: Path, rollout_dir: Path) -> None:
    path = rollout_dir / "2.jsonl"
    lines = path.read_text().splitlines()
    lines[4] = lines[4][:-1]  # cut the closing brace
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(advcalc.DataError) as raised:
        advcalc.compute(rollout_dir, estimator="grpo")
    assert raised.value.message == f"{path} line 5: not a JSON object"
    done = cli("inspect", rollout_dir, check=False)
    assert done.returncode == 1 and done.stderr.startswith(f"error: {raised.value.message}\n")
