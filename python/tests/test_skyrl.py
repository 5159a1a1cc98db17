"""advcalc.skyrl: SkyRL's dump_data_batch pickles, read with a restricted unpickler.

The fixture (fixtures/trainers/dumps/skyrl) was written by SkyRL's own TrainingInputBatch and
dump code; expected.json holds what SkyRL's batch object held, written by the generator from
SkyRL's objects, not by this reader. Needs only numpy, pyarrow and pytest.
"""

from __future__ import annotations

import json
import pickle
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import advcalc
from advcalc import DataError, UsageError
from advcalc import skyrl

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures" / "trainers" / "dumps" / "skyrl"
MODULE = "skyrl.backends.skyrl_train.training_batch"


def expected(run: str) -> dict:
    return json.loads((FIXTURES / run / "expected.json").read_text())


def step_file(run: str, step: int) -> Path:
    return FIXTURES / run / "dumped_data" / f"global_step_{step}_training_input.pkl"


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def check_step(table, want: dict, settings: dict, step: int) -> None:
    rows = [r for r in table.to_pylist() if r["step"] == step]
    n = want["batch_size"] - want["metadata"]["pad_size"]
    assert len(rows) == n  # SkyRL's trailing pad rows are dropped
    cols = {
        "old_log_probs": "action_log_probs",
        "ref_log_prob": "base_action_log_probs",
        "rollout_log_probs": "rollout_logprobs",
        "values": "values",
        "trainer_advantages": "advantages",
        "trainer_returns": "returns",
    }
    for i, row in enumerate(rows):
        mask = np.asarray(want["rows"]["response_mask"][i])
        keep = mask != 0
        # SkyRL's response tensors are right-aligned: the response is the row's last len_i
        # positions, len_i the length of the response SkyRL was given
        length = len(settings["response_ids"][i])
        assert keep.sum() == length and keep[-length:].all()
        assert row["responses"] == settings["response_ids"][i]
        assert row["response_mask"] == [1] * length
        assert row["loss_mask"] == [int(v) for v in np.asarray(want["rows"]["loss_mask"][i])[keep]]
        for col, key in cols.items():
            if want["rows"][key] is None:
                assert col not in row
                continue
            got = f32(row[col])
            assert np.array_equal(got, f32(want["rows"][key][i])[keep]), (col, i)


def test_fixture_steps_match_skyrl_batch():
    want = expected("run1")
    table = advcalc.read_skyrl_dump(FIXTURES / "run1" / "dumped_data")
    assert table.column_names == [
        "uid", "step", "responses", "response_mask", "loss_mask", "old_log_probs",
        "ref_log_prob", "rollout_log_probs", "trainer_advantages", "trainer_returns",
    ]
    assert str(table.schema.field("trainer_advantages").type) == "list<item: float>"
    assert str(table.schema.field("loss_mask").type) == "list<item: int8>"
    # a directory is read in step order
    assert table["step"].to_pylist() == [1] * 6 + [2] * 6
    for step in (1, 2):
        check_step(table, want["steps"][str(step)], want["settings"], step)
    # the groups come from SkyRL's policy_prompt_boundaries: the same split as its uids
    bounds = want["steps"]["1"]["metadata"]["policy_prompt_boundaries"]
    assert bounds == [[0, 3], [3, 6]]
    uids = want["settings"]["uids"]
    got = table["uid"].to_pylist()[:6]
    assert [got.index(u) for u in got] == [uids.index(u) for u in uids]
    assert "score" not in table.column_names  # SkyRL pops the rewards before the dump


def test_fixture_with_values():
    want = expected("run_gae")
    table = advcalc.read_skyrl_dump(step_file("run_gae", 1))
    assert "values" in table.column_names
    check_step(table, want["steps"]["1"], want["settings"], 1)


def test_fixture_references_only_skyrl_globals():
    seen = set()

    class Recording(skyrl._Unpickler):
        def find_class(self, module, name):
            seen.add((module, name))
            return super().find_class(module, name)

    with open(step_file("run_gae", 1), "rb") as f:
        Recording(f).load()
    assert seen == {
        (MODULE, "_rebuild_tensor_batch"),
        (MODULE, "TrainingInputBatch"),
        ("torch", "device"),
    }
    assert set(skyrl._ALLOWED) == seen


def test_directory_in_numeric_step_order(tmp_path):
    shutil.copy(step_file("run1", 2), tmp_path / "global_step_10_training_input.pkl")
    shutil.copy(step_file("run1", 1), tmp_path / "global_step_9_training_input.pkl")
    (tmp_path / "notes.txt").write_text("not a dump")
    table = advcalc.read_skyrl_dump(tmp_path)
    assert table["step"].to_pylist() == [9] * 6 + [10] * 6
    want = expected("run1")
    assert table["trainer_advantages"].to_pylist()[0] == pytest.approx(
        f32(want["steps"]["1"]["rows"]["advantages"][0])[1:].tolist()
    )


def test_uids_argument(tmp_path):
    table = advcalc.read_skyrl_dump(step_file("run1", 1), uids=list("aaabbb"))
    assert table["uid"].to_pylist() == list("aaabbb")
    with pytest.raises(UsageError, match="expected 6 group ids"):
        advcalc.read_skyrl_dump(step_file("run1", 1), uids=["a"])


# --- hostile and broken files ---------------------------------------------------------------


def _marker(tmp_path: Path) -> Path:
    return tmp_path / "ran"


def _os_system(tmp_path: Path) -> bytes:
    # protocol 0 opcodes: GLOBAL os.system, MARK, STRING, TUPLE, REDUCE, STOP
    cmd = f"touch {_marker(tmp_path)}"
    return b"cos\nsystem\n(S" + repr(cmd).encode() + b"\ntR."


def _builtins_eval(tmp_path: Path) -> bytes:
    # protocol 4: SHORT_BINUNICODE builtins, SHORT_BINUNICODE eval, STACK_GLOBAL, ..., REDUCE
    code = f"open({str(_marker(tmp_path))!r}, 'w')".encode()
    return (
        b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93"
        + b"\x8c" + bytes([len(code)]) + code
        + b"\x85R."
    )


def _hidden_in_batch(tmp_path: Path) -> bytes:
    # SkyRL's own globals first, then os.system inside the state the rebuild receives
    mod, rebuild, cls = MODULE.encode(), b"_rebuild_tensor_batch", b"TrainingInputBatch"
    inner = _os_system(tmp_path)[:-1]  # the REDUCE of os.system, without STOP
    return (
        b"c" + mod + b"\n" + rebuild + b"\n"
        + b"(c" + mod + b"\n" + cls + b"\n"
        + b"(dS'batch_dict'\n" + inner + b"stR."
    )


@pytest.mark.parametrize(
    "payload, refused",
    [
        (_os_system, "os.system"),
        (_builtins_eval, "builtins.eval"),
        (_hidden_in_batch, "os.system"),
    ],
)
def test_hostile_pickle_is_refused_and_nothing_runs(tmp_path, payload, refused):
    path = tmp_path / "global_step_1_training_input.pkl"
    path.write_bytes(payload(tmp_path))
    with pytest.raises(DataError) as e:
        advcalc.read_skyrl_dump(path)
    assert refused in str(e.value) and str(path) in str(e.value)
    assert "refused" in str(e.value)
    assert not _marker(tmp_path).exists()


def test_truncated_file(tmp_path):
    data = step_file("run1", 1).read_bytes()
    for cut in (len(data) // 2, len(data) - 1, 3):
        path = tmp_path / "global_step_1_training_input.pkl"
        path.write_bytes(data[:cut])
        with pytest.raises(DataError, match="truncated or corrupt"):
            advcalc.read_skyrl_dump(path)


def test_empty_directory_and_bad_name(tmp_path):
    with pytest.raises(DataError, match="no global_step"):
        advcalc.read_skyrl_dump(tmp_path)
    other = tmp_path / "batch.pkl"
    shutil.copy(step_file("run1", 1), other)
    with pytest.raises(DataError, match="not named"):
        advcalc.read_skyrl_dump(other)


# --- SkyRL-shaped pickles built here (a stand-in module with SkyRL's names) ------------------


@pytest.fixture
def writer(monkeypatch, tmp_path):
    """pickle.dumps of a SkyRL-shaped batch: the globals are named as SkyRL's module names
    them (a stand-in module registered under that name while pickling)."""
    mod = types.ModuleType(MODULE)

    def _rebuild_tensor_batch(cls, state):  # never called: only pickled by name
        raise AssertionError

    class TrainingInputBatch:
        def __init__(self, state):
            self.state = state

        def __reduce__(self):
            return (_rebuild_tensor_batch, (TrainingInputBatch, self.state))

    for obj in (_rebuild_tensor_batch, TrainingInputBatch):
        obj.__module__ = MODULE
        obj.__qualname__ = obj.__name__
        setattr(mod, obj.__name__, obj)
    monkeypatch.setitem(sys.modules, MODULE, mod)
    parts = MODULE.split(".")
    for i in range(1, len(parts)):  # the pickler imports the module by name: its packages too
        monkeypatch.setitem(sys.modules, ".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))

    def write(batch_dict, metadata=None, step=1):
        state = {"batch_dict": batch_dict, "batch_size": 2, "device": None,
                 "metadata": {"pad_size": 0} if metadata is None else metadata}
        path = tmp_path / f"global_step_{step}_training_input.pkl"
        path.write_bytes(pickle.dumps(TrainingInputBatch(state), protocol=4))
        return path

    return write


def tensor(a: np.ndarray) -> dict:
    return {"format": "numpy", "data": a.tobytes(), "shape": a.shape, "dtype": str(a.dtype)}


def _basic(**extra):
    mask = np.array([[0, 1, 1], [1, 1, 1]], dtype=np.int64)
    out = {"response_mask": tensor(mask), "loss_mask": tensor(mask.astype(np.float32)),
           "advantages": tensor(np.arange(6, dtype=np.float32).reshape(2, 3))}
    out.update(extra)
    return out


def test_built_batch_without_boundaries(writer):
    table = advcalc.read_skyrl_dump(writer(_basic()))
    assert "uid" not in table.column_names  # no boundaries, no uids=: no groups
    assert table["trainer_advantages"].to_pylist() == [[1.0, 2.0], [3.0, 4.0, 5.0]]
    assert table["response_mask"].to_pylist() == [[1, 1], [1, 1, 1]]


def test_bfloat16_torch_format_is_refused(writer):
    path = writer(_basic(values={"format": "torch", "data": b"PK\x03\x04not read"}))
    with pytest.raises(DataError, match="needs torch"):
        advcalc.read_skyrl_dump(path)


@pytest.mark.parametrize("dtype", ["uint64", "object", "complex64", ">f4"])
def test_dtype_outside_the_allow_list(writer, dtype):
    bad = {"format": "numpy", "data": b"\x00" * 48, "shape": (2, 3), "dtype": dtype}
    with pytest.raises(DataError, match="has dtype"):
        advcalc.read_skyrl_dump(writer(_basic(values=bad)))


def test_wrong_byte_count(writer):
    bad = {"format": "numpy", "data": b"\x00" * 20, "shape": (2, 3), "dtype": "float32"}
    with pytest.raises(DataError, match="holds 20 bytes"):
        advcalc.read_skyrl_dump(writer(_basic(values=bad)))


def test_pickle_of_something_else(tmp_path):
    path = tmp_path / "global_step_1_training_input.pkl"
    path.write_bytes(pickle.dumps({"batch_dict": {}}))
    with pytest.raises(DataError, match="not SkyRL's TrainingInputBatch"):
        advcalc.read_skyrl_dump(path)


def test_importable_without_native_module():
    # advcalc.skyrl needs numpy and pyarrow only
    assert advcalc.read_skyrl_dump is skyrl.read_skyrl_dump


def test_skyrl_globals_cannot_be_misused(writer, tmp_path):
    # BUILD aimed at the rebuilt batch (a pickle setting attributes on it)
    path = writer(_basic())
    path.write_bytes(path.read_bytes()[:-1] + b"}b.")
    with pytest.raises(DataError, match="BUILD"):
        advcalc.read_skyrl_dump(path)
    # calling TrainingInputBatch (REDUCE) or building it (NEWOBJ): it is no class here
    cls = b"c" + MODULE.encode() + b"\nTrainingInputBatch\n"
    for body in (cls + b")R.", b"\x80\x04" + cls + b")\x81."):
        path.write_bytes(body)
        with pytest.raises(DataError, match="truncated or corrupt"):
            advcalc.read_skyrl_dump(path)
    # torch.device with anything but a device name
    path.write_bytes(b"ctorch\ndevice\n(]tR.")
    with pytest.raises(DataError, match="torch.device"):
        advcalc.read_skyrl_dump(path)
