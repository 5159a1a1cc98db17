//! Every policy loss verl 0.9.1 registers (`trainer/ppo/core_algos.py`, docs/reference/loss-replay.md §1), per
//! token: its value ℓ (before aggregation, as verl's `pg_losses` tensor holds it), dℓ/d log π
//! (what autograd gives through verl's clamps and stop-gradients) and the flags its metrics
//! count. With Δ = log π − log π_old, r = exp(clamp(Δ, ±20)), ε_l/ε_h the clip ratios, c
//! `clip_ratio_c`, sg a stop-gradient:
//!
//! | mode | ℓ | dℓ/d log π |
//! | --- | --- | --- |
//! | `vanilla` (:1285) | max(−A·r, −A·clip(r, 1−ε_l, 1+ε_h)); where A < 0, min(that, −A·c) | −A·r on the branch taken (0 when clipped; ties split as torch does) |
//! | `dppo_tv`, `dppo_kl` (:1379, :1460) | −A·sg(min(r, c))·log π·valid | −A·min(r, c)·valid |
//! | `gspo` (:1545) | PPO clip on s = exp(min(sg(s̄_i) + log π − sg log π, 10)), s̄_i the row's mean Δ | −A·s on the branch taken |
//! | `sapo` (:1622) | −A·σ(τ(r − 1))·4/τ, τ = τ_pos if A > 0 else τ_neg | −A·4·σ'·r |
//! | `gpg` (:1707) | −A·log π | −A |
//! | `kl_cov` (:1848) | −A·e^Δ, plus `ppo_kl_coef`·\|Δ\| on the top-k covariance tokens | −A·e^Δ (+ coef·sign Δ) |
//! | `geo_mean` (:1928) | per row −Ā_i·exp(mean_t of the sign-clipped Δ) | through the row mean |
//! | `dro` (:2014) | −(A·log π − ½β·Δ²) | −A + β·Δ |
//! | `cispo` (:2047) | −sg(clip(r, 1−ε_l, 1+ε_h))·A·log π | −clip(r)·A |
//! | `bypass_mode` (:2413) | `ppo_clip`: vanilla against the rollout; `reinforce`: −A·log π·w | |
//!
//! `clip_cov` is not here: verl picks its tokens with `torch.randperm`, which no replay
//! reproduces; the configuration refuses it.
//!
//! One file per loss, named as its `loss_mode`, holds its maths and its declaration ([`LossInfo`],
//! through [`PolicyLoss`]); the `registry!` list below names each once and generates
//! [`LossMode`] and every dispatch over the losses. Adding a loss: write `policy/NAME.rs`
//! with a unit struct implementing [`PolicyLoss`], declare `pub mod NAME;` and add
//! `Variant => NAME::Struct,` to the list (and its keys to `config/actor.rs` if it reads new
//! ones).

pub mod bypass_mode;
pub mod cispo;
pub mod dppo_kl;
pub mod dppo_tv;
pub mod dro;
pub mod geo_mean;
pub mod gpg;
pub mod gspo;
pub mod kl_cov;
pub mod sapo;
mod torch;
pub mod vanilla;

pub use bypass_mode::BypassLoss;

/// Where verl defines the losses.
pub const SOURCE: &str = "verl 0.9.1 trainer/ppo/core_algos.py";

/// Which of verl's metrics a loss function returns (the others are absent from its logged
/// metrics, not 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metrics {
    /// `actor/pg_clipfrac`.
    pub pg_clipfrac: bool,
    /// `actor/pg_clipfrac_lower`.
    pub pg_clipfrac_lower: bool,
    /// `actor/ppo_kl`.
    pub ppo_kl: bool,
}

impl Metrics {
    /// All three.
    pub const ALL: Metrics = Metrics {
        pg_clipfrac: true,
        pg_clipfrac_lower: true,
        ppo_kl: true,
    };
    /// `ppo_kl` alone.
    pub const PPO_KL: Metrics = Metrics {
        pg_clipfrac: false,
        pg_clipfrac_lower: false,
        ppo_kl: true,
    };
    /// None of them.
    pub const NONE: Metrics = Metrics {
        pg_clipfrac: false,
        pg_clipfrac_lower: false,
        ppo_kl: false,
    };

    /// The names of those returned, as verl logs them.
    pub fn names(self) -> Vec<&'static str> {
        [
            (self.pg_clipfrac, "actor/pg_clipfrac"),
            (self.pg_clipfrac_lower, "actor/pg_clipfrac_lower"),
            (self.ppo_kl, "actor/ppo_kl"),
        ]
        .into_iter()
        .filter_map(|(has, name)| has.then_some(name))
        .collect()
    }
}

/// What a loss's value is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossScope {
    /// Each token's ℓ from the token alone ([`PolicyLoss::token`]).
    Token,
    /// Each token's ℓ needs its whole row (`gspo`'s row mean, `geo_mean`'s row loss): the
    /// loss's own row function, called by `loss::row`.
    Row,
}

/// A loss's declaration: everything `advcalc losses`, the configuration and the dispatch
/// need to know about it. The name is the file's (the registry adds it).
#[derive(Debug, Clone, Copy)]
pub struct LossInfo {
    /// What it computes, in one line.
    pub summary: &'static str,
    /// Its line in verl's `core_algos.py` ([`SOURCE`]).
    pub line: u32,
    /// For `bypass_mode`'s two losses: the `algorithm.rollout_correction.loss_type` that
    /// selects this one.
    pub loss_type: Option<&'static str>,
    pub scope: LossScope,
    /// The metrics verl's loss function returns.
    pub metrics: Metrics,
    /// The configuration keys it reads (under `actor_rollout_ref.actor` unless they say
    /// otherwise); `clip_ratio_low`/`clip_ratio_high` fall back to `clip_ratio`.
    pub parameters: &'static [&'static str],
    /// Why its clip ratios must be ≥ 0, so that its clip range holds the unchanged policy
    /// (the configuration's message when `clip_ratio_low`/`high` is negative); `None`: it
    /// reads no clip range.
    pub clip_range: Option<&'static str>,
    /// The refusal of its name as `policy_loss.loss_mode`: (message, hint); `None`: accepted.
    pub refused: Option<(&'static str, &'static str)>,
    /// What else to know about its replay.
    pub notes: &'static [&'static str],
}

impl LossInfo {
    /// Where verl defines it: `core_algos.py:LINE`.
    pub fn source(&self) -> String {
        format!("{SOURCE}:{}", self.line)
    }
}

/// One policy loss: its declaration and, for a token-wise one, each token's term. The
/// engine calls it through [`LossMode`]'s generated dispatch.
pub trait PolicyLoss {
    const INFO: LossInfo;

    /// Its own pass-1 statistics of IN's rows, beside the common per-row ones (kl_cov: each
    /// row's mask-1 tokens, from which the plan makes each micro-batch's choice); `()` for a
    /// loss that needs none. The engine carries them as an [`AnyLossStats`].
    type Stats: LossStats;

    /// Pass 1: its statistics of one row group's rows, appended to `stats` in row order.
    fn row_stats(_rows: &LossRows<'_>, _stats: &mut Self::Stats) {}

    /// One token's term under a token-wise loss ([`LossScope::Token`]); `kl_cov`'s chosen
    /// tokens add [`kl_cov::extra`], and an IS weight is applied by the caller as for every
    /// loss. A row-wise loss ([`LossScope::Row`]) is never called here: `loss::row` calls its
    /// own row function.
    fn token(_p: &PolicyParams, _a: f32, _logp: f32, _old: f32) -> Term {
        unreachable!("a row-wise loss works per row")
    }
}

/// What a loss keeps of its own between the passes ([`PolicyLoss::Stats`]): built per row
/// group and appended in row-group order.
pub trait LossStats: std::fmt::Debug + Clone + Default + PartialEq + Send + Sync {
    /// Append the next row group's statistics.
    fn append(&mut self, next: Self);
}

impl LossStats for () {
    fn append(&mut self, _: ()) {}
}

/// One row group as a loss's pass 1 sees it: IN's advantages and log-probs (the current
/// policy's, else the old one's), and the mask after rejection.
pub struct LossRows<'a> {
    /// The decoded row group (its rows' spans).
    pub group: &'a crate::data::RowGroup,
    /// IN's `advantages`.
    pub advantages: &'a [f32],
    /// `log_probs`, or `old_log_probs` without them.
    pub log_probs: &'a [f32],
    /// The response mask after rejection.
    pub mask: &'a [f32],
}

/// The clip ranges and each loss's own parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PolicyParams {
    /// `clip_ratio_low` (falling back to `clip_ratio`).
    pub clip_low: f64,
    /// `clip_ratio_high` (falling back to `clip_ratio`).
    pub clip_high: f64,
    /// `clip_ratio_c`: the dual-clip bound (> 1), and dppo's ratio cap.
    pub clip_c: f64,
    /// sapo's `tau_pos`, `tau_neg`.
    pub tau_pos: f64,
    pub tau_neg: f64,
    /// `policy_loss.kl_cov_ratio`, `policy_loss.ppo_kl_coef` (kl_cov).
    pub kl_cov_ratio: f64,
    pub ppo_kl_coef: f64,
    /// `policy_loss.dro_beta` (> 0 for dro).
    pub dro_beta: f64,
}

/// One token's loss: ℓ, dℓ/d log π, whether it counts as clipped (`pg_clipfrac`) and as
/// dual-clipped (`pg_clipfrac_lower`), and its term of `ppo_kl`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Term {
    pub loss: f32,
    pub grad: f32,
    pub clipped: bool,
    pub lower: bool,
    pub kl: f32,
}

/// Generates [`LossMode`] and its dispatch from one list: `Variant => module::Type`, where
/// `module` is the loss's `loss_mode` name (its file, declared above).
macro_rules! registry {
    ($($variant:ident => $module:ident :: $ty:ident,)*) => {
        /// `policy_loss.loss_mode`: every policy loss advcalc replays, in verl 0.9.1's
        /// registry order (`clip_cov` aside); bypass mode's loss is one of two, by
        /// `algorithm.rollout_correction.loss_type`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum LossMode {
            $(
                #[doc = concat!("[`", stringify!($module), "::", stringify!($ty), "`].")]
                $variant,
            )*
        }

        /// One loss's own pass-1 statistics ([`PolicyLoss::Stats`]), as the engine carries
        /// them (`RowStats::loss`).
        #[derive(Debug, Clone, PartialEq)]
        pub enum AnyLossStats {
            $(
                #[doc = concat!("[`", stringify!($module), "::", stringify!($ty), "`]'s.")]
                $variant(<$module::$ty as PolicyLoss>::Stats),
            )*
        }

        impl AnyLossStats {
            /// Append the next row group's statistics; `false` (nothing appended) when they
            /// are another loss's.
            pub fn append(&mut self, next: AnyLossStats) -> bool {
                match (self, next) {
                    $((AnyLossStats::$variant(mine), AnyLossStats::$variant(theirs)) => {
                        mine.append(theirs);
                        true
                    })*
                    #[allow(unreachable_patterns)]
                    _ => false,
                }
            }
        }

        impl LossMode {
            /// Every loss, in the list's order.
            pub const ALL: [LossMode; [$(stringify!($variant)),*].len()] =
                [$(LossMode::$variant,)*];

            /// verl's name (`bypass_mode` for both bypass losses), that of its file.
            pub fn name(self) -> &'static str {
                match self {
                    $(LossMode::$variant => stringify!($module),)*
                }
            }

            /// The loss's declaration.
            pub fn info(self) -> &'static LossInfo {
                match self {
                    $(LossMode::$variant => &<$module::$ty as PolicyLoss>::INFO,)*
                }
            }

            /// Pass 1: the loss's own statistics of one row group ([`PolicyLoss::row_stats`]).
            pub fn row_stats(self, rows: &LossRows<'_>) -> AnyLossStats {
                match self {
                    $(LossMode::$variant => {
                        let mut stats = Default::default();
                        <$module::$ty as PolicyLoss>::row_stats(rows, &mut stats);
                        AnyLossStats::$variant(stats)
                    })*
                }
            }

            /// One token's term under a token-wise loss ([`PolicyLoss::token`]).
            pub fn token(self, p: &PolicyParams, a: f32, logp: f32, old: f32) -> Term {
                match self {
                    $(LossMode::$variant => <$module::$ty as PolicyLoss>::token(p, a, logp, old),)*
                }
            }
        }
    };
}

registry! {
    Vanilla => vanilla::Vanilla,
    DppoTv => dppo_tv::DppoTv,
    DppoKl => dppo_kl::DppoKl,
    Gspo => gspo::Gspo,
    Sapo => sapo::Sapo,
    Gpg => gpg::GpgLoss,
    KlCov => kl_cov::KlCov,
    GeoMean => geo_mean::GeoMean,
    Dro => dro::Dro,
    Cispo => cispo::Cispo,
    // bypass mode's two losses, under one name
    BypassPpoClip => bypass_mode::BypassPpoClip,
    BypassReinforce => bypass_mode::BypassReinforce,
}

impl LossMode {
    /// The loss named `name` (the first of bypass mode's two for `bypass_mode`, whose
    /// [`LossInfo::refused`] the configuration checks); `None`: advcalc replays no such loss.
    pub fn from_name(name: &str) -> Option<LossMode> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The `loss_mode` names, each once, in the list's order.
    pub fn names() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for m in Self::ALL {
            if !names.contains(&m.name()) {
                names.push(m.name());
            }
        }
        names
    }

    /// Bypass mode's loss for `algorithm.rollout_correction.loss_type`.
    pub fn bypass(loss: BypassLoss) -> LossMode {
        match loss {
            BypassLoss::PpoClip => LossMode::BypassPpoClip,
            BypassLoss::Reinforce => LossMode::BypassReinforce,
        }
    }

    /// Which of verl's metrics the loss function returns: (`pg_clipfrac`,
    /// `pg_clipfrac_lower`, `ppo_kl`).
    pub fn metrics(self) -> (bool, bool, bool) {
        let m = self.info().metrics;
        (m.pg_clipfrac, m.pg_clipfrac_lower, m.ppo_kl)
    }
}

/// Parameters the tests share: DAPO's clip-higher, verl's defaults otherwise.
#[cfg(test)]
pub const TEST_PARAMS: PolicyParams = PolicyParams {
    clip_low: 0.2,
    clip_high: 0.28,
    clip_c: 3.0,
    tau_pos: 1.0,
    tau_neg: 1.05,
    kl_cov_ratio: 0.0002,
    ppo_kl_coef: 0.1,
    dro_beta: 0.1,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::assert_close;

    // At ratio 1 every loss but sapo has vanilla's gradient −A (docs/reference/loss-replay.md §1).
    #[test]
    fn at_ratio_one_the_gradient_is_minus_a() {
        for mode in [
            LossMode::Vanilla,
            LossMode::DppoTv,
            LossMode::DppoKl,
            LossMode::Gpg,
            LossMode::KlCov,
            LossMode::Dro,
            LossMode::Cispo,
        ] {
            for a in [0.7f32, -1.3] {
                let t = mode.token(&TEST_PARAMS, a, -0.5, -0.5);
                assert_close(mode.name(), &[t.grad], &[-a], 1e-6, 0.0);
            }
        }
    }

    // The registry: verl 0.9.1's names (clip_cov aside) in its registry's order, each loss
    // found by its name, the row-wise ones gspo and geo_mean, the metrics as verl returns them.
    #[test]
    fn the_registry_holds_verls_losses() {
        assert_eq!(
            LossMode::names(),
            [
                "vanilla",
                "dppo_tv",
                "dppo_kl",
                "gspo",
                "sapo",
                "gpg",
                "kl_cov",
                "geo_mean",
                "dro",
                "cispo",
                "bypass_mode",
            ]
        );
        for m in LossMode::ALL {
            let info = m.info();
            assert_eq!(LossMode::from_name(m.name()).unwrap().name(), m.name());
            assert!(!info.summary.is_empty() && info.line > 0, "{}", m.name());
            assert_eq!(
                info.scope == LossScope::Row,
                matches!(m, LossMode::Gspo | LossMode::GeoMean)
            );
            assert_eq!(
                info.refused.is_some() || info.loss_type.is_some(),
                m.name() == "bypass_mode"
            );
        }
        assert_eq!(LossMode::from_name("clip_cov"), None);
        assert_eq!(LossMode::Gpg.metrics(), (false, false, false));
        for m in [LossMode::KlCov, LossMode::Dro, LossMode::BypassReinforce] {
            assert_eq!(m.metrics(), (false, false, true), "{}", m.name());
        }
        assert_eq!(LossMode::Vanilla.metrics(), (true, true, true));
        assert_eq!(
            LossMode::bypass(BypassLoss::Reinforce),
            LossMode::BypassReinforce
        );
    }
}
