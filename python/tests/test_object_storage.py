"""Object URLs from Python and on Ray, against moto's S3 server on 127.0.0.1 (started and
stopped by this module): the calls on `s3://` IN and OUT give what they give on local files,
an existing OUT is refused without `force`, a missing object is an error naming its URL, and
`advcalc.ray.run` from an `s3://` prefix to an `s3://` prefix writes what it writes locally
(whole steps per task, each reading its objects through the native IO layer, as the CLI).

The expected values are the same calls on local copies of the same files (and the CLI's own
run for `run`), never the code under test."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import advcalc
import advcalc.ray
from advcalc import _remote
from conftest import CASES, DEMO, cli, cli_run, same_columns

BUCKET = "advcalc-py"  # moto refuses bucket names under 3 characters
# what the tests set, and what they clear so that nothing of the machine's leaks in
ENV_SET = ("AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
ENV_CLEARED = ("AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION")


@pytest.fixture(scope="module")
def s3() -> Any:
    """moto's S3 server on a free port of 127.0.0.1 and the AWS_* environment pointing at it
    (restored afterwards), with the bucket created; yields the environment."""
    if os.environ.get("ADVCALC_REQUIRE_MOTO") == "1":
        from moto.server import ThreadedMotoServer
    else:
        ThreadedMotoServer = pytest.importorskip("moto.server").ThreadedMotoServer
    import boto3

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in ENV_SET + ENV_CLEARED}
    for k in ENV_CLEARED:
        os.environ.pop(k, None)
    os.environ.update(env)
    try:
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket=BUCKET)
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def url(key: str) -> str:
    return f"s3://{BUCKET}/{key}"


def fs() -> pafs.FileSystem:
    # as Ray Data resolves it (a bare S3FileSystem() ignores AWS_ENDPOINT_URL)
    return pafs.FileSystem.from_uri(url(""))[0]


def put_file(local: Path, key: str) -> str:
    pafs.copy_files(str(local), f"{BUCKET}/{key}", destination_filesystem=fs())
    return url(key)


def etag(key: str) -> str:
    import boto3

    head = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).head_object(
        Bucket=BUCKET, Key=key
    )
    return head["ETag"].strip('"')


def get_bytes(key: str) -> bytes:
    with fs().open_input_stream(f"{BUCKET}/{key}") as f:
        return f.read()


def exists(key: str) -> bool:
    return fs().get_file_info(f"{BUCKET}/{key}").type != pafs.FileType.NotFound


def read_object(key: str) -> pa.Table:
    return pq.read_table(f"{BUCKET}/{key}", filesystem=fs())


def renamed(report: Any, src: str, local: str) -> Any:
    """A report on the object with its URL named as the local copy's path."""
    return json.loads(json.dumps(report).replace(src, local))


def step_files(table: pa.Table, directory: Path, steps: int) -> List[Path]:
    """`table` as `steps` files `step=N.parquet` (as the verl hook writes them), rows
    interleaved so that the steps differ; no `step` column (the path says it)."""
    directory.mkdir(parents=True)
    paths = []
    for k in range(steps):
        rows = table.take(pa.array(range(k, table.num_rows, steps)))
        paths.append(directory / f"step={k + 1}.parquet")
        pq.write_table(rows, paths[-1])
    return paths


# --- the calls ------------------------------------------------------------------------------


def test_the_calls_on_objects_give_the_local_results(s3: Dict[str, str], tmp_path: Path) -> None:
    src = put_file(DEMO, "calls/demo.parquet")
    same_columns(advcalc.compute(src, estimator="grpo"), advcalc.compute(DEMO, estimator="grpo"))

    # run: s3 -> s3, with the metrics put beside it; the CLI's own run on the local file
    want = cli_run(DEMO, tmp_path / "cli.parquet", ["-e", "grpo", "--metrics", str(tmp_path / "m.json")])
    summary = advcalc.run(src, url("calls/out.parquet"), estimator="grpo", metrics=url("calls/m.json"))
    local = advcalc.run(DEMO, tmp_path / "py.parquet", estimator="grpo")
    assert summary == local
    same_columns(read_object("calls/out.parquet"), want)
    assert json.loads(get_bytes("calls/m.json")) == json.loads((tmp_path / "m.json").read_text())
    # an Arrow IPC OUT, and a local OUT of an object IN
    advcalc.run(src, url("calls/out.arrow"), estimator="grpo")
    with pa.ipc.open_file(pa.BufferReader(get_bytes("calls/out.arrow"))) as f:
        same_columns(f.read_all(), want)
    advcalc.run(src, tmp_path / "from-object.parquet", estimator="grpo")
    same_columns(pq.read_table(tmp_path / "from-object.parquet"), want)

    got = advcalc.inspect(src, estimator="grpo")
    assert renamed(got, src, str(DEMO)) == advcalc.inspect(DEMO, estimator="grpo")
    got = advcalc.compare(src, estimators=["grpo", "rloo"])
    assert renamed(got, src, str(DEMO)) == advcalc.compare(DEMO, estimators=["grpo", "rloo"])


def test_a_config_object_and_a_dataset_prefix(s3: Dict[str, str], tmp_path: Path) -> None:
    case = CASES / "chain_gae"
    src = put_file(case / "input.parquet", "config/input.parquet")
    config = put_file(case / "config.yaml", "config/gae.yaml")
    same_columns(
        advcalc.compute(src, config=config),
        advcalc.compute(case / "input.parquet", config=case / "config.yaml"),
    )
    # compare's labels are the config files' stems, wherever they are
    (tmp_path / "gae.yaml").write_bytes((case / "config.yaml").read_bytes())
    fixed = {"algorithm.kl_ctrl.type": "fixed"}
    got = advcalc.compare(src, configs=[config, case / "config.yaml"], set=fixed)
    local = advcalc.compare(case / "input.parquet", configs=[tmp_path / "gae.yaml", case / "config.yaml"], set=fixed)
    assert renamed(got, src, str(case / "input.parquet")) == local

    # a prefix: its files in the CLI's dataset order (step=10 after step=9), the step from
    # each file's path; what a local directory of the same files gives
    steps = step_files(pq.read_table(DEMO), tmp_path / "steps", 10)
    for p in steps:
        put_file(p, f"prefix/{p.name}")
    put_file(steps[0], "prefix/_SUCCESS")  # skipped as the CLI skips it
    want = advcalc.compute(tmp_path / "steps", estimator="grpo")
    same_columns(advcalc.compute(url("prefix/"), estimator="grpo"), want)
    same_columns(advcalc.compute(url("prefix"), estimator="grpo"), want)
    same_columns(advcalc.compute(url("prefix/step=*.parquet"), estimator="grpo"), want)

    # run, inspect and compare on the prefix: the CLI's dataset run, through the native module
    local = advcalc.run(tmp_path / "steps", tmp_path / "adv", estimator="grpo")
    assert advcalc.run(url("prefix/"), url("prefix-adv/"), estimator="grpo") == local
    for p in steps:
        same_columns(read_object(f"prefix-adv/{p.name}"), pq.read_table(tmp_path / "adv" / p.name))
    assert not exists("prefix-adv/_SUCCESS")
    got = advcalc.inspect(url("prefix/"), estimator="grpo")
    assert renamed(got, url("prefix/"), str(tmp_path / "steps")) == advcalc.inspect(tmp_path / "steps", estimator="grpo")
    got = advcalc.compare(url("prefix/"), estimators=["grpo", "rloo"])
    want = advcalc.compare(tmp_path / "steps", estimators=["grpo", "rloo"])
    assert renamed(got, url("prefix/"), str(tmp_path / "steps")) == want


def test_an_existing_output_is_refused_without_force(s3: Dict[str, str]) -> None:
    src = put_file(DEMO, "force/demo.parquet")
    advcalc.run(src, url("force/out.parquet"), estimator="grpo")
    before = get_bytes("force/out.parquet")
    with pytest.raises(advcalc.UsageError, match="already exists") as e:
        advcalc.run(src, url("force/out.parquet"), estimator="rloo")
    assert url("force/out.parquet") in str(e.value) and "force=True" in str(e.value)
    assert get_bytes("force/out.parquet") == before
    advcalc.run(src, url("force/out.parquet"), estimator="rloo", force=True)
    assert get_bytes("force/out.parquet") != before
    # the sink the Python layer puts its own outputs with: create-only too
    with pytest.raises(advcalc.UsageError, match="already exists"):
        _remote.put(str(DEMO), url("force/out.parquet"), force=False)


def test_a_missing_object_is_an_error_naming_its_url(s3: Dict[str, str]) -> None:
    missing = url("nowhere/missing.parquet")
    for call in (
        lambda: advcalc.compute(missing, estimator="grpo"),
        lambda: advcalc.inspect(missing),
        lambda: advcalc.run(missing, url("nowhere/out.parquet"), estimator="grpo"),
        lambda: advcalc.compute(DEMO, estimator="grpo", config=url("nowhere/config.yaml")),
    ):
        with pytest.raises(advcalc.DataError) as e:
            call()
        assert "nowhere/" in e.value.message and e.value.message.startswith("s3://"), str(e.value)
    assert not exists("nowhere/out.parquet")
    with pytest.raises(advcalc.DataError, match=r"s3://advcalc-py/nowhere/: no Parquet or Arrow files"):
        advcalc.compute(url("nowhere/"), estimator="grpo")


def test_a_url_that_pathlib_shortened_is_refused() -> None:
    with pytest.raises(advcalc.UsageError, match="pathlib shortened"):
        advcalc.compute(Path("s3://bucket/demo.parquet"), estimator="grpo")
    with pytest.raises(advcalc.UsageError, match="pathlib shortened"):
        advcalc.run(DEMO, Path("s3://bucket/out.parquet"), estimator="grpo")


def test_the_listing_takes_the_files_and_the_order_the_native_module_takes(s3: Dict[str, str], tmp_path: Path) -> None:
    # one tree, local and under a prefix: hive directories and step files, names the
    # dataset skips, steps that sort as numbers
    tree = tmp_path / "tree"
    table = pq.read_table(DEMO).slice(0, 8)
    for rel in ["step=10.parquet", "step=9.parquet", "step=2/b.parquet", "step=2/a.arrow",
                "step=3-part1.parquet", "run/step=4/step=4.parquet", "_SUCCESS", ".hidden.parquet",
                "_tmp/step=5.parquet", "step=6.txt"]:
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".arrow"):
            with pa.ipc.new_file(path, table.schema) as w:
                w.write_table(table)
        else:
            pq.write_table(table, path)
        put_file(path, f"tree/{rel}")
    native = advcalc._native
    for pattern in ["", "step=*.parquet", "**/*.parquet", "step=[0-9]/*"]:
        local = native.dataset_parts(str(tree / pattern) if pattern else str(tree))
        listed = _remote.dataset_files(url(f"tree/{pattern}"))
        assert [(rel, step) for _, rel, step, _ in local] == [(rel, step) for _, rel, step in listed], pattern
        assert all(u == url(f"tree/{rel}") for u, rel, _ in listed)


def test_steps_in_paths_as_the_crate_reads_them() -> None:
    # the crate's own cases (io::dataset::tests::steps_from_paths)
    s = lambda p: _remote.path_step(p.split("/"))  # noqa: E731
    assert s("step=12.parquet") == 12
    assert s("step=3/part-0.parquet") == 3
    assert s("run/step=3/step=3.parquet") == 3
    assert s("x_step=3.parquet") is None
    assert s("step=3a.parquet") is None
    assert s("step=3-part1.parquet") == 3
    assert s("part.parquet") is None
    with pytest.raises(ValueError, match="two steps"):
        s("step=1/step=2.parquet")


# --- advcalc.ray ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_ray(s3: Dict[str, str]) -> Any:
    """A local Ray (2 CPUs) whose workers get the AWS_* variables as docs/python.md says."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": dict(s3)})
    yield ray
    ray.shutdown()


def bounded(seconds: float, call: Callable[[], Any]) -> Any:
    """`call()`, failing the test if it has not returned within `seconds` (a hung request
    must not hang the suite; the module's Ray is shut down at teardown)."""
    done: Dict[str, Any] = {}

    def work() -> None:
        try:
            done["value"] = call()
        except BaseException as e:  # re-raised in the test's thread
            done["error"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"did not finish within {seconds} s")
    if "error" in done:
        raise done["error"]
    return done["value"]


def hive(table: pa.Table, directory: Path) -> None:
    """Two steps in hive directories, two files each, every group split across both files
    of its step (the two-pass path's plan on the driver must join them)."""
    step = pa.array([1 + (2 * i) // table.num_rows for i in range(table.num_rows)], pa.int64())
    for s in (1, 2):
        rows = table.filter(pc.equal(step, s))
        (directory / f"step={s}").mkdir(parents=True)
        for k in range(2):
            pq.write_table(rows.take(pa.array(range(k, rows.num_rows, 2))), directory / f"step={s}" / f"part-{k}.parquet")


@pytest.mark.parametrize("layout", ["step_files", "hive"])
def test_ray_run_from_a_prefix_to_a_prefix_writes_what_it_writes_locally(
    local_ray: Any, tmp_path: Path, layout: str
) -> None:
    dumps = tmp_path / "dumps"
    if layout == "step_files":
        step_files(pq.read_table(DEMO), dumps, 4)
    else:
        hive(pq.read_table(DEMO), dumps)
    files = sorted(p for p in dumps.rglob("*.parquet"))
    for p in files:
        put_file(p, f"ray-{layout}/dumps/{p.relative_to(dumps).as_posix()}")
    put_file(files[0], f"ray-{layout}/dumps/_SUCCESS")
    local = bounded(300, lambda: advcalc.ray.run(dumps, tmp_path / "adv", estimator="grpo"))
    src, dst = url(f"ray-{layout}/dumps/"), url(f"ray-{layout}/adv/")
    got = bounded(300, lambda: advcalc.ray.run(src, dst, estimator="grpo"))

    rels = [Path(p).relative_to(tmp_path / "adv").as_posix() for p in local["outputs"]]
    assert got["outputs"] == [dst + rel for rel in rels]
    assert (got["rows"], got["units"], got["steps"]) == (local["rows"], local["units"], local["steps"])
    # whole steps per task, straight from the objects
    assert got["per_step"] is True
    # the CLI's own dataset run on the local copy: the same columns, bit for bit
    cli("run", "-q", "-e", "grpo", dumps, tmp_path / "cli")
    for rel, path in zip(rels, local["outputs"]):
        out = read_object(f"ray-{layout}/adv/{rel}")
        same_columns(out, pq.read_table(path))
        same_columns(out, pq.read_table(tmp_path / "cli" / rel))
        # written by the CLI's writer from the object itself: the input's ETag, as
        # `advcalc run s3://…` records it
        meta = {k.decode(): v.decode() for k, v in (out.schema.metadata or {}).items()}
        assert meta.get("advcalc.dataset") == src
        assert meta.get("advcalc.input_etag", "").strip('"') == etag(f"ray-{layout}/dumps/{rel}")
    listed = fs().get_file_info(pafs.FileSelector(f"{BUCKET}/ray-{layout}/adv", recursive=True))
    assert sorted(i.path for i in listed if i.type == pafs.FileType.File) == sorted(
        f"{BUCKET}/ray-{layout}/adv/{rel}" for rel in rels
    )

    # an existing output without force: refused before any work, nothing replaced
    before = get_bytes(f"ray-{layout}/adv/{rels[0]}")
    with pytest.raises(advcalc.UsageError, match="already exists"):
        advcalc.ray.run(src, dst, estimator="rloo")
    assert get_bytes(f"ray-{layout}/adv/{rels[0]}") == before
    forced = bounded(300, lambda: advcalc.ray.run(src, dst, estimator="rloo", force=True))
    local_rloo = bounded(300, lambda: advcalc.ray.run(dumps, tmp_path / "rloo", estimator="rloo"))
    for rel, path in zip(rels, local_rloo["outputs"]):
        same_columns(read_object(f"ray-{layout}/adv/{rel}"), pq.read_table(path))
    assert forced["rows"] == local_rloo["rows"]
    assert forced["per_step"] is True

    if layout == "step_files":
        # into a local directory, per step; and the two passes, still there when refused
        here = bounded(300, lambda: advcalc.ray.run(src, tmp_path / "here", estimator="grpo"))
        assert here["per_step"] is True
        # a glob: the objects under its prefix, per step too
        globbed = bounded(300, lambda: advcalc.ray.run(src + "step=*.parquet", url("ray-glob/adv/"),
                                                       estimator="grpo"))
        assert globbed["per_step"] is True
        two = bounded(300, lambda: advcalc.ray.run(src, url("ray-two/adv/"), estimator="grpo",
                                                   per_step=False))
        assert two["per_step"] is False
        for rel in rels:
            want = pq.read_table(tmp_path / "cli" / rel)
            same_columns(pq.read_table(tmp_path / "here" / rel), want)
            same_columns(read_object(f"ray-two/adv/{rel}"), want)
            same_columns(read_object(f"ray-glob/adv/{rel}"), want)
            # the two passes' pass 2 through the CLI's writer too, from the object itself
            two_meta = read_object(f"ray-two/adv/{rel}").schema.metadata or {}
            assert two_meta.get(b"advcalc.input_etag", b"").decode().strip('"') == etag(
                f"ray-{layout}/dumps/{rel}")


def test_the_per_step_path_takes_objects(tmp_path: Path) -> None:
    # which storage the per-step tasks take: local into local, objects into either; local
    # files into a prefix take the two passes
    obj = advcalc.ray._Unit("a", "step=1.parquet", 1, path=url("d/step=1.parquet"), step=1)
    loc = advcalc.ray._Unit("b", "step=1.parquet", 1, path=str(tmp_path / "step=1.parquet"), step=1)
    assert advcalc.ray._per_step_storage([obj], url("out/"))
    assert advcalc.ray._per_step_storage([obj], tmp_path / "out")
    assert advcalc.ray._per_step_storage([loc], tmp_path / "out")
    assert not advcalc.ray._per_step_storage([loc], url("out/"))
    assert not advcalc.ray._per_step_storage([obj, loc], tmp_path / "out")
    assert advcalc.ray._base(obj) == url("d/")
    hive_unit = advcalc.ray._Unit("c", "step=2/part-0.parquet", 1, path=url("d/step=2/part-0.parquet"), step=2)
    assert advcalc.ray._base(hive_unit) == url("d/")


def test_ray_refusals_on_prefixes(local_ray: Any, tmp_path: Path) -> None:
    src = put_file(DEMO, "ray-refusals/in/step=1.parquet")
    with pytest.raises(advcalc.UsageError, match="overlaps the input"):
        advcalc.ray.run(url("ray-refusals/in/"), url("ray-refusals/in/out/"), estimator="grpo")
    with pytest.raises(advcalc.UsageError, match="names an object, not a prefix"):
        advcalc.ray.run(url("ray-refusals/in/"), src, estimator="grpo")
    step_files(pq.read_table(DEMO), tmp_path / "in", 2)
    with pytest.raises(advcalc.UsageError, match="local files into an object prefix"):
        advcalc.ray.run(tmp_path / "in", url("ray-refusals/out/"), estimator="grpo", per_step=True)
    with pytest.raises(advcalc.DataError, match="ray-refusals/none/: no Parquet or Arrow files"):
        advcalc.ray.run(url("ray-refusals/none/"), url("ray-refusals/out/"), estimator="grpo")


def test_a_retried_put_of_the_same_bytes_is_done_and_other_bytes_are_refused(s3: Dict[str, str]) -> None:
    # a Ray task retried after its put finds its own output: the same bytes (pyarrow writes
    # the same table the same way) count as done; anything else is another writer's
    table = pq.read_table(DEMO)
    advcalc.ray._put(table, url("retry/out.parquet"), force=False)
    first = get_bytes("retry/out.parquet")
    advcalc.ray._put(table, url("retry/out.parquet"), force=False)
    assert get_bytes("retry/out.parquet") == first
    with pytest.raises(advcalc.UsageError, match="already exists"):
        advcalc.ray._put(table.slice(1), url("retry/out.parquet"), force=False)
    assert get_bytes("retry/out.parquet") == first
    advcalc.ray._put(table.slice(1), url("retry/out.parquet"), force=True)
    assert get_bytes("retry/out.parquet") != first


def test_ray_outputs_are_put_create_only(local_ray: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # another writer's output appears between the driver's listing and the put: the store
    # refuses the put itself (If-None-Match), and the run raises advcalc's error, not Ray's
    put_file(DEMO, "ray-race/in/step=1.parquet")
    put_file(DEMO, "ray-race/out/step=1.parquet")
    before = get_bytes("ray-race/out/step=1.parquet")
    monkeypatch.setattr(advcalc.ray, "_check_object_destination", lambda *args: None)
    with pytest.raises(advcalc.UsageError, match="ray-race/out/step=1.parquet: already exists"):
        bounded(300, lambda: advcalc.ray.run(url("ray-race/in/"), url("ray-race/out/"), estimator="grpo"))
    assert get_bytes("ray-race/out/step=1.parquet") == before

