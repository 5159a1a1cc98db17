//! The advantage estimators: one file per estimator, named as its `-e` value, holding its
//! maths (plain slices and scalars) and its [`Estimate`] declaration; the `registry!` list below
//! lists them once, and every dispatch over estimators is generated from that list.
//!
//! Adding an estimator: write `estimators/NAME.rs` with a unit struct implementing
//! [`Estimate`] (its [`Info`], its batch work, its token outputs and, where it needs them, its
//! own pass-1 statistics and plan part: types implementing [`OwnStats`] and [`OwnPlan`]),
//! then declare `pub mod NAME;` and add `Variant => NAME::Struct,` to the list below, and
//! regenerate the docs' tables from its declaration (`ADVCALC_BLESS=1 cargo test --test docs`).

pub mod context;
pub mod conventions;
pub mod extensions;
pub mod fingerprint;
pub mod groups;
pub mod moments;
pub mod openrlhf;
pub mod sessions;
pub mod skyrl_normalize;
pub mod state;

use std::hash::Hasher;

use crate::error::{Error, Result};
use crate::settings::SettingList;

pub use context::{EstimatorPlan, RowStats, Rows, Settings, Stamp, Tokens, TrainingBatch};
pub use extensions::Extensions;
pub use state::{OwnPlan, OwnStats};

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
    /// One scalar per row broadcast onto the mask, or per-token outputs.
    pub kind: Kind,
    /// The input columns it reads beyond `response_mask` and the scores.
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
    /// It reads the rewards token by token under the response mask, so a reward on a mask-0
    /// token (a tool token, or the last position of a row that ends in one) is dropped; the
    /// others sum every token's reward into the row's score. `inspect` warns of such rewards
    /// only for these.
    pub rewards_under_mask: bool,
    /// Its family: a convention member with its rules, an OpenRLHF estimator, or neither.
    pub family: Family,
    /// verl's `algorithm.*` keys it ignores although verl's trainer has them, each with what
    /// it does instead: a key set away from its default gets that note (`ESTIMATOR WHY`)
    /// instead of "not read".
    pub ignores: &'static [(&'static str, &'static str)],
    /// Its row in `docs/estimators.md`'s overview tables, which are generated from it.
    pub overview: Overview,
}

/// What `docs/estimators.md`'s overview tables say of an estimator beyond its columns: its
/// outputs and its edge cases, as the text of each cell (`tests/docs.rs` keeps the tables
/// and these in step).
#[derive(Debug, Clone, Copy)]
pub struct Overview {
    /// Its section in `docs/conventions.md` ("A1", "B5"), shown after its name; `None` for
    /// verl's estimators, which that file does not describe.
    pub section: Option<&'static str>,
    /// The "also needs" cell when the names of [`Info::columns`] do not say it all (optional
    /// or alternative columns, when a column is read); `None`: those names, or "—".
    pub needs: Option<&'static str>,
    /// What its `returns` output holds ("= advantages", "A_raw + V").
    pub returns: &'static str,
    /// The whitening it applies to its advantages ("no", "batch").
    pub whitening: &'static str,
    /// Whether its advantages are zero outside the response mask.
    pub masked: bool,
    /// What the table adds after the masked cell ("held up to the last valid token").
    pub masked_note: Option<&'static str>,
    /// What a group of one row gets ("s", "**error**", "n/a" without groups).
    pub singleton: &'static str,
    /// Settings under which the additions table lists it as an estimator of its own, with
    /// that row (`gae` with `whiten_advantages: false`, A2): the setting as written, then the
    /// row, whose `needs: None` means the estimator's columns.
    pub variants: &'static [(&'static str, Overview)],
}

impl Info {
    /// Whether it reads `column` (beyond the mask and scores every estimator reads).
    pub fn reads(&self, column: Column) -> bool {
        self.columns.contains(&column)
    }

    /// Whether it runs on sequence-level input (one score per row, no tokens).
    pub fn sequence_level(&self) -> bool {
        self.needs_tokens.is_none()
    }
}

/// One estimator: its declaration, what it keeps of its own between the passes, and its work
/// in each pass. The engine calls these through [`Estimator`]'s generated dispatch.
pub trait Estimate {
    const INFO: Info;

    /// Its own pass-1 statistics (gae's per-row moments, OTB's group column sums), beside
    /// the common per-row ones [`RowStats`] keeps; `()` for most estimators.
    type Stats: OwnStats;
    /// Its own part of the plan (a whitening per step, OTB's baselines), beside each row's
    /// scalar; `()` for most estimators.
    type Plan: OwnPlan;
    /// Its own settings, declared in its file with `settings!` (key, type, default, doc) and
    /// read as `settings.ext.estimators.NAME.FIELD`; `()` for an estimator that reads only
    /// verl's keys and advcalc's shared ones (`config/extensions.rs`).
    type Options: SettingList;

    /// Pass 1: its own statistics of one row group (a fresh value per row group; the engine
    /// appends them in row-group order).
    fn row_stats(_rows: &Rows<'_>, _stats: &mut Self::Stats) -> Result<()> {
        Ok(())
    }

    /// Between the passes, once per training batch: group and batch statistics into `plan`.
    fn batch(
        batch: &TrainingBatch<'_, Self::Stats>,
        plan: &mut EstimatorPlan<Self::Plan>,
    ) -> Result<()>;

    /// After the last training batch: the pass-1 statistics pass 2 reads, moved into the
    /// plan (OTB's group column sums). Nothing by default.
    fn keep(_stats: Self::Stats, _plan: &mut Self::Plan) {}

    /// Pass 2: the token outputs of one row group. Outcome estimators ([`Kind::Outcome`])
    /// broadcast their row scalars with [`broadcast_scalars`]; there is no default, so a
    /// token-level estimator cannot forget its own.
    fn token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<Self::Plan>) -> Result<Tokens>;
}

/// Between the passes for estimator `E`: its batch work per training batch (`batches`: each
/// step's global rows), then what pass 2 keeps of its own statistics.
fn plan_of<E: Estimate>(
    settings: &Settings<'_>,
    stats: &RowStats,
    own: E::Stats,
    batches: &[(Option<i64>, Vec<usize>)],
    file: &str,
) -> Result<EstimatorPlan<E::Plan>> {
    let mut plan = EstimatorPlan::new(stats.rows());
    for (step, rows) in batches {
        let batch = TrainingBatch {
            settings,
            stats,
            own: &own,
            step: *step,
            rows,
            file,
        };
        E::batch(&batch, &mut plan)?;
    }
    E::keep(own, &mut plan.own);
    Ok(plan)
}

/// Generates [`Estimator`] and its dispatch from one list: `Variant => module::Type`, where
/// `module` is the estimator's name (its file, declared just above the list), with the
/// engine's carriers of each estimator's own state ([`AnyEstimatorStats`], [`AnyEstimatorPlan`]).
macro_rules! registry {
    ($($variant:ident => $module:ident :: $ty:ident,)*) => {
        /// Every estimator advcalc knows: verl 0.9.1's names (docs/reference/verl-0.9.1.md §5) in its registry's
        /// order, then advcalc's additions from the agent-RL tutorials and other trainers.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Estimator {
            $($variant,)*
        }

        /// One estimator's own pass-1 statistics ([`Estimate::Stats`]), as the engine carries
        /// them ([`RowStats`]).
        #[derive(Debug, Clone, PartialEq)]
        pub enum AnyEstimatorStats {
            $($variant(<$module::$ty as Estimate>::Stats),)*
        }

        /// One estimator's plan (with its [`Estimate::Plan`]), as the engine carries it.
        #[derive(Debug, Clone, PartialEq)]
        pub enum AnyEstimatorPlan {
            $($variant(EstimatorPlan<<$module::$ty as Estimate>::Plan>),)*
        }

        /// Every estimator's own settings ([`Estimate::Options`]), a field per estimator,
        /// named as it; read after advcalc's shared keys (`Extensions::estimators`).
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct EstimatorSettings {
            $(
                #[doc = concat!("`", stringify!($module), "`'s own settings.")]
                pub $module: <$module::$ty as Estimate>::Options,
            )*
        }

        impl SettingList for EstimatorSettings {
            fn keys() -> Vec<&'static str> {
                let mut keys = Vec::new();
                $(keys.extend(<<$module::$ty as Estimate>::Options as SettingList>::keys());)*
                keys
            }
            fn read(r: &mut dyn crate::settings::Walk) -> Result<Self> {
                Ok(EstimatorSettings { $($module: SettingList::read(r)?,)* })
            }
            fn to_map(&self, m: &mut crate::settings::Map) {
                $(self.$module.to_map(m);)*
            }
            fn changed(&self) -> Vec<&'static str> {
                let mut keys = Vec::new();
                $(keys.extend(self.$module.changed());)*
                keys
            }
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

            /// The `algorithm.*` keys it reads whatever the convention: those its declaration
            /// names ([`Info::settings`]), then its own ([`Estimate::Options`]).
            pub fn settings(self) -> Vec<&'static str> {
                let mut keys = self.info().settings.to_vec();
                keys.extend(match self {
                    $(Estimator::$variant => <<$module::$ty as Estimate>::Options as SettingList>::keys(),)*
                });
                keys
            }

            /// Pass 1: the estimator's own statistics of one row group.
            pub fn row_stats(self, rows: &Rows<'_>) -> Result<AnyEstimatorStats> {
                match self {
                    $(Estimator::$variant => {
                        let mut stats = Default::default();
                        <$module::$ty as Estimate>::row_stats(rows, &mut stats)?;
                        Ok(AnyEstimatorStats::$variant(stats))
                    })*
                }
            }

            /// Between the passes: the plan from the merged statistics (whose own part it
            /// takes) and the training batches.
            pub fn plan(
                self,
                settings: &Settings<'_>,
                stats: &mut RowStats,
                batches: &[(Option<i64>, Vec<usize>)],
                file: &str,
            ) -> Result<AnyEstimatorPlan> {
                let own = stats.own.take();
                match self {
                    $(Estimator::$variant => {
                        let own = match own {
                            Some(AnyEstimatorStats::$variant(own)) => own,
                            // no rows: nothing was appended
                            None => Default::default(),
                            Some(other) => return Err(other.not_of(self)),
                        };
                        plan_of::<$module::$ty>(settings, stats, own, batches, file)
                            .map(AnyEstimatorPlan::$variant)
                    })*
                }
            }

            /// This estimator's own statistics from the exchange bytes.
            pub fn read_stats(self, input: &state::Reading) -> Result<AnyEstimatorStats> {
                match self {
                    $(Estimator::$variant => Ok(AnyEstimatorStats::$variant(OwnStats::read(input)?)),)*
                }
            }

            /// A plan of this estimator from the exchange bytes: its common part, read by the
            /// engine, and its own.
            pub fn read_plan(
                self,
                common: EstimatorPlan,
                input: &state::Reading,
            ) -> Result<AnyEstimatorPlan> {
                match self {
                    $(Estimator::$variant => Ok(AnyEstimatorPlan::$variant(common.with_own(OwnPlan::read(input)?))),)*
                }
            }
        }

        impl AnyEstimatorStats {
            /// The estimator the statistics belong to.
            pub fn estimator(&self) -> Estimator {
                match self {
                    $(AnyEstimatorStats::$variant(_) => Estimator::$variant,)*
                }
            }

            /// Append the next row group's; `false` (and nothing appended) when they are
            /// another estimator's.
            pub fn append(&mut self, next: AnyEstimatorStats) -> bool {
                match (self, next) {
                    $((AnyEstimatorStats::$variant(mine), AnyEstimatorStats::$variant(next)) => {
                        mine.append(next);
                        true
                    })*
                    #[allow(unreachable_patterns)]
                    _ => false,
                }
            }

            pub fn write(&self, out: &mut state::Written) {
                match self {
                    $(AnyEstimatorStats::$variant(s) => OwnStats::write(s, out),)*
                }
            }
        }

        impl AnyEstimatorPlan {
            /// The estimator the plan belongs to.
            pub fn estimator(&self) -> Estimator {
                match self {
                    $(AnyEstimatorPlan::$variant(_) => Estimator::$variant,)*
                }
            }

            /// [`EstimatorPlan::position`].
            pub fn position(&self, row: usize) -> Option<usize> {
                match self {
                    $(AnyEstimatorPlan::$variant(p) => p.position(row),)*
                }
            }

            /// The plan's rows ([`EstimatorPlan::rows`]) and their scalars ([`EstimatorPlan::row_scalar`]).
            pub fn scalars(&self) -> (Option<&[usize]>, &[f32]) {
                match self {
                    $(AnyEstimatorPlan::$variant(p) => (p.rows.as_deref(), &p.row_scalar),)*
                }
            }

            /// [`EstimatorPlan::warnings`].
            pub fn warnings(&self) -> &[String] {
                match self {
                    $(AnyEstimatorPlan::$variant(p) => &p.warnings,)*
                }
            }

            /// [`EstimatorPlan::restrict`].
            pub fn restrict(&self, rows: &[usize], steps: &[Option<i64>]) -> AnyEstimatorPlan {
                match self {
                    $(AnyEstimatorPlan::$variant(p) => AnyEstimatorPlan::$variant(p.restrict(rows, steps)),)*
                }
            }

            /// [`OwnPlan::nan_rows`].
            pub fn nan_rows(&self) -> usize {
                match self {
                    $(AnyEstimatorPlan::$variant(p) => p.own.nan_rows(),)*
                }
            }

            pub fn write(&self, out: &mut state::Written) {
                match self {
                    $(AnyEstimatorPlan::$variant(p) => OwnPlan::write(&p.own, out),)*
                }
            }

            pub fn fingerprint<H: Hasher>(&self, h: &mut H) {
                match self {
                    $(AnyEstimatorPlan::$variant(p) => p.fingerprint(h),)*
                }
            }

            /// Pass 2: the estimator's token outputs of one row group.
            pub fn token_outputs(&self, rows: &Rows<'_>) -> Result<Tokens> {
                match self {
                    $(AnyEstimatorPlan::$variant(p) => <$module::$ty as Estimate>::token_outputs(rows, p),)*
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

impl AnyEstimatorStats {
    /// The error for statistics of another estimator than `estimator` (the engine's stamp
    /// checks refuse them before).
    fn not_of(&self, estimator: Estimator) -> Error {
        Error::usage(format!(
            "these statistics are {}'s, not {}'s",
            self.estimator().name(),
            estimator.name()
        ))
    }
}

/// Pass 2 of an outcome estimator: each row's scalar broadcast onto its mask; returns equal
/// advantages.
pub fn broadcast_scalars<P>(rows: &Rows<'_>, plan: &EstimatorPlan<P>) -> Tokens {
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
pub mod test_support {
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
