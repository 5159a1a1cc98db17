//! The advantage estimators: one file per estimator, named as its `-e` value, holding its
//! maths (plain slices and scalars) and its [`Estimate`] declaration; the `registry!` list below
//! lists them once, and every dispatch over estimators is generated from that list.
//!
//! Adding an estimator: write `estimators/NAME.rs` with a unit struct implementing
//! [`Estimate`] (its [`Info`], its batch work, its token outputs and, where it needs them, its
//! pass-1 statistics), then declare `pub mod NAME;` and add `Variant => NAME::Struct,` to the
//! list below.

pub mod context;
pub mod conventions;
pub mod groups;
pub mod moments;
pub mod openrlhf;
pub mod sessions;
pub mod skyrl_normalize;

use crate::error::{Error, Result};

pub use context::{Plan, RowStats, Rows, Settings, Stamp, Tokens, TrainingBatch};

/// Where an estimator comes from (verl 0.9.1's own names first).
pub const VERL: &str = "verl 0.9.1";

/// What an estimator's advantages are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One scalar per row from the rows' outcome scores, broadcast onto the row's mask;
    /// returns equal advantages.
    Outcome,
    /// Per-token advantages (and returns) from each row's tokens.
    Token,
}

/// An input column an estimator reads beyond `response_mask` and the scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// `uid`: the group label.
    Uid,
    /// `values`: the critic.
    Values,
    /// `reward_baselines`: the greedy response's reward.
    RewardBaselines,
    /// `sum_pi_squared`.
    SumPiSquared,
    /// `old_log_probs` (`rollout_log_probs` in bypass mode).
    OldLogProbs,
    /// The scalar columns named by `algorithm.gdpo_reward_keys`.
    RewardComponents,
}

impl Column {
    pub fn name(self) -> &'static str {
        match self {
            Column::Uid => "uid",
            Column::Values => "values",
            Column::RewardBaselines => "reward_baselines",
            Column::SumPiSquared => "sum_pi_squared",
            Column::OldLogProbs => "old_log_probs",
            Column::RewardComponents => "<gdpo_reward_keys columns>",
        }
    }
}

/// The family an estimator belongs to, part of its declaration: what `--convention` and the
/// OpenRLHF checks go by.
#[derive(Debug, Clone, Copy)]
pub enum Family {
    /// Its numbers are the same under every convention, and it is none of OpenRLHF's.
    Independent,
    /// A member of the GRPO/RLOO family (`docs/conventions.md` C): its behaviour under each
    /// convention ([`conventions`]).
    Convention(conventions::Member),
    /// OpenRLHF's token pipeline ([`openrlhf`]): γ = 1, and verl's KL in the reward refused.
    Openrlhf,
}

/// An estimator's declaration: everything `advcalc estimators`, the column check and the
/// dispatch need to know about it. The name is the file's (the registry adds it).
#[derive(Debug, Clone, Copy)]
pub struct Info {
    /// [`VERL`], or the trainer or paper it comes from.
    pub source: &'static str,
    /// What it computes, in one line.
    pub summary: &'static str,
    pub kind: Kind,
    pub columns: &'static [Column],
    /// The `algorithm.*` keys (and their flags) it reads.
    pub settings: &'static [&'static str],
    /// Its pass-1 statistics use the rollout-correction IS weights, so batch-normalised
    /// weights need their normalisation (a constants pre-pass) before pass 1.
    pub weights_in_pass1: bool,
    /// What it needs of the tokens beyond each row's score sum, said as the refusal on
    /// sequence-level input names it ("estimator opo needs ..."); `None` when its advantage
    /// is one number per row computed from the rows' sequence scores alone, whatever their
    /// token counts and positions, so that it runs on verl's JSONL dumps (one score per row,
    /// `io::jsonl`). A token-level estimator, or one whose numbers depend on how many valid
    /// tokens a row has (whitening over tokens, length weights), must say what it needs:
    /// run on one synthesized token per row it would give other numbers than on the real
    /// rows.
    pub needs_tokens: Option<&'static str>,
    /// Its family: a convention member with its rules, an OpenRLHF estimator, or neither.
    pub family: Family,
}

impl Info {
    /// Whether it runs on sequence-level input (one score per row, no tokens).
    pub fn sequence_level(&self) -> bool {
        self.needs_tokens.is_none()
    }
}

/// One estimator: its declaration and its work in each pass. The engine calls these through
/// [`Estimator`]'s generated dispatch.
pub trait Estimate {
    const INFO: Info;

    /// Pass 1: the estimator's own per-row statistics of one row group (gae's moments, OTB's
    /// column sums). Most estimators need only the common ones the engine keeps.
    fn row_stats(_rows: &Rows<'_>, _stats: &mut RowStats) -> Result<()> {
        Ok(())
    }

    /// Between the passes, once per training batch: group and batch statistics into `plan`.
    fn batch(batch: &TrainingBatch<'_>, plan: &mut Plan) -> Result<()>;

    /// Pass 2: the token outputs of one row group. Outcome estimators ([`Kind::Outcome`])
    /// broadcast their row scalars with [`broadcast_scalars`]; there is no default, so a
    /// token-level estimator cannot forget its own.
    fn token_outputs(rows: &Rows<'_>, plan: &Plan) -> Result<Tokens>;
}

/// Generates [`Estimator`] and its dispatch from one list: `Variant => module::Type`, where
/// `module` is the estimator's name (its file, declared just above the list).
macro_rules! registry {
    ($($variant:ident => $module:ident :: $ty:ident,)*) => {
        /// Every estimator advcalc knows: verl 0.9.1's names (reference §5) in its registry's
        /// order, then advcalc's additions from the agent-RL tutorials and other trainers.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Estimator {
            $($variant,)*
        }

        impl Estimator {
            pub const ALL: [Estimator; [$(stringify!($variant)),*].len()] =
                [$(Estimator::$variant,)*];

            /// The name used by verl's config, by `--estimator` and by the estimator's file.
            pub fn name(self) -> &'static str {
                match self {
                    $(Estimator::$variant => stringify!($module),)*
                }
            }

            /// The estimator's declaration.
            pub fn info(self) -> &'static Info {
                match self {
                    $(Estimator::$variant => &<$module::$ty as Estimate>::INFO,)*
                }
            }

            pub(crate) fn row_stats(self, rows: &Rows<'_>, stats: &mut RowStats) -> Result<()> {
                match self {
                    $(Estimator::$variant => <$module::$ty as Estimate>::row_stats(rows, stats),)*
                }
            }

            pub(crate) fn batch(self, batch: &TrainingBatch<'_>, plan: &mut Plan) -> Result<()> {
                match self {
                    $(Estimator::$variant => <$module::$ty as Estimate>::batch(batch, plan),)*
                }
            }

            pub(crate) fn token_outputs(self, rows: &Rows<'_>, plan: &Plan) -> Result<Tokens> {
                match self {
                    $(Estimator::$variant => <$module::$ty as Estimate>::token_outputs(rows, plan),)*
                }
            }
        }
    };
}

// The estimators, one file each (declared here so that rustfmt sees them), then the list.
pub mod drgrpo;
pub mod gae;
pub mod gdpo;
pub mod gpg;
pub mod grpo;
pub mod grpo_batch_std;
pub mod grpo_passk;
pub mod grpo_vectorized;
pub mod maxrl;
pub mod openrlhf_dr_grpo;
pub mod openrlhf_group_norm;
pub mod openrlhf_reinforce_baseline;
pub mod openrlhf_rloo;
pub mod opo;
pub mod optimal_token_baseline;
pub mod reinforce;
pub mod reinforce_plus_plus;
pub mod reinforce_plus_plus_baseline;
pub mod remax;
pub mod rloo;
pub mod rloo_loo_std;
pub mod rloo_vectorized;
pub mod tir_optimal_token_baseline;
pub mod turn_gae;

registry! {
    // verl 0.9.1, in its registry's order
    Gae => gae::Gae,
    Grpo => grpo::Grpo,
    GrpoVectorized => grpo_vectorized::GrpoVectorized,
    GrpoPassk => grpo_passk::GrpoPassk,
    ReinforcePlusPlus => reinforce_plus_plus::ReinforcePlusPlus,
    ReinforcePlusPlusBaseline => reinforce_plus_plus_baseline::ReinforcePlusPlusBaseline,
    Remax => remax::Remax,
    Rloo => rloo::Rloo,
    RlooVectorized => rloo_vectorized::RlooVectorized,
    Opo => opo::Opo,
    Gpg => gpg::Gpg,
    OptimalTokenBaseline => optimal_token_baseline::OptimalTokenBaseline,
    TirOptimalTokenBaseline => tir_optimal_token_baseline::TirOptimalTokenBaseline,
    Gdpo => gdpo::Gdpo,
    // advcalc's additions (docs/conventions.md)
    Reinforce => reinforce::Reinforce,
    TurnGae => turn_gae::TurnGae,
    Drgrpo => drgrpo::Drgrpo,
    GrpoBatchStd => grpo_batch_std::GrpoBatchStd,
    Maxrl => maxrl::Maxrl,
    RlooLooStd => rloo_loo_std::RlooLooStd,
    OpenrlhfReinforceBaseline => openrlhf_reinforce_baseline::OpenrlhfReinforceBaseline,
    OpenrlhfGroupNorm => openrlhf_group_norm::OpenrlhfGroupNorm,
    OpenrlhfDrGrpo => openrlhf_dr_grpo::OpenrlhfDrGrpo,
    OpenrlhfRloo => openrlhf_rloo::OpenrlhfRloo,
}

impl Estimator {
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| {
                let names = |verl: bool| -> String {
                    Self::ALL
                        .iter()
                        .filter(|e| e.is_verl() == verl)
                        .map(|e| e.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let error = Error::usage(format!(
                    "unknown estimator `{name}` (verl 0.9.1 knows: {}; advcalc adds: {})",
                    names(true),
                    names(false)
                ));
                if name.contains(',') {
                    return error.with_hint(format!(
                        "one estimator at a time here; `advcalc compare -e {name} IN` puts several side by side"
                    ));
                }
                if name.eq_ignore_ascii_case("ppo") {
                    return error.with_hint("verl's PPO computes its advantages with `gae`");
                }
                match crate::nearest::nearest(name, Self::ALL.iter().map(|e| e.name())) {
                    Some(known) => error.with_hint(format!("did you mean `{known}`?")),
                    None => error,
                }
            })
    }

    /// Whether verl 0.9.1 has this estimator.
    pub fn is_verl(self) -> bool {
        self.info().source == VERL
    }

    /// Its declaration as a member of the GRPO/RLOO family; `None` outside it.
    pub fn member(self) -> Option<&'static conventions::Member> {
        match &self.info().family {
            Family::Convention(member) => Some(member),
            Family::Independent | Family::Openrlhf => None,
        }
    }

    /// The OpenRLHF token-pipeline estimators (`estimators::openrlhf`).
    pub fn is_openrlhf(self) -> bool {
        match self.info().family {
            Family::Openrlhf => true,
            Family::Independent | Family::Convention(_) => false,
        }
    }
}

/// Pass 2 of an outcome estimator: each row's scalar broadcast onto its mask; returns equal
/// advantages.
pub fn broadcast_scalars(rows: &Rows<'_>, plan: &Plan) -> Tokens {
    let mut advantages = vec![0.0f32; rows.mask.len()];
    let first = rows.group.first_row;
    for i in 0..rows.rows() {
        let s = rows.span(i);
        broadcast_outcome(
            plan.scalar(first + i),
            &rows.mask[s.clone()],
            &mut advantages[s],
        );
    }
    Tokens {
        advantages,
        returns: None,
    }
}

/// `advantages[t] = a · m[t]`: an outcome estimator's row scalar under the row's mask.
pub fn broadcast_outcome(a: f32, mask: &[f32], out: &mut [f32]) {
    for (o, &m) in out.iter_mut().zip(mask) {
        *o = a * m;
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use crate::data::GroupKey;
    use crate::estimators::groups::Grouping;

    pub fn grouping(labels: &[&str]) -> Grouping {
        let keys: Vec<GroupKey> = labels.iter().map(|l| GroupKey::Str((*l).into())).collect();
        Grouping::by_key(keys.iter())
    }

    /// Scores as verl holds them: f32 values.
    pub fn f32_scores(s: &[f32]) -> Vec<f64> {
        s.iter().map(|&x| x as f64).collect()
    }

    /// `|a − e| ≤ 1e-6 + 1e-5·|e|` element-wise (docs/conventions.md's tolerance), through
    /// the shared oracle.
    pub fn assert_close<A: Into<f64> + Copy>(actual: &[A], expected: &[f64]) {
        crate::test_support::assert_close("estimator", actual, expected, 1e-6, 1e-5);
    }
}
