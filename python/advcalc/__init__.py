"""advcalc: advantages and returns for logged LLM RL rollouts, with verl 0.9.1's numbers.

The same engine as the ``advcalc`` command line, from Python::

    import advcalc, pyarrow.parquet as pq

    table = advcalc.compute(pq.read_table("dump.parquet"), estimator="grpo")
    table, metrics = advcalc.compute("dump.parquet", config="trainer.yaml", metrics=True)
    advcalc.run("dump.parquet", "out.parquet", estimator="gae", set={"algorithm.lam": 0.95})
    report = advcalc.inspect("dump.parquet")           # the dict `inspect --json` prints
    table = advcalc.compare("dump.parquet", estimators=["grpo", "rloo"])

Inputs are paths (Parquet, Arrow IPC, verl's JSONL dumps and their directories; see the
CLI's README), object URLs as strings (``s3://bucket/dump.parquet``, ``gs://``, ``az://``,
``https://``: docs/python.md) or any object with ``__arrow_c_stream__`` (a pyarrow Table or
RecordBatchReader, a polars DataFrame, a DuckDB relation), for every call. :func:`compute`
returns a pyarrow Table, or a polars DataFrame for a polars DataFrame. Errors raise
:class:`DataError` (bad data, the CLI's exit 1) or :class:`UsageError` (bad arguments, exit
2), both :class:`Error`, with the CLI's message and hint, naming the Python arguments where
the CLI names its flags; data warnings and configuration notes are issued as
:class:`DataWarning` and :class:`ConfigNote` (``warnings`` module). The GIL is released while
the engine works, and Ctrl-C stops it promptly with ``KeyboardInterrupt``.

The distribution is ``advcalc-rl`` (``advcalc`` on the package index is an unrelated
project). The native module is loaded on first use: ``advcalc.verl`` imports without it.

Configuration, as the CLI's: ``config`` is a verl trainer YAML (a path), its ``algorithm:``
section or the whole trainer config as YAML text, or the same as a dict; ``set`` holds
overrides as ``{"algorithm.lam": 0.95}`` (the CLI's ``--set``); ``estimator`` and
``convention`` are ``-e`` and ``--convention``. Later sources win: config, then set, then
estimator and convention.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import shutil
import sys
import tempfile
import warnings as _warnings
import weakref
from types import ModuleType
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

import pyarrow as pa
import pyarrow.parquet as pq

from . import _remote
from ._errors import ConfigNote, DataError, DataWarning, Error, UsageError, python_names
from ._files import read_file

if TYPE_CHECKING:
    import polars

__all__ = [
    "compute",
    "loss",
    "run",
    "inspect",
    "compare",
    "estimators",
    "view",
    "View",
    "check",
    "Error",
    "DataError",
    "UsageError",
    "DataWarning",
    "ConfigNote",
    "__version__",
]

__version__: str  # the native module's (the crate's) version, read when first asked for


def _load() -> ModuleType:
    """The native module, imported when first needed: `advcalc.verl` (numpy and pyarrow
    only) imports without it."""
    try:
        return importlib.import_module("advcalc._native")
    except ImportError as e:
        raise ImportError(
            "advcalc's native module (advcalc._native) is not installed: install the "
            "advcalc-rl wheel (docs/python.md); advcalc.verl works without it",
            name="advcalc._native",
        ) from e


def __getattr__(name: str) -> Any:
    # module attributes that need the native module: loaded on first access
    if name == "View":
        from ._view import View

        return View
    if name == "__version__":
        return _load().__version__
    if name == "_native":
        return _load()
    if name == "read_skyrl_dump":  # advcalc.skyrl: numpy and pyarrow, no native module
        from .skyrl import read_skyrl_dump

        return read_skyrl_dump
    raise AttributeError(f"module 'advcalc' has no attribute {name!r}")


PathLike = Union[str, "os.PathLike[str]"]
ConfigLike = Union[PathLike, str, Mapping[str, Any], None]
Sets = Union[Mapping[str, Any], Sequence[str], None]


@overload
def compute(
    data: "polars.DataFrame",
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    metrics: Literal[False] = False,
    *,
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> "polars.DataFrame": ...
@overload
def compute(
    data: "polars.DataFrame",
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    *,
    metrics: Literal[True],
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> Tuple["polars.DataFrame", Any]: ...
@overload
def compute(
    data: Any,
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    metrics: Literal[False] = False,
    *,
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> pa.Table: ...
@overload
def compute(
    data: Any,
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    *,
    metrics: Literal[True],
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> Tuple[pa.Table, Any]: ...
@overload
def compute(
    data: Any,
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    metrics: bool = False,
    *,
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> Union[pa.Table, Tuple[pa.Table, Any], Any]: ...


def compute(
    data: Any,
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    metrics: bool = False,
    *,
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> Any:
    """Compute advantages and returns: the same columns and numbers as ``advcalc run``.

    Args:
        data: an object with ``__arrow_c_stream__`` (pyarrow Table or RecordBatchReader,
            polars DataFrame, DuckDB relation), or a path to a dump (Parquet, Arrow IPC file
            or stream, a verl JSONL dump or its ``rollout_data_dir``, a dataset: a directory
            or glob of files, concatenated in the CLI's order), or an object URL as a string
            (``s3://bucket/dump.parquet``, or a prefix or glob of objects, listed once:
            docs/python.md). A RecordBatchReader is read once: a second call with it raises
            :class:`UsageError`.
        estimator: ``algorithm.adv_estimator`` (``advcalc.estimators()`` lists them).
        config: a verl trainer YAML path (or object URL), YAML text, or a dict (see the
            module docstring).
        set: overrides, ``{"algorithm.lam": 0.95}`` or ``["algorithm.lam=0.95"]``.
        convention: whose numbers the GRPO/RLOO family gives (verl, trl, openrlhf, ...).
        metrics: also return verl's metrics, as ``run --metrics`` writes them: a dict, or a
            list of dicts (one per step) when the input has a ``step`` column.
        layout: ``"ragged"`` or ``"padded"`` token lists (where a scalar ``score`` goes).
        allow_nonfinite: let NaN and ±inf through instead of refusing them.
        threads: worker threads (default: one per core).
        input_format: ``"parquet"``, ``"arrow"``, ``"arrows"`` or ``"jsonl"`` for a path
            whose extension does not say.

    Returns:
        The input's columns with ``token_level_rewards``, ``advantages``, ``returns`` (and
        ``rollout_is_weights`` with importance weights): a polars DataFrame for a polars
        DataFrame (sharing the result's buffers), else a pyarrow Table; with
        ``metrics=True``, a pair ``(result, metrics)``.

    Raises:
        DataError: the input cannot be read or holds a refused value.
        UsageError: a bad argument or configuration.
    """
    cfg = _config_args(config, set, estimator, convention)
    read = _read_args(input_format, layout, threads, allow_nonfinite)
    return _compute(data, cfg, read, metrics)


def loss(
    data: Any,
    config: ConfigLike = None,
    set: Sets = None,
    metrics: bool = False,
    *,
    estimator: Optional[str] = None,
    convention: Optional[str] = None,
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> Any:
    """Replay verl's actor loss token by token: the same columns and numbers as
    ``advcalc loss`` (docs/loss.md).

    The configuration is verl's: ``actor_rollout_ref.actor`` (``policy_loss.loss_mode``,
    the clip ratios, ``loss_agg_mode``, the KL loss, ``ppo_mini_batch_size``, ...),
    ``actor_rollout_ref.rollout.n`` and ``.response_length``, and ``algorithm``. The input's
    ``advantages`` are replayed when it has them, else computed first as :func:`compute`
    computes them; without a ``log_probs`` column the replay is on-policy.

    Args:
        data: as for :func:`compute` (an Arrow C stream or a path).
        config: a verl trainer YAML path, YAML text, or a dict.
        set: overrides, ``{"actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean"}``.
        metrics: also return verl's actor metrics (``actor/pg_loss``, ``actor/pg_clipfrac``,
            ...) and advcalc's, as ``--metrics`` writes them.
        estimator, convention, layout, allow_nonfinite, threads, input_format: as for
            :func:`compute` (the estimator computes the advantages when the input has none).

    Returns:
        The input's columns (and :func:`compute`'s when the advantages were computed) with
        ``pg_losses``, ``grad_weights`` (dL/d log π) and, with the KL loss, ``kl_losses``;
        with ``metrics=True``, a pair ``(result, metrics)``. The findings (verl #4852's
        divisor, seq-mean-token-mean's length bias) are issued as :class:`DataWarning`.
    """
    cfg = _config_args(config, set, estimator, convention)
    cfg["actor"] = True
    read = _read_args(input_format, layout, threads, allow_nonfinite)
    return _compute(data, cfg, read, metrics)


def _compute(data: Any, cfg: Dict[str, Any], read: Dict[str, Any], metrics: bool) -> Any:
    """`compute` and `loss` on a stream, a dataset or a file."""
    native = _load()
    if hasattr(data, "__arrow_c_stream__"):
        _take_stream(data, "data")
        table, metrics_json, warns, notes = native.compute_stream(data, cfg, read, metrics)
        found = json.loads(metrics_json) if metrics_json is not None else None
    elif isinstance(data, (str, os.PathLike)) and (files := _dataset_files(data)):
        # a dataset (a directory, a glob, an object prefix): the files concatenated in the
        # CLI's dataset order, a file's step from its path as a `step` column
        table = pa.concat_tables([read_file(path, step) for path, step in files])
        table, metrics_json, warns, notes = native.compute_stream(
            table, cfg, read, metrics, os.fspath(data)
        )
        found = json.loads(metrics_json) if metrics_json is not None else None
    elif isinstance(data, (str, os.PathLike)):
        # one file or object (an object is fetched by the native module's IO layer)
        src = _remote.fspath("data", data)
        done = native.compute_path(src, cfg, read, metrics)
        if done is not None:
            table, metrics_json, warns, notes = done
            found = json.loads(metrics_json) if metrics_json is not None else None
        else:
            table, found, warns, notes = _compute_via_run(src, cfg, read, metrics)
    else:
        raise _wrong_type("data", data)
    _say(warns, notes)
    result = _like_input(table, data)
    return (result, found) if metrics else result


def _dataset_files(data: Any) -> List[Tuple[str, Optional[int]]]:
    """The files of the dataset `data` names, (path, step of its path), in the CLI's dataset
    order; empty for one file. A local dataset is listed by the native module (its checks);
    an object prefix or glob through pyarrow (`_remote`), once."""
    src = _remote.fspath("data", data)
    if _remote.is_url(src):
        if not _remote.is_dataset(src):
            return []
        return [(url, step) for url, _, step in _remote.dataset_files(src)]
    return [(path, step) for path, _, step, _ in _load().dataset_parts(src)]


def _like_input(table: pa.Table, data: Any) -> Any:
    """A polars DataFrame for a polars DataFrame (its columns share the table's buffers:
    no copy, no rechunk), else the pyarrow Table."""
    polars = sys.modules.get("polars")
    if polars is not None and isinstance(data, polars.DataFrame):
        return polars.from_arrow(table, rechunk=False)
    return table


# Readers already handed to the engine: an Arrow C stream can be read once, and pyarrow
# exports an exhausted RecordBatchReader again as a stream of no batches.
_consumed_readers: "weakref.WeakSet[pa.RecordBatchReader]" = weakref.WeakSet()


def _take_stream(data: Any, name: str) -> None:
    """Refuse a RecordBatchReader that an earlier call read (instead of computing on the
    0 rows it would give now); mark this one as read."""
    if isinstance(data, pa.RecordBatchReader):
        if data in _consumed_readers:
            raise UsageError(
                f"{name}: this RecordBatchReader was already consumed by an earlier call "
                "(an Arrow C stream can be read once)",
                "pass a new reader, or a pyarrow Table (which can be read any number of times)",
            )
        _consumed_readers.add(data)


def _wrong_type(name: str, value: Any) -> UsageError:
    return UsageError(
        f"{name}: expected a path or an object with __arrow_c_stream__, got "
        f"{type(value).__name__}",
        "pass a file path, a pyarrow Table or RecordBatchReader, a polars DataFrame or a "
        "DuckDB relation",
    )


_STREAM = "<stream>"


@contextlib.contextmanager
def _source(data: Any, name: str) -> Iterator[str]:
    """A path for the engine's path-reading calls (`inspect`, `compare`, `run`): a path as
    it is, or a stream spooled batch by batch into a temporary Arrow IPC file (removed
    afterwards; messages name it `<stream>`)."""
    if isinstance(data, (str, os.PathLike)):
        yield _remote.fspath(name, data)  # an object URL as it is: the native module reads it
        return
    if not hasattr(data, "__arrow_c_stream__"):
        raise _wrong_type(name, data)
    _take_stream(data, name)
    scratch = tempfile.mkdtemp(prefix="advcalc-stream-")
    path = os.path.join(scratch, "stream.arrow")
    try:
        try:
            reader = pa.RecordBatchReader.from_stream(data)
            with pa.OSFile(path, "wb") as sink:
                with pa.ipc.new_file(sink, reader.schema) as writer:
                    for batch in reader:
                        writer.write_batch(batch)
        except (OSError, pa.ArrowException) as e:
            raise DataError(f"{_STREAM}: cannot read the Arrow C stream", None, [str(e)]) from None
        try:
            yield path
        except Error as e:
            e.message, e.hint = _unspool(e.message, path), _unspool(e.hint, path)
            e.causes = [_unspool(c, path) for c in e.causes]
            e.args = (e.message,)
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _named(report: Any, src: Any, path: str) -> Any:
    """A report on `src` read from `path`: a spooled stream is named `<stream>` in it."""
    return report if isinstance(src, (str, os.PathLike)) else _unspool(report, path)


def _unspool(value: Any, path: str) -> Any:
    """`value` (text, or the JSON of a report) with the spool file named `<stream>`."""
    if isinstance(value, str):
        return value.replace(path, _STREAM)
    if isinstance(value, list):
        return [_unspool(v, path) for v in value]
    if isinstance(value, dict):
        return {k: _unspool(v, path) for k, v in value.items()}
    return value


def _compute_via_run(
    src: str, cfg: Dict[str, Any], read: Dict[str, Any], metrics: bool
) -> Tuple[pa.Table, Any, List[str], List[str]]:
    """A verl JSONL dump: `run`'s output (the dump's fields and one advantage per row) into
    a temporary file, read back."""
    scratch = tempfile.mkdtemp(prefix="advcalc-compute-")
    try:
        out = os.path.join(scratch, "out.parquet")
        metrics_path = os.path.join(scratch, "metrics.json") if metrics else None
        summary = _load().run(src, out, cfg, read, "parquet", False, metrics_path, None)
        table = pq.read_table(out)
        found = None
        if metrics_path is not None:
            with open(metrics_path, encoding="utf-8") as f:
                found = json.load(f)
        return table, found, summary[3], summary[4]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(
    src: Any,
    dst: PathLike,
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    *,
    metrics: Optional[PathLike] = None,
    force: bool = False,
    layout: str = "ragged",
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
    output_format: Optional[str] = None,
    memory: Optional[int] = None,
) -> Dict[str, Any]:
    """``advcalc run SRC DST``: read a dump, write it with the computed columns.

    ``src`` is what :func:`compute` takes: a path, or an object with ``__arrow_c_stream__``
    (spooled to a temporary Arrow IPC file first, then read as the CLI reads a file). DST is
    written to a temporary file beside it and renamed at the end, so it appears only when
    complete; an existing DST is an error unless ``force``. An object URL as DST
    (``s3://bucket/out.parquet``) is put once complete, create-only unless ``force`` (the
    store refuses an existing object). ``metrics`` is a path or an object URL for the
    metrics JSON, under DST's rules as the CLI's ``--metrics``: never SRC or DST, an
    existing one replaced only with ``force``, written whole (``"-"`` writes to stdout,
    a character device or FIFO is written into). ``memory`` is
    ``--memory`` in bytes: how much of the row groups pass 1 decoded may be kept for pass 2
    (default 1 GiB); the rest is read again, and the output is the same bytes either way.
    Other arguments as in :func:`compute`.

    Returns:
        ``{"rows", "row_groups", "training_batches", "warnings"}``.
    """
    cfg = _config_args(config, set, estimator, convention)
    read = _read_args(input_format, layout, threads, allow_nonfinite)
    if output_format is not None and not isinstance(output_format, str):
        raise UsageError(f"output_format={output_format!r}: expected a format name")
    if memory is not None and (
        not isinstance(memory, int) or isinstance(memory, bool) or not 0 <= memory <= sys.maxsize
    ):
        raise UsageError(f"memory={memory!r}: expected a number of bytes (0 or more)")
    dst = _path("dst", dst)
    metrics = _path("metrics", metrics) if metrics is not None else None
    native = _load()
    with _source(src, "src") as path:
        rows, row_groups, batches, warns, notes = native.run(
            path, dst, cfg, read, output_format, bool(force), metrics, memory
        )
    warns = _say(warns, notes)
    return {"rows": rows, "row_groups": row_groups, "training_batches": batches, "warnings": warns}


def inspect(
    src: Any,
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    *,
    layout: str = "ragged",
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> Dict[str, Any]:
    """``advcalc inspect --json SRC``: check a dump; the report as a dict.

    Per step: masks and tool spans, group sizes, groups with no learning signal, score
    sums, the KL term, train/rollout mismatch, non-finite values and, with an estimator,
    advantage statistics; likely mistakes are listed as warnings in the report (not raised).
    ``src`` is what :func:`compute` takes (a stream is spooled to a temporary Arrow IPC
    file, named ``<stream>`` in the report).
    """
    cfg = _config_args(config, set, estimator, convention)
    read = _read_args(input_format, layout, threads, False)
    native = _load()
    with _source(src, "src") as path:
        return _named(json.loads(native.inspect(path, cfg, read)), src, path)


def compare(
    src: Any,
    estimators: Optional[Sequence[str]] = None,
    configs: Union[Sequence[ConfigLike], Mapping[str, ConfigLike], None] = None,
    set: Sets = None,
    convention: Optional[str] = None,
    *,
    correct_above: float = 0.0,
    allow_nonfinite: bool = False,
    layout: str = "ragged",
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> Dict[str, Any]:
    """``advcalc compare --json SRC``: several estimators or configs side by side; a dict.

    The variants are every (config, estimator) pair, labelled as the CLI labels them: the
    estimator's name; a config file's stem when several configs are given (``stem:name``
    with several estimators too). ``configs`` may also be a dict ``{label: config}``. A row
    is correct when its score is above ``correct_above``. ``src`` is what :func:`compute`
    takes (a stream is spooled to a temporary Arrow IPC file, named ``<stream>``).
    """
    if isinstance(estimators, str):
        estimators = [e for e in estimators.split(",") if e]
    names: List[Optional[str]] = list(estimators) if estimators else [None]
    if configs is None:
        labelled: List[Tuple[Optional[str], ConfigLike]] = [(None, None)]
    elif isinstance(configs, Mapping):
        labelled = [(str(k), v) for k, v in configs.items()]
    else:
        labelled = [(_stem(c, i), c) for i, c in enumerate(configs)]
    if len(labelled) * len(names) < 2:
        raise UsageError(
            "compare needs at least two variants",
            "name several estimators (estimators=['grpo', 'rloo']) or give two configs",
        )
    variants = []
    for label, config in labelled:
        for name in names:
            cfg = _config_args(config, set, name, convention)
            variants.append((label, name, cfg))
    read = _read_args(input_format, layout, threads, allow_nonfinite)
    resolved = []
    for label, name, cfg in variants:
        resolved.append((_variant_label(label, name, cfg, len(labelled), len(names)), cfg))
    seen = [lab for lab, _ in resolved]
    for i, lab in enumerate(seen):
        if lab in seen[:i]:
            raise UsageError(f"variant `{lab}` is given twice", "name each estimator or config once")
    native = _load()
    with _source(src, "src") as path:
        report = json.loads(native.compare(path, resolved, read, float(correct_above)))
        return _named(report, src, path)


def estimators() -> List[Dict[str, Any]]:
    """Every estimator (``advcalc estimators --json``): name, source, kind, summary, the
    columns it reads, the settings it uses and its ``overview`` (the cells of
    docs/estimators.md's overview tables)."""
    return json.loads(_load().estimators())


def view(
    src: Any,
    estimators: Union[str, Sequence[str], None] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    *,
    follow: bool = False,
    tokenizer: Optional[PathLike] = None,
    host: str = "127.0.0.1",
    port: int = 0,
    correct_above: float = 0.0,
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
    height: int = 800,
) -> "View":
    """``advcalc view SRC``: browse a dump (steps, groups, rows, every token) in a local
    web app; a :class:`View` whose ``url`` carries the token every request needs.

    In Jupyter the returned object shows the page in an IFrame of ``height`` pixels. The
    view runs as a child process (this package's own command line) until
    :meth:`View.stop`, the end of a ``with`` block, or the object's deletion. ``src`` is a
    path (a directory of steps with ``follow=True``) or an in-memory table (written once to
    a temporary Arrow IPC file the view reads). ``estimators`` (one variant each),
    ``config``, ``set`` and ``convention`` are :func:`compare`'s; ``tokenizer`` a Hugging
    Face ``tokenizer.json`` that turns the dump's token ids into text. docs/view.md.
    """
    from . import _view

    scratch: List[str] = []
    try:
        path = _view.config_file(config, scratch)
        args = _view.arguments(
            estimators, config, _sets(set), convention, follow, tokenizer, host, port,
            allow_nonfinite, threads, input_format, correct_above, path,
        )
        src = _remote.fspath("src", src) if isinstance(src, (str, os.PathLike)) else src
    except BaseException:
        for d in scratch:
            shutil.rmtree(d, ignore_errors=True)
        raise
    return _view.start(src, args, scratch, height)


def check(
    log: PathLike,
    dumps: PathLike,
    estimator: Optional[str] = None,
    config: ConfigLike = None,
    set: Sets = None,
    convention: Optional[str] = None,
    *,
    max_response_length: Optional[int] = None,
    allow_nonfinite: bool = False,
    threads: Optional[int] = None,
    input_format: Optional[str] = None,
) -> Dict[str, Any]:
    """``advcalc check --json LOG DUMPS``: a run's logged metrics, step by step, against the
    same metrics recomputed from its dumps; the report as a dict (docs/check.md).

    ``log`` is verl's file log (JSON lines), its captured console output, a TensorBoard log
    directory or event file, or TRL's ``trainer_state.json``; ``dumps`` what :func:`run`
    reads. A value that differs is in the report (``diverging``, ``first_divergence``,
    ``likely_causes``), not raised; a log or dumps that cannot be read raise as the CLI's
    errors do.
    """
    import subprocess

    from . import _view

    scratch: List[str] = []
    try:
        args = ["check", "--json", "-q"]
        args += _view.shared_arguments(
            estimator, _view.config_file(config, scratch), _sets(set), convention,
            allow_nonfinite, threads, input_format,
        )
        if max_response_length is not None:
            args += ["--max-response-length", str(int(max_response_length))]
        args += [_path("log", log), _path("dumps", dumps)]
        done = subprocess.run(
            [sys.executable, "-m", "advcalc", *args],
            capture_output=True, text=True, encoding="utf-8",
        )
    finally:
        for d in scratch:
            shutil.rmtree(d, ignore_errors=True)
    if done.stdout.strip():
        return json.loads(done.stdout)
    raise _view.error_of(done.returncode, done.stderr)


# --- argument handling: Python values to the native module's plain arguments -------------


def _config_args(
    config: ConfigLike, sets: Sets, estimator: Optional[str], convention: Optional[str]
) -> Dict[str, Any]:
    config_file: Optional[str] = None
    config_text: Optional[str] = None
    config_name: Optional[str] = None
    if config is None:
        pass
    elif isinstance(config, Mapping):
        # JSON is YAML: the dict goes in as the text of a config file (JSON has no NaN or
        # infinity; YAML text spells them .nan and .inf)
        try:
            config_text = json.dumps(config, allow_nan=False)
        except ValueError:
            raise UsageError(
                "config: a dict cannot carry NaN or infinity",
                "pass the config as YAML text, where they are .nan and .inf",
            ) from None
    elif isinstance(config, os.PathLike):
        config_file = _remote.fspath("config", config)
    elif isinstance(config, str):
        if "\n" in config or ": " in config or config.lstrip().startswith("{"):
            config_text = config
        else:
            config_file = config
    else:
        raise UsageError(
            f"config: expected a path, YAML text or a dict, got {type(config).__name__}"
        )
    if config_file is not None and _remote.is_url(config_file):
        # a config object: its text, read here (as Ray workers then get it), named by its URL
        config_text, config_name, config_file = _remote.read_text(config_file), config_file, None
    for name, value in (("estimator", estimator), ("convention", convention)):
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{name}={value!r}: expected a name")
    return {
        "config_file": config_file,
        "config_text": config_text,
        "config_name": config_name,
        "sets": _sets(sets),
        "estimator": estimator,
        "convention": convention,
        "actor": False,
    }


def _sets(sets: Sets) -> List[str]:
    if sets is None:
        return []
    if isinstance(sets, Mapping):
        out = []
        for key, value in sets.items():
            # the CLI reads each value as YAML: JSON spells every other value in YAML, but
            # for NaN and infinity
            if isinstance(value, float) and not math.isfinite(value):
                text = ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
            elif isinstance(value, str):
                text = value
            else:
                text = json.dumps(value)
            out.append(f"{key}={text}")
        return out
    if isinstance(sets, str):
        return [sets]
    return [str(s) for s in sets]


def _read_args(
    input_format: Optional[str], layout: str, threads: Optional[int], allow_nonfinite: bool
) -> Dict[str, Any]:
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise UsageError(f"threads={threads!r}: expected a positive integer")
    return {
        "input_format": input_format,
        "layout": layout,
        "threads": threads,
        "allow_nonfinite": bool(allow_nonfinite),
    }


def _stem(config: ConfigLike, index: int) -> Optional[str]:
    if isinstance(config, str) and _remote.is_url(config):
        return os.path.splitext(config.rsplit("/", 1)[-1])[0]
    if isinstance(config, (os.PathLike, str)) and isinstance(
        _config_args(config, None, None, None)["config_file"], str
    ):
        name = os.path.basename(os.fspath(config))
        return os.path.splitext(name)[0]
    return f"config{index + 1}"


def _variant_label(
    label: Optional[str], name: Optional[str], cfg: Dict[str, Any], configs: int, names: int
) -> str:
    if label is not None and configs > 1:
        return f"{label}:{_estimator_name(name, cfg)}" if names > 1 else label
    return _estimator_name(name, cfg)


def _estimator_name(name: Optional[str], cfg: Dict[str, Any]) -> str:
    # the engine's name for what the configuration selects (a config file, or verl's default)
    return _load().estimator_name(cfg)


def _path(name: str, value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise UsageError(f"{name}: expected a path, got {type(value).__name__}")
    return _remote.fspath(name, value)


def _say(warns: List[str], notes: List[str]) -> List[str]:
    """Issue the engine's notes and warnings, their CLI flags named as the Python arguments;
    the warnings as issued."""
    warns = [python_names(w) for w in warns]
    for note in notes:
        _warnings.warn(python_names(note), ConfigNote, stacklevel=3)
    for warning in warns:
        _warnings.warn(warning, DataWarning, stacklevel=3)
    return warns
