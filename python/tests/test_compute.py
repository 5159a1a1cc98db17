"""advcalc.compute and advcalc.run give the CLI's columns and numbers, value for value."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import advcalc
from conftest import CASES, DEMO, cli, cli_run, same_columns

ESTIMATORS = ["grpo", "rloo", "gae", "reinforce_plus_plus", "opo", "grpo_passk"]


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_compute_on_a_table_equals_the_cli(tmp_path: Path, estimator: str) -> None:
    want = cli_run(DEMO, tmp_path / "out.parquet", ["-e", estimator])
    got = advcalc.compute(pq.read_table(DEMO), estimator=estimator)
    same_columns(got, want)


def test_compute_on_a_path_equals_the_cli(tmp_path: Path) -> None:
    want = cli_run(DEMO, tmp_path / "out.parquet", ["-e", "gae", "--lam", "0.9"])
    same_columns(advcalc.compute(DEMO, estimator="gae", set={"algorithm.lam": 0.9}), want)
    same_columns(advcalc.compute(str(DEMO), estimator="gae", set=["algorithm.lam=0.9"]), want)


def test_the_result_does_not_depend_on_threads_or_batching() -> None:
    table = pq.read_table(DEMO)
    one = advcalc.compute(table, estimator="gae", threads=1)
    # 256 rows in 8 record batches, on 2 threads
    batched = pa.Table.from_batches(table.to_batches(max_chunksize=32))
    same_columns(advcalc.compute(batched, estimator="gae", threads=2), one)


def _kwargs(case: Path, args: list) -> dict:
    """The CLI arguments of a corpus case as compute's keyword arguments."""
    kw: dict = {"set": []}
    flags = []
    it = iter(args)
    for a in it:
        if a == "-e":
            kw["estimator"] = next(it)
        elif a == "--config":
            kw["config"] = case / next(it)
        elif a == "--set":
            kw["set"].append(next(it))
        elif a == "--gamma":
            flags.append(f"algorithm.gamma={next(it)}")
        elif a == "--lam":
            flags.append(f"algorithm.lam={next(it)}")
        elif a == "--no-norm-adv-by-std":
            flags.append("algorithm.norm_adv_by_std_in_grpo=false")
        else:
            raise AssertionError(f"{case.name}: unexpected argument {a}")
    kw["set"] += flags  # the CLI applies its flags after --set
    return kw


CORPUS = sorted(p.name for p in CASES.iterdir() if (p / "case.json").exists())


@pytest.mark.parametrize("name", CORPUS)
def test_the_verl_corpus_gives_the_cli_numbers(tmp_path: Path, name: str) -> None:
    case = CASES / name
    spec = json.loads((case / "case.json").read_text())
    kw = _kwargs(case, spec["args"])
    kw["layout"] = spec.get("layout", "ragged")
    table = pq.read_table(case / "input.parquet")
    if "expect_error" in spec:
        done = cli("run", "-q", "--layout", kw["layout"], *spec["args"], case / "input.parquet",
                   tmp_path / "out.parquet", check=False, cwd=case)
        assert done.returncode in (1, 2), done.stderr
        with pytest.raises(advcalc.Error) as raised:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                advcalc.compute(table, **kw)
        assert raised.value.exit_code == done.returncode
        cli_message = done.stderr.splitlines()[0].removeprefix("error: ")
        # the CLI names the input file (the table has none) and the config as given
        got = raised.value.message.replace(f"{case}/", "")
        assert got == cli_message.replace("input.parquet", "<stream>").replace(f"{case}/", "")
        assert spec["expect_error"] in raised.value.message
        return
    metrics_path = tmp_path / "metrics.json"
    want = cli_run(case / "input.parquet", tmp_path / "out.parquet",
                   ["--layout", kw["layout"], "--metrics", str(metrics_path), *spec["args"]], cwd=case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, metrics = advcalc.compute(table, metrics=True, **kw)
    same_columns(got, want)
    assert metrics == json.loads(metrics_path.read_text())


def test_polars_and_duckdb_give_the_pyarrow_table_values() -> None:
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    want = advcalc.compute(pq.read_table(DEMO), estimator="rloo")
    for data in (pl.read_parquet(DEMO), duckdb.sql(f"select * from '{DEMO}'")):
        got = advcalc.compute(data, estimator="rloo")
        if isinstance(got, pl.DataFrame):  # polars in, polars out
            got = got.to_arrow()
        else:
            assert got.schema.field("advantages").type == pa.list_(pa.float32())
        assert got.column_names == want.column_names
        for name in want.column_names:
            # polars hands over large lists and string views; the values are the same
            assert got.column(name).to_pylist() == want.column(name).to_pylist(), name


def test_a_record_batch_reader_is_read_once() -> None:
    table = pq.read_table(DEMO)
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=64))
    same_columns(advcalc.compute(reader, estimator="grpo"), advcalc.compute(table, estimator="grpo"))
    with pytest.raises(advcalc.UsageError, match="already consumed"):
        advcalc.compute(reader, estimator="grpo")


def test_a_stream_that_fails_halfway_raises_instead_of_returning_a_partial_table() -> None:
    table = pq.read_table(DEMO)
    batches = table.to_batches(max_chunksize=64)

    def failing():
        yield batches[0]
        raise OSError("the producer broke")

    reader = pa.RecordBatchReader.from_batches(table.schema, failing())
    with pytest.raises(advcalc.DataError) as raised:
        advcalc.compute(reader, estimator="grpo")
    assert "cannot read the Arrow C stream" in raised.value.message
    assert any("the producer broke" in c for c in raised.value.causes)


def test_config_as_a_path_yaml_text_or_a_dict_is_the_same(tmp_path: Path) -> None:
    yaml = "algorithm:\n  adv_estimator: gae\n  gamma: 0.9\n  lam: 0.8\n"
    path = tmp_path / "trainer.yaml"
    path.write_text(yaml)
    want = cli_run(DEMO, tmp_path / "out.parquet", ["--config", str(path)])
    table = pq.read_table(DEMO)
    for config in (path, str(path), yaml,
                   {"algorithm": {"adv_estimator": "gae", "gamma": 0.9, "lam": 0.8}},
                   {"adv_estimator": "gae", "gamma": 0.9, "lam": 0.8}):
        same_columns(advcalc.compute(table, config=config), want)


def test_run_writes_the_cli_file_atomically(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    summary = advcalc.run(DEMO, out, estimator="grpo", metrics=tmp_path / "m.json")
    assert (summary["rows"], summary["training_batches"]) == (256, 1)
    same_columns(pq.read_table(out), cli_run(DEMO, tmp_path / "cli.parquet", ["-e", "grpo"]))
    # the provenance the CLI writes is there too
    assert pq.read_schema(out).metadata[b"advcalc.estimator"] == b"grpo"
    assert "advcalc/advantage_mean" in json.loads((tmp_path / "m.json").read_text())
    with pytest.raises(advcalc.UsageError) as raised:
        advcalc.run(DEMO, out, estimator="grpo")
    assert raised.value.hint and "force" in raised.value.hint
    advcalc.run(DEMO, out, estimator="rloo", force=True)
    assert pq.read_schema(out).metadata[b"advcalc.estimator"] == b"rloo"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli.parquet", "m.json", "out.parquet"]


def test_run_memory_budget_changes_nothing_in_the_output(tmp_path: Path) -> None:
    # 0: nothing kept, every row group read twice; 1 GiB (the default): all kept
    kept, reread = tmp_path / "kept.parquet", tmp_path / "reread.parquet"
    advcalc.run(DEMO, kept, estimator="gae")
    advcalc.run(DEMO, reread, estimator="gae", memory=0)
    assert kept.read_bytes() == reread.read_bytes()
    for bad in (-1, 2**70, "1G", 1.5, True):
        with pytest.raises(advcalc.UsageError, match="memory="):
            advcalc.run(DEMO, tmp_path / "bad.parquet", estimator="gae", memory=bad)
    assert not (tmp_path / "bad.parquet").exists()


def test_run_leaves_nothing_behind_on_bad_data(tmp_path: Path) -> None:
    bad = tmp_path / "bad.parquet"
    pq.write_table(pq.read_table(DEMO).drop_columns(["values"]), bad)
    with pytest.raises(advcalc.DataError) as raised:
        advcalc.run(bad, tmp_path / "out.parquet", estimator="gae")
    done = cli("run", "-q", "-e", "gae", bad, tmp_path / "cli.parquet", check=False)
    assert done.returncode == 1
    assert f"error: {raised.value}" == done.stderr.rstrip("\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.parquet"]
    # compute on the path reads it with the CLI's reader: the same message, naming the file
    with pytest.raises(advcalc.DataError) as raised:
        advcalc.compute(bad, estimator="gae")
    assert f"error: {raised.value}" == done.stderr.rstrip("\n")


def test_warnings_and_notes_are_python_warnings() -> None:
    table = pq.read_table(DEMO)
    with pytest.warns(advcalc.ConfigNote, match="filter_groups.enable is ignored"):
        advcalc.compute(table, estimator="grpo", set={"algorithm.filter_groups.enable": True})


def test_config_text_is_read_as_verl_reads_it() -> None:
    # OmegaConf interpolation and YAML 1.1 scalars, as for a config file (docs/config.md)
    table = pq.read_table(DEMO)
    text = "algorithm:\n  adv_estimator: gae\n  lam: 0.9\n  gamma: ${algorithm.lam}\n"
    same_columns(advcalc.compute(table, config=text),
                 advcalc.compute(table, estimator="gae", set={"algorithm.lam": 0.9, "algorithm.gamma": 0.9}))
    with pytest.raises(advcalc.UsageError, match="algorithm.nope"):
        advcalc.compute(table, config="algorithm:\n  gamma: ${algorithm.nope}\n")
    with pytest.raises(advcalc.UsageError, match="NaN or infinity"):
        advcalc.compute(table, config={"algorithm": {"gamma": float("nan")}})
