"""``advcalc.check``: the CLI's ``check --json`` from Python, on the logs verl 0.9.1's own
logging code wrote (fixtures/logs/verl): the report as a dict, the same as the CLI's."""

from __future__ import annotations

import json

import pytest

import advcalc
from conftest import REPO, cli

RUNS = REPO / "fixtures" / "logs" / "verl"


@pytest.mark.parametrize("log", ["file.jsonl", "console.log", "tensorboard"])
def test_check_gives_the_cli_s_report(log):
    run = RUNS / "run_wrong_std"
    report = advcalc.check(run / log, run / "dumps", config=run / "config.yaml")
    done = cli("check", "--json", "-q", "-c", run / "config.yaml", run / log, run / "dumps", check=False)
    assert done.returncode == 1
    assert report == json.loads(done.stdout)
    assert report["first_divergence"] == {"step": 1, "metric": "critic/advantages/max"}
    assert any("norm_adv_by_std_in_grpo=false" in c for c in report["likely_causes"])


def test_a_run_that_agrees_and_a_config_as_a_dict():
    run = RUNS / "run_ok"
    config = {"algorithm": {"adv_estimator": "grpo"}, "data": {"max_response_length": 48}}
    report = advcalc.check(run / "file.jsonl", run / "dumps", config=config)
    assert report["diverging"] == 0
    assert len(report["compared"]) == 72


def test_a_log_that_cannot_be_read_raises_the_cli_s_error(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing logged\n")
    with pytest.raises(advcalc.DataError) as e:
        advcalc.check(tmp_path / "notes.txt", RUNS / "run_ok" / "dumps")
    assert "console logger" in str(e.value)
    with pytest.raises(advcalc.UsageError):
        advcalc.check(tmp_path / "missing.jsonl", RUNS / "run_ok" / "dumps")
