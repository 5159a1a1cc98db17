"""Other trainers' dumps from Python: the same reading, defaults and check as the CLI
(docs/trainers.md). The expected advantages are TRL's own (fixtures/trainers/dumps/trl,
expected.json, written from TRL 1.16.0's code)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import advcalc
from conftest import cli, cli_json

TRL = Path(__file__).resolve().parents[2] / "fixtures" / "trainers" / "dumps" / "trl" / "run1"
WEIGHTS = ["algorithm.trl.reward_weights=[1.0,0.5]"]


def trl_advantages() -> list:
    files = json.loads((TRL / "expected.json").read_text())["files"]
    return [a for name in sorted(files) for a in files[name]["advantage"]]


def test_run_reads_the_directory_and_writes_trls_advantages(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    done = advcalc.run(TRL, out, set=WEIGHTS)
    assert done["rows"] == 36
    table = pq.read_table(out)
    got = [row[0] for row in table.column("advantages").to_pylist()]
    assert got == pytest.approx(trl_advantages(), abs=1e-6)
    assert table.column("trainer_advantage").to_pylist() == trl_advantages()
    assert table.schema.metadata[b"advcalc.convention"] == b"trl"


def test_compute_on_the_directory_matches_the_cli(tmp_path: Path) -> None:
    table = advcalc.compute(TRL, set=WEIGHTS)
    got = [row[0] for row in table.column("advantages").to_pylist()]
    assert got == pytest.approx(trl_advantages(), abs=1e-6)


def test_inspect_reports_the_logged_check_as_the_cli_does() -> None:
    report = advcalc.inspect(TRL, set=WEIGHTS)
    check = report["logged_advantages"]
    assert (check["trainer"], check["compared"], check["differing"]) == ("trl", 36, 0)
    cli = cli_json("inspect", "--json", str(TRL), "--set", WEIGHTS[0])
    assert cli["logged_advantages"] == check


def test_input_format_names_the_trainer(tmp_path: Path) -> None:
    one = TRL / "completions" / "completions_00002.parquet"
    table = advcalc.compute(one, set=WEIGHTS, input_format="trl")
    got = [row[0] for row in table.column("advantages").to_pylist()]
    assert got == pytest.approx(trl_advantages()[12:24], abs=1e-6)


DUMPS = TRL.parents[1]


@pytest.mark.parametrize(
    "run, settings",
    [
        ("nemo-rl/run1", []),
        ("prime-rl/run1", []),
        ("open-instruct/run1", []),
        ("trl/run_chat", WEIGHTS),
    ],
)
def test_every_trainers_dump_reads_from_python_as_from_the_cli(run: str, settings: list) -> None:
    """Each trainer's fixture (written by its own writer): the logged advantages are
    recomputed within float32 rounding, the same report as the CLI's."""
    src = DUMPS / run
    report = advcalc.inspect(src, set=settings or None)
    check = report["logged_advantages"]
    assert check["compared"] == check["rows"] > 0
    assert check["differing"] == 0, check
    args = ["inspect", "--json", str(src)] + [a for s in settings for a in ("--set", s)]
    assert cli_json(*args)["logged_advantages"] == check


@pytest.mark.parametrize(
    "run", ["trl/run1", "nemo-rl/run1", "prime-rl/run1", "open-instruct/run1"]
)
def test_compute_says_what_the_cli_says_of_each_readers_dump(run: str, tmp_path: Path) -> None:
    """The reader's notes (TRL: the group size inferred, the reward weights taken, the rows
    without a reward) reach Python as ConfigNote warnings, the same ones `advcalc run`
    prints, in the same order."""
    import warnings

    from advcalc._errors import python_names

    src = DUMPS / run
    done = cli("run", str(src), str(tmp_path / "out.parquet"))
    said = [
        python_names(line[len("note: "):])
        for line in done.stderr.splitlines()
        if line.startswith("note: ")
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        advcalc.compute(src)
    notes = [str(w.message) for w in caught if issubclass(w.category, advcalc.ConfigNote)]
    assert notes == said
    if run == "trl/run1":
        assert len(notes) == 3, notes
