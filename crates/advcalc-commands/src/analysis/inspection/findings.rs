//! From one step's tally to its findings: the numbers of the report, and a warning for each
//! finding past its threshold (`thresholds.rs`).

use std::collections::BTreeMap;

use crate::analysis::Warning;
use crate::analysis::fragile::{fragile_findings, fragile_groups};
use crate::analysis::tokens::TokenStats;
use crate::loss::AggMode;
use crate::loss::findings::length_bias;
use crate::numbers::{num, pct};
use crate::shaping::scores::Layout;
use advcalc_maths::estimators::groups::Grouping;

use super::checks::{Checks, LossChecks};
use super::distribution::Distribution;
use super::report::{
    Groups, Kl, KlShaping, Mismatch, Rejection, ScoreSums, StepReport, ToolSpans, fraction,
    histogram,
};
use super::tally::{RowFacts, StepTally};
use super::thresholds::{
    EXTREME_ADVANTAGE, KL_DOMINANCE_RATIO, MISMATCH_EXTREME_FRACTION, MISMATCH_OUTSIDE_FRACTION,
    NO_SIGNAL_GROUP_FRACTION, RATIO_EXTREME, RATIO_HIGH, RATIO_LOW, REJECTED_FRACTION,
    ZERO_ADVANTAGE_FRACTION,
};

/// Sum in row order (the order of the rows in the file, whatever the row-group layout).
fn sum(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |a, x| a + x)
}

fn mean(total: f64, n: u64) -> Option<f64> {
    (n > 0).then(|| total / n as f64)
}

/// The findings of one step.
pub fn step_report(step: Option<i64>, t: StepTally, checks: &Checks) -> StepReport {
    let mut r = StepReport {
        step,
        rows: t.rows,
        tokens: t.tokens,
        valid_tokens: t.valid_tokens,
        rows_without_valid_token: t.rows_without_valid_token,
        v1_padding_rows: t.padding_rows,
        rows_ending_in_tool_token: (checks.layout == Layout::Ragged)
            .then_some(t.rows_ending_in_tool_token),
        sequence_level: checks.sequence_level,
        masked_reward_rows: t.masked_reward_rows,
        masked_reward_tokens: t.masked_reward_tokens,
        tool_spans: ToolSpans {
            rows: t.span_rows,
            mean: mean(t.spans as f64, t.rows),
            max: t.max_spans,
        },
        ..Default::default()
    };
    let facts = &t.row_facts;

    // Score sums of the rows that are not V1 padding.
    let mut scores: Vec<f64> = facts
        .iter()
        .filter(|f| !f.padding && f.score.is_finite())
        .map(|f| f.score)
        .collect();
    let non_finite = facts
        .iter()
        .filter(|f| !f.padding && !f.score.is_finite())
        .count() as u64;
    r.score_sum = ScoreSums {
        distribution: Distribution::of(&mut scores),
        non_finite_rows: non_finite,
    };

    if checks.groups {
        let grouping = Grouping::by_key(t.groups.iter().map(|(k, _)| k));
        let members = grouping.members();
        let mut sizes = BTreeMap::new();
        let mut no_signal = 0;
        for g in &members {
            *sizes.entry(g.len()).or_insert(0u64) += 1;
            let first = t.groups[g[0]].1;
            no_signal += u64::from(g.iter().all(|&i| t.groups[i].1 == first));
        }
        r.groups = Some(Groups {
            count: members.len() as u64,
            sizes,
            expected_size: checks.rollout_n,
            no_signal,
        });
        let scores: Vec<Vec<f64>> = members
            .iter()
            .map(|g| g.iter().map(|&i| t.groups[i].1).collect())
            .collect();
        r.fragile = Some(fragile_groups(&scores));
    }

    if checks.kl {
        r.kl = Some(Kl {
            tokens: t.kl_tokens,
            mean_k1: mean(sum(facts.iter().map(|f| f.k1)), t.kl_tokens),
            mean_abs_k1: mean(sum(facts.iter().map(|f| f.abs_k1)), t.kl_tokens),
            mean_row_sum_k1: mean(sum(facts.iter().map(|f| f.k1)), t.rows),
            shaping: checks.shaping.as_ref().map(|(estimator, coef)| {
                // Rows whose penalty or score is not finite are left out of both means.
                let both: Vec<_> = facts
                    .iter()
                    .filter(|f| f.penalty.is_finite() && f.score.is_finite())
                    .collect();
                let n = both.len() as u64;
                KlShaping {
                    estimator: estimator.clone(),
                    coef: *coef,
                    rows_sign_flipped: t.sign_flips,
                    mean_abs_penalty: mean(sum(both.iter().map(|f| f.penalty.abs())), n),
                    mean_abs_score_sum: mean(sum(both.iter().map(|f| f.score.abs())), n),
                }
            }),
        });
    }
    if checks.mismatch {
        r.mismatch = Some(Mismatch {
            tokens: t.mismatch_tokens,
            mean_abs_diff: mean(sum(facts.iter().map(|f| f.mismatch)), t.mismatch_tokens),
            ratio_outside: t.ratio_outside,
            ratio_extreme: t.ratio_extreme,
        });
    }
    if checks.rejection {
        r.rejection = Some(Rejection {
            valid_tokens: t.valid_tokens,
            rejected_tokens: t.rejected_tokens,
            rows_with_valid_token: t.rows_with_valid_token,
            rows_fully_rejected: t.rows_fully_rejected,
            outside_mask: t.rejection_outside_mask,
        });
    }
    r.columns = t.columns;
    r.warnings = warnings(&r, checks);
    if let Some(l) = &checks.loss {
        r.warnings.extend(loss_warnings(l, &r, facts));
    }
    if let Some(f) = &r.fragile {
        r.notes = fragile_findings(f, &[checks.convention]).1;
    }
    r.notes.extend(unread_non_finite_note(&r, checks));
    r
}

/// What `advcalc loss` would flag on this step (`loss::findings`): bypass mode's token-mean
/// divisor with the rejection check's kept fraction, seq-mean-token-mean's length bias.
fn loss_warnings(l: &LossChecks, r: &StepReport, facts: &[RowFacts]) -> Vec<Warning> {
    let mut out = Vec::new();
    if let (true, AggMode::TokenMean, Some(j)) = (l.bypass_rejection, l.agg, &r.rejection)
        && j.rejected_tokens > 0
        && j.valid_tokens > 0
    {
        let kept = 1.0 - j.rejected_tokens as f64 / j.valid_tokens as f64;
        out.push(Warning {
            code: "bypass_token_mean_divisor",
            message: format!(
                "bypass mode's rejection drops {} of the tokens inside the loss (measured on-policy, log π = old_log_probs), but token-mean still divides by all of them (verl #4852): the loss and every gradient weight shrink to {:.3} of what the kept tokens alone would give; `advcalc loss` replays it with the run's log-probs",
                pct(1.0 - kept),
                kept
            ),
        });
    }
    if l.agg == AggMode::SeqMeanTokenMean || l.sapo {
        let valid = facts.iter().filter(|f| !f.padding).map(|f| f.valid);
        if let Some(message) = length_bias(valid, l.sapo) {
            out.push(Warning {
                code: "seq_mean_token_mean_length_bias",
                message,
            });
        }
    }
    out
}

/// The warnings a step's findings raise under `checks`' configuration, in report order.
pub fn warnings(r: &StepReport, checks: &Checks) -> Vec<Warning> {
    let convention = checks.convention;
    // rewards on mask-0 tokens matter only to an estimator that reads them under the mask
    let dropping: Vec<&str> = checks
        .estimators
        .iter()
        .filter(|e| e.info().rewards_under_mask)
        .map(|e| e.name())
        .collect();
    let drops = !dropping.is_empty();
    let (dropping, drop) = (
        dropping.join(" and "),
        if dropping.len() == 1 { "drops" } else { "drop" },
    );
    let estimators = names(checks);
    let mut w = Vec::new();
    let mut warn = |code: &'static str, message: String| w.push(Warning { code, message });

    let empty = r.rows_without_valid_token.saturating_sub(r.v1_padding_rows);
    if empty > 0 {
        let besides = if r.v1_padding_rows > 0 {
            format!(" besides {} verl V1 padding rows", r.v1_padding_rows)
        } else {
            String::new()
        };
        warn(
            "rows_without_valid_token",
            format!(
                "{empty} rows{besides} have no valid token (response_mask all 0, or an empty response): they train nothing but still count in group statistics; check the masks the agent loop writes"
            ),
        );
    }
    if let Some(n) = r.rows_ending_in_tool_token.filter(|&n| n > 0 && drops) {
        warn(
            "ends_in_tool_token",
            format!(
                "{n} rows end in a tool token (mask 0 at the last position): verl puts a sequence reward on the last position, where {dropping} {drop} it (reading rewards under the mask); the rollout may have stopped after a tool call"
            ),
        );
    }
    if r.masked_reward_rows > 0 && drops {
        warn(
            "masked_reward",
            format!(
                "{} rows carry non-zero rewards on mask-0 tokens ({} tokens): {dropping} {drop} them (reading rewards under the mask; the GRPO family sums them); put the reward on the last mask-1 token",
                r.masked_reward_rows, r.masked_reward_tokens
            ),
        );
    }
    if let Some(g) = &r.groups {
        match g.expected_size {
            Some(n) => {
                let off: u64 = g
                    .sizes
                    .iter()
                    .filter(|&(&size, _)| size as i64 != n)
                    .map(|(_, &c)| c)
                    .sum();
                if off > 0 {
                    warn(
                        "group_size_mismatch",
                        format!(
                            "{off} of {} groups do not have actor_rollout_ref.rollout.n = {n} rows (sizes {}): uids may be wrong, or rows were filtered or duplicated",
                            g.count,
                            histogram(&g.sizes)
                        ),
                    );
                }
            }
            None if g.sizes.len() > 1 => warn(
                "unequal_group_sizes",
                format!(
                    "group sizes vary ({}): group baselines differ in quality across groups, and uids may be wrong; pass --set actor_rollout_ref.rollout.n=N to check against the configured size",
                    histogram(&g.sizes)
                ),
            ),
            None => {}
        }
        if let Some(f) = fraction(g.no_signal, g.count).filter(|&f| f > NO_SIGNAL_GROUP_FRACTION) {
            warn(
                "no_signal_groups",
                format!(
                    "{} of {} groups ({}) have all-equal score sums (threshold {}): they give no learning signal (group-baseline advantages 0); the task may be too easy or too hard for the policy, the reward constant, or uids unique per row",
                    g.no_signal,
                    g.count,
                    pct(f),
                    pct(NO_SIGNAL_GROUP_FRACTION)
                ),
            );
        }
    }
    if let Some(f) = &r.fragile {
        for x in fragile_findings(f, &[convention]).0 {
            warn(x.code, x.message);
        }
    }
    if let Some(d) = r
        .score_sum
        .distribution
        .filter(|d| d.count >= 2 && d.min == d.max)
    {
        let what = if d.min == 0.0 {
            "score 0".to_string()
        } else {
            format!("have the same score sum {}", num(d.min))
        };
        warn(
            "constant_scores",
            format!(
                "all {} rows {what}: no row is better than another, so there is no learning signal; check that the reward reaches the dump",
                d.count
            ),
        );
    }
    if let Some(s) = r.kl.as_ref().and_then(|k| k.shaping.as_ref()) {
        if s.rows_sign_flipped > 0 {
            warn(
                "kl_flips_sign",
                format!(
                    "{} rows ({}) have a reward sum of the opposite sign to their score sum once the KL penalty (β = {}) is taken off: the penalty overrides the task reward; lower algorithm.kl_ctrl.kl_coef",
                    s.rows_sign_flipped,
                    pct(fraction(s.rows_sign_flipped, r.rows).unwrap_or(0.0)),
                    num(s.coef)
                ),
            );
        }
        if let (Some(p), Some(sc)) = (s.mean_abs_penalty, s.mean_abs_score_sum)
            && p > KL_DOMINANCE_RATIO * sc
        {
            warn(
                "kl_dominates",
                format!(
                    "the mean |β·ΣKL| per row ({}) exceeds the mean |score sum| ({}): the KL penalty, not the task reward, decides the advantages; lower algorithm.kl_ctrl.kl_coef or check ref_log_prob",
                    num(p),
                    num(sc)
                ),
            );
        }
    }
    if let Some(x) = &r.mismatch {
        let outside = fraction(x.ratio_outside, x.tokens).unwrap_or(0.0);
        let extreme = fraction(x.ratio_extreme, x.tokens).unwrap_or(0.0);
        let mut why = Vec::new();
        if outside > MISMATCH_OUTSIDE_FRACTION {
            why.push(format!(
                "{} of valid tokens have a ratio exp(old − rollout) outside [{RATIO_LOW}, {RATIO_HIGH}] (threshold {})",
                pct(outside),
                pct(MISMATCH_OUTSIDE_FRACTION)
            ));
        }
        if extreme > MISMATCH_EXTREME_FRACTION {
            why.push(format!(
                "{} above {RATIO_EXTREME} (threshold {})",
                pct(extreme),
                pct(MISMATCH_EXTREME_FRACTION)
            ));
        }
        if !why.is_empty() {
            warn(
                "train_rollout_mismatch",
                format!(
                    "{}: the trainer and the rollout engine disagree on the sampled tokens; check the engine's sampling settings and weights sync, or enable rollout correction",
                    why.join(", ")
                ),
            );
        }
    }
    if let Some(j) = &r.rejection {
        let tokens = fraction(j.rejected_tokens, j.valid_tokens).unwrap_or(0.0);
        let rows = fraction(j.rows_fully_rejected, j.rows_with_valid_token).unwrap_or(0.0);
        if tokens > REJECTED_FRACTION || rows > REJECTED_FRACTION {
            warn(
                "heavy_rejection",
                format!(
                    "rejection sampling removes {} of valid tokens and all valid tokens of {} of rows (threshold {}): most of the batch trains nothing; loosen algorithm.rollout_correction.rollout_rs_threshold or fix the mismatch",
                    pct(tokens),
                    pct(rows),
                    pct(REJECTED_FRACTION)
                ),
            );
        }
        if j.outside_mask > 0 {
            warn(
                "rejection_outside_mask",
                format!(
                    "the rejected mask is non-zero on {} mask-0 tokens: rejection should only clear tokens; this is a bug in advcalc, please report it",
                    j.outside_mask
                ),
            );
        }
    }
    let bad = r.non_finite_in(|c| refused(checks, c));
    if !bad.is_empty() {
        warn(
            "non_finite_values",
            format!(
                "non-finite values in columns {estimators} reads ({}): verl carries them into every group and batch statistic; advcalc run refuses them unless --allow-nonfinite",
                bad.join("; ")
            ),
        );
    }
    let positive: Vec<String> = r
        .columns
        .iter()
        .filter(|c| c.positive > 0)
        .map(|c| format!("{} {}", c.name, c.positive))
        .collect();
    if !positive.is_empty() {
        warn(
            "positive_log_probs",
            format!(
                "positive values in log-probability columns ({}): log π ≤ 0, so the column probably holds probabilities, or its sign is flipped",
                positive.join("; ")
            ),
        );
    }
    w
}

/// The configured estimators' names, for messages ("grpo", "grpo and gae").
fn names(checks: &Checks) -> String {
    let names: Vec<&str> = checks.estimators.iter().map(|e| e.name()).collect();
    names.join(" and ")
}

/// Whether `advcalc run` under `checks`' configuration refuses the non-finite values of
/// `column`: a column it reads, unless they are the trainer's own NaN scores.
fn refused(checks: &Checks, column: &str) -> bool {
    !own_nans(checks, column)
        && checks
            .read
            .as_ref()
            .is_none_or(|read| read.contains(column))
}

/// Whether `column`'s NaNs are the trainer's own scores, which its reader's note covers.
fn own_nans(checks: &Checks, column: &str) -> bool {
    checks.own_nan_scores && column == checks.score_column
}

/// The note for non-finite values that `advcalc run` does not refuse: in columns this
/// configuration does not read (the trainer's own NaN scores have their reader's note).
fn unread_non_finite_note(r: &StepReport, checks: &Checks) -> Option<Warning> {
    let unread = r.non_finite_in(|c| !(refused(checks, c) || own_nans(checks, c)));
    (!unread.is_empty()).then(|| Warning {
        code: "non_finite_unread",
        message: format!(
            "non-finite values in columns {} does not read ({}): they do not reach its advantages",
            names(checks),
            unread.join("; ")
        ),
    })
}

/// Warnings on the configured estimator's advantages of one step (`inspect -e`).
pub fn advantage_warnings(estimator: &str, stats: &TokenStats) -> Vec<Warning> {
    let mut w = Vec::new();
    if stats.valid_tokens > 0 && stats.zero_fraction > ZERO_ADVANTAGE_FRACTION {
        w.push(Warning {
            code: "zero_advantages",
            message: format!(
                "{} of the valid tokens have an advantage of exactly 0 under {estimator} (threshold {}): they add no gradient; see no_signal_groups, masked_reward and rows_without_valid_token",
                pct(stats.zero_fraction),
                pct(ZERO_ADVANTAGE_FRACTION)
            ),
        });
    }
    let largest = stats.min.abs().max(stats.max.abs());
    if largest > EXTREME_ADVANTAGE {
        w.push(Warning {
            code: "extreme_advantages",
            message: format!(
                "an advantage of magnitude {} under {estimator} (threshold {}): rewards on a scale the estimator passes through (RLOO, Dr. GRPO, REINFORCE, GAE without whitening do not normalise); a few tokens then dominate the update — rescale the rewards or pick a normalising estimator",
                num(largest),
                num(EXTREME_ADVANTAGE)
            ),
        });
    }
    w
}
