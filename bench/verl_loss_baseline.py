#!/usr/bin/env python3
"""The `advcalc loss` benchmark's alternative: verl 0.9.1's own functions, on CPU.

    CUDA_VISIBLE_DEVICES= PYTHONPATH=<verl-0.9.1 wheel dir> python bench/verl_loss_baseline.py IN OUT \
        [--config bench/loss.yaml] [--times FILE] [--torch-threads N]

What `advcalc loss -c bench/loss.yaml IN OUT` computes, with verl's real code, as
``bench/verl_baseline.py`` (GRPO advantages) and ``fixtures/verl/loss/generate.py`` (the actor
loss) drive it:

1. read the dump with pyarrow; pad the token columns to [B, T] torch tensors, T =
   ``rollout.response_length`` (numpy boolean-mask scatter, no Python loop over rows);
2. advantages: ``token_level_rewards = rm_scores``, ``ray_trainer.compute_advantage(data,
   "grpo")`` on a ``DataProto`` (verl's default algorithm section merged with the config's);
3. loss: the step cut into contiguous mini-batches of ``ppo_mini_batch_size x rollout.n`` rows
   (shuffle off, 1 DP rank), ``batch_num_tokens`` = the mini-batch's mask sum; per micro-batch of
   ``ppo_micro_batch_size_per_gpu`` rows the TensorDict verl's engine hands the loss (padded
   [b, T] ``response_mask`` / ``old_log_probs`` / ``advantages`` / ``ref_log_prob``, nested
   ``prompts`` / ``responses``, the model output ``log_probs`` as a no-padding nested tensor cut
   from the leaf; built with tensor ops, no per-row Python), then verl's real
   ``workers.utils.losses.ppo_loss`` and ``loss.backward()``. ``pg_losses`` and ``kl_losses``
   are the ``loss_mat`` tensors ppo_loss passes to ``agg_loss`` (times the mask), recorded by a
   thin wrapper; ``grad_weights`` is the ``.grad`` of the micro-batch's current log-probs, a
   [b, T] leaf with requires_grad (generate.py uses one [G, T] leaf per mini-batch: the same
   gradients, but every micro-batch's backward then fills a [G, T] tensor, which made verl
   slower here for no reason of verl's own);
4. cut back to each row's length and write IN + ``token_level_rewards``, ``advantages``,
   ``returns``, ``pg_losses``, ``grad_weights``, ``kl_losses`` with pyarrow (zstd, row groups
   of 1024).

Prints one JSON line of phase times (s, ``time.perf_counter``): ``import`` (verl, torch),
``read`` (Parquet), ``pad`` (token columns to tensors, uids to Python), ``advantages``,
``loss`` (micro-batch inputs, ppo_loss, backward, the recorded per-token losses and gradients
copied out), ``write`` (unpad + Parquet). ``compute`` = advantages + loss: verl's functions
alone, the number the benchmark compares with (as fair to verl as it gets: no reading,
padding, importing or writing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

T_START = time.perf_counter()
os.environ["CUDA_VISIBLE_DEVICES"] = ""
os.environ.setdefault("VERL_FORCE_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import yaml  # noqa: E402

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "fixtures" / "verl"))
sys.path.insert(0, str(BENCH))
from verl_shim import stub_transfer_queue  # noqa: E402
from verl_baseline import Padder  # noqa: E402

stub_transfer_queue()
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402

import verl  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.workers.config import FSDPActorConfig, PolicyLossConfig  # noqa: E402
from verl.workers.utils import losses as verl_losses  # noqa: E402

T_IMPORTED = time.perf_counter()

# ---- the per-token loss matrices ppo_loss aggregates (no copies: detach only) ----------------
CAP = {"pg": None, "kl": None}
_orig_core_agg, _orig_losses_agg = core_algos.agg_loss, verl_losses.agg_loss


def _core_agg(loss_mat, **kw):
    CAP["pg"] = loss_mat.detach()
    return _orig_core_agg(loss_mat=loss_mat, **kw)


def _losses_agg(loss_mat, **kw):
    CAP["kl"] = loss_mat.detach()
    return _orig_losses_agg(loss_mat=loss_mat, **kw)


core_algos.agg_loss = _core_agg
verl_losses.agg_loss = _losses_agg


def merged_config(path):
    full = yaml.safe_load((Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml").read_text())
    a = full["actor_rollout_ref"]["actor"]
    base = {
        "actor_rollout_ref": {"actor": {k: a[k] for k in (
            "ppo_mini_batch_size", "ppo_micro_batch_size_per_gpu", "clip_ratio", "clip_ratio_low", "clip_ratio_high",
            "clip_ratio_c", "tau_pos", "tau_neg", "loss_agg_mode", "loss_scale_factor", "entropy_coeff",
            "use_kl_loss", "kl_loss_coef", "kl_loss_type", "ppo_epochs", "policy_loss")},
            "rollout": {"n": full["actor_rollout_ref"]["rollout"]["n"], "response_length": None}},
        "algorithm": full["algorithm"],
    }
    base["actor_rollout_ref"]["actor"]["policy_loss"].pop("_target_", None)
    user = yaml.safe_load(Path(path).read_text())
    return OmegaConf.to_container(OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(user)))


def actor_config(cfg):
    a, n = cfg["actor_rollout_ref"]["actor"], cfg["actor_rollout_ref"]["rollout"]["n"]
    G = a["ppo_mini_batch_size"] * n
    return FSDPActorConfig(
        strategy="fsdp", rollout_n=n, ppo_mini_batch_size=a["ppo_mini_batch_size"],
        ppo_micro_batch_size_per_gpu=a["ppo_micro_batch_size_per_gpu"] or G,
        clip_ratio=a["clip_ratio"], clip_ratio_low=a["clip_ratio_low"], clip_ratio_high=a["clip_ratio_high"],
        clip_ratio_c=a["clip_ratio_c"], tau_pos=a["tau_pos"], tau_neg=a["tau_neg"],
        loss_agg_mode=a["loss_agg_mode"], loss_scale_factor=a["loss_scale_factor"],
        entropy_coeff=a["entropy_coeff"], use_kl_loss=a["use_kl_loss"], kl_loss_coef=a["kl_loss_coef"],
        kl_loss_type=a["kl_loss_type"], ppo_epochs=a["ppo_epochs"], shuffle=False,
        policy_loss=PolicyLossConfig(**a["policy_loss"]),
    )


def micro_td(t, r0, r1, lens, lp_leaf, n_tokens, G, T, use_kl):
    """The micro-batch TensorDict ppo_loss receives and the model output (as generate.py, vectorised);
    lp_leaf: the micro-batch's [b, T] current log-probs."""
    names = ["response_mask", "old_log_probs", "advantages"] + (["ref_log_prob"] if use_kl else [])
    b = r1 - r0
    data = TensorDict({k: t[k][r0:r1] for k in names}, batch_size=[b])
    L = lens[r0:r1]
    zero = torch.zeros(1, dtype=torch.int64)
    data["prompts"] = torch.nested.nested_tensor_from_jagged(torch.zeros(b, dtype=torch.int64),
                                                             offsets=torch.arange(b + 1, dtype=torch.int64))
    data["responses"] = torch.nested.nested_tensor_from_jagged(torch.zeros(int(L.sum()), dtype=torch.int64),
                                                               offsets=torch.cat([zero, L.cumsum(0)]))
    tu.assign_non_tensor(data, max_response_len=T, dp_size=1, batch_num_tokens=n_tokens, global_batch_size=G)
    # model output: one value per prompt + response token; verl's no_padding_2_padding reads the
    # row's first L of its L + 1 values (the response log-probs)
    padded = torch.cat([lp_leaf, torch.zeros(b, 1)], dim=1)
    keep = torch.arange(T + 1)[None, :] < (L + 1)[:, None]
    lp = torch.nested.nested_tensor_from_jagged(padded[keep], offsets=torch.cat([zero, (L + 1).cumsum(0)]))
    return data, {"log_probs": lp}


def main(argv=None):
    ap = argparse.ArgumentParser(description="verl 0.9.1's GRPO + actor loss on padded torch tensors (CPU)")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--config", default=str(BENCH / "loss.yaml"))
    ap.add_argument("--times", metavar="FILE", help="also write the phase times (JSON) to FILE")
    ap.add_argument("--torch-threads", type=int, default=0, help="torch threads (default: torch's, all cores)")
    args = ap.parse_args(argv)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    times = {"import": T_IMPORTED - T_START}

    cfg = merged_config(args.config)
    acfg = actor_config(cfg)
    alg = OmegaConf.create(cfg["algorithm"])
    a, n = cfg["actor_rollout_ref"]["actor"], cfg["actor_rollout_ref"]["rollout"]["n"]
    T = cfg["actor_rollout_ref"]["rollout"]["response_length"]
    G = a["ppo_mini_batch_size"] * n
    micro = a["ppo_micro_batch_size_per_gpu"] or G
    use_kl = bool(a["use_kl_loss"])

    t0 = time.perf_counter()
    table = pq.read_table(args.input)
    t1 = time.perf_counter()
    times["read"] = t1 - t0

    mask_col = table.column("response_mask")
    lengths = pc.list_value_length(mask_col).to_numpy(zero_copy_only=False).astype(np.int64)
    assert lengths.max() <= T, "rollout.response_length is shorter than the longest response"
    P = Padder(lengths)
    pad_T = lambda col, dt: np.pad(P.pad(table.column(col), dt), ((0, 0), (0, T - P.T)))  # noqa: E731
    t = {"response_mask": torch.from_numpy(pad_T("response_mask", np.int64)),
         "token_level_scores": torch.from_numpy(pad_T("rm_scores", np.float32))}
    for c in ("old_log_probs", "log_probs") + (("ref_log_prob",) if use_kl else ()):
        t[c] = torch.from_numpy(pad_T(c, np.float32))
    uids = np.array(table.column("uid").to_pylist(), dtype=object)
    lens = torch.from_numpy(lengths)
    N = len(lengths)
    assert N % G == 0, "verl: the step's rows must be a multiple of ppo_mini_batch_size x rollout.n"
    t2 = time.perf_counter()
    times["pad"] = t2 - t1

    # ---- advantages (ray_trainer.compute_advantage, as bench/verl_baseline.py --chain grpo) ----
    dp = DataProto.from_dict(tensors={"token_level_scores": t["token_level_scores"],
                                      "response_mask": t["response_mask"],
                                      "old_log_probs": t["old_log_probs"]},
                             non_tensors={"uid": uids})
    dp.batch["token_level_rewards"] = dp.batch["token_level_scores"]
    dp = compute_advantage(dp, adv_estimator=alg.adv_estimator, gamma=alg.gamma, lam=alg.lam,
                           norm_adv_by_std_in_grpo=alg.get("norm_adv_by_std_in_grpo", True), config=alg)
    t["advantages"] = dp.batch["advantages"]
    t3 = time.perf_counter()
    times["advantages"] = t3 - t2

    # ---- the actor loss (engine_workers.train_mini_batch -> forward_backward_batch -> ppo_loss) ----
    pg_out = torch.zeros(N, T)
    kl_out = torch.zeros(N, T)
    gw_out = torch.zeros(N, T)
    mask_f = t["response_mask"].to(torch.float32)
    for m0 in range(0, N, G):
        mb = {k: v[m0:m0 + G] for k, v in t.items() if k != "token_level_scores"}
        n_tokens = int(mb["response_mask"].sum().item())
        for u0 in range(0, G, micro):
            u1 = min(u0 + micro, G)
            # the micro-batch's current log-probs: a leaf of its own (the model's output in verl);
            # ppo_loss of one micro-batch reads only its rows, so its .grad is dL/d log_probs
            lp_leaf = mb["log_probs"][u0:u1].clone().requires_grad_(True)
            data, model_output = micro_td(mb, u0, u1, lens[m0:m0 + G], lp_leaf, n_tokens, G, T, use_kl)
            loss, _metrics = verl_losses.ppo_loss(acfg, model_output, data)
            loss.backward()
            pg_out[m0 + u0:m0 + u1] = CAP["pg"] * mask_f[m0 + u0:m0 + u1]
            if use_kl:
                kl_out[m0 + u0:m0 + u1] = CAP["kl"] * mask_f[m0 + u0:m0 + u1]
            gw_out[m0 + u0:m0 + u1] = lp_leaf.grad
    t4 = time.perf_counter()
    times["loss"] = t4 - t3

    f32 = pa.float32()
    out_cols = {name: dp.batch[name][:, :P.T].numpy() for name in ("token_level_rewards", "advantages", "returns")}
    out_cols.update(pg_losses=pg_out[:, :P.T].numpy(), grad_weights=gw_out[:, :P.T].numpy())
    if use_kl:
        out_cols["kl_losses"] = kl_out[:, :P.T].numpy()
    for name, arr in out_cols.items():
        table = table.append_column(name, P.unpad(np.ascontiguousarray(arr), f32))
    pq.write_table(table, args.output, row_group_size=1024, compression="zstd")
    times["write"] = time.perf_counter() - t4
    times["compute"] = times["advantages"] + times["loss"]
    line = json.dumps({k: round(v, 4) for k, v in times.items()})
    print(line, flush=True)
    if args.times:
        Path(args.times).write_text(line + "\n")


if __name__ == "__main__":
    main()
