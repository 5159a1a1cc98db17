//! The advantage estimators. Each one lives in the file named after it and works on plain
//! slices and scalars of one training batch; the driver feeds it and the I/O layer converts.

pub mod gae;
pub mod gdpo;
pub mod gpg;
pub mod grpo;
pub mod grpo_passk;
pub mod grpo_vectorized;
pub mod opo;
pub mod optimal_token_baseline;
pub mod reinforce_plus_plus;
pub mod reinforce_plus_plus_baseline;
pub mod remax;
pub mod rloo;
pub mod rloo_vectorized;
pub mod tir_optimal_token_baseline;

use crate::error::{Error, Result};

/// Every estimator name verl 0.9.1 registers (reference §5), in its registry's order.
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
}

impl Estimator {
    pub const ALL: [Estimator; 14] = [
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
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|e| e.name()).collect();
                Error::usage(format!(
                    "unknown estimator `{name}` (verl 0.9.1 knows: {})",
                    known.join(", ")
                ))
            })
    }

    /// Whether the estimator groups rows by `uid`.
    pub fn needs_uid(self) -> bool {
        !matches!(
            self,
            Estimator::Gae | Estimator::ReinforcePlusPlus | Estimator::Remax
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
    use crate::groups::{GroupKey, Grouping};

    pub fn grouping(labels: &[&str]) -> Grouping {
        let keys: Vec<GroupKey> = labels.iter().map(|l| GroupKey::Str((*l).into())).collect();
        Grouping::by_key(keys.iter())
    }

    /// Scores as verl holds them: f32 values.
    pub fn f32_scores(s: &[f32]) -> Vec<f64> {
        s.iter().map(|&x| x as f64).collect()
    }
}
