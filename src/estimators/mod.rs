//! The advantage estimators. Each one lives in the file named after it and works on plain
//! slices and scalars of one training batch; the driver feeds it and the I/O layer converts.

pub mod conventions;
pub mod drgrpo;
pub mod gae;
pub mod gdpo;
pub mod gpg;
pub mod groups;
pub mod grpo;
pub mod grpo_batch_std;
pub mod grpo_passk;
pub mod grpo_vectorized;
pub mod maxrl;
pub mod moments;
pub mod openrlhf;
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
pub mod sessions;
pub mod tir_optimal_token_baseline;
pub mod turn_gae;

use crate::error::{Error, Result};

/// Every estimator name verl 0.9.1 registers (reference §5), in its registry's order, then
/// advcalc's additions from the agent-RL tutorials and other trainers (`docs/conventions.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Estimator {
    Gae,
    Grpo,
    GrpoVectorized,
    GrpoPassk,
    ReinforcePlusPlus,
    ReinforcePlusPlusBaseline,
    Remax,
    Rloo,
    RlooVectorized,
    Opo,
    Gpg,
    OptimalTokenBaseline,
    TirOptimalTokenBaseline,
    Gdpo,
    // advcalc additions (not verl names)
    Reinforce,
    TurnGae,
    Drgrpo,
    GrpoBatchStd,
    Maxrl,
    RlooLooStd,
    OpenrlhfReinforceBaseline,
    OpenrlhfGroupNorm,
    OpenrlhfDrGrpo,
    OpenrlhfRloo,
}

impl Estimator {
    /// How many of [`Estimator::ALL`] (the first ones) are verl 0.9.1's own names.
    pub const VERL_COUNT: usize = 14;

    pub const ALL: [Estimator; 24] = [
        Estimator::Gae,
        Estimator::Grpo,
        Estimator::GrpoVectorized,
        Estimator::GrpoPassk,
        Estimator::ReinforcePlusPlus,
        Estimator::ReinforcePlusPlusBaseline,
        Estimator::Remax,
        Estimator::Rloo,
        Estimator::RlooVectorized,
        Estimator::Opo,
        Estimator::Gpg,
        Estimator::OptimalTokenBaseline,
        Estimator::TirOptimalTokenBaseline,
        Estimator::Gdpo,
        Estimator::Reinforce,
        Estimator::TurnGae,
        Estimator::Drgrpo,
        Estimator::GrpoBatchStd,
        Estimator::Maxrl,
        Estimator::RlooLooStd,
        Estimator::OpenrlhfReinforceBaseline,
        Estimator::OpenrlhfGroupNorm,
        Estimator::OpenrlhfDrGrpo,
        Estimator::OpenrlhfRloo,
    ];

    /// The name used by verl's config, by `--estimator` and by the estimator's file.
    pub fn name(self) -> &'static str {
        match self {
            Estimator::Gae => "gae",
            Estimator::Grpo => "grpo",
            Estimator::GrpoVectorized => "grpo_vectorized",
            Estimator::GrpoPassk => "grpo_passk",
            Estimator::ReinforcePlusPlus => "reinforce_plus_plus",
            Estimator::ReinforcePlusPlusBaseline => "reinforce_plus_plus_baseline",
            Estimator::Remax => "remax",
            Estimator::Rloo => "rloo",
            Estimator::RlooVectorized => "rloo_vectorized",
            Estimator::Opo => "opo",
            Estimator::Gpg => "gpg",
            Estimator::OptimalTokenBaseline => "optimal_token_baseline",
            Estimator::TirOptimalTokenBaseline => "tir_optimal_token_baseline",
            Estimator::Gdpo => "gdpo",
            Estimator::Reinforce => "reinforce",
            Estimator::TurnGae => "turn_gae",
            Estimator::Drgrpo => "drgrpo",
            Estimator::GrpoBatchStd => "grpo_batch_std",
            Estimator::Maxrl => "maxrl",
            Estimator::RlooLooStd => "rloo_loo_std",
            Estimator::OpenrlhfReinforceBaseline => "openrlhf_reinforce_baseline",
            Estimator::OpenrlhfGroupNorm => "openrlhf_group_norm",
            Estimator::OpenrlhfDrGrpo => "openrlhf_dr_grpo",
            Estimator::OpenrlhfRloo => "openrlhf_rloo",
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| {
                let names = |es: &[Estimator]| -> String {
                    es.iter().map(|e| e.name()).collect::<Vec<_>>().join(", ")
                };
                let (verl, ours) = Self::ALL.split_at(Self::VERL_COUNT);
                Error::usage(format!(
                    "unknown estimator `{name}` (verl 0.9.1 knows: {}; advcalc adds: {})",
                    names(verl),
                    names(ours)
                ))
            })
    }

    /// Whether the estimator groups rows by `uid`.
    pub fn needs_uid(self) -> bool {
        !matches!(
            self,
            Estimator::Gae
                | Estimator::ReinforcePlusPlus
                | Estimator::Remax
                | Estimator::Reinforce
                | Estimator::TurnGae
        )
    }

    /// Whether the estimator reads the `values` column (a critic).
    pub fn needs_values(self) -> bool {
        matches!(self, Estimator::Gae | Estimator::TurnGae)
    }

    /// The OpenRLHF token-pipeline estimators (`estimators::openrlhf`).
    pub fn is_openrlhf(self) -> bool {
        matches!(
            self,
            Estimator::OpenrlhfReinforceBaseline
                | Estimator::OpenrlhfGroupNorm
                | Estimator::OpenrlhfDrGrpo
                | Estimator::OpenrlhfRloo
        )
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

    /// `|a − e| ≤ 1e-6 + 1e-5·|e|` element-wise (docs/conventions.md's tolerance).
    pub fn assert_close<A: Into<f64> + Copy + std::fmt::Debug>(actual: &[A], expected: &[f64]) {
        assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
        for (&a, &e) in actual.iter().zip(expected) {
            let a: f64 = a.into();
            assert!(
                (a - e).abs() <= 1e-6 + 1e-5 * e.abs(),
                "{actual:?} vs {expected:?}"
            );
        }
    }
}
