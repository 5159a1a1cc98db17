"""Token-level dumps from a verl run, in advcalc's input schema.

verl keeps a training batch as a ``DataProto``: padded tensors in ``.batch`` (one row per
response, every response tensor ``[B, T]`` and right-padded) and per-row numpy arrays in
``.non_tensor_batch`` (``uid`` and the reward extras). This module turns such a batch into
advcalc's ragged schema (design section 1) and writes one Parquet file per training step::

    from advcalc.verl import write_step
    write_step(data, "dumps/run-1", step=12)      # -> dumps/run-1/step=12.parquet

``docs/verl.md`` shows the trainer subclass that calls it in a verl 0.9.1 run and how to run
``advcalc`` on what it wrote.

The module needs only numpy and pyarrow. It never imports torch: a tensor is anything with
``.cpu().numpy()`` (half-precision tensors are converted with ``.float()`` first), and numpy
arrays work as they are.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# the CLI's atomic writes in pure Python (standard library only: no native module)
from ._atomic import write_atomic

__all__ = [
    "TOKEN_COLUMNS",
    "SCALAR_COLUMNS",
    "to_table",
    "write_step",
    "write_table_atomic",
    "step_path",
    "list_steps",
]

#: Response-token tensors written as ``list<float32>`` (besides ``response_mask`` and the
#: score column), in output order.
TOKEN_COLUMNS = ("old_log_probs", "ref_log_prob", "rollout_log_probs", "values", "sum_pi_squared")

#: Per-row tensors of ``.batch`` written as scalar ``float32`` columns.
SCALAR_COLUMNS = ("reward_baselines",)

# Score tensors, in order of preference: verl's advantage code reads `token_level_scores`
# (the legacy trainer sets it from the reward; the V1 trainer sets it to `rm_scores`).
_SCORE_COLUMNS = ("token_level_scores", "rm_scores")

# Names a non-tensor key may not take: advcalc reads (or writes) these with a meaning of
# their own, so a reward extra that happens to carry one of them is not copied.
_RESERVED = frozenset(
    (
        "uid",
        "step",
        "response_mask",
        "loss_mask",
        "session_id",
        "output_index",
        "token_level_rewards",
        "advantages",
        "returns",
        "rollout_is_weights",
        *_SCORE_COLUMNS,
        *TOKEN_COLUMNS,
        *SCALAR_COLUMNS,
    )
)

_STEP_FILE = re.compile(r"^step=(-?\d+)\.parquet$")


# ----------------------------------------------------------------------------- conversion


def to_table(
    data: Any,
    *,
    step: int | None = None,
    response_lengths: Any = None,
    batch_keys: Sequence[str] | None = None,
    columns: Mapping[str, Any] | None = None,
) -> pa.Table:
    """Convert one verl batch into a ``pyarrow.Table`` in advcalc's ragged schema.

    ``data`` is a verl ``DataProto`` (or anything with ``.batch`` and ``.non_tensor_batch``),
    or a plain mapping of name -> array, where 2-D entries are response tensors and 1-D
    entries are per-row values.

    Columns written, each only where its source is present:

    * ``uid`` (string) from ``non_tensor_batch["uid"]``;
    * ``step`` (int64) when ``step`` is given;
    * ``session_id`` (int64, or string when not numeric) and ``output_index`` (int64)
      when ``batch_keys`` is given: verl V1's TransferQueue keys ``{uid}_{session}_{index}``;
    * ``response_mask`` (list<int8>); without it in the batch, the response part of
      ``attention_mask`` is used, as verl's ``compute_response_mask`` does;
    * ``token_level_scores``, else ``rm_scores`` (list<float32>);
    * ``old_log_probs``, ``ref_log_prob``, ``rollout_log_probs``, ``values``,
      ``sum_pi_squared`` (list<float32>);
    * ``reward_baselines`` (float32);
    * every other 1-D entry of ``non_tensor_batch`` holding strings, numbers or booleans,
      under its own name (``data_source``, reward extras, ...); others are skipped;
    * ``columns``: extra scalar columns, a value for every row or one array per column.

    Token lists are cut to each row's true response length: ``response_lengths`` if given
    (one int per row), else the number of positions up to the last 1 of the response part of
    ``attention_mask`` (the last ``T`` columns, ``T`` the width of ``responses``). Without
    either, lists keep the padded width ``T`` (advcalc reads that layout too).
    """
    tensors, non_tensors = _split(data)
    arrays = {name: _to_numpy(value) for name, value in tensors.items()}
    arrays = {name: value for name, value in arrays.items() if value is not None}

    batch_size = _batch_size(arrays, non_tensors)
    width = _response_width(arrays)
    mask = arrays.get("response_mask")
    if mask is None and "attention_mask" in arrays and width is not None:
        mask = arrays["attention_mask"][:, -width:]
    lengths = _lengths(arrays, width, batch_size, response_lengths)

    out: dict[str, pa.Array] = {}
    if "uid" in non_tensors:
        out["uid"] = _uid_column(non_tensors["uid"], batch_size)
    if step is not None:
        out["step"] = pa.array(np.full(batch_size, int(step), dtype=np.int64))
    if batch_keys is not None:
        out.update(_session_columns(batch_keys, batch_size))
    if mask is not None:
        out["response_mask"] = _ragged(_mask_values(mask), lengths, width, "response_mask")
    score = next((name for name in _SCORE_COLUMNS if name in arrays), None)
    if score is not None:
        out[score] = _ragged(arrays[score].astype(np.float32, copy=False), lengths, width, score)
    for name in TOKEN_COLUMNS:
        if name in arrays:
            out[name] = _ragged(arrays[name].astype(np.float32, copy=False), lengths, width, name)
    for name in SCALAR_COLUMNS:
        if name in arrays:
            out[name] = pa.array(_per_row(arrays[name], batch_size, name).astype(np.float32))
    for name, value in non_tensors.items():
        if name in out or name in _RESERVED or name == "score" and score is not None:
            continue
        column = _scalar_column(value, batch_size)
        if column is not None:
            out[name] = column
    for name, value in (columns or {}).items():
        out[name] = _extra_column(name, value, batch_size)
    if not out:
        raise ValueError("the batch holds none of the columns advcalc reads")
    return pa.table(out)


def _split(data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(response/row tensors, per-row non-tensor values) of a DataProto or a mapping."""
    if hasattr(data, "batch") and hasattr(data, "non_tensor_batch"):
        batch = data.batch
        tensors = {} if batch is None else {name: batch[name] for name in batch.keys()}
        return tensors, dict(data.non_tensor_batch or {})
    if not hasattr(data, "keys"):
        raise TypeError(f"expected a verl DataProto or a mapping of arrays, got {type(data).__name__}")
    tensors: dict[str, Any] = {}
    non_tensors: dict[str, Any] = {}
    for name in data.keys():
        value = data[name]
        if isinstance(value, np.ndarray) and (value.ndim != 2 or value.dtype == object):
            non_tensors[name] = value
        elif isinstance(value, (list, tuple)):
            non_tensors[name] = np.asarray(value, dtype=object)
        else:
            tensors[name] = value
    return tensors, non_tensors


def _to_numpy(value: Any) -> np.ndarray | None:
    """A numpy view of a tensor, duck-typed: numpy arrays, or anything with ``.cpu().numpy()``."""
    if isinstance(value, np.ndarray):
        return value
    if getattr(value, "is_nested", False):
        raise TypeError(
            "nested (jagged) tensors are not read: pad them first (TensorDict.to_padded_tensor())"
            " and pass response_lengths"
        )
    if hasattr(value, "numpy"):
        if hasattr(value, "detach"):
            value = value.detach()
        if hasattr(value, "cpu"):
            value = value.cpu()
        try:
            return np.asarray(value.numpy())
        except (TypeError, RuntimeError):
            # bfloat16 (and other dtypes numpy lacks) convert through float32 first
            if hasattr(value, "float"):
                return np.asarray(value.float().numpy())
            raise
    if hasattr(value, "cpu"):
        return _to_numpy(value.cpu())
    return None


def _batch_size(arrays: Mapping[str, np.ndarray], non_tensors: Mapping[str, Any]) -> int:
    sizes = {name: a.shape[0] for name, a in arrays.items() if a.ndim >= 1}
    sizes.update({name: len(v) for name, v in non_tensors.items() if np.ndim(v) >= 1})
    distinct = set(sizes.values())
    if not distinct:
        raise ValueError("empty batch: no tensor and no non-tensor entry")
    if len(distinct) > 1:
        raise ValueError(f"entries disagree on the batch size: {sizes}")
    return distinct.pop()


def _response_width(arrays: Mapping[str, np.ndarray]) -> int | None:
    """T, the padded response length: the width of `responses` (verl's definition)."""
    if "responses" in arrays:
        return arrays["responses"].shape[1]
    for name in ("response_mask", *_SCORE_COLUMNS, *TOKEN_COLUMNS):
        if name in arrays and arrays[name].ndim == 2:
            return arrays[name].shape[1]
    return None


def _lengths(arrays, width, batch_size, response_lengths) -> np.ndarray | None:
    """Each row's true response length, or None to keep the padded width."""
    if response_lengths is not None:
        lengths = _to_numpy(response_lengths) if not isinstance(response_lengths, (list, tuple)) else None
        lengths = np.asarray(response_lengths if lengths is None else lengths).astype(np.int64).reshape(-1)
        if lengths.shape[0] != batch_size:
            raise ValueError(f"response_lengths has {lengths.shape[0]} entries for {batch_size} rows")
        source = "response_lengths"
    elif "attention_mask" in arrays and width is not None:
        attention = arrays["attention_mask"]
        if attention.ndim != 2 or attention.shape[1] < width:
            raise ValueError(f"attention_mask of shape {attention.shape} has no response part of width {width}")
        valid = attention[:, -width:] != 0
        # the position after each row's last 1 (responses are right-padded)
        lengths = np.where(valid.any(axis=1), width - np.argmax(valid[:, ::-1], axis=1), 0).astype(np.int64)
        source = "attention_mask"
    else:
        return None
    if width is not None:
        bad = np.flatnonzero((lengths < 0) | (lengths > width))
        if bad.size:
            row = int(bad[0])
            raise ValueError(f"row {row}: {source} gives length {lengths[row]}, outside 0..{width}")
    return lengths


def _mask_values(mask: np.ndarray) -> np.ndarray:
    if mask.dtype != np.bool_:
        bad = (mask != 0) & (mask != 1)
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"response_mask: row {row}, position {col} holds {mask[row, col].item()!r}, not 0 or 1")
    return mask.astype(np.int8)


def _ragged(values: np.ndarray, lengths: np.ndarray | None, width: int | None, name: str) -> pa.Array:
    """A list array: row i holds values[i, :lengths[i]] (all of row i without lengths)."""
    if values.ndim != 2:
        raise ValueError(f"{name}: expected a [batch, response] tensor, got shape {values.shape}")
    rows, cols = values.shape
    if width is not None and cols != width:
        raise ValueError(f"{name} has {cols} response positions where responses have {width}")
    if lengths is None:
        lengths = np.full(rows, cols, dtype=np.int64)
        flat = values.reshape(-1)
    else:
        flat = values[np.arange(cols)[None, :] < lengths[:, None]]
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    offset_type = np.int32 if offsets[-1] < 2**31 else np.int64
    list_type = pa.ListArray if offset_type is np.int32 else pa.LargeListArray
    return list_type.from_arrays(pa.array(offsets.astype(offset_type)), pa.array(np.ascontiguousarray(flat)))


def _per_row(value: np.ndarray, batch_size: int, name: str) -> np.ndarray:
    value = np.asarray(value)
    if value.ndim == 2 and value.shape[1] == 1:
        value = value[:, 0]
    if value.shape != (batch_size,):
        raise ValueError(f"{name}: expected one value per row, got shape {value.shape}")
    return value


def _uid_column(uid: Any, batch_size: int) -> pa.Array:
    values = _per_row(np.asarray(uid, dtype=object), batch_size, "uid")
    return pa.array([_as_str(v) for v in values], type=pa.string())


def _as_str(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _session_columns(batch_keys: Iterable[str], batch_size: int) -> dict[str, pa.Array]:
    """verl V1 keys `{uid}_{session_id}_{index}` -> session_id, output_index columns."""
    keys = [_as_str(k) for k in batch_keys]
    if len(keys) != batch_size:
        raise ValueError(f"batch_keys has {len(keys)} entries for {batch_size} rows")
    sessions: list[str] = []
    indices: list[int] = []
    for row, key in enumerate(keys):
        parts = key.rsplit("_", 2)
        if len(parts) != 3 or not _is_int(parts[2]):
            raise ValueError(f"row {row}: batch key {key!r} is not of the form {{uid}}_{{session_id}}_{{index}}")
        sessions.append(parts[1])
        indices.append(int(parts[2]))
    session = (
        pa.array([int(s) for s in sessions], type=pa.int64())
        if all(_is_int(s) for s in sessions)
        else pa.array(sessions, type=pa.string())
    )
    return {"session_id": session, "output_index": pa.array(indices, type=pa.int64())}


def _is_int(text: str) -> bool:
    return re.fullmatch(r"-?\d+", text) is not None


def _scalar_column(value: Any, batch_size: int) -> pa.Array | None:
    """A 1-D array of strings / numbers / booleans as a column; None for anything else."""
    if not isinstance(value, np.ndarray):
        value = np.asarray(value) if isinstance(value, (list, tuple)) else None
    if value is None or value.ndim != 1 or value.shape[0] != batch_size:
        return None
    if value.dtype != object:
        if value.dtype.kind not in "biufUS":
            return None
        return pa.array(value)
    try:
        column = pa.array(value.tolist())
    except (pa.ArrowException, TypeError, ValueError):
        return None
    t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
        return column
    if pa.types.is_boolean(t):
        return column
    return None


def _extra_column(name: str, value: Any, batch_size: int) -> pa.Array:
    if isinstance(value, (str, bytes, int, float, bool, np.generic)):
        return pa.array([value] * batch_size)
    array = _to_numpy(value)
    column = _scalar_column(np.asarray(value) if array is None else array, batch_size)
    if column is None:
        raise ValueError(f"columns[{name!r}]: expected a scalar or {batch_size} strings/numbers")
    return column


# ----------------------------------------------------------------------------- writing


def step_path(directory: str | os.PathLike, step: int) -> Path:
    """Where ``write_step`` puts a step: ``<directory>/step=<step>.parquet`` (no zero padding)."""
    return Path(directory) / f"step={int(step)}.parquet"


def list_steps(directory: str | os.PathLike) -> list[tuple[int, Path]]:
    """The ``(step, path)`` pairs of the step files in ``directory``, in step order."""
    found = []
    for path in Path(directory).iterdir():
        match = _STEP_FILE.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    return sorted(found)


def write_table_atomic(table: pa.Table, path: str | os.PathLike, *, compression: str = "zstd") -> Path:
    """Write ``table`` to ``path`` as Parquet, atomically, as the CLI writes its outputs.

    The table goes to a hidden temporary file in the same directory, named as the CLI names
    its own (``.advcalc-HOST-KEY-PID-*.parquet.tmp``, which dataset readers skip), is
    fsynced, then renamed over ``path``, and the directory fsynced: a reader sees the old
    file or the whole new one. A failed write removes its temporary; a killed process leaves
    at most the hidden temporary, which the next write into the directory on this host (the
    hook's, the CLI's, the Ray runner's) removes once that process is gone.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as sink:
            pq.write_table(table, sink, compression=compression)

    return write_atomic(path, write)


def write_step(
    data: Any,
    directory: str | os.PathLike,
    step: int,
    *,
    response_lengths: Any = None,
    batch_keys: Sequence[str] | None = None,
    columns: Mapping[str, Any] | None = None,
    compression: str = "zstd",
) -> Path:
    """Convert ``data`` (see ``to_table``) and write it to ``<directory>/step=<step>.parquet``.

    The file carries a ``step`` column (int64) equal to ``step``; an existing file for the
    same step is replaced (a resumed run re-runs its step). Returns the path written.
    """
    table = to_table(data, step=step, response_lengths=response_lengths, batch_keys=batch_keys, columns=columns)
    return write_table_atomic(table, step_path(directory, step), compression=compression)
