"""advcalc on Ray Data: the two passes over a dataset too large for one machine.

    import advcalc.ray
    advcalc.ray.run("s3://bucket/rollouts/", "s3://bucket/advantages/", estimator="grpo")

The same numbers as ``advcalc run`` on the concatenated input (docs/ray.md), by one of two
paths.

**Steps apart**, when the files' steps are in their paths (``step=N``) and the configuration
carries nothing across steps (no adaptive KL controller): one ``map_batches`` over tasks of
whole consecutive steps, each running the CLI's own dataset run on its steps' files (pass 1,
the steps' plan, pass 2 through the CLI's writer, each output renamed into place). One Ray
Data execution; the driver sees a few numbers per task. A dataset in object storage runs
the same way, straight from the store: each task reads its steps' objects by ranged GETs
through the CLI's IO layer (nothing is copied locally) and puts each output under DST as
``advcalc run s3://… s3://…`` does (once complete, create-only unless ``force``, the same
provenance).

**Two passes over the units** otherwise:

1. (only for an adaptive KL controller, or OTB with batch-normalised IS weights) a pre-pass
   ``map_batches`` over the units: their per-row statistics, merged on the driver;
2. pass 1, ``map_batches`` over the units (one file or block each; a file or an object read
   by the CLI's IO layer, only the columns the maths needs): per-row statistics, a few
   numbers per row, sent back to the driver;
3. the plan, on the driver, by the same Rust code as the CLI (the KL controller scanned over
   the steps in order, group and batch statistics per step), cut into one shard per unit
   (the steps its rows hold), each put in the object store;
4. pass 2, ``map_batches`` over the units: each runs the CLI's pass 2 on its file or object
   with its shard (``Engine.file_outputs``: the computed columns encoded, IN's other column
   chunks copied byte for byte, the CLI's provenance) and writes its output atomically (a
   temporary name, then a rename; an object put once complete), so a task that Ray kills
   and retries leaves one whole file. A Dataset's blocks, which have no file, are written by
   pyarrow.

No token data crosses the network except each unit's own read and write: no shuffle, no
``groupby().map_groups``. Workers need the package (the distribution ``advcalc-rl``; the
name ``advcalc`` on the package index is an unrelated project): install its wheel
(``scripts/wheel``) on the cluster's image, or have Ray install it in each job's workers from
a path every node can read::

    ray.init(runtime_env={"pip": ["/shared/wheels/advcalc_rl-0.1.0-cp39-abi3-manylinux_2_28_x86_64.whl"]})

(Ray's pip environment keeps the packages of the image, so pyarrow and Ray are not
installed again.)
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.parquet as pq

from . import _config_args, _native, _read_args, _remote, _say
from ._atomic import remove_stale_temporaries, remove_tagged_temporaries, write_atomic
from ._files import file_rows, file_schema, read_file, write_file
from ._errors import DataError, Error, UsageError

__all__ = ["run"]

@dataclass
class _Unit:
    """One unit of work: a file (path) or a block of a Dataset (ref), and where its output
    goes (a name relative to DST)."""

    name: str
    out: str
    rows: int
    path: Optional[str] = None
    ref: Any = None
    step: Optional[int] = None  # `step=N` in the file's path
    schema: Optional[pa.Schema] = None  # an object's, read with its rows (one footer read)


def run(
    src: Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]], Any],
    dst: Union[str, "os.PathLike[str]"],
    estimator: Optional[str] = None,
    config: Any = None,
    set: Any = None,
    convention: Optional[str] = None,
    *,
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    force: bool = False,
    per_step: Optional[bool] = None,
    tasks: Optional[int] = None,
) -> Dict[str, Any]:
    """Compute advantages and returns for a dataset on Ray; write one output file per unit.

    Args:
        src: a Parquet or Arrow IPC file, a dataset as the CLI reads it (a directory or a
            glob: one file per step as the verl hook writes them, hive ``step=N/``
            directories, files with a ``step`` column), a list of files, or a
            ``ray.data.Dataset``. Files may be object URLs (``s3://bucket/dumps/``, a prefix
            or a glob, listed once by the driver through ``pyarrow.fs``; docs/python.md).
        dst: the output directory, or an object prefix (``s3://bucket/adv/``: each output
            put once complete, create-only unless ``force``). Each input file's output has
            the file's path relative to SRC (a list of files: its name); a Dataset's blocks
            give ``part-00000.parquet``, ``part-00001.parquet``, ...
        estimator, config, set, convention, layout, allow_nonfinite: as in
            :func:`advcalc.compute`.
        force: overwrite existing output files.
        per_step: run each step's files in one task (the CLI's own dataset run on them),
            ``True`` or ``False`` to insist on or refuse it; by default, whenever it is
            possible: the files' steps are in their paths (``step=N``), the configuration
            carries nothing across steps (no adaptive KL controller), and SRC is local with
            a local DST, or SRC is in object storage (DST a prefix or a local directory).
            Otherwise the passes run over all units, with the plan on the driver
            (docs/ray.md).
        tasks: how many Ray tasks each Ray Data execution runs (default: as many as the
            cluster has CPUs, at most one per step or unit). The per-step path shares the
            steps among them (consecutive whole steps per task, one dataset run of their
            files: steps never share state there, so any cut gives the same numbers); the
            two-pass path shares the units (each task takes its units one after the other).
            Each round of tasks costs Ray Data about 0.1 s of scheduling, so one round of
            larger tasks is faster than many small ones while every CPU is busy.

    Units are taken in order: a list as given; a directory's (or a glob's) files in the CLI's
    dataset order (docs/datasets.md: by the step in their path, ``step=N``, then by path); a
    Dataset's blocks as materialised. The result equals ``advcalc run`` on the units
    concatenated in that order. A file without a ``step`` column whose path holds
    ``step=N`` gets the column.

    Returns:
        ``{"rows", "units", "steps", "outputs", "warnings", "per_step"}``.
    """
    import ray

    if not ray.is_initialized():
        ray.init()
    cfg = _config_args(config, set, estimator, convention)
    read = _read_args(None, layout, None, allow_nonfinite)
    units = _units(src)
    if not units:
        raise UsageError(f"{src}: no Parquet files in it")
    schema = _schema(units)
    dst_text = _remote.fspath("dst", dst)
    out_dir: Union[str, Path] = dst_text if _remote.is_url(dst_text) else Path(dst_text)
    targets = [_target(out_dir, u.out) for u in units]
    if isinstance(out_dir, str):
        _check_object_destination(src, units, out_dir, targets, force)
    else:
        _check_destination(src, units, out_dir, force)
    # the per-step tasks read local files into a local DST, or objects (into a prefix or a
    # local directory); local files into a prefix take the two passes
    apart = _per_step_storage(units, out_dir)
    name = str(src) if isinstance(src, (str, os.PathLike)) else "<dataset>"
    engine = _native.Engine(cfg, schema, name, read)
    starts, row = [], 0
    for unit in units:
        starts.append(row)
        row += unit.rows
    if tasks is not None and tasks < 1:
        raise UsageError(f"tasks={tasks}: expected at least 1")
    n_tasks = tasks or _cluster_cpus()
    groups = None if per_step is False or not apart else _step_groups(units, engine)
    if per_step and groups is None:
        raise UsageError(
            "per_step=True: the steps cannot be run apart (files without `step=N` in their "
            "paths, a ray.data.Dataset, an adaptive KL controller, which carries its "
            "coefficient from step to step, or local files into an object prefix: the "
            "per-step tasks read local files into a local directory, or objects)",
            "leave per_step unset",
        )
    outputs = [str(t) for t in targets]
    if groups is not None:
        warnings = _run_per_step(units, _cut(groups, n_tasks), name, out_dir, cfg, read, force)
        warnings = _say(warnings, [])
        return {
            "rows": row,
            "units": len(units),
            "steps": [units[g[0]].step for g in groups],
            "outputs": outputs,
            "warnings": warnings,
            "per_step": True,
        }
    needed = engine.pass1_columns()
    run_id = uuid.uuid4().hex[:12]
    shares = _cut([[i] for i in range(len(units))], n_tasks)

    def each(fn):
        # one task per share of the units; the UDF gets a one-row table holding the share's
        # index and returns one row per unit
        def udf(batch: pa.Table) -> pa.Table:
            share = shares[batch.column("unit")[0].as_py()]
            try:
                rows = [fn(i, _Engine.get(cfg, schema, units[i].name, read)) for i in share]
            except Error as e:
                return _failed(share[0], e)
            return pa.concat_tables(rows, promote_options="default")

        return _run_tasks(len(shares), udf)

    # a file or an object is read by the CLI's IO layer (its own schema, the step of its
    # path), and each pass checks that it reads the version the first pass read (and the
    # rows the driver listed); a Dataset's block, in memory, through an Arrow C stream
    versions: List[Optional[str]] = [None] * len(units)

    def prepass_of(i: int, e: Any) -> pa.Table:
        unit = units[i]
        if unit.path is None:
            return _row(i, stats=e.prepass_stats(_read(unit, needed), starts[i]), version=None)
        stats, _, rows, version = e.file_stats(
            unit.path, unit.step, starts[i], True, None, None, _task_threads())
        _same_rows(unit, rows)
        return _row(i, stats=stats, version=version)

    prepass = None
    if engine.needs_prepass():
        found = each(prepass_of)
        prepass = ray.put(_native.merge_stats(_ordered(found, "stats")))
        versions = _ordered(found, "version")

    def pass1(i: int, e: Any) -> pa.Table:
        unit, got = units[i], ray.get(prepass) if prepass is not None else None
        if unit.path is None:
            stats, steps = e.row_stats(_read(unit, needed), starts[i], got)
            return _row(i, stats=stats, steps=[s for s in steps], version=None)
        stats, steps, rows, version = e.file_stats(
            unit.path, unit.step, starts[i], False, got, versions[i], _task_threads())
        _same_rows(unit, rows)
        return _row(i, stats=stats, steps=[s for s in steps], version=version)

    found = each(pass1)
    plan = engine.plan(_ordered(found, "stats"))
    versions = _ordered(found, "version")
    steps = {r["unit"]: r["steps"] for r in found}
    shards = [ray.put(plan.shard(steps[i])) for i in range(len(units))]

    def pass2(i: int, e: Any) -> pa.Table:
        unit, shard = units[i], ray.get(shards[i])
        if unit.path is not None:
            # a file or an object: the CLI's writer, IN's unchanged column chunks copied
            rows = _file_outputs(e, name, unit, starts[i], shard, targets[i], versions[i], force)
            _same_rows(unit, rows)
            return _row(i, rows=rows)
        # a Dataset's block has no file to copy from: its table, written by pyarrow
        table = e.token_outputs(_read(unit), starts[i], shard)
        _write(table, targets[i], run_id, force)
        return _row(i, rows=table.num_rows)

    try:
        each(pass2)
    finally:
        if isinstance(out_dir, Path):
            _remove_temporaries(out_dir, units, run_id)
    warnings = list(plan.warnings)
    warnings = _say(warnings, [])
    return {
        "rows": row,
        "units": len(units),
        "steps": [s for s in plan.steps()],
        "outputs": outputs,
        "warnings": warnings,
        "per_step": False,
    }


def _same_rows(unit: _Unit, rows: int) -> None:
    """Refuse a file whose row count is no longer the one the driver listed: the plan numbers
    every unit's rows from the listed counts, so a file rewritten during the run would get
    other rows' numbers (as the CLI refuses a dataset file that changed while it ran)."""
    if rows != unit.rows:
        raise DataError(
            f"{unit.name}: changed while advcalc read it ({unit.rows} rows when listed, then {rows})",
            "run again once the dataset is no longer being written",
        )


def _task_threads() -> int:
    """A task's engine threads: as many as the task has CPUs."""
    import ray

    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
    return max(1, int(cpus))


def _file_outputs(
    e: Any,
    name: str,
    unit: _Unit,
    first_row: int,
    shard: bytes,
    target: Union[str, Path],
    version: Optional[str],
    force: bool,
) -> int:
    """Pass 2 of a file or an object of the input ``name`` by the CLI's writer
    (``Engine.file_outputs``; ``version``, the one pass 1 read, which it must still be): into
    a local directory, written beside the target and renamed
    into place (over a retried task's own earlier output; the driver checked the targets);
    into a prefix, written to a local temporary file and put as ``_put`` puts. Returns the
    rows written."""
    if isinstance(target, Path):
        target.parent.mkdir(parents=True, exist_ok=True)
        return e.file_outputs(name, unit.path, unit.step, first_row, shard, str(target), version,
                              _task_threads())
    scratch = tempfile.mkdtemp(prefix="advcalc-ray-")
    try:
        local = os.path.join(scratch, _name(target))
        rows = e.file_outputs(name, unit.path, unit.step, first_row, shard, local, version,
                              _task_threads())
        _put_file(local, target, force)
        return rows
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_tasks(n: int, udf: Any) -> List[Dict[str, Any]]:
    """One Ray Data execution of `n` tasks, ``udf`` on each task's one-row table (its number),
    all at once as far as the cluster's CPUs go; the rows they return. The first advcalc
    error a task returned (``_failed``) is raised as itself.

    Ray Data's resource reservation (``op_resource_reservation_enabled``, on by default) holds
    back part of the cluster's CPUs for operators downstream of a map; our map has none, so
    on a small cluster its tasks ran one at a time (Ray 2.60, 2 CPUs: two tasks of 0.5 s took
    1.07 s, and 0.55 s without it). It is switched off on these datasets' own copy of the
    context only."""
    dataset = _items(n).map_batches(udf, batch_size=1, batch_format="pyarrow")
    # each Dataset holds its own copy of the context, which its execution reads: the
    # process-wide one (other threads' datasets) is left alone
    ctx = getattr(dataset, "context", None)
    if ctx is not None and hasattr(ctx, "op_resource_reservation_enabled"):
        ctx.op_resource_reservation_enabled = False
    rows = dataset.take_all()
    for r in sorted(rows, key=lambda r: r["unit"]):
        if r.get("error") is not None:
            raise pickle.loads(r["error"])
    return rows


def _failed(unit: int, e: Error) -> pa.Table:
    """A task's advcalc error as its result row: Ray wraps an exception a task raises in its
    own errors and drops the original when it crosses processes, so the caller would not see
    the ``DataError`` or ``UsageError`` (e.g. an output another writer created after the
    driver's check: ``already exists``). The error pickles whole (message, hint, causes)."""
    return pa.table({"unit": [unit], "error": [pickle.dumps(e)]})


def _items(n: int) -> Any:
    """A Dataset of `n` one-row blocks numbering the tasks: ``map_batches`` over it with
    ``batch_size=1`` runs one task per number."""
    import ray

    return ray.data.from_items([{"unit": i} for i in range(n)])


def _step_groups(units: List[_Unit], engine: Any) -> Optional[List[List[int]]]:
    """The units of each step, steps in order, when each step can run alone: every unit's
    step is in its path (the dataset order puts a step's files together) and the
    configuration carries nothing across steps. ``None`` otherwise."""
    if engine.carries_across_steps() or any(u.step is None or u.path is None for u in units):
        return None
    groups: List[List[int]] = []
    for i, unit in enumerate(units):
        if groups and units[groups[-1][0]].step == unit.step:
            groups[-1].append(i)
        else:
            groups.append([i])
    if len({units[g[0]].step for g in groups}) != len(groups):
        return None  # a step's files apart (not the dataset order): not one task's
    return groups


def _cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _cut(groups: List[List[int]], n: int) -> List[List[int]]:
    """`groups` (of unit indices: a step's, or one unit each) cut into at most `n` runs of
    consecutive groups, as even in count as they can be (sizes differ by at most one): the
    units of each task, in dataset order."""
    n = min(n, len(groups))
    size, extra = divmod(len(groups), n)
    cut, at = [], 0
    for k in range(n):
        end = at + size + (1 if k < extra else 0)
        cut.append([i for g in groups[at:end] for i in g])
        at = end
    return cut


def _per_step_storage(units: List[_Unit], out_dir: Union[str, Path]) -> bool:
    """Whether the per-step tasks can read the units and write DST: local files into a local
    directory (``_native.run_parts``), or objects into a prefix or a local directory
    (``_native.run_object_parts``)."""
    urls = [u.path is not None and _remote.is_url(u.path) for u in units]
    if all(urls):
        return True
    return not any(urls) and not isinstance(out_dir, str)


def _base(unit: _Unit) -> str:
    """The dataset's directory: the unit's path without its relative path (an object's: its
    prefix, ending in ``/``)."""
    if _remote.is_url(unit.path):
        assert unit.path.endswith("/" + unit.out), (unit.path, unit.out)
        return unit.path[: len(unit.path) - len(unit.out)]
    path, depth = Path(unit.path), len(Path(unit.out).parts)
    return str(path.parents[depth - 1])


def _run_per_step(
    units: List[_Unit],
    tasks: List[List[int]],
    name: str,
    out_dir: Union[str, Path],
    cfg: Dict[str, Any],
    read: Dict[str, Any],
    force: bool,
) -> List[str]:
    """One task per group of whole steps: the CLI's dataset run on the steps' files (pass 1,
    the steps' plan by the same Rust code, pass 2 through the CLI's writer, each output
    renamed into place), all in one Ray Data execution. Objects are read where they are, by
    the CLI's IO layer, and each output is put as the CLI puts it (once complete,
    create-only unless `force`: a retried task whose earlier attempt put an output is
    refused, naming it). Returns the tasks' warnings, in step order."""
    objects = _remote.is_url(units[0].path)

    def udf(batch: pa.Table) -> pa.Table:
        g = batch.column("unit")[0].as_py()
        members = [units[i] for i in tasks[g]]
        args = (cfg, {**read, "threads": _task_threads()})
        try:
            base, rels, out = _base(members[0]), [u.out for u in members], str(out_dir)
            if objects:
                # into a local directory, outputs are renamed into place, as run_parts does
                # (the driver checked them; a retried task redoes its files)
                put_force = force or isinstance(out_dir, Path)
                rows, warnings = _native.run_object_parts(name, base, rels, out, *args, put_force)
            else:
                rows, warnings = _native.run_parts(name, base, rels, out, *args)
        except Error as e:
            return _failed(g, e)
        return pa.table({
            "unit": [g],
            "rows": [rows],
            "warnings": pa.array([warnings], pa.list_(pa.string())),
        })

    try:
        done = _run_tasks(len(tasks), udf)
    finally:
        # temporaries of tasks that Ray killed mid-write (their retries wrote the outputs)
        if isinstance(out_dir, Path):
            for parent in {(out_dir / u.out).parent for u in units}:
                if parent.is_dir():
                    remove_stale_temporaries(parent)
    return [str(w) for r in sorted(done, key=lambda r: r["unit"]) for w in r["warnings"]]


class _Engine:
    """One engine per worker process and configuration (the native object is not picklable;
    building it parses the configuration and checks the schema)."""

    _cache: Dict[Any, Any] = {}

    @classmethod
    def get(cls, cfg: Dict[str, Any], schema: pa.Schema, name: str, read: Dict[str, Any]) -> Any:
        key = (repr(sorted(cfg.items())), schema.to_string(), name, repr(sorted(read.items())))
        if key not in cls._cache:
            cls._cache[key] = _native.Engine(cfg, schema, name, read)
        return cls._cache[key]


def _row(i: int, **fields: Any) -> pa.Table:
    return pa.table({"unit": [i], **{k: [v] for k, v in fields.items()}})


def _ordered(rows: List[Dict[str, Any]], key: str) -> List[bytes]:
    return [r[key] for r in sorted(rows, key=lambda r: r["unit"])]


def _units(src: Any) -> List[_Unit]:
    if hasattr(src, "iter_internal_ref_bundles"):  # a ray.data.Dataset
        units = []
        for bundle in src.materialize().iter_internal_ref_bundles():
            for entry in bundle.blocks:
                # a BlockEntry (ray >= 2.5x) or a (ref, metadata) pair (older)
                ref, meta = (entry.ref, entry.metadata) if hasattr(entry, "ref") else entry
                i = len(units)
                units.append(_Unit(f"<block {i}>", f"part-{i:05d}.parquet", meta.num_rows, ref=ref))
        return units
    if isinstance(src, (str, os.PathLike)):
        text = _remote.fspath("src", src)
        if _remote.is_url(text) and _remote.is_dataset(text):
            # an object prefix or glob: listed once, in the CLI's dataset order
            found = _remote.dataset_files(text)
            units = _object_units([(url, rel, step) for url, rel, step in found])
            _check_path_steps(units)
            return units
        if not _remote.is_url(text):
            # a directory or a glob: the CLI's dataset (its order, its checks); else one file
            parts = _native.dataset_parts(text)
            if parts:
                return [_Unit(path, rel, rows, path=path, step=step) for path, rel, step, rows in parts]
        return [_file_unit(text, _name(text))]
    texts = [_remote.fspath("src", p) for p in src]
    names = [_name(t) for t in texts]
    if len(set(names)) != len(names):
        raise UsageError("src: two files of the list have the same name", "pass a directory instead")
    return [_file_unit(t, n) for t, n in zip(texts, names)]


def _name(path: str) -> str:
    """A file's name (an object URL's last component: pathlib would shorten its `//`)."""
    return path.rstrip("/").rsplit("/", 1)[-1] if _remote.is_url(path) else Path(path).name


def _file_unit(path: str, out: str) -> _Unit:
    if _remote.is_url(path):
        return _object_units([(path, out, None)])[0]
    return _Unit(path, out, file_rows(path), path=path)


def _object_units(found: List[Tuple[str, str, Optional[int]]]) -> List[_Unit]:
    """Units of objects, each footer read once (schema and rows), several at a time: on the
    driver, one round trip per object would otherwise add up."""

    def info(url: str) -> Tuple[pa.Schema, int]:
        return file_schema(url), file_rows(url)

    with ThreadPoolExecutor(max_workers=16) as pool:
        infos = list(pool.map(info, [url for url, _, _ in found]))
    return [
        _Unit(url, rel, rows, path=url, step=step, schema=schema)
        for (url, rel, step), (schema, rows) in zip(found, infos)
    ]


def _check_path_steps(units: List[_Unit]) -> None:
    """Without a `step` column, all files' paths name a step or none does (the CLI's check
    on a dataset, which the native module makes for a local one)."""
    with_step = next((u for u in units if u.step is not None), None)
    without = next((u for u in units if u.step is None), None)
    if with_step is None or without is None or "step" in _read_schema(units[0]).names:
        return
    raise DataError(
        f"{without.name}: no step (no `step` column, no step=N in its path), while "
        f"{with_step.name} is step {with_step.step}",
        "name every file (or its directory) step=N, or add a `step` column",
    )


def _read(unit: _Unit, columns: Optional[List[str]] = None) -> pa.Table:
    """The unit; the statistics passes read only `columns` (the engine's pass-1 columns)."""
    if unit.ref is not None:
        import ray

        block = ray.get(unit.ref)
        return block if isinstance(block, pa.Table) else pa.Table.from_pandas(block)
    return read_file(unit.path, unit.step, columns)


def _schema(units: List[_Unit]) -> pa.Schema:
    """The units' common schema (what pass 1 reads); files that disagree are an error naming
    both files and the column."""
    first = (
        _read(units[0]).schema if units[0].path is None else _read_schema(units[0])
    ).remove_metadata()
    for unit in units[1:]:
        if unit.path is None:
            continue
        other = _read_schema(unit)
        if not other.equals(first):
            column = next(
                (f.name for f in first if other.get_field_index(f.name) < 0
                 or other.field(f.name).type != f.type),
                next((f.name for f in other if first.get_field_index(f.name) < 0), "?"),
            )
            raise UsageError(
                f"{unit.name}: its schema differs from {units[0].name}'s (column `{column}`)",
                "give files with the same columns and types",
            )
    return first


def _read_schema(unit: _Unit) -> pa.Schema:
    schema = (unit.schema or file_schema(unit.path)).remove_metadata()
    if unit.step is not None and "step" not in schema.names:
        schema = schema.append(pa.field("step", pa.int64()))
    return schema


def _check_destination(src: Any, units: List[_Unit], out_dir: Path, force: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir}: not a directory", "DST is the output directory")
    if isinstance(src, (str, os.PathLike)) and not _remote.is_url(os.fspath(src)):
        # as the CLI: OUT neither IN's directory, nor inside it, nor containing it (outputs
        # would become inputs of the next run)
        base = Path(src) if Path(src).is_dir() else Path(_glob_base(os.fspath(src)))
        out, inp = out_dir.resolve(), base.resolve()
        if out == inp or inp in out.parents or out in inp.parents:
            raise UsageError(f"{out_dir}: overlaps the input {src}", "write to a directory apart from the input")
    for unit in units:
        if (
            unit.path is not None
            and not _remote.is_url(unit.path)
            and (out_dir / unit.out).resolve() == Path(unit.path).resolve()
        ):
            raise UsageError(f"{out_dir}: would overwrite its input {unit.path}",
                             "write to another directory")
        if (out_dir / unit.out).exists() and not force:
            raise UsageError(f"{out_dir / unit.out}: already exists",
                             "pass force=True to overwrite it")


def _target(out_dir: Union[str, Path], rel: str) -> Union[str, Path]:
    """Where a unit's output goes: a path under the directory, or a URL under the prefix."""
    return _remote.join(out_dir, rel) if isinstance(out_dir, str) else out_dir / rel


def _prefix(url: str) -> str:
    """A URL prefix compared as the store sees it: `s3a://` is `s3://`, one trailing `/`."""
    head, _, body = url.partition("://")
    head = "s3" if head.lower() == "s3a" else head.lower()
    return f"{head}://{body.rstrip('/')}/"


def _check_object_destination(
    src: Any, units: List[_Unit], dst: str, targets: List[Any], force: bool
) -> None:
    """The local checks of `_check_destination` for an object prefix, on one listing of it:
    DST not an object, not overlapping a dataset's prefix, no output over its input, and no
    existing output without `force`. The puts are create-only besides (unless `force`), so
    an output that appears after this listing is refused by the store too."""
    here, below = _remote.existing(dst)
    if here:
        raise UsageError(f"{dst}: names an object, not a prefix", "DST is the output prefix, e.g. s3://bucket/adv/")
    if isinstance(src, str) and _remote.is_url(src):
        base = _remote.split(src)[0] if _remote.is_dataset(src) else src.rsplit("/", 1)[0]
        out, inp = _prefix(dst), _prefix(base)
        if out.startswith(inp) or inp.startswith(out):
            raise UsageError(f"{dst}: overlaps the input {src}", "write to a prefix apart from the input")
    for unit, target in zip(units, targets):
        if unit.path is not None and _remote.is_url(unit.path) and _prefix(unit.path) == _prefix(target):
            raise UsageError(f"{dst}: would overwrite its input {unit.path}", "write to another prefix")
        if target in below and not force:
            raise UsageError(f"{target}: already exists", "pass force=True to overwrite it")


def _glob_base(pattern: str) -> str:
    """The directory part of a glob before its first wildcard (a file: its directory)."""
    parts = Path(pattern).parts
    for i, part in enumerate(parts):
        if any(c in part for c in "*?["):
            return str(Path(*parts[:i])) if i else "."
    return str(Path(pattern).parent)


def _run_tag(run_id: str) -> str:
    """The tag that starts the random part of this run's temporary names (``_atomic``)."""
    return f"ray.{run_id}."


def _write(table: pa.Table, path: Union[str, Path], run_id: str, force: bool) -> None:
    """Write atomically, in the format of the name (as the CLI's dataset run), through the
    CLI's scheme (``_atomic``): a temporary ``.advcalc-HOST-KEY-PID-ray.RUN.*.tmp`` beside
    the target, fsync, rename. A retried task writes the same bytes again and renames over
    its own earlier output; creating its temporary removes those of this host's killed
    attempts. An object URL: ``_put``."""
    if isinstance(path, str):
        _put(table, path, force)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: write_file(table, tmp, like=path), tag=_run_tag(run_id))


def _put(table: pa.Table, url: str, force: bool) -> None:
    """The output written to a local temporary file, then put at ``url`` (``_put_file``)."""
    scratch = tempfile.mkdtemp(prefix="advcalc-ray-")
    try:
        name = _name(url)
        local = os.path.join(scratch, name)
        write_file(table, Path(local), like=Path(name))
        _put_file(local, url, force)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _put_file(local: str, url: str, force: bool) -> None:
    """The finished local file put at ``url``: visible only when complete; create-only unless
    ``force``. A create-only put refused because the object holds exactly these bytes is this
    task's own earlier attempt (Ray retried the task after its put): done. Any other existing
    object is refused."""
    try:
        _remote.put(local, url, force)
    except UsageError:
        if force or not _remote.same_bytes(local, url):
            raise


def _remove_temporaries(out_dir: Path, units: List[_Unit], run_id: str) -> None:
    """This run's temporary files that attempts Ray killed mid-write left (their retries wrote
    the outputs), for a Dataset's blocks on any node: a dead node's are under another host's
    key, which the PID rule never removes (a file's output is written by the CLI's writer,
    whose temporaries carry no run tag); and, as everywhere, this host's dead processes'
    temporaries. Another run's, in flight in the same directory, are not touched."""
    for parent in {(out_dir / u.out).parent for u in units}:
        if parent.is_dir():
            remove_tagged_temporaries(parent, _run_tag(run_id))
            remove_stale_temporaries(parent)
