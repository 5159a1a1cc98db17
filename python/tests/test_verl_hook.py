"""advcalc.verl: verl batches (built here with numpy) -> advcalc's ragged Parquet schema.

Needs only numpy, pyarrow and pytest; the round trip through `advcalc run` also needs the
binary (ADVCALC_BIN, else target/debug/advcalc) and is skipped without it.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from advcalc import verl as hook

REPO = Path(__file__).resolve().parents[2]

PAD = -7.0  # what the padding of every float tensor holds here: must never reach a file


def _batch(*, optional=True, score_name="rm_scores"):
    """A verl-shaped batch: B=5, prompts left-padded to P=3, responses right-padded to T=4.

    rows (uid, prompt length, response length, mask over the response, scores):
      0  p0  2  4  [1 1 0 1]  1.0 on the last position (a tool span in the middle)
      1  p0  3  2  [1 1]      0.0
      2  p0  1  0  []         (empty response)
      3  p1  3  3  [1 1 1]    0.25 at 0, 0.5 at 2
      4  p1  2  1  [1]        1.0
    """
    prompt_lens = [2, 3, 1, 3, 2]
    resp_lens = [4, 2, 0, 3, 1]
    masks = [[1, 1, 0, 1], [1, 1], [], [1, 1, 1], [1]]
    scores = [{3: 1.0}, {1: 0.0}, {}, {0: 0.25, 2: 0.5}, {0: 1.0}]
    B, P, T = 5, 3, 4
    prompts = np.zeros((B, P), dtype=np.int64)
    responses = np.zeros((B, T), dtype=np.int64)
    attention = np.zeros((B, P + T), dtype=np.int64)
    response_mask = np.zeros((B, T), dtype=np.int64)
    rm = np.full((B, T), PAD, dtype=np.float32)
    old = np.full((B, T), PAD, dtype=np.float32)
    for i in range(B):
        p, r = prompt_lens[i], resp_lens[i]
        prompts[i, P - p :] = 100 + np.arange(p)  # left-padded prompt
        attention[i, P - p : P] = 1
        responses[i, :r] = 200 + np.arange(r)  # right-padded response
        attention[i, P : P + r] = 1
        response_mask[i, :r] = masks[i]
        rm[i, :r] = 0.0
        for t, s in scores[i].items():
            rm[i, t] = s
        old[i, :r] = -0.1 * (i + 1) - 0.01 * np.arange(r)
    batch = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": np.concatenate([prompts, responses], axis=1),
        "attention_mask": attention,
        "response_mask": response_mask,
        score_name: rm,
    }
    if optional:
        batch["old_log_probs"] = old
        batch["ref_log_prob"] = old - 0.5
        batch["rollout_log_probs"] = old + 0.25
        batch["values"] = old * 2
    non_tensor = {
        "uid": np.array(["p0", "p0", "p0", "p1", "p1"], dtype=object),
        "data_source": np.array(["gsm8k"] * 3 + ["math"] * 2, dtype=object),
        "acc": np.array([1.0, 0.0, 0.0, 0.5, 1.0]),
        "reward_model": np.array([{"ground_truth": "4"}] * B, dtype=object),  # skipped: dicts
        "multi_modal_inputs": np.array([{}] * B, dtype=object),  # skipped
    }
    truth = SimpleNamespace(lens=resp_lens, masks=masks, scores=scores)
    return SimpleNamespace(batch=batch, non_tensor_batch=non_tensor, meta_info={}), truth


def _col(table, name):
    return table.column(name).to_pylist()


def test_ragged_from_attention_mask():
    data, truth = _batch()
    table = hook.to_table(data, step=7)
    assert table.num_rows == 5
    assert table.schema.field("uid").type == pa.string()
    assert table.schema.field("step").type == pa.int64()
    assert table.schema.field("response_mask").type == pa.list_(pa.int8())
    for name in ("rm_scores", "old_log_probs", "ref_log_prob", "rollout_log_probs", "values"):
        assert table.schema.field(name).type == pa.list_(pa.float32()), name
    assert _col(table, "uid") == ["p0", "p0", "p0", "p1", "p1"]
    assert _col(table, "step") == [7] * 5
    assert _col(table, "response_mask") == truth.masks
    assert [len(x) for x in _col(table, "rm_scores")] == truth.lens
    for i, row in enumerate(_col(table, "rm_scores")):
        assert row == [truth.scores[i].get(t, 0.0) for t in range(truth.lens[i])]
    old = data.batch["old_log_probs"]
    for i, row in enumerate(_col(table, "old_log_probs")):
        np.testing.assert_array_equal(np.array(row, dtype=np.float32), old[i, : truth.lens[i]])
        assert PAD not in row
    # token ids, prompts and masks of the full sequence are not written
    for name in ("prompts", "responses", "input_ids", "attention_mask"):
        assert name not in table.column_names


def test_empty_response_row():
    data, _ = _batch()
    table = hook.to_table(data, step=1)
    for name in ("response_mask", "rm_scores", "old_log_probs", "values"):
        assert _col(table, name)[2] == [], name


def test_non_tensor_keys_as_columns():
    data, _ = _batch()
    data.non_tensor_batch["score"] = np.array([1.0, 0.0, 0.0, 0.75, 1.0])  # reward extra named score
    data.non_tensor_batch["pair"] = np.zeros((5, 2))  # 2-D: skipped
    table = hook.to_table(data, step=1)
    assert _col(table, "data_source") == ["gsm8k"] * 3 + ["math"] * 2
    assert _col(table, "acc") == [1.0, 0.0, 0.0, 0.5, 1.0]
    for skipped in ("reward_model", "multi_modal_inputs", "pair", "score"):
        assert skipped not in table.column_names, skipped


def test_missing_optional_tensors_and_response_mask_from_attention():
    data, truth = _batch(optional=False)
    del data.batch["response_mask"]  # as before verl's compute_response_mask ran
    table = hook.to_table(data, step=2)
    assert set(table.column_names) == {"uid", "step", "response_mask", "rm_scores", "data_source", "acc"}
    # the response part of attention_mask: 1 on every real response token, tool spans included
    assert _col(table, "response_mask") == [[1] * n for n in truth.lens]


def test_token_level_scores_kept_under_its_name():
    data, _ = _batch(score_name="token_level_scores")
    table = hook.to_table(data)
    assert "token_level_scores" in table.column_names and "rm_scores" not in table.column_names
    assert "step" not in table.column_names  # no step given
    data.batch["rm_scores"] = data.batch["token_level_scores"] * 0  # both: verl reads token_level_scores
    table = hook.to_table(data)
    assert "token_level_scores" in table.column_names and "rm_scores" not in table.column_names


class FakeBF16:
    """Duck-types a bfloat16 torch tensor: `.numpy()` fails until `.float()` is called."""

    def __init__(self, array, converted=False):
        self.array = np.asarray(array)
        self.converted = converted
        self.calls = []

    def detach(self):
        self.calls.append("detach")
        return self

    def cpu(self):
        self.calls.append("cpu")
        return self

    def float(self):
        return FakeBF16(self.array.astype(np.float32), converted=True)

    def numpy(self):
        if not self.converted:
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self.array


class FakeTensor(FakeBF16):
    def __init__(self, array):
        super().__init__(array, converted=True)


def test_tensor_like_objects():
    data, truth = _batch()
    plain = hook.to_table(data, step=3)
    wrapped = {name: FakeTensor(value) for name, value in data.batch.items()}
    wrapped["values"] = FakeBF16(data.batch["values"])
    wrapped["old_log_probs"] = FakeBF16(data.batch["old_log_probs"])
    fake = SimpleNamespace(batch=wrapped, non_tensor_batch=data.non_tensor_batch)
    table = hook.to_table(fake, step=3)
    assert table.equals(plain)
    assert wrapped["attention_mask"].calls[:2] == ["detach", "cpu"]


def test_mapping_input_and_explicit_lengths():
    data, truth = _batch()
    mapping = {**data.batch, **data.non_tensor_batch}
    del mapping["attention_mask"]
    lengths = FakeTensor(np.array(truth.lens))  # e.g. a nested tensor's offsets().diff()
    table = hook.to_table(mapping, step=4, response_lengths=lengths)
    assert [len(x) for x in _col(table, "values")] == truth.lens
    assert _col(table, "data_source")[0] == "gsm8k"


def test_padded_layout_without_lengths():
    data, _ = _batch()
    del data.batch["attention_mask"]
    table = hook.to_table(data, step=1)
    assert [len(x) for x in _col(table, "rm_scores")] == [4] * 5


def test_v1_batch_keys_give_session_columns():
    data, _ = _batch()
    keys = ["p0_0_0", "p0_1_0", "p0_1_1", "p_1_0_0", "p_1_1_0"]  # uid may contain "_"
    table = hook.to_table(data, step=1, batch_keys=keys)
    assert _col(table, "session_id") == [0, 1, 1, 0, 1]
    assert _col(table, "output_index") == [0, 0, 1, 0, 0]
    with pytest.raises(ValueError, match="not of the form"):
        hook.to_table(data, batch_keys=["p0"] * 5)


def test_extra_columns():
    data, _ = _batch()
    table = hook.to_table(data, step=9, columns={"global_step": 3, "epoch": np.array([0, 0, 0, 1, 1])})
    assert _col(table, "global_step") == [3] * 5
    assert _col(table, "epoch") == [0, 0, 0, 1, 1]


def test_errors():
    data, _ = _batch()
    data.batch["response_mask"] = data.batch["response_mask"] * 2
    with pytest.raises(ValueError, match="response_mask: row 0, position 0 holds 2"):
        hook.to_table(data)
    data, _ = _batch()
    data.batch["values"] = data.batch["values"][:, :3]
    with pytest.raises(ValueError, match="values has 3 response positions where responses have 4"):
        hook.to_table(data)
    data, _ = _batch()
    data.non_tensor_batch["uid"] = data.non_tensor_batch["uid"][:4]
    with pytest.raises(ValueError, match="batch size"):
        hook.to_table(data)
    with pytest.raises(ValueError, match="response_lengths has 2 entries for 5 rows"):
        hook.to_table(_batch()[0], response_lengths=[1, 2])


def test_write_step_is_atomic_and_named_by_step(tmp_path, monkeypatch):
    data, truth = _batch()
    out = tmp_path / "dumps"
    path = hook.write_step(data, out, step=12)
    assert path == out / "step=12.parquet" == hook.step_path(out, 12)
    assert sorted(p.name for p in out.iterdir()) == ["step=12.parquet"]
    first = pq.read_table(path)
    assert _col(first, "step") == [12] * 5
    assert first.equals(hook.to_table(data, step=12))

    # a failed write (here: the Parquet writer dies half-way) leaves the old file and no temporary
    def dying_writer(table, sink, **kwargs):
        sink.write(b"PAR1 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(hook.pq, "write_table", dying_writer)
    with pytest.raises(KeyboardInterrupt):
        hook.write_step(data, out, step=12)
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == ["step=12.parquet"]
    assert pq.read_table(path).equals(first)

    # a rerun of the step (resumed training) replaces the file
    data.non_tensor_batch["uid"] = np.array(["q0", "q0", "q0", "q1", "q1"], dtype=object)
    hook.write_step(data, out, step=12)
    hook.write_step(data, out, step=2)
    assert _col(pq.read_table(path), "uid")[0] == "q0"
    assert [(s, p.name) for s, p in hook.list_steps(out)] == [(2, "step=2.parquet"), (12, "step=12.parquet")]


def test_module_does_not_import_torch():
    # the hook as the package's Python files alone (the module and advcalc._atomic, which it
    # writes through), with the native module unimportable
    package = Path(hook.__file__).resolve().parents[1]
    code = (
        "import sys\n"
        "sys.modules['advcalc._native'] = None\n"
        "import advcalc.verl\n"
        f"assert advcalc.verl.__file__ == {hook.__file__!r}, advcalc.verl.__file__\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(package)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


# ----------------------------------------------------------------------------- advcalc run


def _advcalc_bin() -> Path | None:
    candidate = os.environ.get("ADVCALC_BIN")
    path = Path(candidate) if candidate else REPO / "target" / "debug" / "advcalc"
    return path if path.is_file() and os.access(path, os.X_OK) else None


@pytest.fixture
def advcalc_bin():
    path = _advcalc_bin()
    if path is None:
        pytest.skip("advcalc binary not found: set ADVCALC_BIN or run `cargo build` (target/debug/advcalc)")
    return path


def _grpo_by_hand(scores, eps=1e-6):
    """verl's GRPO: (s - mean) / (std + eps) per group, std unbiased; singleton: mean 0, std 1."""
    n = len(scores)
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1)) if n > 1 else 1.0
    return [(s - mean) / (std + eps) for s in scores]


def test_advcalc_run_grpo_on_the_dump(tmp_path, advcalc_bin):
    data, truth = _batch()
    path = hook.write_step(data, tmp_path / "dumps", step=5)
    out = tmp_path / "out.parquet"
    subprocess.run([str(advcalc_bin), "run", "-e", "grpo", "--quiet", str(path), str(out)], check=True)
    result = pq.read_table(out)

    # sequence scores: row 0 1.0, row 1 0.0, row 2 (empty) 0.0 | row 3 0.25 + 0.5, row 4 1.0
    p0 = _grpo_by_hand([1.0, 0.0, 0.0])  # mean 1/3, std sqrt(1/3)
    p1 = _grpo_by_hand([0.75, 1.0])  # mean 0.875, std 0.125 * sqrt(2)
    per_row = p0 + p1
    assert math.isclose(p0[0], (2 / 3) / (math.sqrt(1 / 3) + 1e-6))
    assert math.isclose(p1[1], 0.125 / (0.125 * math.sqrt(2) + 1e-6))
    advantages = _col(result, "advantages")
    returns = _col(result, "returns")
    assert _col(result, "uid") == ["p0", "p0", "p0", "p1", "p1"]  # row order kept
    for i in range(5):
        expected = [per_row[i] * m for m in truth.masks[i]]
        assert len(advantages[i]) == truth.lens[i]
        np.testing.assert_allclose(advantages[i], expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(returns[i], expected, rtol=1e-6, atol=1e-6)
