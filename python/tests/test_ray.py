"""advcalc.ray on a real local Ray (2 CPUs): the CLI's numbers on the concatenated input."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray")

import advcalc
import advcalc.ray
from conftest import CASES, DEMO, cli, cli_run, same_columns


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def split(table: pa.Table, directory: Path, parts: int, name=lambda i: f"part{i}.parquet") -> List[Path]:
    """Write `table` as `parts` files of interleaved rows, so every group is split across
    files; return them in the order advcalc.ray takes them, with their concatenation."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(parts):
        rows = pa.array(range(i, table.num_rows, parts))
        path = directory / name(i)
        pq.write_table(table.take(rows), path)
        paths.append(path)
    return paths


def concatenated(paths: List[Path], out: Path) -> Path:
    pq.write_table(pa.concat_tables([pq.read_table(p) for p in paths]), out)
    return out


def outputs(summary) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in summary["outputs"]])


def with_steps(table: pa.Table, steps: int) -> pa.Table:
    step = pa.array([1 + (i * steps) // table.num_rows for i in range(table.num_rows)], pa.int64())
    return table.append_column("step", step)


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "reinforce_plus_plus"])
def test_files_with_groups_split_across_them_give_the_cli_numbers(tmp_path: Path, estimator: str) -> None:
    table = with_steps(pq.read_table(DEMO), 2)
    paths = split(table, tmp_path / "in", 3)
    want = cli_run(concatenated(paths, tmp_path / "all.parquet"), tmp_path / "cli.parquet", ["-e", estimator])
    summary = advcalc.ray.run(tmp_path / "in", tmp_path / "out", estimator=estimator)
    assert summary["rows"] == 256 and summary["units"] == 3 and summary["steps"] == [1, 2]
    same_columns(outputs(summary), want)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["part0.parquet", "part1.parquet", "part2.parquet"]


def test_gae_with_adaptive_kl_and_token_is_with_rejection(tmp_path: Path) -> None:
    case = CASES / "chain_gae"
    config = case / "config.yaml"
    paths = split(pq.read_table(case / "input.parquet"), tmp_path / "in", 2)
    want = cli_run(concatenated(paths, tmp_path / "all.parquet"), tmp_path / "cli.parquet", ["--config", str(config)])
    summary = advcalc.ray.run(paths, tmp_path / "out", config=config)
    assert summary["per_step"] is False
    same_columns(outputs(summary), want)
    # both units in one task, one after the other
    one = advcalc.ray.run(paths, tmp_path / "one", config=config, tasks=1)
    same_columns(outputs(one), want)


def test_one_file_per_step_as_the_verl_hook_writes_them(tmp_path: Path) -> None:
    table = with_steps(pq.read_table(DEMO), 4)
    d = tmp_path / "dumps"
    d.mkdir()
    paths = []
    # step=10 sorts after step=9 (numbers compared as numbers), whatever the names say
    for step in (9, 10, 11, 12):
        rows = table.filter(pc.equal(table.column("step"), step - 8))
        rows = rows.set_column(rows.schema.get_field_index("step"), "step",
                               pa.array([step] * rows.num_rows, pa.int64()))
        paths.append(d / f"step={step}.parquet")
        pq.write_table(rows, paths[-1])
    want = cli_run(concatenated(paths, tmp_path / "all.parquet"), tmp_path / "cli.parquet", ["-e", "grpo"])
    summary = advcalc.ray.run(d, tmp_path / "out", estimator="grpo")
    # steps in the paths and nothing carried across them: one task per step
    assert summary["per_step"] is True and summary["steps"] == [9, 10, 11, 12]
    assert summary["outputs"] == [str(tmp_path / "out" / p.name) for p in paths]
    same_columns(outputs(summary), want)
    # any cut of the steps into tasks, and the two passes with the plan on the driver: the
    # same numbers
    for k in (4, 3, 1):  # one step per task; 2 + 1 + 1 steps; all in one task
        cut = advcalc.ray.run(d, tmp_path / f"by{k}", estimator="grpo", tasks=k)
        same_columns(outputs(cut), want)
    both = advcalc.ray.run(d, tmp_path / "two", estimator="grpo", per_step=False)
    assert both["per_step"] is False and both["steps"] == [9, 10, 11, 12]
    same_columns(outputs(both), want)


def step_files(table: pa.Table, directory: Path) -> List[Path]:
    """`table` as one `step=N.parquet` file per value of its `step` column."""
    directory.mkdir(parents=True)
    paths = []
    for step in sorted(set(table.column("step").to_pylist())):
        paths.append(directory / f"step={step}.parquet")
        pq.write_table(table.filter(pc.equal(table.column("step"), step)), paths[-1])
    return paths


@pytest.mark.parametrize("case", ["chain_gae", "chain_rloo"])
def test_step_files_with_adaptive_kl_take_the_cross_step_path(tmp_path: Path, case: str) -> None:
    # the adaptive controller's β moves from step to step: the steps cannot run apart
    config = CASES / case / "config.yaml"
    paths = step_files(pq.read_table(CASES / case / "input.parquet"), tmp_path / "in")
    want = cli_run(concatenated(paths, tmp_path / "all.parquet"), tmp_path / "cli.parquet", ["--config", str(config)])
    summary = advcalc.ray.run(tmp_path / "in", tmp_path / "out", config=config)
    assert summary["per_step"] is False and len(summary["steps"]) > 1
    same_columns(outputs(summary), want)
    with pytest.raises(advcalc.UsageError, match="adaptive KL"):
        advcalc.ray.run(tmp_path / "in", tmp_path / "out2", config=config, per_step=True)


@pytest.mark.parametrize("case", ["chain_gae", "chain_rloo"])
def test_step_files_with_fixed_kl_and_token_is_with_rejection_run_per_step(tmp_path: Path, case: str) -> None:
    config = CASES / case / "config.yaml"
    sets = ["algorithm.kl_ctrl.type=fixed"]
    paths = step_files(pq.read_table(CASES / case / "input.parquet"), tmp_path / "in")
    want = cli_run(concatenated(paths, tmp_path / "all.parquet"), tmp_path / "cli.parquet",
                   ["--config", str(config), "--set", sets[0]])
    summary = advcalc.ray.run(tmp_path / "in", tmp_path / "out", config=config, set=sets)
    assert summary["per_step"] is True
    same_columns(outputs(summary), want)


def test_a_ray_dataset_in_block_order(tmp_path: Path) -> None:
    table = with_steps(pq.read_table(DEMO), 2)
    paths = split(table, tmp_path / "in", 4)
    ds = ray.data.from_arrow([pq.read_table(p) for p in paths]).materialize()
    blocks = [ray.get(e.ref) for bundle in ds.iter_internal_ref_bundles() for e in bundle.blocks]
    pq.write_table(pa.concat_tables(blocks), tmp_path / "all.parquet")
    want = cli_run(tmp_path / "all.parquet", tmp_path / "cli.parquet", ["-e", "rloo"])
    summary = advcalc.ray.run(ds, tmp_path / "out", estimator="rloo")
    same_columns(outputs(summary).select(want.column_names), want)


def test_refusals(tmp_path: Path) -> None:
    table = pq.read_table(DEMO)
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.drop_columns(["values"]), tmp_path / "b.parquet")
    with pytest.raises(advcalc.UsageError, match=r"b.parquet: its schema differs .*`values`"):
        advcalc.ray.run([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "out", estimator="grpo")
    summary = advcalc.ray.run([tmp_path / "a.parquet"], tmp_path / "out", estimator="grpo")
    with pytest.raises(advcalc.UsageError, match="already exists"):
        advcalc.ray.run([tmp_path / "a.parquet"], tmp_path / "out", estimator="grpo")
    with pytest.raises(advcalc.DataError, match="values"):
        advcalc.ray.run([tmp_path / "b.parquet"], tmp_path / "out2", estimator="gae")
    with pytest.raises(advcalc.UsageError, match="tasks=0: expected at least 1"):
        advcalc.ray.run([tmp_path / "a.parquet"], tmp_path / "out3", estimator="grpo", tasks=0)
    assert summary["units"] == 1


def _holders(path_prefix: str) -> List[int]:
    """PIDs with a file open whose path starts with `path_prefix` (Linux /proc)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(path_prefix):
                    found.append(int(pid))
                    break
        except OSError:
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc")
@pytest.mark.parametrize("per_step", [False, True])
def test_a_worker_killed_mid_write_is_retried_into_whole_files(tmp_path: Path, per_step: bool) -> None:
    import signal
    import threading
    import time

    # big units, so that a write takes long enough to be caught in the middle
    demo = pq.read_table(DEMO)
    copies = []
    for k in range(12):
        uid = pc.binary_join_element_wise(demo.column("uid").cast(pa.string()), pa.scalar(f"-{k}"), "")
        copies.append(demo.set_column(demo.schema.get_field_index("uid"), "uid", uid))
    if per_step:
        # two steps, one file each: the tasks write through the CLI's writer
        paths = step_files(with_steps(pa.concat_tables(copies), 2), tmp_path / "in")
        src, names = tmp_path / "in", ["step=1.parquet", "step=2.parquet"]
    else:
        paths = split(pa.concat_tables(copies), tmp_path / "in", 2)
        src, names = paths, ["part0.parquet", "part1.parquet"]
    want = cli_run(concatenated(paths, tmp_path / "all.parquet"), tmp_path / "cli.parquet", ["-e", "grpo"])
    out = tmp_path / "out"
    out.mkdir()
    killed: List[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            tmps = [p for p in out.iterdir() if p.name.startswith(".advcalc-") and p.name.endswith(".tmp")]
            for tmp in tmps:
                for pid in _holders(str(tmp)):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.002)

    watcher = threading.Thread(target=killer)
    watcher.start()
    summary = advcalc.ray.run(src, out, estimator="grpo")
    watcher.join()
    assert killed, "no write was caught in the middle"
    assert summary["per_step"] is per_step
    same_columns(outputs(summary), want)
    assert sorted(p.name for p in out.iterdir()) == names


def hive_dataset(src: Path) -> Path:
    """The demo as two steps in hive directories, two files each, every group split across
    both files of its step; the step only in the path."""
    table = with_steps(pq.read_table(DEMO), 2)
    for step in (1, 2):
        rows = table.filter(pc.equal(table.column("step"), step)).drop_columns(["step"])
        split(rows, src / f"step={step}", 2, name=lambda i: f"part-{i}.parquet")
    return src


def test_a_hive_dataset_gives_the_cli_dataset_run_file_for_file(tmp_path: Path) -> None:
    src = hive_dataset(tmp_path / "rollouts")
    cli("run", "-q", "-e", "rloo", src, tmp_path / "cli")
    summary = advcalc.ray.run(src, tmp_path / "ray", estimator="rloo")
    # one task per step, each with both of its files (every group is split across them)
    assert summary["per_step"] is True and summary["steps"] == [1, 2]
    rels = [Path(p).relative_to(tmp_path / "ray").as_posix() for p in summary["outputs"]]
    assert rels == ["step=1/part-0.parquet", "step=1/part-1.parquet",
                    "step=2/part-0.parquet", "step=2/part-1.parquet"]
    for rel in rels:
        want = pq.read_table(tmp_path / "cli" / rel)
        got = pq.read_table(tmp_path / "ray" / rel)
        same_columns(got, want)


def test_compute_and_run_on_a_dataset_from_python(tmp_path: Path) -> None:
    src = hive_dataset(tmp_path / "rollouts")
    cli("run", "-q", "-e", "grpo", src, tmp_path / "cli")
    advcalc.run(src, tmp_path / "py", estimator="grpo")
    parts = sorted((tmp_path / "cli").rglob("*.parquet"))
    assert [p.relative_to(tmp_path / "cli") for p in parts] == [
        p.relative_to(tmp_path / "py") for p in sorted((tmp_path / "py").rglob("*.parquet"))]
    for p in parts:
        same_columns(pq.read_table(tmp_path / "py" / p.relative_to(tmp_path / "cli")), pq.read_table(p))
    # compute: one table, the files concatenated in dataset order, the path's step as a column
    got = advcalc.compute(src, estimator="grpo")
    want = pa.concat_tables([pq.read_table(p) for p in parts])
    assert got.column("step").to_pylist() == [1] * 128 + [2] * 128
    same_columns(got.drop_columns(["step"]), want)


def test_arrow_files_in_arrow_out_as_the_cli(tmp_path: Path) -> None:
    table = with_steps(pq.read_table(DEMO), 2)
    src = tmp_path / "rollouts"
    src.mkdir()
    for step in (1, 2):
        rows = table.filter(pc.equal(table.column("step"), step))
        with pa.ipc.new_file(src / f"step={step}.arrow", rows.schema) as w:
            w.write_table(rows)
    cli("run", "-q", "-e", "grpo", src, tmp_path / "cli")
    summary = advcalc.ray.run(src, tmp_path / "ray", estimator="grpo")
    for out in summary["outputs"]:
        got = pa.ipc.open_file(out).read_all()
        want = pa.ipc.open_file(tmp_path / "cli" / Path(out).name).read_all()
        same_columns(got, want)
    # the two passes too: each file read by the IO layer, its output exported as Arrow IPC
    two = advcalc.ray.run(src, tmp_path / "two", estimator="grpo", per_step=False)
    assert two["per_step"] is False
    for out in two["outputs"]:
        got = pa.ipc.open_file(out).read_all()
        same_columns(got, pa.ipc.open_file(tmp_path / "cli" / Path(out).name).read_all())
    # one Arrow file, given alone
    single = advcalc.ray.run(src / "step=1.arrow", tmp_path / "one", estimator="grpo")
    assert single["rows"] == 128


def test_dataset_refusals_as_the_cli(tmp_path: Path) -> None:
    src = hive_dataset(tmp_path / "rollouts")
    with pytest.raises(advcalc.UsageError, match="overlaps"):
        advcalc.ray.run(src, src / "out", estimator="grpo")
    # a step column that disagrees with the path
    bad = pq.read_table(src / "step=2" / "part-0.parquet")
    bad = bad.append_column("step", pa.array([3] * bad.num_rows, pa.int64()))
    pq.write_table(bad, src / "step=2" / "part-0.parquet")
    done = cli("run", "-q", "-e", "grpo", src, tmp_path / "cli", check=False)
    assert done.returncode != 0 and "step=2" in done.stderr
    with pytest.raises(advcalc.Error, match="step=2"):
        advcalc.ray.run(src, tmp_path / "ray", estimator="grpo")


def test_the_two_passes_write_each_file_as_the_cli_dataset_run_does(tmp_path: Path) -> None:
    # pass 2 through the CLI's writer: the same schema (the path's step not added as a
    # column), the same column chunks (IN's copied byte for byte, the computed ones encoded
    # as the CLI encodes them) and the CLI's provenance
    src = hive_dataset(tmp_path / "rollouts")
    cli("run", "-q", "-e", "rloo", src, tmp_path / "cli")
    summary = advcalc.ray.run(src, tmp_path / "ray", estimator="rloo", per_step=False)
    assert summary["per_step"] is False
    for out in summary["outputs"]:
        rel = Path(out).relative_to(tmp_path / "ray")
        got, want = pq.ParquetFile(out), pq.ParquetFile(tmp_path / "cli" / rel)
        assert got.schema_arrow.names == want.schema_arrow.names
        assert "step" not in got.schema_arrow.names
        same_columns(got.read(), want.read())
        assert got.metadata.num_row_groups == want.metadata.num_row_groups
        for rg in range(got.metadata.num_row_groups):
            for c in range(got.metadata.num_columns):
                a, b = got.metadata.row_group(rg).column(c), want.metadata.row_group(rg).column(c)
                assert (a.path_in_schema, a.total_compressed_size, a.encodings) == (
                    b.path_in_schema, b.total_compressed_size, b.encodings)
                assert a.statistics == b.statistics, (rel, a.path_in_schema)
        meta = {k.decode(): v.decode() for k, v in got.metadata.metadata.items() if k.startswith(b"advcalc.")}
        cli_meta = {k.decode(): v.decode() for k, v in want.metadata.metadata.items() if k.startswith(b"advcalc.")}
        # the plan's fingerprint is the dataset run's own (its --resume); the rest is the same
        cli_meta.pop("advcalc.plan")
        assert meta == cli_meta


def test_the_two_passes_on_a_file_without_rows(tmp_path: Path) -> None:
    table = pq.read_table(DEMO)
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table.slice(0, 0), tmp_path / "b.parquet")
    want = cli_run(tmp_path / "a.parquet", tmp_path / "cli.parquet", ["-e", "grpo"])
    summary = advcalc.ray.run([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "out",
                              estimator="grpo", per_step=False)
    same_columns(pq.read_table(tmp_path / "out" / "a.parquet"), want)
    empty = pq.read_table(tmp_path / "out" / "b.parquet")
    assert empty.num_rows == 0 and empty.schema.names == want.column_names
    assert summary["rows"] == 256


def test_the_two_passes_name_the_file_and_its_row(tmp_path: Path) -> None:
    # pass 1 reads each file through the CLI's IO layer: a bad value is named by its file and
    # its row within the file, as the CLI's dataset run names it (row 5 of part1, not 133)
    table = pq.read_table(DEMO)
    first, second = table.slice(0, 128), table.slice(128)
    scores = second.column("rm_scores").to_pylist()
    scores[5][-1] = float("nan")
    i = second.schema.get_field_index("rm_scores")
    second = second.set_column(i, "rm_scores", pa.array(scores, second.schema.field(i).type))
    pq.write_table(first, tmp_path / "part0.parquet")
    pq.write_table(second, tmp_path / "part1.parquet")
    with pytest.raises(advcalc.DataError, match=r"part1\.parquet: column `rm_scores` row 5: NaN"):
        advcalc.ray.run([tmp_path / "part0.parquet", tmp_path / "part1.parquet"], tmp_path / "out",
                        estimator="grpo", per_step=False)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_tasks_of_one_execution_run_at_once_and_the_callers_context_is_kept() -> None:
    # Ray Data's resource reservation ran the two tasks one after the other on 2 CPUs (Ray
    # 2.60); advcalc.ray switches it off on its own datasets only
    import time

    ctx = ray.data.DataContext.get_current()
    assert ctx.op_resource_reservation_enabled is True  # Ray's default

    def udf(batch: pa.Table) -> pa.Table:
        start = time.time()
        time.sleep(1.0)
        return pa.table({"unit": batch.column("unit"), "start": [start], "end": [time.time()]})

    rows = sorted(advcalc.ray._run_tasks(2, udf), key=lambda r: r["start"])
    assert rows[1]["start"] < rows[0]["end"], "the two tasks ran one after the other"
    assert ray.data.DataContext.get_current().op_resource_reservation_enabled is True
