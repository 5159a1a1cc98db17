#!/usr/bin/env python3
"""Alternative 1: verl 0.9.1's own functions, driven from pyarrow and torch.

    CUDA_VISIBLE_DEVICES= PYTHONPATH=<verl-0.9.1 wheel dir> python bench/verl_baseline.py IN OUT --chain grpo|full

What a user without advcalc would write: read the dump with pyarrow, pad every token column
to a [B, T] torch tensor (numpy boolean-mask scatter, no Python loop over rows), wrap them in
a ``DataProto`` and call verl's real trainer functions in the V1 trainer's order, then cut
the padded results back to each row's length and write them with pyarrow (zstd, row groups
of 1024 rows as the input).

* ``--chain grpo``: ``token_level_rewards = rm_scores``, then
  ``ray_trainer.compute_advantage(data, "grpo")`` (verl's defaults: norm by std). Output:
  the input columns + ``token_level_rewards``, ``advantages``, ``returns``.
* ``--chain full``: ``ray_trainer.apply_kl_penalty`` (``low_var_kl``, a
  ``FixedKLController(0.001)``) -> ``rollout_corr_helper.compute_rollout_correction_and_add_to_batch``
  (``rollout_is: token``, threshold 2.0; ``rollout_rs: token_k1``, threshold 2.0) ->
  ``compute_advantage(data, "gae", gamma=1.0, lam=0.95)``. Output: the input columns with
  ``response_mask`` replaced by the mask after rejection (int8, the input type), +
  ``token_level_rewards``, ``advantages``, ``returns``, ``rollout_is_weights``.

The algorithm config is verl's own default ``algorithm`` section
(``verl/trainer/config/_generated_ppo_trainer.yaml``) with the chain's keys merged in, the
same config advcalc is given. torch uses its default thread count (all cores).
"""

from __future__ import annotations

import argparse
import os
import sys
import types
from pathlib import Path

os.environ["CUDA_VISIBLE_DEVICES"] = ""
os.environ.setdefault("VERL_FORCE_DEVICE", "cpu")

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

# verl's import needs the same TransferQueue stand-in as the fixture generator.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures" / "verl"))
from verl_shim import stub_transfer_queue  # noqa: E402

TOKEN_FLOAT_COLS = ("old_log_probs", "ref_log_prob", "rollout_log_probs", "values")

CHAINS = {
    "grpo": {"adv_estimator": "grpo"},
    "full": {
        "adv_estimator": "gae",
        "gamma": 1.0,
        "lam": 0.95,
        "use_kl_in_reward": True,
        "kl_penalty": "low_var_kl",
        "kl_ctrl": {"type": "fixed", "kl_coef": 0.001},
        "rollout_correction": {
            "rollout_is": "token",
            "rollout_is_threshold": 2.0,
            "rollout_rs": "token_k1",
            "rollout_rs_threshold": 2.0,
        },
    },
}


def import_verl():
    stub_transfer_queue()
    import verl  # noqa: F401
    from omegaconf import OmegaConf
    from verl import DataProto
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.ray_trainer import apply_kl_penalty, compute_advantage
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch

    return types.SimpleNamespace(
        verl=verl, OmegaConf=OmegaConf, DataProto=DataProto, core_algos=core_algos,
        apply_kl_penalty=apply_kl_penalty, compute_advantage=compute_advantage,
        compute_rollout_correction_and_add_to_batch=compute_rollout_correction_and_add_to_batch,
    )


def algorithm_config(V, chain: str):
    cfg_file = Path(V.verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    cfg = V.OmegaConf.create(yaml.safe_load(cfg_file.read_text())["algorithm"])
    return V.OmegaConf.merge(cfg, V.OmegaConf.create(CHAINS[chain]))


class Padder:
    """Pads list columns that share one set of row lengths to [B, T] and cuts them back."""

    def __init__(self, lengths: np.ndarray):
        self.lengths = lengths
        self.B, self.T = len(lengths), int(lengths.max()) if len(lengths) else 0
        self.valid = np.arange(self.T)[None, :] < lengths[:, None]  # row-major = flat list order
        offsets = np.zeros(self.B + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        self.offsets = pa.array(offsets.astype(np.int32))

    def pad(self, col: pa.ChunkedArray, dtype) -> np.ndarray:
        flat = pc.list_flatten(col).to_numpy()  # chunked -> one numpy array
        arr = np.zeros((self.B, self.T), dtype=dtype)
        arr[self.valid] = flat
        return arr

    def unpad(self, arr: np.ndarray, type_: pa.DataType) -> pa.ListArray:
        return pa.ListArray.from_arrays(self.offsets, pa.array(arr[self.valid], type=type_))


def main(argv=None):
    ap = argparse.ArgumentParser(description="verl 0.9.1 functions on padded torch tensors (benchmark baseline)")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--chain", choices=sorted(CHAINS), default="grpo")
    args = ap.parse_args(argv)

    V = import_verl()
    import torch

    cfg = algorithm_config(V, args.chain)

    table = pq.read_table(args.input)
    mask_col = table.column("response_mask")
    mask_type = mask_col.type.value_type
    P = Padder(pc.list_value_length(mask_col).to_numpy(zero_copy_only=False).astype(np.int64))

    rm = torch.from_numpy(P.pad(table.column("rm_scores"), np.float32))
    tensors = {
        "rm_scores": rm,
        "token_level_scores": rm,  # V1 trainer: token_level_scores = rm_scores
        "response_mask": torch.from_numpy(P.pad(mask_col, np.int64)),
    }
    for c in TOKEN_FLOAT_COLS:
        if c in table.column_names:
            tensors[c] = torch.from_numpy(P.pad(table.column(c), np.float32))
    uids = np.array(table.column("uid").to_pylist(), dtype=object)
    batch = V.DataProto.from_dict(tensors=tensors, non_tensors={"uid": uids})

    # the V1 trainer's order (_compute_old_log_prob + _compute_advantage)
    if cfg.use_kl_in_reward:
        kl_ctrl = V.core_algos.get_kl_controller(cfg.kl_ctrl)  # FixedKLController(0.001)
        batch, _ = V.apply_kl_penalty(batch, kl_ctrl=kl_ctrl, kl_penalty=cfg.kl_penalty)
    else:
        batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    corrected = args.chain == "full"
    if corrected:
        batch, _ = V.compute_rollout_correction_and_add_to_batch(batch, cfg.rollout_correction)
    batch = V.compute_advantage(
        batch,
        adv_estimator=cfg.adv_estimator,
        gamma=cfg.gamma,
        lam=cfg.lam,
        norm_adv_by_std_in_grpo=cfg.get("norm_adv_by_std_in_grpo", True),
        config=cfg,
    )

    out_cols = {}
    f32 = pa.float32()
    if corrected:
        mask_after = batch.batch["response_mask"].numpy().astype(mask_type.to_pandas_dtype())
        out_cols["response_mask"] = P.unpad(mask_after, mask_type)
    for name in ("token_level_rewards", "advantages", "returns"):
        out_cols[name] = P.unpad(batch.batch[name].numpy(), f32)
    if corrected:
        out_cols["rollout_is_weights"] = P.unpad(batch.batch["rollout_is_weights"].numpy(), f32)

    for name, arr in out_cols.items():
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, arr)
        else:
            table = table.append_column(name, arr)
    pq.write_table(table, args.output, row_group_size=1024, compression="zstd")


if __name__ == "__main__":
    main()
