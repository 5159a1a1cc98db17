//! verl's KL-in-reward keys (docs/reference/verl-0.9.1.md §2): `use_kl_in_reward`, `kl_penalty` and `kl_ctrl`,
//! read into the typed [`KlEstimator`] and [`KlController`]. verl builds the estimator and
//! the controller only with KL in the reward, so only then are their names and the adaptive
//! horizon checked; otherwise the keys are only type-checked, as verl's dataclass does.

use super::section::Section;
use crate::error::Result;
use crate::settings::{Invalid, Keys};
use crate::shaping::kl::{KlController, KlEstimator};

/// KL in the reward: how each token's KL is estimated and how β is controlled.
#[derive(Debug, Clone, PartialEq)]
pub struct KlInReward {
    /// `kl_penalty`.
    pub estimator: KlEstimator,
    /// `kl_ctrl` (`type`, `kl_coef`, and for the adaptive controller `target_kl`, `horizon`).
    pub controller: KlController,
}

/// verl's default `algorithm.kl_ctrl.kl_coef`.
pub const KL_COEF: f64 = 0.001;
/// verl's default `algorithm.kl_ctrl.horizon`.
pub const HORIZON: i64 = 10000;
/// verl's default `algorithm.kl_ctrl.target_kl`.
pub const TARGET_KL: f64 = 0.1;

/// Read `kl_penalty` and `kl_ctrl` from the algorithm section; `None` without KL in reward.
pub fn read(s: &mut Section<'_>, use_kl_in_reward: bool) -> Result<Option<KlInReward>> {
    let penalty = s.string("kl_penalty", "kl")?;
    let mut k = s.subsection_or_empty("kl_ctrl")?;
    let kind = k.string("type", "fixed")?;
    let kl_coef = k.finite("kl_coef", KL_COEF)?;
    let horizon = k.int("horizon", HORIZON)?;
    let target_kl = k.finite("target_kl", TARGET_KL)?;
    let controller = if use_kl_in_reward {
        Some(controller(&kind, kl_coef, target_kl, horizon).map_err(|e| k.reject(e))?)
    } else {
        None
    };
    k.finish()?;
    let Some(controller) = controller else {
        return Ok(None);
    };
    let estimator = estimator(&penalty).map_err(|e| s.reject(e))?;
    Ok(Some(KlInReward {
        estimator,
        controller,
    }))
}

/// verl's `kl_penalty` names (§2.1); a trailing `+` (straight-through gradient) has the base
/// estimator's value.
pub fn estimator(name: &str) -> Result<KlEstimator, Invalid> {
    let base = name.strip_suffix('+').unwrap_or(name);
    match base {
        "kl" | "k1" => Ok(KlEstimator::K1),
        "abs" => Ok(KlEstimator::Abs),
        "mse" | "k2" => Ok(KlEstimator::K2),
        "low_var_kl" | "k3" => Ok(KlEstimator::K3),
        "full" => Err(Invalid::new(
            "kl_penalty",
            "`full` needs the full vocabulary logits, which a rollout dump does not hold (verl raises NotImplementedError for it too)",
        )
        .hint("use one of kl, abs, mse, low_var_kl (k1, k2, k3)")),
        other => Err(Invalid::new(
            "kl_penalty",
            format!("unknown estimator `{other}`; verl raises NotImplementedError"),
        )
        .hint(
            "verl 0.9.1 knows kl, k1, abs, mse, k2, low_var_kl and k3, each also with a `+` suffix",
        )),
    }
}

/// `get_kl_controller`: `fixed` or `adaptive` (whose horizon must be positive).
pub fn controller(
    kind: &str,
    kl_coef: f64,
    target_kl: f64,
    horizon: i64,
) -> Result<KlController, Invalid> {
    match kind {
        "fixed" => Ok(KlController::Fixed { value: kl_coef }),
        "adaptive" if horizon <= 0 => Err(Invalid::new(
            "horizon",
            format!(
                "must be larger than 0 for the adaptive controller, got {horizon} (verl asserts this)"
            ),
        )),
        "adaptive" => Ok(KlController::Adaptive {
            value: kl_coef,
            target: target_kl,
            horizon: horizon as f64,
        }),
        other => Err(Invalid::new(
            "type",
            format!("unknown controller `{other}`; verl raises NotImplementedError"),
        )
        .hint("kl_ctrl.type is fixed or adaptive")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_plus_variants() {
        assert_eq!(estimator("low_var_kl").unwrap(), KlEstimator::K3);
        assert_eq!(estimator("k3+").unwrap(), KlEstimator::K3);
        assert_eq!(estimator("mse").unwrap(), KlEstimator::K2);
        assert!(estimator("full").unwrap_err().message.contains("logits"));
        assert!(estimator("k4").unwrap_err().hint.is_some());
        for e in [
            KlEstimator::K1,
            KlEstimator::Abs,
            KlEstimator::K2,
            KlEstimator::K3,
        ] {
            assert_eq!(estimator(e.name()).unwrap(), e);
        }
    }

    #[test]
    fn controllers() {
        assert_eq!(
            controller("fixed", 0.2, 0.1, 0).unwrap(),
            KlController::Fixed { value: 0.2 }
        );
        assert!(matches!(
            controller("adaptive", 0.001, 0.1, 10000).unwrap(),
            KlController::Adaptive { horizon, .. } if horizon == 10000.0
        ));
        assert_eq!(
            controller("adaptive", 0.001, 0.1, 0).unwrap_err().key,
            "horizon"
        );
        assert_eq!(controller("pid", 0.001, 0.1, 1).unwrap_err().key, "type");
    }
}
