"""advcalc.inspect, compare and estimators return what the CLI's --json prints; errors map
to the CLI's exit codes and messages."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import advcalc
from conftest import CASES, DEMO, cli, cli_json


def test_inspect_is_the_cli_json() -> None:
    assert advcalc.inspect(DEMO) == cli_json("inspect", "--json", DEMO)
    steps = CASES / "grpo_steps" / "input.parquet"
    assert advcalc.inspect(steps, estimator="grpo", set={"actor_rollout_ref.rollout.n": 4}) == cli_json(
        "inspect", "--json", "-e", "grpo", "--set", "actor_rollout_ref.rollout.n=4", steps
    )


def test_compare_is_the_cli_json(tmp_path: Path) -> None:
    want = cli_json("compare", "--json", "-e", "grpo,rloo,drgrpo", DEMO)
    assert advcalc.compare(DEMO, estimators=["grpo", "rloo", "drgrpo"]) == want
    assert advcalc.compare(DEMO, estimators="grpo,rloo,drgrpo") == want
    # two configs: labelled by their file stems, as the CLI does
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("algorithm:\n  adv_estimator: grpo\n")
    b.write_text("algorithm:\n  adv_estimator: grpo\n  norm_adv_by_std_in_grpo: false\n")
    got = advcalc.compare(DEMO, configs=[a, b])
    assert got == cli_json("compare", "--json", "-c", a, "-c", b, DEMO)
    assert [v["label"] for v in got["variants"]] == ["a", "b"]
    labelled = advcalc.compare(DEMO, configs={"std": a.read_text(), "no_std": b.read_text()})
    assert [v["label"] for v in labelled["variants"]] == ["std", "no_std"]
    for mine, theirs in zip(labelled["variants"], got["variants"]):
        assert {k: v for k, v in mine.items() if k != "label"} == {
            k: v for k, v in theirs.items() if k != "label"
        }


def test_compare_needs_two_variants() -> None:
    with pytest.raises(advcalc.UsageError, match="at least two variants"):
        advcalc.compare(DEMO, estimators=["grpo"])
    with pytest.raises(advcalc.UsageError, match="given twice"):
        advcalc.compare(DEMO, estimators=["grpo", "grpo"])


def test_estimators_is_the_cli_json() -> None:
    assert advcalc.estimators() == cli_json("estimators", "--json")
    assert {"grpo", "gae", "rloo"} <= {e["name"] for e in advcalc.estimators()}


def test_errors_carry_the_cli_message_hint_and_exit_code(tmp_path: Path) -> None:
    missing = tmp_path / "missing.parquet"
    done = cli("inspect", missing, check=False)
    with pytest.raises(advcalc.DataError) as raised:
        advcalc.inspect(missing)
    assert done.returncode == raised.value.exit_code == 1
    assert f"error: {raised.value}\n" == done.stderr

    done = cli("run", "-e", "grpo", "--set", "algorithm.lamda=0.9", DEMO, tmp_path / "o.parquet",
               check=False)
    with pytest.raises(advcalc.UsageError) as raised:
        advcalc.compute(pq.read_table(DEMO), estimator="grpo", set={"algorithm.lamda": 0.9})
    assert done.returncode == raised.value.exit_code == 2
    # the CLI's message, with its flag named as the Python argument
    assert "(from --set)" in done.stderr
    assert done.stderr.replace("(from --set)", "(from set=)").startswith(
        f"error: {raised.value.message}"
    )
    assert isinstance(raised.value, advcalc.Error)


def test_python_argument_errors_are_usage_errors() -> None:
    table = pq.read_table(DEMO)
    with pytest.raises(advcalc.UsageError, match="layout"):
        advcalc.compute(table, layout="diagonal")
    with pytest.raises(advcalc.UsageError, match="threads"):
        advcalc.compute(table, threads=0)
    with pytest.raises(advcalc.UsageError, match="__arrow_c_stream__"):
        advcalc.compute(42)
    with pytest.raises(advcalc.UsageError, match="config"):
        advcalc.compute(table, config=3.5)
