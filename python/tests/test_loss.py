"""advcalc.loss gives verl's per-token losses and gradient weights (the loss corpus, made by
verl 0.9.1's own ppo_loss) and the CLI's numbers, value for value."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import advcalc
from conftest import same_columns

ROOT = Path(__file__).resolve().parents[2]
LOSS_CASES = ROOT / "fixtures" / "verl" / "loss" / "cases"


def _close(got: pa.ChunkedArray, want: pa.ChunkedArray) -> None:
    got_rows, want_rows = got.to_pylist(), want.to_pylist()
    assert len(got_rows) == len(want_rows)
    for g, w in zip(got_rows, want_rows):
        assert len(g) == len(w)
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=2e-4)


@pytest.mark.parametrize("case", ["loss_vanilla", "kl_k3", "steps_seq_mean_token_mean", "adv_grpo"])
def test_loss_gives_verls_numbers(case: str) -> None:
    d = LOSS_CASES / case
    got, metrics = advcalc.loss(pq.read_table(d / "input.parquet"), config=d / "config.yaml", metrics=True)
    want = pq.read_table(d / "expected.parquet")
    for name in want.column_names:
        _close(got[name], want[name])
    expected = json.loads((d / "expected_metrics.json").read_text())
    steps = expected if isinstance(expected, list) else [expected]
    mine = metrics if isinstance(metrics, list) else [metrics]
    assert len(mine) == len(steps)
    for e, m in zip(steps, mine):
        for key in ("actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/kl_loss"):
            if key in e:
                assert m[key] == pytest.approx(e[key], rel=1e-4, abs=1e-6), key


def test_loss_on_a_path_equals_loss_on_a_table() -> None:
    d = LOSS_CASES / "agg_seq_mean_token_mean_off"
    on_path = advcalc.loss(d / "input.parquet", config=d / "config.yaml")
    on_table = advcalc.loss(pq.read_table(d / "input.parquet"), config=str(d / "config.yaml"))
    same_columns(on_path, on_table)


def test_settings_and_findings_reach_python() -> None:
    d = LOSS_CASES / "agg_token_mean_off"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = advcalc.loss(
            pq.read_table(d / "input.parquet"),
            config=d / "config.yaml",
            set={"actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean"},
        )
    assert "pg_losses" in out.column_names and "grad_weights" in out.column_names
    assert "kl_losses" not in out.column_names
    texts = [str(w.message) for w in caught]
    assert any("seq_mean_token_mean_length_bias" in t for t in texts), texts
    # on-policy: no log_probs column, a note says so
    table = pq.read_table(d / "input.parquet").drop_columns(["log_probs"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        advcalc.loss(table, config=d / "config.yaml")
    assert any("on-policy" in str(w.message) for w in caught)


def test_clip_cov_and_bad_keys_are_usage_errors() -> None:
    d = LOSS_CASES / "loss_vanilla"
    table = pq.read_table(d / "input.parquet")
    with pytest.raises(advcalc.UsageError, match="clip_cov"):
        advcalc.loss(table, config=d / "config.yaml", set={"actor_rollout_ref.actor.policy_loss.loss_mode": "clip_cov"})
    with pytest.raises(advcalc.UsageError, match="loss_agg_mod"):
        advcalc.loss(table, config=d / "config.yaml", set={"actor_rollout_ref.actor.loss_agg_mod": "token-sum"})
