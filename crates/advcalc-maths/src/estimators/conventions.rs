//! `--convention verl|trl|openrlhf|nemo-rl|open-instruct|skyrl|prime-rl`: each framework's grouping
//! rule, std flavour, ε and its placement, singleton rule and whitening switch for the
//! GRPO/RLOO family (`grpo`, `drgrpo`, `grpo_batch_std`, `rloo`, `maxrl`), so that the same
//! estimator name gives that framework's numbers (`docs/conventions.md` C). Not an estimator
//! name itself; no other estimator depends on the convention.
//!
//! Membership is part of an estimator's declaration: a member's [`Info::family`] is
//! [`Family::Convention`] with its [`Member`], whose `under` says, for every convention in an
//! exhaustive match, which [`Rule`] it computes there and which keys it reads (or that the
//! framework has no such estimator). This module holds what the conventions share: the
//! [`Convention`] itself, the rules' maths ([`family_scalars`], one arm per [`Rule`]) and the
//! batch and token work of every member ([`family_batch`], [`family_row_stats`],
//! [`family_token_outputs`]). Adding a convention is a compile error in each member's `under`
//! until its behaviour there is decided.
//!
//! | convention | groups | GRPO std | ε | singleton | source |
//! | --- | --- | --- | --- | --- | --- |
//! | verl (default) | `uid` | sample | `σ + 1e-6` | μ = 0, σ = 1 | verl `core_algos.py` |
//! | trl | consecutive n | sample, NaN-aware | `σ + 1e-4` | 0 | `trl/trainer/grpo_trainer.py` 2670–2725, `rloo_trainer.py` 1505–1561 |
//! | openrlhf | consecutive n | sample | `σ + 1e-9` | error | `openrlhf/trainer/ppo_utils/experience_maker.py` |
//! | nemo-rl | `uid` (or `prompt_ids`, `nemo.group_by`) | leave-one-out sample | `σ + 1e-6` where σ > 0 | 0 | `nemo_rl/algorithms/utils.py` line 104 |
//! | open-instruct | consecutive n | population | `σ + 1e-8` | 0 | `open_instruct/data_loader.py` 1472–1484 |
//! | skyrl | `uid` | sample | `σ + 1e-6` | raw s (RLOO: 0) | `skyrl/backends/skyrl_train/utils/ppo_utils.py` 1224–1429 |
//! | prime-rl | `uid` | none (`s − μ_g`) | — | 0 | `prime_rl/orchestrator/algo/grpo.py` `score_group` (559b447) |
//!
//! Everything is computed in f64 and written as f32: the exact answer of each framework's
//! formula (open-instruct's numpy does the same). For the f32 frameworks the difference is
//! within an ulp or two, except on numerically fragile groups (equal non-dyadic scores, tight
//! spreads, NeMo's one-pass f32 leave-one-out variance), where their f32 departs far more;
//! advcalc keeps the exact answer there and `inspect` reports the groups
//! (`docs/conventions.md` C6). Outputs are `a · m` under every convention (NeMo broadcasts
//! over all positions; advcalc choice, C3), except with SkyRL's
//! `advantage_batch_normalize` ([`super::skyrl_normalize`]), which writes every position.
//!
//! [`Info::family`]: super::Info::family
//! [`Family::Convention`]: super::Family::Convention

use crate::data::GroupKey;
use crate::error::Error;
use crate::estimators::Extensions;
use crate::estimators::groups::Grouping;
use crate::estimators::moments::{Moments, RowMoments, StepWhitening};
use crate::estimators::{EstimatorPlan, Rows, Tokens, TrainingBatch, broadcast_scalars};
use crate::settings::{Invalid, Keys, SettingValue, Value};

use super::Estimator;
use super::grpo_batch_std::{BatchStdRule, grpo_batch_std};
use super::maxrl::{MaxrlRule, maxrl};
use super::openrlhf::{Shaping, group_scalar};
use super::rloo_loo_std::{NemoGroupBy, NemoOptions, rloo_loo_std};
use super::skyrl_normalize::skyrl_batch_normalize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Convention {
    #[default]
    Verl,
    Trl,
    Openrlhf,
    NemoRl,
    OpenInstruct,
    Skyrl,
    PrimeRl,
}

impl Convention {
    pub const ALL: [Convention; 7] = [
        Convention::Verl,
        Convention::Trl,
        Convention::Openrlhf,
        Convention::NemoRl,
        Convention::OpenInstruct,
        Convention::Skyrl,
        Convention::PrimeRl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Convention::Verl => "verl",
            Convention::Trl => "trl",
            Convention::Openrlhf => "openrlhf",
            Convention::NemoRl => "nemo-rl",
            Convention::OpenInstruct => "open-instruct",
            Convention::Skyrl => "skyrl",
            Convention::PrimeRl => "prime-rl",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Whether the framework groups consecutive blocks of `group_size` rows (else by `uid`).
    pub fn consecutive(self) -> bool {
        match self {
            Convention::Trl | Convention::Openrlhf | Convention::OpenInstruct => true,
            Convention::Verl | Convention::NemoRl | Convention::Skyrl | Convention::PrimeRl => {
                false
            }
        }
    }

    /// The keys the convention's grouping reads, for every member: listed before the
    /// member's own keys under it.
    fn grouping_reads(self) -> &'static [&'static str] {
        if self.consecutive() {
            &["group_size"]
        } else {
            &[]
        }
    }

    /// The convention's switches that apply to every member: listed after the member's
    /// own keys under it.
    fn switches(self) -> &'static [&'static str] {
        match self {
            Convention::NemoRl => &["nemo.group_by"],
            Convention::Skyrl => &["skyrl.advantage_batch_normalize"],
            Convention::Verl
            | Convention::Trl
            | Convention::Openrlhf
            | Convention::OpenInstruct
            | Convention::PrimeRl => &[],
        }
    }
}

/// `convention` (and `--convention`) reads one of the names, with its own message: the
/// conventions are many, so the hint lists them.
impl SettingValue for Convention {
    fn read(s: &mut dyn Keys, key: &'static str, default: Self) -> crate::error::Result<Self> {
        let Some(name) = s.opt_string(key)? else {
            return Ok(default);
        };
        Convention::from_name(&name).ok_or_else(|| {
            let known: Vec<&str> = Convention::ALL.iter().map(|c| c.name()).collect();
            s.reject(
                Invalid::new(key, format!("unknown convention `{name}`"))
                    .hint(format!("known conventions: {}", known.join(", "))),
            )
        })
    }
    fn to_value(&self) -> Value {
        self.name().into()
    }
}

/// Whether a member's group-mean baseline is divided by a std.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// As `norm_adv_by_std_in_grpo` says (`grpo`).
    ByStdWhenSet,
    /// Never: the mean baseline alone (`drgrpo`).
    MeanOnly,
}

impl Scale {
    /// Whether the std division applies, given `norm_adv_by_std_in_grpo`.
    fn divides(self, norm_adv_by_std_in_grpo: bool) -> bool {
        match self {
            Scale::ByStdWhenSet => norm_adv_by_std_in_grpo,
            Scale::MeanOnly => false,
        }
    }
}

/// A framework's NaN-aware group std: its divisor (n, or n − 1) and its ε.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StdRule {
    /// Divide by n (else by n − 1).
    pub population: bool,
    pub epsilon: f64,
}

/// TRL `GRPOTrainer`: sample std, `σ + 1e-4`.
pub const TRL_STD: StdRule = StdRule {
    population: false,
    epsilon: 1e-4,
};

/// open-instruct: population std, `σ + 1e-8`.
pub const OPEN_INSTRUCT_STD: StdRule = StdRule {
    population: true,
    epsilon: 1e-8,
};

/// What a family member computes under one convention; [`family_scalars`] has one arm for
/// each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// verl's `grpo` (singleton μ = 0, σ = 1; `σ + 1e-6`): verl and SkyRL.
    Grpo(Scale),
    /// `(s − μ_g)/(σ_g + ε)` (or `s − μ_g`) over the non-NaN scores with the framework's std;
    /// NaN scores give 0 (TRL, open-instruct).
    MeanStd(Scale, StdRule),
    /// OpenRLHF's group mean (`Shaping::Mean`), or its group norm (`Shaping::GroupNorm`)
    /// when the scale divides; a singleton group is refused.
    OpenrlhfMean(Scale),
    /// OpenRLHF's leave-one-out (`Shaping::Rloo`); a singleton group is refused.
    OpenrlhfRloo,
    /// NeMo-RL's baseline and std with the `nemo.*` switches; `normalize_rewards` only where
    /// the scale divides.
    Nemo(Scale),
    /// NeMo-RL's leave-one-out baseline without the std.
    NemoRloo,
    /// verl's `rloo` (a singleton keeps its raw score).
    VerlRloo,
    /// SkyRL's `compute_rloo_outcome_advantage` (a singleton gets 0).
    SkyrlRloo,
    /// TRL's `RLOOTrainer`, with `trl.normalize_advantages`.
    TrlRloo,
    /// `grpo_batch_std` under the framework's rule.
    BatchStd(BatchStdRule),
    /// `maxrl` under the framework's rule.
    Maxrl(MaxrlRule),
    /// prime-rl's GRPO (`score_group`): `s − μ_g`, never divided by a std whatever
    /// `norm_adv_by_std_in_grpo` says (prime-rl has no such switch); a singleton gets 0 (its
    /// own mean). As prime-rl's `iter_trainable_traces`, rows without a valid token stay out
    /// of μ_g and get 0; NaN scores too (prime-rl's mean would turn the group NaN).
    PrimeRlMean,
}

/// A family member's behaviour under one convention: its rule, and the keys it reads there
/// besides its own under every convention ([`Member::reads`]) and the convention's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Under {
    pub rule: Rule,
    pub reads: &'static [&'static str],
}

impl Under {
    /// The rule, reading no key of its own under the convention.
    pub const fn rule(rule: Rule) -> Self {
        Under { rule, reads: &[] }
    }
}

/// A member of the GRPO/RLOO family, declared in its [`super::Info`]
/// ([`super::Family::Convention`]).
#[derive(Debug, Clone, Copy)]
pub struct Member {
    /// The `algorithm.*` keys it reads under every convention, besides `convention`.
    pub reads: &'static [&'static str],
    /// Its behaviour under each convention, an exhaustive match; `None`: the framework has
    /// no such estimator (C5).
    pub under: fn(Convention) -> Option<Under>,
}

/// The estimators whose numbers depend on the convention.
pub fn in_family(e: Estimator) -> bool {
    e.member().is_some()
}

/// The refusal of an estimator the framework does not define (C5).
fn undefined(e: Estimator, c: Convention) -> String {
    format!(
        "--convention {}: {} has no `{}` estimator (see docs/conventions.md C5)",
        c.name(),
        c.name(),
        e.name()
    )
}

/// Whether the framework defines the estimator (C5); `Err` says why not. Every estimator
/// outside the family is defined under every convention (its numbers do not change).
pub fn check(e: Estimator, c: Convention) -> Result<(), String> {
    match e.member().map(|m| (m.under)(c)) {
        Some(None) => Err(undefined(e, c)),
        Some(Some(_)) | None => Ok(()),
    }
}

/// The `algorithm.*` settings family member `e` reads under convention `c`, besides
/// `convention` itself (what `advcalc estimators` lists): the member's own, the convention's
/// grouping key, the member's under `c`, then the convention's switches; `Err` when `c` has
/// no such estimator ([`check`]). `None` for an estimator outside the family.
pub fn settings_under(e: Estimator, c: Convention) -> Option<Result<Vec<&'static str>, String>> {
    let member = e.member()?;
    Some(match (member.under)(c) {
        None => Err(undefined(e, c)),
        Some(under) => Ok(member
            .reads
            .iter()
            .chain(c.grouping_reads())
            .chain(under.reads)
            .chain(c.switches())
            .copied()
            .chain(
                e.settings()
                    .into_iter()
                    .filter(|k| !e.info().settings.contains(k)),
            )
            .collect()),
    })
}

/// What the convention and its framework switches mean for an estimator.
impl Extensions {
    /// Whether SkyRL's `advantage_batch_normalize` applies to `e` (the family under `skyrl`).
    pub fn skyrl_normalizes(&self, e: Estimator) -> bool {
        self.skyrl_advantage_batch_normalize && self.convention == Convention::Skyrl && in_family(e)
    }

    /// Whether `e` groups by NeMo's prompt token ids (`nemo.group_by: prompt_ids` for
    /// rloo_loo_std, and for the family under `nemo-rl`).
    pub fn groups_by_prompt_ids(&self, e: Estimator) -> bool {
        self.nemo_group_by == NemoGroupBy::PromptIds
            && (e == Estimator::RlooLooStd
                || (self.convention == Convention::NemoRl && in_family(e)))
    }
}

/// Consecutive-n grouping of one batch's rows (TRL, OpenRLHF, open-instruct). Also returns a
/// warning when blocks and `uid`s disagree. `Err` when the row count is not a multiple of n.
pub fn consecutive_grouping(
    labels: &[GroupKey],
    group_size: Option<usize>,
) -> Result<(Grouping, Option<String>), String> {
    let rows = labels.len();
    let n = group_size.unwrap_or_else(|| {
        labels
            .iter()
            .take_while(|l| labels.first() == Some(*l))
            .count()
            .max(1)
    });
    if n == 0 || !rows.is_multiple_of(n) {
        return Err(format!(
            "{rows} rows do not split into consecutive groups of {n} (group_size{})",
            if group_size.is_none() {
                ", taken from the first run of equal uids"
            } else {
                ""
            }
        ));
    }
    let grouping = Grouping {
        group_of_row: (0..rows).map(|i| i / n).collect(),
        n_groups: rows / n,
    };
    let mixed = labels
        .chunks(n)
        .filter(|b| b.iter().any(|l| *l != b[0]))
        .count();
    let mut block_of: std::collections::HashMap<&GroupKey, usize> = Default::default();
    let mut split = std::collections::BTreeSet::new();
    for (i, l) in labels.iter().enumerate() {
        if *block_of.entry(l).or_insert(i / n) != i / n {
            split.insert(l);
        }
    }
    let warning = (mixed > 0 || !split.is_empty()).then(|| {
        format!(
            "consecutive groups of {n}: {mixed} blocks hold more than one uid and {} uids span more than one block; the convention groups by position, not by uid",
            split.len()
        )
    });
    Ok((grouping, warning))
}

/// Mean and std over the non-NaN values (TRL's `nanmean`/`nanstd`; `population` divides by
/// n, else by n − 1). `None` for the mean when nothing is left; std 0 with fewer than 2.
fn nan_mean_std(values: impl Iterator<Item = f64> + Clone, population: bool) -> (f64, f64) {
    let (n, sum) = values
        .clone()
        .filter(|x| !x.is_nan())
        .fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = sum / n as f64;
    let sq: f64 = values
        .filter(|x| !x.is_nan())
        .map(|x| (x - mean) * (x - mean))
        .sum();
    let div = if population { n } else { n - 1 };
    let std = if div == 0 {
        0.0
    } else {
        (sq / div as f64).sqrt()
    };
    (mean, std)
}

/// `(s − μ_g)/(σ_g + ε)` (or `s − μ_g`) with the framework's std; NaN scores give 0.
fn mean_std_scaled(
    scores: &[f64],
    grouping: &Grouping,
    norm: bool,
    population: bool,
    epsilon: f64,
) -> Vec<f64> {
    let stats: Vec<(f64, f64)> = grouping
        .members()
        .iter()
        .map(|rows| nan_mean_std(rows.iter().map(|&r| scores[r]), population))
        .collect();
    scores
        .iter()
        .zip(&grouping.group_of_row)
        .map(|(&s, &g)| {
            let (mean, std) = stats[g];
            match (s.is_nan(), norm) {
                (true, _) => 0.0,
                (false, true) => (s - mean) / (std + epsilon),
                (false, false) => s - mean,
            }
        })
        .collect()
}

/// TRL RLOOTrainer (`rloo_trainer.py` 1537–1555 at `f2cd577`): `s − (Σ − s)/(cnt − 1)` over
/// the group's scorable (non-NaN) rows. A group with one scorable row gets `0/0 = NaN`, and
/// unscorable rows stay NaN; with `normalize`, `(a − nanmean(a))/(nanstd(a) + 1e-4)` over the
/// batch's rows runs while they are still NaN — so they are left out of the mean and std —
/// and only then does `nan_to_num` zero them. Groups of one row (`num_generations == 1`) get
/// 0 before the normalisation (TRL's `zeros_like` branch), and count in it.
fn trl_rloo(scores: &[f64], grouping: &Grouping, normalize: bool) -> Vec<f64> {
    let mut a = vec![f64::NAN; scores.len()];
    for rows in grouping.members() {
        if rows.len() == 1 {
            a[rows[0]] = 0.0;
            continue;
        }
        let valid: Vec<usize> = rows.into_iter().filter(|&r| !scores[r].is_nan()).collect();
        if valid.len() < 2 {
            continue; // 0/0: NaN until after the normalisation
        }
        let sum: f64 = valid.iter().map(|&r| scores[r]).sum();
        let cnt = valid.len() as f64;
        for &r in &valid {
            a[r] = scores[r] - (sum - scores[r]) / (cnt - 1.0);
        }
    }
    if normalize {
        let (mean, std) = nan_mean_std(a.iter().copied(), false);
        for x in a.iter_mut().filter(|x| !x.is_nan()) {
            *x = (*x - mean) / (std + 1e-4);
        }
    }
    a.into_iter()
        .map(|x| if x.is_nan() { 0.0 } else { x })
        .collect()
}

/// SkyRL `compute_rloo_outcome_advantage`: `(s − μ)·n/(n − 1)`, a singleton gets 0.
fn skyrl_rloo(scores: &[f64], grouping: &Grouping) -> Vec<f64> {
    super::groups::per_row_from_group(scores, grouping, |s, count, sum| {
        let n = count as f64;
        if count > 1 {
            (s - sum / n) * n / (n - 1.0)
        } else {
            0.0
        }
    })
}

/// prime-rl's GRPO ([`Rule::PrimeRlMean`]): `s − μ_g` over the group's rows with a valid
/// token and a score; the others get 0.
fn prime_rl_mean(scores: &[f64], has_tokens: &[bool], grouping: &Grouping) -> Vec<f64> {
    let counted = |i: usize| has_tokens.get(i).copied().unwrap_or(false) && !scores[i].is_nan();
    let mut count = vec![0usize; grouping.n_groups];
    let mut sum = vec![0.0; grouping.n_groups];
    for (i, &g) in grouping.group_of_row.iter().enumerate() {
        if counted(i) {
            count[g] += 1;
            sum[g] += scores[i];
        }
    }
    grouping
        .group_of_row
        .iter()
        .enumerate()
        .map(|(i, &g)| {
            if counted(i) {
                scores[i] - sum[g] / count[g] as f64
            } else {
                0.0
            }
        })
        .collect()
}

/// Why [`family_scalars`] gives no numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A row of a singleton group where the framework refuses one (OpenRLHF asserts n > 1).
    Singleton(usize),
    /// The convention has no such estimator ([`check`]'s message; C5).
    Undefined(String),
}

/// The family member `e` under `opts.convention` for one batch, on groups already formed by
/// the convention's rule. `norm_adv_by_std_in_grpo` is verl's key (for `grpo`);
/// `has_tokens[i]`: row `i` has a valid token (prime-rl's MaxRL leaves the others out).
pub fn family_scalars(
    e: Estimator,
    opts: &Extensions,
    norm_adv_by_std_in_grpo: bool,
    scores: &[f64],
    has_tokens: &[bool],
    grouping: &Grouping,
) -> Result<Vec<f64>, Refusal> {
    let Some(member) = e.member() else {
        return Err(Refusal::Undefined(format!(
            "{} is not one of the GRPO/RLOO family that --convention changes",
            e.name()
        )));
    };
    let Some(under) = (member.under)(opts.convention) else {
        return Err(Refusal::Undefined(undefined(e, opts.convention)));
    };
    Ok(match under.rule {
        Rule::Grpo(scale) => {
            super::grpo::grpo(scores, grouping, scale.divides(norm_adv_by_std_in_grpo))
        }
        Rule::MeanStd(scale, std) => mean_std_scaled(
            scores,
            grouping,
            scale.divides(norm_adv_by_std_in_grpo),
            std.population,
            std.epsilon,
        ),
        Rule::OpenrlhfMean(scale) => {
            let shaping = if scale.divides(norm_adv_by_std_in_grpo) {
                Shaping::GroupNorm
            } else {
                Shaping::Mean
            };
            group_scalar(scores, grouping, shaping).map_err(Refusal::Singleton)?
        }
        Rule::OpenrlhfRloo => {
            group_scalar(scores, grouping, Shaping::Rloo).map_err(Refusal::Singleton)?
        }
        Rule::Nemo(scale) => rloo_loo_std(
            scores,
            grouping,
            NemoOptions {
                normalize_rewards: opts.nemo_normalize_rewards
                    && scale.divides(norm_adv_by_std_in_grpo),
                ..opts.nemo()
            },
        ),
        Rule::NemoRloo => rloo_loo_std(
            scores,
            grouping,
            NemoOptions {
                use_leave_one_out_baseline: true,
                normalize_rewards: false,
            },
        ),
        Rule::VerlRloo => super::rloo::rloo(scores, grouping),
        Rule::SkyrlRloo => skyrl_rloo(scores, grouping),
        Rule::TrlRloo => trl_rloo(scores, grouping, opts.trl_normalize_advantages),
        Rule::BatchStd(rule) => grpo_batch_std(scores, grouping, rule),
        Rule::Maxrl(rule) => maxrl(scores, has_tokens, grouping, rule),
        Rule::PrimeRlMean => prime_rl_mean(scores, has_tokens, grouping),
    })
}

/// The batch work of a family member under a convention other than verl's exact rule (and
/// of grpo_batch_std and maxrl under every convention): the convention's groups, then
/// [`family_scalars`].
pub fn family_batch(
    batch: &TrainingBatch<'_, RowMoments>,
    plan: &mut EstimatorPlan<StepWhitening>,
) -> Result<(), Error> {
    let s = batch.settings;
    let g = batch.family_grouping(plan, s.ext.convention.consecutive())?;
    let has_tokens: Vec<bool> = batch.valid().iter().map(|&v| v > 0.0).collect();
    let scalars = family_scalars(
        s.estimator,
        s.ext,
        s.norm_adv_by_std_in_grpo,
        &batch.scores(),
        &has_tokens,
        &g,
    )
    .map_err(|refusal| match refusal {
        Refusal::Singleton(row) => batch.singleton_error(&g, row),
        Refusal::Undefined(msg) => Error::usage(msg),
    })?;
    if s.ext.skyrl_normalizes(s.estimator) {
        let lengths: Vec<f64> = batch.rows.iter().map(|&r| batch.own.0[r].n).collect();
        let w = skyrl_batch_normalize(&scalars, &batch.valid(), &lengths).ok_or_else(|| {
            Error::data(format!(
                "{} skyrl.advantage_batch_normalize found no valid token in the batch (SkyRL divides 0 by 0)",
                batch.at()
            ))
        })?;
        plan.own.insert(batch.step, w);
    }
    batch.set_scalars(plan, scalars);
    Ok(())
}

/// Pass 1 of a family member: with SkyRL's batch normalisation, each row's length (the
/// padded width is the longest), kept as the count of an empty [`Moments`]. Nothing else.
pub fn family_row_stats(rows: &Rows<'_>, stats: &mut RowMoments) -> Result<(), Error> {
    if rows.settings.ext.skyrl_normalizes(rows.settings.estimator) {
        for i in 0..rows.rows() {
            stats.0.push(Moments {
                n: rows.span(i).len() as f64,
                mean: 0.0,
                m2: 0.0,
            });
        }
    }
    Ok(())
}

/// Pass 2 of a family member: `a·m`, or with SkyRL's batch normalisation
/// `(a·m − mean)·rstd` at every position and the un-normalised `a·m` as returns.
pub fn family_token_outputs(rows: &Rows<'_>, plan: &EstimatorPlan<StepWhitening>) -> Tokens {
    let plain = broadcast_scalars(rows, plan);
    if !rows.settings.ext.skyrl_normalizes(rows.settings.estimator) {
        return plain;
    }
    let mut advantages = plain.advantages.clone();
    for i in 0..rows.rows() {
        let w = plan.own.of(rows.group.step_of(i));
        for t in rows.span(i) {
            advantages[t] = w.apply(plain.advantages[t]);
        }
    }
    Tokens {
        advantages,
        returns: Some(plain.advantages),
    }
}

#[cfg(test)]
#[allow(clippy::approx_constant)] // hand-worked numbers, written as computed
mod tests {
    use super::*;
    use crate::estimators::test_support::{assert_close, grouping};

    fn opts(c: Convention) -> Extensions {
        Extensions {
            convention: c,
            ..Default::default()
        }
    }

    fn run(e: Estimator, c: Convention, s: &[f64], labels: &[&str]) -> Vec<f64> {
        family_scalars(
            e,
            &opts(c),
            true,
            s,
            &vec![true; s.len()],
            &grouping(labels),
        )
        .unwrap()
    }

    fn eight() -> Vec<f64> {
        let mut s = vec![0.0; 8];
        s[0] = 1.0;
        s
    }

    // conventions.md, the group of 8 with one success under each rule.
    #[test]
    fn group_of_eight_one_success() {
        use Convention::*;
        use Estimator::*;
        let l = ["g"; 8];
        let s = eight();
        for c in [Verl, Trl, Openrlhf, OpenInstruct, Skyrl] {
            assert_close(&run(Drgrpo, c, &s, &l)[..2], &[0.875, -0.125]);
        }
        assert_close(&run(Rloo, Verl, &s, &l)[..2], &[1.0, -0.142857]);
        assert_close(&run(Grpo, Verl, &s, &l)[..2], &[2.474867, -0.353552]);
        // the 2.475 / −.354: mean / sample std
        let a = run(Grpo, Skyrl, &s, &l);
        assert!((a[0] - 2.475).abs() < 5e-4 && (a[1] + 0.354).abs() < 5e-4);
        assert_close(&run(Grpo, Openrlhf, &s, &l)[..2], &[2.474874, -0.353553]);
        assert_close(&run(Grpo, Trl, &s, &l)[..2], &[2.474174, -0.353453]);
        assert_close(
            &run(Grpo, OpenInstruct, &s, &l)[..2],
            &[2.645751, -0.377964],
        );
        assert_close(&run(Grpo, NemoRl, &s, &l)[..2], &[1.0, -0.377963]);
        assert_close(&run(Maxrl, Verl, &s, &l)[..2], &[7.0, -1.0]);
    }

    // conventions.md T1: uid [a,a,a,b], s = [1,0,.5,.7].
    #[test]
    fn uid_conventions_with_a_singleton() {
        use Convention::*;
        use Estimator::*;
        let l = ["a", "a", "a", "b"];
        let s = [1.0, 0.0, 0.5, 0.7];
        for c in [Verl, Skyrl] {
            assert_close(
                &run(Grpo, c, &s, &l),
                &[0.999998, -0.999998, 0.0, 0.6999993],
            );
            assert_close(&run(Drgrpo, c, &s, &l), &[0.5, -0.5, 0.0, 0.7]);
        }
        assert_close(&run(Grpo, NemoRl, &s, &l), &[2.121314, -2.121314, 0.0, 0.0]);
        assert_close(&run(Drgrpo, NemoRl, &s, &l), &[0.75, -0.75, 0.0, 0.0]);
        assert_close(&run(Rloo, NemoRl, &s, &l), &[0.75, -0.75, 0.0, 0.0]);
        let plain = Extensions {
            convention: NemoRl,
            nemo_use_leave_one_out_baseline: false,
            nemo_normalize_rewards: true,
            ..Default::default()
        };
        assert_close(
            &family_scalars(Grpo, &plain, true, &s, &[true; 4], &grouping(&l)).unwrap(),
            &[0.999998, -0.999998, 0.0, 0.0],
        );
        assert_close(&run(Rloo, Verl, &s, &l), &[0.75, -0.75, 0.0, 0.7]);
        assert_close(&run(Rloo, Skyrl, &s, &l), &[0.75, -0.75, 0.0, 0.0]);
        assert_close(&run(Maxrl, Verl, &s, &l), &[1.0, -1.0, 0.0, 0.0]);
        assert_close(&run(Maxrl, Skyrl, &s, &l), &[0.999998, -0.999998, 0.0, 0.7]);
        assert_close(
            &run(GrpoBatchStd, Verl, &s, &l),
            &[1.189575, -1.189575, 0.0, 1.665404],
        );
    }

    // conventions.md T2: two groups of 2, s = [1,0,.25,.25].
    #[test]
    fn two_pairs() {
        use Convention::*;
        use Estimator::*;
        let l = ["a", "a", "b", "b"];
        let s = [1.0, 0.0, 0.25, 0.25];
        assert_close(&run(Grpo, Trl, &s, &l), &[0.707007, -0.707007, 0.0, 0.0]);
        assert_close(
            &run(GrpoBatchStd, Trl, &s, &l),
            &[1.154434, -1.154434, 0.0, 0.0],
        );
        assert_close(&run(Drgrpo, Trl, &s, &l), &[0.5, -0.5, 0.0, 0.0]);
        assert_close(&run(Rloo, Trl, &s, &l), &[1.0, -1.0, 0.0, 0.0]);
        let normalized = Extensions {
            convention: Trl,
            trl_normalize_advantages: true,
            ..Default::default()
        };
        assert_close(
            &family_scalars(Rloo, &normalized, true, &s, &[true; 4], &grouping(&l)).unwrap(),
            &[1.224595, -1.224595, 0.0, 0.0],
        );
        assert_close(
            &run(Grpo, Openrlhf, &s, &l),
            &[0.707107, -0.707107, 0.0, 0.0],
        );
        assert_close(
            &run(Grpo, OpenInstruct, &s, &l),
            &[0.99999998, -0.99999998, 0.0, 0.0],
        );
        assert_close(&run(Drgrpo, OpenInstruct, &s, &l), &[0.5, -0.5, 0.0, 0.0]);
        assert_close(&run(Grpo, Verl, &s, &l), &[0.707106, -0.707106, 0.0, 0.0]);
        assert_close(&run(Grpo, NemoRl, &s, &l), &[1.0, -1.0, 0.0, 0.0]);
    }

    // conventions.md T3: one group of 4, s = [1,0,0,.5].
    #[test]
    fn std_flavours() {
        use Convention::*;
        use Estimator::*;
        let l = ["a"; 4];
        let s = [1.0, 0.0, 0.0, 0.5];
        for c in [Verl, Skyrl] {
            assert_close(
                &run(Grpo, c, &s, &l),
                &[1.30558, -0.783348, -0.783348, 0.261116],
            );
        }
        assert_close(
            &run(Grpo, Trl, &s, &l),
            &[1.30531, -0.783186, -0.783186, 0.261062],
        );
        assert_close(
            &run(Grpo, Openrlhf, &s, &l),
            &[1.305582, -0.783349, -0.783349, 0.261116],
        );
        assert_close(
            &run(Grpo, OpenInstruct, &s, &l),
            &[1.507557, -0.904534, -0.904534, 0.301511],
        );
        assert_close(
            &run(Grpo, NemoRl, &s, &l),
            &[2.886741, -0.999998, -0.999998, 0.288675],
        );
        assert_close(&run(Rloo, Verl, &s, &l), &[0.833333, -0.5, -0.5, 0.166667]);
        assert_close(
            &run(Drgrpo, NemoRl, &s, &l),
            &[0.833333, -0.5, -0.5, 0.166667],
        );
    }

    // prime-rl's GRPO (`score_group`): s − μ_g, no std whatever norm_adv_by_std_in_grpo
    // says; a singleton is its own mean (0). T1: μ_a = .5 → [.5, −.5, 0], b alone → 0. The
    // prime-rl fixture's step 1 group: rewards [1.25, .25, 1, 1.25], μ = .9375 →
    // [.3125, −.6875, .0625, .3125] (prime-rl's own, expected.json).
    #[test]
    fn prime_rl_mean_baseline() {
        use Convention::PrimeRl;
        use Estimator::*;
        let l = ["a", "a", "a", "b"];
        let s = [1.0, 0.0, 0.5, 0.7];
        for e in [Grpo, Drgrpo] {
            assert_close(&run(e, PrimeRl, &s, &l), &[0.5, -0.5, 0.0, 0.0]);
        }
        let no_std = family_scalars(Grpo, &opts(PrimeRl), false, &s, &[true; 4], &grouping(&l));
        assert_close(&no_std.unwrap(), &[0.5, -0.5, 0.0, 0.0]);
        assert_close(&run(Maxrl, PrimeRl, &s, &l), &[1.0, -1.0, 0.0, 0.0]);
        assert_close(
            &run(Grpo, PrimeRl, &eight(), &["g"; 8])[..2],
            &[0.875, -0.125],
        );
        assert_close(
            &run(Grpo, PrimeRl, &[1.25, 0.25, 1.0, 1.25], &["g"; 4]),
            &[0.3125, -0.6875, 0.0625, 0.3125],
        );
        // rows without a valid token stay out of the mean (iter_trainable_traces), NaN too:
        // μ = (1 + 0)/2 over the counted rows
        let a = family_scalars(
            Grpo,
            &opts(PrimeRl),
            true,
            &[1.0, 0.0, 0.2, f64::NAN],
            &[true, true, false, true],
            &grouping(&["a"; 4]),
        );
        assert_close(&a.unwrap(), &[0.5, -0.5, 0.0, 0.0]);
        assert!(check(Rloo, PrimeRl).is_err());
        assert!(check(GrpoBatchStd, PrimeRl).is_err());
        assert!(!PrimeRl.consecutive());
    }

    #[test]
    fn openrlhf_refuses_singletons_and_trl_zeroes_them() {
        let g = grouping(&["a"]);
        assert_eq!(
            family_scalars(
                Estimator::Grpo,
                &opts(Convention::Openrlhf),
                true,
                &[1.0],
                &[true],
                &g
            ),
            Err(Refusal::Singleton(0))
        );
        assert_eq!(
            family_scalars(
                Estimator::Grpo,
                &opts(Convention::Trl),
                true,
                &[1.0],
                &[true],
                &g
            ),
            Ok(vec![0.0])
        );
        assert_eq!(
            family_scalars(
                Estimator::Rloo,
                &opts(Convention::Trl),
                true,
                &[1.0],
                &[true],
                &g
            ),
            Ok(vec![0.0])
        );
    }

    // TRL rloo_trainer.py: a group with one scorable reward has a NaN baseline and stays NaN
    // through the normalisation, zeroed only afterwards. Groups of 2: [1, NaN], [0, 1],
    // [.5, 0] → before normalising [NaN, NaN, −1, 1, .5, −.5]; nanmean 0, nanstd over the
    // four = √(2.5/3) = .912871; ±1/(.912871 + 1e-4) = ±1.095325, ±.547663. Zeroing group a
    // first would give mean 0, std √(2.5/5) = .707107 and ±1.414014, ±.707007.
    #[test]
    fn trl_rloo_normalises_before_zeroing_nan_rows() {
        let l = ["a", "a", "b", "b", "c", "c"];
        let s = [1.0, f64::NAN, 0.0, 1.0, 0.5, 0.0];
        let normalized = Extensions {
            convention: Convention::Trl,
            trl_normalize_advantages: true,
            ..Default::default()
        };
        let a = family_scalars(
            Estimator::Rloo,
            &normalized,
            true,
            &s,
            &[true; 6],
            &grouping(&l),
        )
        .unwrap();
        assert_close(&a, &[0.0, 0.0, -1.095325, 1.095325, 0.547663, -0.547663]);
        // without the normalisation the NaN rows are plain zeros
        let a = family_scalars(
            Estimator::Rloo,
            &opts(Convention::Trl),
            true,
            &s,
            &[true; 6],
            &grouping(&l),
        )
        .unwrap();
        assert_close(&a, &[0.0, 0.0, -1.0, 1.0, 0.5, -0.5]);
    }

    #[test]
    fn family_scalars_refuses_instead_of_panicking() {
        let g = grouping(&["a", "a"]);
        let refused = |e, c| {
            matches!(
                family_scalars(e, &opts(c), true, &[1.0, 0.0], &[true; 2], &g),
                Err(Refusal::Undefined(_))
            )
        };
        assert!(refused(Estimator::Maxrl, Convention::Trl));
        assert!(refused(Estimator::Rloo, Convention::OpenInstruct));
        assert!(refused(Estimator::GrpoBatchStd, Convention::Skyrl));
        assert!(refused(Estimator::Gae, Convention::Verl));
        for c in Convention::ALL {
            for e in Estimator::ALL {
                let _ = family_scalars(e, &opts(c), true, &[1.0, 0.0], &[true; 2], &g);
            }
        }
    }

    #[test]
    fn unsupported_pairs_are_refused() {
        assert!(check(Estimator::Maxrl, Convention::Trl).is_err());
        assert!(check(Estimator::GrpoBatchStd, Convention::NemoRl).is_err());
        assert!(check(Estimator::Rloo, Convention::OpenInstruct).is_err());
        assert!(check(Estimator::Grpo, Convention::OpenInstruct).is_ok());
    }

    #[test]
    fn consecutive_blocks() {
        let keys = |ls: &[&str]| -> Vec<GroupKey> {
            ls.iter().map(|l| GroupKey::Str((*l).into())).collect()
        };
        let (g, w) = consecutive_grouping(&keys(&["a", "a", "b", "b"]), None).unwrap();
        assert_eq!(g.group_of_row, vec![0, 0, 1, 1]);
        assert!(w.is_none());
        let (g, w) = consecutive_grouping(&keys(&["a", "b", "a", "b"]), Some(2)).unwrap();
        assert_eq!(g.group_of_row, vec![0, 0, 1, 1]);
        assert!(w.is_some());
        assert!(consecutive_grouping(&keys(&["a", "a", "b"]), None).is_err());
    }

    // What each member reads under each convention, as `advcalc estimators` lists it (`Err`:
    // the framework has no such estimator).
    #[test]
    fn settings_under_every_convention() {
        use Convention::*;
        use Estimator::*;
        let none: Option<&[&str]> = None;
        let table: [(Estimator, [Option<&[&str]>; 7]); 5] = [
            (
                Grpo,
                [
                    Some(&["norm_adv_by_std_in_grpo"]),
                    Some(&["norm_adv_by_std_in_grpo", "group_size"]),
                    Some(&["norm_adv_by_std_in_grpo", "group_size"]),
                    Some(&[
                        "norm_adv_by_std_in_grpo",
                        "nemo.use_leave_one_out_baseline",
                        "nemo.normalize_rewards",
                        "nemo.group_by",
                    ]),
                    Some(&["norm_adv_by_std_in_grpo", "group_size"]),
                    Some(&["norm_adv_by_std_in_grpo", "skyrl.advantage_batch_normalize"]),
                    // listed as the member's own; prime-rl's rule never divides
                    Some(&["norm_adv_by_std_in_grpo"]),
                ],
            ),
            (
                Rloo,
                [
                    Some(&[]),
                    Some(&["group_size", "trl.normalize_advantages"]),
                    Some(&["group_size"]),
                    Some(&["nemo.group_by"]),
                    none,
                    Some(&["skyrl.advantage_batch_normalize"]),
                    none,
                ],
            ),
            (
                Drgrpo,
                [
                    Some(&[]),
                    Some(&["group_size"]),
                    Some(&["group_size"]),
                    Some(&["nemo.use_leave_one_out_baseline", "nemo.group_by"]),
                    Some(&["group_size"]),
                    Some(&["skyrl.advantage_batch_normalize"]),
                    Some(&[]),
                ],
            ),
            (
                GrpoBatchStd,
                [
                    Some(&[]),
                    Some(&["group_size"]),
                    none,
                    none,
                    none,
                    none,
                    none,
                ],
            ),
            (
                Maxrl,
                [
                    Some(&[]),
                    none,
                    none,
                    none,
                    none,
                    Some(&["skyrl.advantage_batch_normalize"]),
                    Some(&[]),
                ],
            ),
        ];
        assert_eq!(
            Convention::ALL,
            [Verl, Trl, Openrlhf, NemoRl, OpenInstruct, Skyrl, PrimeRl]
        );
        for (e, lists) in table {
            for (c, expected) in Convention::ALL.into_iter().zip(lists) {
                let got = settings_under(e, c).unwrap();
                match expected {
                    Some(list) => assert_eq!(got.as_deref(), Ok(list), "{} {}", e.name(), c.name()),
                    None => {
                        assert!(got.is_err(), "{} {}", e.name(), c.name());
                        assert!(check(e, c).is_err());
                    }
                }
            }
        }
        // the family is exactly these five (the note in config/extensions.rs names them)
        let family: Vec<Estimator> = Estimator::ALL
            .into_iter()
            .filter(|&e| in_family(e))
            .collect();
        assert_eq!(family, [Grpo, Rloo, Drgrpo, GrpoBatchStd, Maxrl]);
        for e in Estimator::ALL.into_iter().filter(|&e| !in_family(e)) {
            assert_eq!(settings_under(e, Verl), None);
        }
    }

    // A member's declared settings are `convention` and what it reads under every convention;
    // the OpenRLHF family is the estimators from OpenRLHF.
    #[test]
    fn declarations_agree() {
        for e in Estimator::ALL {
            let info = e.info();
            match e.member() {
                Some(m) => {
                    let mut declared = info.settings.to_vec();
                    declared.sort();
                    let mut reads: Vec<&str> =
                        m.reads.iter().copied().chain(["convention"]).collect();
                    reads.sort();
                    assert_eq!(declared, reads, "{}", e.name());
                }
                None => assert!(!info.settings.contains(&"convention"), "{}", e.name()),
            }
            assert_eq!(
                e.is_openrlhf(),
                info.source == super::super::openrlhf::SOURCE,
                "{}",
                e.name()
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for c in Convention::ALL {
            assert_eq!(Convention::from_name(c.name()), Some(c));
        }
        assert_eq!(Convention::from_name("nemo"), None);
    }
}
