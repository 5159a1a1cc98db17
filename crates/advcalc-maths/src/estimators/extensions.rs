//! advcalc's keys beside verl's in the `algorithm` section (`docs/conventions.md`, "Option
//! keys") that several estimators or conventions read: verl 0.9.1 has none of them, and
//! their defaults give verl's numbers. Each is declared once, in the `settings!` list below
//! (key, type, default, doc): [`Extensions`], its reading and errors, its YAML (`advcalc
//! config`) and the notes for keys an estimator does not read all come from that list. The
//! estimators that read a key say so in their own declaration (`Info::settings`, a family
//! member's `reads`), which `advcalc estimators` prints.

use crate::estimators::EstimatorSettings;
use crate::estimators::conventions::Convention;
use crate::estimators::reinforce_plus_plus::MaskMode;
use crate::estimators::rloo_loo_std::{NemoGroupBy, NemoOptions};
use crate::settings::{Map, SettingList};
use crate::shaping::openrlhf_kl::{ApproxKl, OpenrlhfKl};

impl Extensions {
    /// Every key with its value (the resolved configuration's), subsections nested.
    pub fn to_map(&self) -> Map {
        let mut m = Map::new();
        SettingList::to_map(self, &mut m);
        m
    }
}

// advcalc's settings that several estimators or conventions read, each declared once, in the
// order of the resolved configuration. A new one is one entry here; the estimators that read
// it say so in their declaration (`Info::settings`, a family member's `reads`) and read it as
// `settings.ext.FIELD`. A setting only one estimator reads is declared in its file instead
// (its `Estimate::Options`), and read as `settings.ext.estimators.NAME.FIELD`.
crate::settings! {
    /// advcalc's extension keys, validated: one field per entry of this `settings!` list, which
    /// declares each key once, and every estimator's own.
    pub struct Extensions {
    /// `convention` (or `--convention`): whose numbers the GRPO/RLOO family gives.
    "convention" => convention: Convention = Convention::Verl,
    /// `whiten_advantages` (gae only): false writes A_raw·m instead of the whitened values.
    "whiten_advantages" => whiten_advantages: bool = true,
    /// `mask_mode` (reinforce_plus_plus only): `carry` (verl ≥ 0.9) or `reset` (verl < 0.9).
    "mask_mode" => mask_mode: MaskMode = MaskMode::Carry,
    /// `group_size`: consecutive-n groups (trl, openrlhf, open-instruct conventions and the
    /// openrlhf_* estimators); null: the first run of equal uids.
    "group_size" => group_size: Option<usize> = None,
    /// `openrlhf.reward_clip`: OpenRLHF's `--reward.clip_range`.
    "openrlhf.reward_clip" => openrlhf_reward_clip: (f64, f64) = (-10.0, 10.0),
    /// `openrlhf.no_std_norm`: OpenRLHF's `--algo.advantage.no_std_norm`.
    "openrlhf.no_std_norm" => openrlhf_no_std_norm: bool = false,
    /// `openrlhf.kl_coef`: OpenRLHF's `--algo.kl.init_coef` (the openrlhf_* estimators; 0:
    /// no KL in the reward).
    "openrlhf.kl_coef" => openrlhf_kl_coef: f64 = 0.0,
    /// `openrlhf.kl_estimator`: OpenRLHF's `--algo.kl.estimator` (k1, k2 or k3).
    "openrlhf.kl_estimator" => openrlhf_kl_estimator: ApproxKl = ApproxKl::K1,
    /// `trl.normalize_advantages`: TRL RLOOTrainer's flag.
    "trl.normalize_advantages" => trl_normalize_advantages: bool = false,
    /// `trl.reward_weights`: TRL's `reward_weights`, one per reward column of a TRL dump
    /// (`io::trainers::trl`); empty: 1.0 each, TRL's default.
    "trl.reward_weights" => trl_reward_weights: Vec<f64> = Vec::new(),
    /// `nemo.use_leave_one_out_baseline`: NeMo-RL's `grpo.use_leave_one_out_baseline` (read
    /// under nemo-rl only).
    "nemo.use_leave_one_out_baseline" => nemo_use_leave_one_out_baseline: bool = true,
    /// `nemo.normalize_rewards`: NeMo-RL's `grpo.normalize_rewards` (read under nemo-rl only).
    "nemo.normalize_rewards" => nemo_normalize_rewards: bool = true,
    /// `nemo.group_by`: `uid` or `prompt_ids` (rloo_loo_std, and the family under nemo-rl).
    "nemo.group_by" => nemo_group_by: NemoGroupBy = NemoGroupBy::Uid,
    /// `skyrl.advantage_batch_normalize`: SkyRL's `trainer.algorithm` flag (the family under
    /// `--convention skyrl`).
    "skyrl.advantage_batch_normalize" => skyrl_advantage_batch_normalize: bool = false,
    }
    + /// Every estimator's own settings (its `Estimate::Options`), a field per estimator.
    estimators: EstimatorSettings
}

impl Extensions {
    /// `openrlhf.kl_coef` and `openrlhf.kl_estimator`, as the openrlhf_* estimators read them.
    pub fn openrlhf_kl(&self) -> OpenrlhfKl {
        OpenrlhfKl {
            coef: self.openrlhf_kl_coef,
            estimator: self.openrlhf_kl_estimator,
        }
    }

    /// `nemo.use_leave_one_out_baseline` and `nemo.normalize_rewards`, as NeMo-RL's maths
    /// reads them.
    pub fn nemo(&self) -> NemoOptions {
        NemoOptions {
            use_leave_one_out_baseline: self.nemo_use_leave_one_out_baseline,
            normalize_rewards: self.nemo_normalize_rewards,
        }
    }
}
