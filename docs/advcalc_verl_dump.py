"""Token-level advcalc dumps from a verl 0.9.1 run (V1 trainer, `trainer.use_v1=True`).

Put this file on PYTHONPATH and switch it on with two environment variables:

    VERL_USE_EXTERNAL_MODULES=advcalc_verl_dump   # verl imports this module at `import verl`
    ADVCALC_DUMP_DIR=/data/runs/my-run/advcalc    # one step=N.parquet per training step

Importing it replaces the trainer registered as "sync" (verl's default trainer mode) with a
subclass whose `_compute_advantage` first writes the batch verl is about to compute
advantages on, then calls verl's own method unchanged. Without ADVCALC_DUMP_DIR the subclass
does nothing extra. See docs/verl.md.
"""

import os

import numpy as np
import transfer_queue as tq
from verl.protocol import DataProto
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

from advcalc.verl import write_step

# The fields verl 0.9.1's PPOTrainer._compute_advantage reads from the TransferQueue.
ADVANTAGE_INPUTS = ["uid", "response_mask", "rm_scores", "rollout_log_probs", "old_log_probs", "ref_log_prob", "values"]


class AdvcalcDumpTrainer(PPOTrainerSync):
    """verl's sync V1 trainer, writing each advantage batch to ADVCALC_DUMP_DIR first."""

    def _compute_advantage(self, batch, metrics):
        dump_dir = os.environ.get("ADVCALC_DUMP_DIR")
        if dump_dir:
            # the same read verl's _compute_advantage starts with: nested (ragged) tensors
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=ADVANTAGE_INPUTS)
            lengths = data["response_mask"].offsets().diff()  # each row's true response length
            data = DataProto(batch=data.to_padded_tensor())
            data.non_tensor_batch["uid"] = np.array(data.batch.pop("uid").tolist(), dtype=object)
            # one file per advantage batch: global_steps, unless trainer.v1.<mode>.parameter_sync_step > 1
            step = (self.global_steps - 1) * self.parameter_sync_step + self.local_trigger_step + 1
            write_step(
                data,
                dump_dir,
                step,
                response_lengths=lengths,
                batch_keys=batch.keys,  # "{uid}_{session_id}_{index}" -> session_id, output_index
                columns={
                    "global_step": self.global_steps,
                    "is_padding": [bool(tag.get("is_padding", False)) for tag in batch.tags],
                },
            )
        return super()._compute_advantage(batch, metrics)


TRAINER_REGISTRY["sync"] = AdvcalcDumpTrainer  # what main_ppo's get_trainer_cls("sync") returns
