"""SkyRL's ``trainer.dump_data_batch`` pickles as advcalc's input, read without running them.

SkyRL (``skyrl`` 0.3, the ``skyrl.backends.skyrl_train`` layout) with
``trainer.dump_data_batch=true`` writes
``{export_path}/dumped_data/global_step_{N}_training_input.pkl`` after the advantages and
before the update: a pickle of a ``TrainingInputBatch`` whose ``__reduce__`` calls
``_rebuild_tensor_batch`` with a state dict, each tensor in it a plain
``{"format": "numpy", "data": bytes, "shape": ..., "dtype": ...}`` dict.

:func:`read_skyrl_dump` reads such files with a restricted unpickler: nothing in the file is
imported or called but three stand-ins of this module (see ``_ALLOWED``), and every tensor is
rebuilt with ``numpy.frombuffer`` from an allow-listed dtype. SkyRL and torch are not needed.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pyarrow as pa

from ._errors import DataError, UsageError

__all__ = ["read_skyrl_dump"]

PathLike = Union[str, "os.PathLike[str]"]

_MODULE = "skyrl.backends.skyrl_train.training_batch"
_FILE_NAME = re.compile(r"global_step_(\d+)_training_input\.pkl")

# SkyRL writes str(ndarray.dtype); SkyRL's own reader passes it to np.dtype. Only these are read,
# as little-endian (the byte order numpy's tobytes() gave on the machines SkyRL runs on).
_DTYPES = {
    "float32": np.dtype("<f4"),
    "float16": np.dtype("<f2"),
    "float64": np.dtype("<f8"),
    "int64": np.dtype("<i8"),
    "int32": np.dtype("<i4"),
    "bool": np.dtype("?"),
}

# the [B, R] response-block keys advcalc reads, and the columns they become
_COLUMNS = [
    ("action_log_probs", "old_log_probs"),
    ("base_action_log_probs", "ref_log_prob"),
    ("rollout_logprobs", "rollout_log_probs"),
    ("values", "values"),
    ("advantages", "trainer_advantages"),
    ("returns", "trainer_returns"),
]


class _Refused(Exception):
    """A global the file names that is not one of SkyRL's three: raised from find_class."""


class _TrainingInputBatchMarker:
    """What ``skyrl...training_batch.TrainingInputBatch`` resolves to: an instance, never a
    class, so the pickle cannot construct it (NEWOBJ needs a type, REDUCE a callable)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{_MODULE}.TrainingInputBatch (not imported)>"


_TRAINING_INPUT_BATCH = _TrainingInputBatchMarker()


class _Batch:
    """The state ``_rebuild_tensor_batch`` received, kept as plain data."""

    __slots__ = ("state",)

    def __init__(self, state: Dict[str, Any]):
        self.state = state

    def __setstate__(self, state: Any) -> None:  # a BUILD opcode aimed at the batch
        raise _Refused("BUILD on the rebuilt batch")


def _rebuild_tensor_batch(cls: Any, state: Any) -> _Batch:
    """Stand-in for SkyRL's ``_rebuild_tensor_batch(cls, state)``: checks the arguments and
    keeps ``state`` (no tensor is decoded here; nothing is constructed)."""
    if cls is not _TRAINING_INPUT_BATCH:
        raise _Refused(f"_rebuild_tensor_batch for {cls!r} (only TrainingInputBatch is read)")
    if not isinstance(state, dict) or not isinstance(state.get("batch_dict"), dict):
        raise _Refused("_rebuild_tensor_batch with a state that is not SkyRL's dict")
    return _Batch(state)


def _device(kind: Any, index: Any = None) -> str:
    """Stand-in for ``torch.device``: the batch's device, kept as its name."""
    if not isinstance(kind, str) or not (index is None or type(index) is int):
        raise _Refused("torch.device with arguments that are not a device name")
    return kind if index is None else f"{kind}:{index}"


_ALLOWED = {
    (_MODULE, "_rebuild_tensor_batch"): _rebuild_tensor_batch,
    (_MODULE, "TrainingInputBatch"): _TRAINING_INPUT_BATCH,
    ("torch", "device"): _device,
}


class _Unpickler(pickle.Unpickler):
    """Resolves only the globals in ``_ALLOWED`` (to this module's stand-ins); any other
    global, and any persistent id, is refused before anything is imported."""

    def find_class(self, module: str, name: str) -> Any:
        found = _ALLOWED.get((module, name))
        if found is None:
            raise _Refused(f"the global {module}.{name}")
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("a persistent id (torch storage)")


def read_skyrl_dump(path: PathLike, uids: Optional[Sequence[str]] = None) -> pa.Table:
    """SkyRL ``dump_data_batch`` pickles as a table in advcalc's ragged layout.

    Args:
        path: a ``global_step_{N}_training_input.pkl`` file, or a directory of them (SkyRL's
            ``dumped_data``): read in step order, the step from each file's name.
        uids: the group of each row (all files together, in step order; pad rows excluded),
            written as ``uid``. SkyRL drops its ``uids`` before the dump; without this argument
            ``uid`` is ``prompt-{k}``, the k-th prompt of the step, from the batch's
            ``policy_prompt_boundaries`` (absent from older dumps: then no ``uid`` column).

    Returns:
        One row per sample (SkyRL's trailing ``pad_size`` pad rows dropped) with ``step``
        (int64), ``responses`` (list<int64>, the response token ids from ``sequences``),
        ``response_mask`` and ``loss_mask`` (list<int8>), and, as list<float32>, those present
        of ``old_log_probs`` (``action_log_probs``), ``ref_log_prob``
        (``base_action_log_probs``), ``rollout_log_probs`` (``rollout_logprobs``), ``values``
        (with a critic), ``trainer_advantages`` and ``trainer_returns`` (SkyRL's). Each list is
        the row's response: SkyRL's [B, R] response tensors are right-aligned (leading
        padding), and the row keeps the positions from its first to its last ``response_mask``
        1, so ``response_mask`` is all ones and ``loss_mask`` holds SkyRL's loss mask there.

        There is no ``score``: SkyRL pops the token-level ``rewards`` before the dump. Join
        each row's score yourself to run an outcome estimator, or use the token-level
        estimators with ``values``; ``trainer_advantages`` is what SkyRL trained on.

    Raises:
        DataError: the file is not a SkyRL dump, is truncated, names a global other than
            SkyRL's ``_rebuild_tensor_batch`` / ``TrainingInputBatch`` and ``torch.device``
            (the message names it; nothing in the file was run), or holds a dtype other than
            float32/float16/float64/int64/int32/bool (bfloat16 tensors are saved with
            ``torch.save`` and need torch).
        UsageError: a bad ``path`` or ``uids``.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"path: expected a path, got {type(path).__name__}")
    path = os.fspath(path)
    files = _files(path)
    parts = [_read_file(f, step) for step, f in files]
    n = sum(len(p["step"]) for p in parts)
    if uids is not None:
        if isinstance(uids, (str, bytes)) or len(uids) != n:
            raise UsageError(
                f"uids: expected {n} group ids (one per row of {path}, in step order), "
                f"got {len(uids) if not isinstance(uids, (str, bytes)) else 'a string'}"
            )
        uid_column: Optional[List[str]] = [str(u) for u in uids]
    elif all(p["uid"] is not None for p in parts):
        uid_column = [u for p in parts for u in p["uid"]]
    else:
        uid_column = None
    return _table(parts, uid_column)


def _files(path: str) -> List[Tuple[int, str]]:
    if os.path.isdir(path):
        found = []
        for name in os.listdir(path):
            m = _FILE_NAME.fullmatch(name)
            if m:
                found.append((int(m.group(1)), os.path.join(path, name)))
        if not found:
            raise DataError(
                f"{path}: no global_step_{{N}}_training_input.pkl in the directory",
                "give SkyRL's {export_path}/dumped_data directory or one of its .pkl files",
            )
        return sorted(found)
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file or directory")
    m = _FILE_NAME.fullmatch(os.path.basename(path))
    if not m:
        raise DataError(
            f"{path}: not named global_step_{{N}}_training_input.pkl "
            "(the step comes from the name)",
            "keep the name SkyRL's dump_data gave the file",
        )
    return [(int(m.group(1)), path)]


def _load(file: str) -> Dict[str, Any]:
    with open(file, "rb") as f:
        data = f.read()
    try:
        obj = _Unpickler(io.BytesIO(data)).load()
    except _Refused as e:
        raise DataError(
            f"{file}: refused to unpickle {e}: not one of the objects a SkyRL dump holds",
            "advcalc reads SkyRL's TrainingInputBatch pickles only; nothing in the file was run",
        ) from None
    except (EOFError, pickle.UnpicklingError, ValueError, TypeError, KeyError,
            IndexError, AttributeError, MemoryError, OverflowError, RecursionError) as e:
        raise DataError(
            f"{file}: not a complete SkyRL dump pickle (truncated or corrupt)",
            causes=[f"{type(e).__name__}: {e}"],
        ) from None
    if not isinstance(obj, _Batch):
        raise DataError(
            f"{file}: the pickle holds a {type(obj).__name__}, not SkyRL's TrainingInputBatch"
        )
    return obj.state


def _tensor(file: str, key: str, value: Any) -> Optional[np.ndarray]:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DataError(f"{file}: `{key}` is not a serialized tensor")
    fmt = value.get("format", "numpy")  # SkyRL's legacy dicts have no "format"
    if fmt == "torch":
        raise DataError(
            f"{file}: `{key}` was saved with torch.save (a dtype numpy lacks, e.g. bfloat16); "
            "reading it needs torch, and advcalc does not unpickle torch objects",
            "load the batch with SkyRL (TrainingInputBatch.load) and cast the tensor to float32, "
            "or dump float32 tensors",
        )
    if fmt != "numpy":
        raise DataError(f"{file}: `{key}` has format {fmt!r}; expected \"numpy\"")
    dtype_name, data, shape = value.get("dtype"), value.get("data"), value.get("shape")
    dtype = _DTYPES.get(dtype_name) if isinstance(dtype_name, str) else None
    if dtype is None:
        raise DataError(
            f"{file}: `{key}` has dtype {dtype_name!r}; read are {', '.join(_DTYPES)}"
        )
    if not isinstance(data, (bytes, bytearray)) or not isinstance(shape, (tuple, list)) or not all(
        type(d) is int and d >= 0 for d in shape
    ):
        raise DataError(f"{file}: `{key}` is not SkyRL's {{data, shape, dtype}} tensor")
    count = 1
    for d in shape:
        count *= d
    if count * dtype.itemsize != len(data):
        raise DataError(
            f"{file}: `{key}` holds {len(data)} bytes, but shape {list(shape)} of {dtype_name} "
            f"needs {count * dtype.itemsize}"
        )
    return np.frombuffer(bytes(data), dtype=dtype).reshape(shape)


def _read_file(file: str, step: int) -> Dict[str, Any]:
    state = _load(file)
    batch = state["batch_dict"]
    metadata = state.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise DataError(f"{file}: the batch's metadata is not a dict")
    mask = _tensor(file, "response_mask", batch.get("response_mask"))
    if mask is None:
        raise DataError(f"{file}: the batch has no `response_mask`")
    if mask.ndim != 2:
        raise DataError(f"{file}: `response_mask` has shape {list(mask.shape)}; expected [B, R]")
    rows, width = mask.shape
    pad = metadata.get("pad_size", 0)
    if type(pad) is not int or not 0 <= pad <= rows:
        raise DataError(f"{file}: metadata pad_size {pad!r} for a batch of {rows} rows")
    n = rows - pad

    def block(key: str) -> Optional[np.ndarray]:
        t = _tensor(file, key, batch.get(key))
        if t is not None and t.shape != (rows, width):
            raise DataError(
                f"{file}: `{key}` has shape {list(t.shape)}; expected [{rows}, {width}] "
                "as response_mask"
            )
        return t

    loss = block("loss_mask")
    if loss is None:
        raise DataError(f"{file}: the batch has no `loss_mask`")
    tensors = {col: block(key) for key, col in _COLUMNS}
    sequences = _tensor(file, "sequences", batch.get("sequences"))
    if sequences is not None and (sequences.ndim != 2 or sequences.shape[0] != rows):
        raise DataError(f"{file}: `sequences` has shape {list(sequences.shape)}")

    spans = []
    for i in range(n):
        on = np.flatnonzero(mask[i] != 0)
        if len(on) and on[-1] - on[0] + 1 != len(on):
            raise DataError(f"{file}: row {i}: `response_mask` has a gap inside the response")
        spans.append((int(on[0]), int(on[-1]) + 1) if len(on) else (0, 0))
    for i, (a, b) in enumerate(spans):
        lm = loss[i, a:b]
        if not np.all((lm == 0) | (lm == 1)):
            raise DataError(f"{file}: row {i}: `loss_mask` holds values other than 0 and 1")
        if sequences is not None and b > a and width - a > sequences.shape[1]:
            raise DataError(f"{file}: row {i}: the response is longer than `sequences`")

    out: Dict[str, Any] = {"step": [step] * n, "uid": _prompt_uids(file, metadata, n)}
    out["response_mask"] = [np.ones(b - a, dtype=np.int8) for a, b in spans]
    out["loss_mask"] = [loss[i, a:b].astype(np.int8) for i, (a, b) in enumerate(spans)]
    if sequences is not None and all(b == width for a, b in spans if b > a):
        # right-aligned responses (SkyRL's layout): the response's tokens end each
        # left-padded row of `sequences`
        out["responses"] = [
            sequences[i, sequences.shape[1] - (width - a) : sequences.shape[1] - (width - b)]
            .astype(np.int64)
            for i, (a, b) in enumerate(spans)
        ]
    for col, t in tensors.items():
        if t is not None:
            out[col] = [t[i, a:b].astype(np.float32) for i, (a, b) in enumerate(spans)]
    return out


def _prompt_uids(file: str, metadata: Dict[str, Any], n: int) -> Optional[List[str]]:
    bounds = metadata.get("policy_prompt_boundaries")
    if bounds is None:
        return None
    uids: List[str] = []
    at = 0
    ok = isinstance(bounds, (list, tuple))
    for k, b in enumerate(bounds if ok else []):
        if not (isinstance(b, (list, tuple)) and len(b) == 2 and b[0] == at
                and type(b[1]) is int and b[1] > at):
            ok = False
            break
        uids += [f"prompt-{k}"] * (b[1] - at)
        at = b[1]
    if not ok or at != n:
        raise DataError(
            f"{file}: metadata policy_prompt_boundaries {bounds!r} do not cover the {n} rows",
            "pass uids= to name each row's group",
        )
    return uids


_ORDER = ["uid", "step", "responses", "response_mask", "loss_mask"] + [c for _, c in _COLUMNS]


def _table(parts: List[Dict[str, Any]], uid: Optional[List[str]]) -> pa.Table:
    def present(col: str) -> bool:
        return all(col in p and p[col] is not None for p in parts)

    for col in _ORDER[2:]:
        if any(col in p and p[col] is not None for p in parts) and not present(col):
            raise DataError(f"`{col}` is in some of the files and not in others")
    types = {
        "responses": pa.int64(),
        "response_mask": pa.int8(),
        "loss_mask": pa.int8(),
    }
    arrays, names = [], []
    for col in _ORDER:
        if col == "uid":
            if uid is not None:
                arrays.append(pa.array(uid, pa.string()))
                names.append("uid")
            continue
        if col == "step":
            arrays.append(pa.array([s for p in parts for s in p["step"]], pa.int64()))
            names.append("step")
            continue
        if not present(col):
            continue
        t = types.get(col, pa.float32())
        rows = [r for p in parts for r in p[col]]
        arrays.append(_list_array(rows, t))
        names.append(col)
    return pa.Table.from_arrays(arrays, names=names)


def _list_array(rows: List[np.ndarray], t: pa.DataType) -> pa.Array:
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    values = np.concatenate(rows) if rows else np.zeros(0, t.to_pandas_dtype())
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=t))
