//! `--metrics`: verl's metric names and values per training batch (docs/reference/verl-0.9.1.md §2.2, §3.2–3.4)
//! plus advcalc's own. Row groups contribute token sums and per-row values per step in the
//! statistics pass; they are merged in row-group order and finished per step. The
//! `rollout_corr/...` maths is `shaping::correction_metrics`; this module reads a row group's
//! log probs through the `Pipeline` and writes the values as JSON.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::data::RowGroup;
use crate::data::TokenRole;
use crate::job::{Job, Plan};
use crate::loss::AggMode;
use crate::loss::length_bias::LengthBias;
use crate::pipeline::Pipeline;
use crate::plan::training_batches;
use crate::shaping::correction::Correction;
use crate::shaping::correction_metrics::{self, CorrectionParts};

/// One step's partial metrics.
#[derive(Debug, Clone, Default)]
pub struct StepParts {
    /// The rollout-correction parts (pass 1).
    correction: CorrectionParts,
    /// Advantage statistics over valid tokens (pass 2).
    adv: crate::estimators::moments::Moments,
    adv_min: Option<f64>,
    adv_max: Option<f64>,
    /// The loss stage's per-row sums (pass 2), by global row.
    pub loss_rows: Vec<(usize, crate::loss::row::RowSums)>,
}

fn fmax(a: Option<f64>, b: f64) -> Option<f64> {
    Some(a.map_or(b, |a| a.max(b)))
}
fn fmin(a: Option<f64>, b: f64) -> Option<f64> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// The larger / smaller of two optional extremes (`None`: nothing seen yet).
fn max_of_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    b.map_or(a, |v| fmax(a, v))
}
fn min_of_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    b.map_or(a, |v| fmin(a, v))
}

impl StepParts {
    pub fn merge(&mut self, o: StepParts) {
        self.correction.merge(o.correction);
        self.loss_rows.extend(o.loss_rows);
        self.adv.merge(&o.adv);
        self.adv_min = min_of_opt(self.adv_min, o.adv_min);
        self.adv_max = max_of_opt(self.adv_max, o.adv_max);
    }
}

pub type Parts = BTreeMap<Option<i64>, StepParts>;

/// The loss stage's per-row sums of an input of `rows` rows, by row, from pass 2's parts.
pub fn loss_rows(parts: &Parts, rows: usize) -> Vec<crate::loss::row::RowSums> {
    let mut out = vec![crate::loss::row::RowSums::default(); rows];
    for (r, sums) in parts.values().flat_map(|p| &p.loss_rows) {
        out[*r] = *sums;
    }
    out
}

pub fn merge(into: &mut Parts, other: Parts) {
    for (step, parts) in other {
        into.entry(step).or_default().merge(parts);
    }
}

/// Pass 1: the rollout-correction metric parts of a row group (original mask), by step;
/// none without both log-prob columns.
pub fn correction_parts(pipeline: &Pipeline, c: &Correction, group: &RowGroup) -> Parts {
    let (Some(old), Some(rollout)) = (
        pipeline.old_log_probs(group),
        group.token(TokenRole::RolloutLogProbs),
    ) else {
        return Parts::new();
    };
    correction_metrics::correction_parts(c, group, old, rollout)
        .into_iter()
        .map(|(step, correction)| {
            let parts = StepParts {
                correction,
                ..Default::default()
            };
            (step, parts)
        })
        .collect()
}

/// Pass 2: advantage statistics over the valid tokens of a row group.
pub fn advantage_parts(group: &RowGroup, mask: &[f32], advantages: &[f32]) -> Parts {
    let mut parts = Parts::new();
    for i in 0..group.rows() {
        let p = parts.entry(group.step_of(i)).or_default();
        for t in group.span(i) {
            if mask[t] != 0.0 {
                let a = advantages[t] as f64;
                p.adv.push(a);
                p.adv_min = fmin(p.adv_min, a);
                p.adv_max = fmax(p.adv_max, a);
            }
        }
    }
    parts
}

/// verl's `rollout_corr/...` metrics of one step (`shaping::correction_metrics`) into `out`.
pub fn correction_metrics(
    c: &Correction,
    p: &StepParts,
    is_norm: Option<f64>,
    out: &mut Map<String, Value>,
) {
    for (name, value) in correction_metrics::correction_metrics(c, &p.correction, is_norm) {
        out.insert(name, Value::from(value));
    }
}

/// advcalc's own advantage statistics of one step.
pub fn advantage_metrics(p: &StepParts, out: &mut Map<String, Value>) {
    let std = if p.adv.n > 1.0 {
        (p.adv.m2 / (p.adv.n - 1.0)).sqrt()
    } else {
        0.0
    };
    out.insert("advcalc/advantage_mean".into(), Value::from(p.adv.mean));
    out.insert("advcalc/advantage_std".into(), Value::from(std));
    out.insert(
        "advcalc/advantage_min".into(),
        Value::from(p.adv_min.unwrap_or(0.0)),
    );
    out.insert(
        "advcalc/advantage_max".into(),
        Value::from(p.adv_max.unwrap_or(0.0)),
    );
}

/// The `--metrics` JSON: one object per training batch (a single object without a step
/// column), verl's metric names where verl has them.
pub fn to_json(job: &Job<'_>, prepared: &Plan, parts: &Parts) -> Value {
    let (stats, kl_metrics, constants, plan) = (
        &prepared.stats,
        &prepared.kl_metrics,
        &prepared.constants,
        &prepared.plan,
    );
    let has_rollout = job.has_rollout();
    let pipeline = job.pipeline;
    let empty = StepParts::default();
    let mut loss: BTreeMap<Option<i64>, crate::loss::metrics::StepMetrics> =
        match (&pipeline.loss, &prepared.loss) {
            (Some(stage), Some(plan)) => {
                let rows = loss_rows(parts, stats.rows());
                crate::loss::metrics::step_metrics(
                    &stage.spec,
                    pipeline.bypass,
                    &plan.partition,
                    &rows,
                )
                .into_iter()
                .collect()
            }
            _ => BTreeMap::new(),
        };
    let mut steps = Vec::new();
    for (step, rows) in training_batches(stats.step.as_deref(), stats.rows()) {
        let mut m = Map::new();
        if let Some(s) = step {
            m.insert("step".into(), Value::from(s));
        }
        if let Some(&(current, beta)) = kl_metrics.get(&step) {
            m.insert("actor/reward_kl_penalty".into(), Value::from(current));
            m.insert("actor/reward_kl_penalty_coeff".into(), Value::from(beta));
        }
        let p = parts.get(&step).unwrap_or(&empty);
        if let Some(c) = pipeline.correction_runs(has_rollout) {
            correction_metrics(c, p, constants.get(step).is_norm, &mut m);
        }
        m.insert("advcalc/rows".into(), Value::from(rows.len()));
        let valid: f64 = rows.iter().map(|&r| stats.valid[r]).sum();
        m.insert("advcalc/valid_tokens".into(), Value::from(valid));
        m.insert(
            "advcalc/rows_without_valid_token".into(),
            Value::from(rows.iter().filter(|&&r| stats.valid[r] == 0.0).count()),
        );
        if !stats.uid.is_empty() {
            let grouping =
                crate::estimators::groups::Grouping::by_key(rows.iter().map(|&r| &stats.uid[r]));
            let members = grouping.members();
            let mut histogram = std::collections::BTreeMap::new();
            for g in &members {
                *histogram.entry(g.len()).or_insert(0usize) += 1;
            }
            let flat = members
                .iter()
                .filter(|g| {
                    g.iter()
                        .all(|&i| stats.score[rows[i]] == stats.score[rows[g[0]]])
                })
                .count();
            m.insert("advcalc/groups".into(), Value::from(members.len()));
            m.insert(
                "advcalc/group_size_histogram".into(),
                Value::Object(
                    histogram
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Value::from(v)))
                        .collect(),
                ),
            );
            m.insert(
                "advcalc/zero_variance_group_fraction".into(),
                Value::from(flat as f64 / members.len().max(1) as f64),
            );
        }
        m.insert(
            "advcalc/nan_rows_zeroed".into(),
            Value::from(plan.nan_rows()),
        );
        advantage_metrics(p, &mut m);
        if let Some(l) = loss.remove(&step) {
            m.extend(
                l.into_iter()
                    .map(|(name, value)| (name.to_string(), Value::from(value))),
            );
        }
        steps.push(Value::Object(m));
    }
    if stats.step.is_some() {
        Value::Array(steps)
    } else {
        steps.pop().unwrap_or(Value::Object(Map::new()))
    }
}

/// The length-bias view as JSON (`advcalc loss --json`, `docs/loss.md`), `configured` being
/// the run's `loss_agg_mode`.
pub fn length_bias_json(view: &LengthBias, configured: AggMode) -> Value {
    json!({
        "configured": configured.name(),
        "split": view.split,
        "length_quartile_bounds": view.bounds,
        "shortest": view.lengths.0,
        "longest": view.lengths.1,
        "modes": view.modes.iter().map(|m| json!({
            "loss_agg_mode": m.mode.name(),
            "share_by_length_quartile": m.quartiles,
            "share_positive": m.positive,
            "share_negative": 1.0 - m.positive,
            "token_weight_shortest_to_longest": m.short_to_long,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    //! The metric maths is tested by hand in `shaping::correction_metrics`; here: that verl's
    //! configuration reaches it through the pipeline and comes out as JSON, and advcalc's own
    //! advantage statistics. The batch (padding marked by mask 0):
    //!
    //! ```text
    //! row 0: mask [1, 1, 0]  old [-1, -0.5, -3]  rollout [-1, -1, -2]     log ρ [0, 0.5, (-1)]
    //! row 1: mask [1, 1]     old [-2, -1]        rollout [-1.5, -0.75]    log ρ [-0.5, -0.25]
    //! ```
    use super::*;
    use crate::config::{Config, ConfigSources};
    use crate::test_support::assert_close;

    const MASK: [&[f32]; 2] = [&[1.0, 1.0, 0.0], &[1.0, 1.0]];
    const OLD: [&[f32]; 2] = [&[-1.0, -0.5, -3.0], &[-2.0, -1.0]];
    const ROLLOUT: [&[f32]; 2] = [&[-1.0, -1.0, -2.0], &[-1.5, -0.75]];

    /// Rows `range` of the batch as one row group, with an optional step per row.
    fn group(range: std::ops::Range<usize>, step: Option<Vec<i64>>) -> RowGroup {
        RowGroup::from_rows(
            range.start,
            &MASK[range.clone()],
            &[
                (TokenRole::OldLogProbs, &OLD[range.clone()]),
                (TokenRole::RolloutLogProbs, &ROLLOUT[range]),
            ],
            step,
        )
    }

    /// The `--set` overrides of a rollout_correction section: (option, threshold) for IS
    /// and rejection.
    fn rollout_correction(
        is: Option<(&str, crate::config::Value)>,
        rs: Option<(&str, crate::config::Value)>,
    ) -> Vec<String> {
        let yaml = |v: &crate::config::Value| crate::config::to_yaml::scalar(v);
        let key = "algorithm.rollout_correction";
        let mut sets = Vec::new();
        if let Some((option, threshold)) = is {
            sets.push(format!("{key}.rollout_is={option}"));
            sets.push(format!("{key}.rollout_is_threshold={}", yaml(&threshold)));
        }
        if let Some((option, threshold)) = rs {
            sets.push(format!("{key}.rollout_rs={option}"));
            sets.push(format!("{key}.rollout_rs_threshold={}", yaml(&threshold)));
        }
        sets
    }

    /// verl's defaults with `sets` applied to the rollout_correction section: the pipeline
    /// and its correction.
    fn pipeline(sets: Vec<String>) -> (Pipeline, Correction) {
        let config = Config::load(&ConfigSources {
            sets: &sets,
            ..Default::default()
        })
        .unwrap();
        let p = Pipeline::new(&config.algorithm);
        let c = p.correction.clone().expect("correction configured");
        (p, c)
    }

    fn metrics_of(cfg: Vec<String>, is_norm: Option<f64>) -> Map<String, Value> {
        let (p, c) = pipeline(cfg);
        let parts = correction_parts(&p, &c, &group(0..2, None));
        assert_eq!(parts.keys().collect::<Vec<_>>(), [&None]);
        let mut out = Map::new();
        correction_metrics(&c, &parts[&None], is_norm, &mut out);
        out
    }

    /// The JSON holds the maths' metrics of the correction built by hand, each as its number.
    #[track_caller]
    fn assert_written(out: &Map<String, Value>, c: &Correction, is_norm: Option<f64>, n: usize) {
        let g = group(0..2, None);
        let (old, rollout) = (
            g.token(TokenRole::OldLogProbs).unwrap(),
            g.token(TokenRole::RolloutLogProbs).unwrap(),
        );
        let parts = correction_metrics::correction_parts(c, &g, old, rollout);
        let want = correction_metrics::correction_metrics(c, &parts[&None], is_norm);
        assert_eq!(want.len(), n);
        assert_eq!(out.len(), n, "{out:?}");
        for (k, v) in want {
            assert_eq!(out[&k], Value::from(v), "{k}");
        }
    }

    #[test]
    fn configured_corrections_write_the_maths_metrics() {
        use crate::shaping::correction::{IsLevel, IsSpec, RsAggregate, RsOption, RsStatistic};
        let is = |level, lower, upper, batch_normalize| IsSpec {
            level,
            upper,
            lower,
            batch_normalize,
        };
        // rollout_is and rollout_rs null: the correction step runs for its metrics only.
        let out = metrics_of(rollout_correction(None, None), None);
        assert_written(&out, &Correction::default(), None, 13);

        let cfg = rollout_correction(Some(("token", 1.5.into())), Some(("token_k1", 1.5.into())));
        let c = Correction {
            is: Some(is(IsLevel::Token, None, 1.5, false)),
            rs: vec![RsOption::new(
                "token_k1",
                RsAggregate::Token,
                RsStatistic::K1,
                (Some(1.0 / 1.5), 1.5),
            )],
        };
        assert_eq!(pipeline(cfg.clone()).1, c);
        assert_written(&metrics_of(cfg, None), &c, None, 44);

        let mut cfg = rollout_correction(
            Some(("sequence", 2.0.into())),
            Some(("seq_mean_k3", 0.07.into())),
        );
        cfg.push("algorithm.rollout_correction.rollout_is_batch_normalize=true".into());
        let c = Correction {
            is: Some(is(IsLevel::Sequence, None, 2.0, true)),
            rs: vec![RsOption::new(
                "seq_mean_k3",
                RsAggregate::SeqMean,
                RsStatistic::K3,
                (None, 0.07),
            )],
        };
        assert_eq!(pipeline(cfg.clone()).1, c);
        let out = metrics_of(cfg, Some(0.75));
        assert_eq!(out["rollout_corr/rollout_is_batch_norm_factor"], 0.75);
        assert_written(&out, &c, Some(0.75), 44);

        let cfg = rollout_correction(Some(("token", "0.7_1.5".into())), None);
        let c = Correction {
            is: Some(is(IsLevel::Token, Some(0.7), 1.5, false)),
            rs: Vec::new(),
        };
        assert_eq!(pipeline(cfg.clone()).1, c);
        assert_written(&metrics_of(cfg, None), &c, None, 28);
    }

    #[test]
    fn row_groups_merge_into_the_batch_and_steps_stay_apart() {
        let cfg = rollout_correction(Some(("token", 1.5.into())), Some(("token_k1", 1.5.into())));
        let (p, c) = pipeline(cfg);
        // Row by row, merged in order, writes the same JSON as the whole batch at once.
        let mut merged = correction_parts(&p, &c, &group(0..1, None));
        merge(&mut merged, correction_parts(&p, &c, &group(1..2, None)));
        let whole = correction_parts(&p, &c, &group(0..2, None));
        let (mut a, mut b) = (Map::new(), Map::new());
        correction_metrics(&c, &merged[&None], None, &mut a);
        correction_metrics(&c, &whole[&None], None, &mut b);
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (k, v) in &a {
            assert_close(
                k,
                &[v.as_f64().unwrap()],
                &[b[k].as_f64().unwrap()],
                1e-12,
                1e-12,
            );
        }
        // With a step column each step is its own batch.
        let parts = correction_parts(&p, &c, &group(0..2, Some(vec![3, 7])));
        assert_eq!(parts.keys().collect::<Vec<_>>(), [&Some(3), &Some(7)]);
        // Without both log-prob columns: nothing.
        let mut g = group(0..2, None);
        g.tokens.retain(|(r, _)| *r != TokenRole::RolloutLogProbs);
        assert!(correction_parts(&p, &c, &g).is_empty());
    }

    #[test]
    fn advantage_metrics_by_hand() {
        // Valid-token advantages (the mask-0 token's 9 is left out):
        // row 0 [1.5, -0.5, (9)], row 1 [0, -1]: mean 0, unbiased std √((2.25 + 0.25 + 0 +
        // 1)/3) = √(3.5/3) = 1.0801234, min -1, max 1.5.
        let g = group(0..2, None);
        let advantages = [1.5f32, -0.5, 9.0, 0.0, -1.0];
        let parts = advantage_parts(&g, &g.mask.values, &advantages);
        let mut out = Map::new();
        advantage_metrics(&parts[&None], &mut out);
        let got: Vec<f64> = [
            "advcalc/advantage_mean",
            "advcalc/advantage_std",
            "advcalc/advantage_min",
            "advcalc/advantage_max",
        ]
        .iter()
        .map(|k| out[*k].as_f64().unwrap())
        .collect();
        assert_eq!(out.len(), 4);
        assert_close(
            "advantage metrics",
            &got,
            &[0.0, 1.0801234497, -1.0, 1.5],
            1e-9,
            1e-9,
        );

        // Steps apart, and merged row group by row group: step 1 is row 1 alone
        // ([0, -1]: mean -0.5, std √0.5 = 0.7071068).
        let mut parts = advantage_parts(
            &group(0..1, Some(vec![0])),
            &[1.0, 1.0, 0.0],
            &[1.5, -0.5, 9.0],
        );
        merge(
            &mut parts,
            advantage_parts(&group(1..2, Some(vec![1])), &[1.0, 1.0], &[0.0, -1.0]),
        );
        let mut out = Map::new();
        advantage_metrics(&parts[&Some(1)], &mut out);
        assert_close(
            "step 1 mean, std",
            &[
                out["advcalc/advantage_mean"].as_f64().unwrap(),
                out["advcalc/advantage_std"].as_f64().unwrap(),
            ],
            &[-0.5, 0.5f64.sqrt()],
            1e-12,
            1e-12,
        );

        // Nothing valid: zeros, not ±inf or NaN.
        let mut out = Map::new();
        advantage_metrics(&StepParts::default(), &mut out);
        for k in ["mean", "std", "min", "max"] {
            assert_eq!(out[&format!("advcalc/advantage_{k}")], 0.0, "{k}");
        }
    }
}
