"""The Python layer's own behaviour around the engine: what it imports when, what inputs each
call takes, how it names arguments in messages, what it returns for polars, how it is typed
and packaged."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import inspect as pyinspect
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import typing
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import advcalc
from conftest import DEMO, REPO, cli, same_columns

PACKAGE = REPO / "python" / "advcalc"
COMPUTED = ["token_level_rewards", "advantages", "returns"]


# --- the native module is loaded when first needed -----------------------------------------


def test_the_hook_imports_without_the_native_module(tmp_path: Path) -> None:
    # the package's Python files alone (no advcalc._native beside them), first on the path
    (tmp_path / "advcalc").mkdir()
    for f in PACKAGE.glob("*.py"):
        shutil.copy(f, tmp_path / "advcalc")
    code = """
import sys
import numpy as np
import advcalc.verl
assert "advcalc._native" not in sys.modules
table = advcalc.verl.to_table({
    "uid": np.array(["a", "a"], dtype=object),
    "response_mask": np.ones((2, 3), dtype=np.int64),
    "rm_scores": np.zeros((2, 3), dtype=np.float32),
}, step=1)
assert table.num_rows == 2, table
try:
    advcalc.__version__
except ImportError as e:
    print("ImportError:", e)
"""
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "ImportError: advcalc's native module (advcalc._native) is not installed" in done.stdout
    assert "advcalc-rl" in done.stdout


def test_importing_the_package_does_not_load_the_native_module() -> None:
    code = (
        "import sys, advcalc, advcalc.verl; assert 'advcalc._native' not in sys.modules; "
        "v = advcalc.__version__; assert 'advcalc._native' in sys.modules; print(v)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == importlib.metadata.version("advcalc-rl")


# --- a C stream is read once ---------------------------------------------------------------


def _reader(table: pa.Table) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())


def test_a_consumed_reader_is_refused() -> None:
    table = pq.read_table(DEMO)
    reader = _reader(table)
    assert advcalc.compute(reader, estimator="grpo").num_rows == table.num_rows
    with pytest.raises(advcalc.UsageError, match="already consumed") as e:
        advcalc.compute(reader, estimator="grpo")
    assert "read once" in e.value.message and e.value.hint
    for again in (
        lambda: advcalc.inspect(reader),
        lambda: advcalc.compare(reader, estimators=["grpo", "rloo"]),
    ):
        with pytest.raises(advcalc.UsageError, match="already consumed"):
            again()
    # a Table is no stream: any number of calls
    assert advcalc.compute(table, estimator="grpo").num_rows == table.num_rows
    assert advcalc.compute(table, estimator="grpo").num_rows == table.num_rows


# --- inspect, compare and run take what compute takes --------------------------------------


def _stream(kind: str) -> typing.Any:
    table = pq.read_table(DEMO)
    if kind == "table":
        return table
    if kind == "reader":
        return _reader(table)
    if kind == "polars":
        return pytest.importorskip("polars").read_parquet(DEMO)
    duckdb = pytest.importorskip("duckdb")
    return duckdb.connect().from_arrow(table)


def _without_input_name(report: typing.Any) -> typing.Any:
    # the reports name their input: the path, or <stream>
    if isinstance(report, dict):
        return {k: _without_input_name(v) for k, v in report.items() if k not in ("input", "file")}
    if isinstance(report, list):
        return [_without_input_name(v) for v in report]
    return report


@pytest.mark.parametrize("kind", ["table", "reader", "polars", "duckdb"])
def test_inspect_compare_and_run_take_streams(tmp_path: Path, kind: str) -> None:
    report = advcalc.inspect(_stream(kind), estimator="grpo")
    want = advcalc.inspect(DEMO, estimator="grpo")
    assert _without_input_name(report) == _without_input_name(want)
    assert report["file"] == "<stream>" and want["file"] == str(DEMO)
    assert "stream.arrow" not in repr(report)

    both = advcalc.compare(_stream(kind), estimators=["grpo", "rloo"])
    assert _without_input_name(both) == _without_input_name(
        advcalc.compare(DEMO, estimators=["grpo", "rloo"])
    )

    out = tmp_path / "out.parquet"
    summary = advcalc.run(_stream(kind), out, estimator="grpo")
    assert summary["rows"] == 256
    got, want_table = pq.read_table(out), pq.read_table(_cli_out(tmp_path))
    if kind in ("table", "reader"):
        same_columns(got, want_table)
    else:  # polars and DuckDB hand over their own string and list types (large lists, ...)
        for name in COMPUTED:
            assert got.column(name).to_pylist() == want_table.column(name).to_pylist(), name


def _cli_out(tmp_path: Path) -> Path:
    out = tmp_path / "cli.parquet"
    if not out.exists():
        cli("run", "-q", "-e", "grpo", DEMO, out)
    return out


def test_a_spooled_stream_is_named_stream(tmp_path: Path) -> None:
    table = pq.read_table(DEMO).drop_columns(["uid"])
    with pytest.raises(advcalc.DataError) as e:
        advcalc.run(table, tmp_path / "out.parquet", estimator="grpo")
    assert str(e.value).startswith("<stream>: missing column uid")
    assert advcalc.inspect(table)["file"] == "<stream>"


@pytest.mark.parametrize(
    "call",
    [
        lambda: advcalc.compute(42),
        lambda: advcalc.inspect(42),
        lambda: advcalc.compare(42, estimators=["grpo", "rloo"]),
        lambda: advcalc.run(42, "out.parquet"),
        lambda: advcalc.run(DEMO, 42),
        lambda: advcalc.run(DEMO, "out.parquet", metrics=42),
    ],
    ids=["compute", "inspect", "compare", "run-src", "run-dst", "run-metrics"],
)
def test_a_wrong_type_is_a_usage_error(call: typing.Callable[[], object]) -> None:
    with pytest.raises(advcalc.UsageError, match="expected a path"):
        call()


# --- messages name the Python arguments ----------------------------------------------------


def test_errors_name_the_python_arguments(tmp_path: Path) -> None:
    with pytest.raises(advcalc.UsageError) as e:
        advcalc.compute(DEMO, estimator="no_such_estimator")
    assert "(from estimator=)" in str(e.value) and "-e" not in str(e.value)

    with pytest.raises(advcalc.UsageError) as e:
        advcalc.compute(DEMO, set=["algorithm.gamma"])
    assert str(e.value).startswith('set entry "algorithm.gamma": expected KEY=VALUE')
    assert e.value.hint == 'write it as set={"algorithm.lam": 0.95}'

    with pytest.raises(advcalc.UsageError) as e:
        advcalc.compute(
            DEMO, set={"algorithm.use_kl_in_reward": True, "algorithm.kl_ctrl.type": "nope"}
        )
    assert "(from set=)" in str(e.value) and "--set" not in str(e.value)

    out = tmp_path / "out.parquet"
    out.write_bytes(b"")
    with pytest.raises(advcalc.UsageError) as e:
        advcalc.run(DEMO, out, estimator="grpo")
    assert e.value.hint == "pass force=True to overwrite it"
    advcalc.run(DEMO, out, estimator="grpo", force=True)


def test_notes_and_warnings_name_the_python_arguments() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        advcalc.compute(DEMO, estimator="gae", convention="trl")
    notes = [str(w.message) for w in caught if issubclass(w.category, advcalc.ConfigNote)]
    assert notes and all("--" not in n for n in notes), notes
    assert any('convention="trl"' in n for n in notes), notes


def test_the_cli_hint_names_only_the_cli_flag(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    cli("run", "-q", "-e", "grpo", DEMO, out)
    done = cli("run", "-q", "-e", "grpo", DEMO, out, check=False)
    assert done.returncode == 2
    assert "hint: pass --force to overwrite it" in done.stderr
    assert "Python" not in done.stderr and "force=True" not in done.stderr


# --- polars in, polars out -----------------------------------------------------------------


def test_compute_on_polars_returns_polars() -> None:
    pl = pytest.importorskip("polars")
    frame = pl.read_parquet(DEMO)
    got = advcalc.compute(frame, estimator="grpo")
    assert isinstance(got, pl.DataFrame)
    want = advcalc.compute(pq.read_table(DEMO), estimator="grpo")
    assert isinstance(want, pa.Table)  # pyarrow stays pyarrow
    assert got.columns == want.column_names
    for name in COMPUTED:
        assert got[name].to_list() == want.column(name).to_pylist()
    got, metrics = advcalc.compute(frame, estimator="grpo", metrics=True)
    assert isinstance(got, pl.DataFrame)
    # the same up to the order of sums (polars hands over its own chunks)
    want_metrics = advcalc.compute(pq.read_table(DEMO), estimator="grpo", metrics=True)[1]
    assert metrics.keys() == want_metrics.keys()
    for key, value in metrics.items():
        assert value == (pytest.approx(want_metrics[key], rel=1e-12) if isinstance(value, float) else want_metrics[key])


def test_compute_is_overloaded_on_metrics() -> None:
    if not hasattr(typing, "get_overloads"):
        pytest.skip("typing.get_overloads needs Python 3.11")
    overloads = typing.get_overloads(advcalc.compute)
    assert overloads
    by_metrics = {}
    for f in overloads:
        sig = pyinspect.signature(f)
        by_metrics.setdefault(str(sig.parameters["metrics"].annotation), []).append(
            str(sig.return_annotation)
        )
    assert set(by_metrics) >= {"Literal[True]", "Literal[False]"}
    assert all(r.startswith("Tuple[") for r in by_metrics["Literal[True]"])
    assert all(not r.startswith("Tuple[") for r in by_metrics["Literal[False]"])
    assert any("polars.DataFrame" in r for r in by_metrics["Literal[False]"])


# --- the distribution ----------------------------------------------------------------------


def _third_party_imports(path: Path) -> typing.Set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if not _stdlib(n) and n != "advcalc"}


def _stdlib(name: str) -> bool:
    if hasattr(sys, "stdlib_module_names"):  # Python 3.10+
        return name in sys.stdlib_module_names
    if name in sys.builtin_module_names:
        return True
    spec = importlib.util.find_spec(name)
    origin = (spec.origin or "") if spec is not None else ""
    return origin.startswith(sysconfig.get_paths()["stdlib"]) and "site-packages" not in origin


def test_the_distribution_is_advcalc_rl_with_extras() -> None:
    meta = importlib.metadata.metadata("advcalc-rl")
    assert meta["Name"] == "advcalc-rl"
    assert {"ray", "verl"} <= set(meta.get_all("Provides-Extra") or [])
    requires = meta.get_all("Requires-Dist") or []

    def extra(name: str) -> typing.Set[str]:
        found = set()
        for r in requires:
            if re.search(rf"extra\s*==\s*['\"]{name}['\"]", r):
                found.add(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0])
        return found

    base = {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0] for r in requires if "extra" not in r}
    # every third-party import of the optional modules is in its extra (or a base dependency)
    assert _third_party_imports(PACKAGE / "ray.py") | {"ray"} <= extra("ray") | base
    assert any(r.startswith("ray[data]") for r in requires)
    assert _third_party_imports(PACKAGE / "verl.py") <= extra("verl") | base
    assert "numpy" in extra("verl")


def test_the_docs_install_the_right_distribution() -> None:
    # `advcalc` on the package index is an unrelated project: no command or runtime_env
    # installs it (prose may warn against it)
    wrong = re.compile(
        r"^\s*pip install advcalc(?![-_\w])|[\"']pip[\"']\s*:\s*\[\s*[\"']advcalc[\"']", re.M
    )
    texts = {p: p.read_text() for p in [REPO / "README.md", *(REPO / "docs").glob("*.md")]}
    texts.update({p: p.read_text() for p in PACKAGE.glob("*.py")})
    texts[REPO / "python" / "README.md"] = (REPO / "python" / "README.md").read_text()
    bad = [str(p.relative_to(REPO)) for p, text in texts.items() if wrong.search(text)]
    assert not bad
    import advcalc.ray

    assert "advcalc_rl-" in (advcalc.ray.__doc__ or "")
