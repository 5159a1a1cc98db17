//! The loss configuration's hostile-input entry, shared by the fuzz target
//! (`fuzz/fuzz_targets/loss_config.rs`) and `tests/hostile_loss.rs`, which runs it on the
//! seed corpus beside this file (`tests/hostile/loss_config/*.yaml`).
//!
//! [`check`] reads any text as `advcalc loss`'s `--config` (the actor section with
//! `rollout.n`, `rollout.response_length` and `algorithm`), then, when it loads, replays the
//! loss kernels on a tiny synthetic step of G or 2G rows (G = `ppo_mini_batch_size ×
//! rollout.n`, when G ≤ [`MAX_ROWS`]): the partition, the plan, every row's `pg_losses`,
//! `grad_weights` and `kl_losses`, the step's metrics, the findings and the length-bias view.
//! Its contract: a configuration is refused with a usage error (exit 2), or its replay gives
//! finite numbers everywhere; never a panic.
#![allow(dead_code)] // each includer uses its part

use advcalc::{Config, ConfigSources, ErrorKind};
use advcalc_maths::loss::LossMode;
use advcalc_maths::loss::plan::LossPlan;
use advcalc_maths::loss::policy::AnyLossStats;
use advcalc_maths::loss::policy::kl_cov::KlCovRows;
use advcalc_maths::loss::row::{KlCovTokens, RowInputs, RowSums, row};

/// The most rows the synthetic step has (larger mini-batches are checked as configuration
/// only).
pub const MAX_ROWS: usize = 512;

/// Tokens per synthetic row.
const WIDTH: usize = 6;

/// What [`check`] found for a configuration that loads.
#[derive(Debug)]
pub struct Replay {
    /// Rows replayed: 0 when G > [`MAX_ROWS`].
    pub rows: usize,
    /// The first non-finite number, named (`pg_losses row 3 token 1: NaN`); `None` when
    /// every output and metric is finite.
    pub non_finite: Option<String>,
}

/// Read `text` as the loss stage's configuration and replay it on the synthetic step. An
/// `Err` is the configuration's refusal (a usage error, or a data error the configuration
/// itself implies).
pub fn check(text: &str) -> Result<Replay, advcalc::Error> {
    let config = Config::load(&ConfigSources {
        actor: true,
        text: Some(("loss_config.yaml", text)),
        ..Default::default()
    })?;
    let spec = config.loss.expect("actor: true reads the loss stage");
    let g = spec.mini_batch_rows;
    if g == 0 || g > MAX_ROWS {
        assert!(g > 0, "a mini-batch of 0 rows was accepted");
        return Ok(Replay {
            rows: 0,
            non_finite: None,
        });
    }
    let rows = if 2 * g <= MAX_ROWS { 2 * g } else { g };
    let step = Step::new(rows, g);
    let kl_cov: Option<AnyLossStats> = (spec.mode == LossMode::KlCov).then(|| {
        let tokens: Vec<KlCovTokens> = (0..rows)
            .map(|r| {
                (0..WIDTH)
                    .filter(|&t| step.mask[r][t] > 0.0)
                    .map(|t| (step.advantages[r][t], step.log_probs[r][t], t))
                    .collect()
            })
            .collect();
        AnyLossStats::KlCov(KlCovRows(tokens))
    });
    let valid: Vec<f64> = step
        .mask
        .iter()
        .map(|m| m.iter().map(|&x| x as f64).sum())
        .collect();
    let batches = vec![(None, (0..rows).collect::<Vec<usize>>())];
    let plan = LossPlan::new(&spec, &batches, &valid, kl_cov.as_ref()).map_err(|u| {
        advcalc::Error::data(format!(
            "{} rows do not cut into mini-batches of {}",
            u.rows, u.mini_batch_rows
        ))
    })?;
    let mut non_finite = None;
    let mut note = |what: String| {
        non_finite.get_or_insert(what);
    };
    let mut sums: Vec<RowSums> = Vec::with_capacity(rows);
    let mut scratch = Vec::new();
    for r in 0..rows {
        let mut pg = vec![0.0f32; WIDTH];
        let mut gw = vec![0.0f32; WIDTH];
        let mut kl = vec![0.0f32; WIDTH];
        let input = RowInputs {
            advantages: &step.advantages[r],
            log_probs: &step.log_probs[r],
            old: &step.old[r],
            reference: Some(&step.reference[r]),
            mask: &step.mask[r],
            is_weights: None,
        };
        let s = row(
            &spec,
            &plan.place(r),
            &mut scratch,
            &input,
            &mut pg,
            &mut gw,
            spec.kl.is_some().then_some(&mut kl[..]),
        );
        for (name, values) in [
            ("pg_losses", &pg),
            ("grad_weights", &gw),
            ("kl_losses", &kl),
        ] {
            if let Some(t) = values.iter().position(|x| !x.is_finite()) {
                note(format!("{name} row {r} token {t}: {}", values[t]));
            }
        }
        sums.push(s);
    }
    for (step_id, metrics) in advcalc_maths::loss::metrics::step_metrics(
        &spec,
        spec.bypass.is_some(),
        &plan.partition,
        &sums,
    ) {
        for (name, value) in &metrics {
            if !value.is_finite() {
                note(format!("metric {name} (step {step_id:?}): {value}"));
            }
        }
    }
    let _ = advcalc_maths::loss::findings::findings(&spec, &plan, &sums, &valid);
    let correct: Vec<bool> = (0..rows).map(|r| r % 3 == 0).collect();
    if let Some(view) =
        advcalc_maths::loss::length_bias::length_bias(&plan, &sums, &valid, &correct, "score")
    {
        let _ = view.to_table(spec.agg);
    }
    Ok(Replay { rows, non_finite })
}

/// [`check`]'s contract, as the fuzz target asserts it: refused as a usage error, or replayed
/// to finite numbers.
pub fn assert_sound(text: &str) {
    match check(text) {
        Ok(Replay {
            non_finite: Some(what),
            ..
        }) => panic!("a configuration that loads gives non-finite numbers: {what}\n{text}"),
        Ok(_) => {}
        Err(e) => assert_eq!(
            e.kind(),
            ErrorKind::Usage,
            "a configuration refused as other than a usage error: {e}\n{text}"
        ),
    }
}

/// A deterministic step of `rows` rows × [`WIDTH`] tokens: log-probabilities below 0,
/// advantages of both signs and 0, ratios inside and outside the usual clip ranges (Δ from
/// −0.4 to 1.2), short rows, and in each mini-batch of G
/// ≥ 2 rows one fully masked row (never a whole mini-batch: verl's token-mean divides by
/// its tokens).
struct Step {
    advantages: Vec<Vec<f32>>,
    log_probs: Vec<Vec<f32>>,
    old: Vec<Vec<f32>>,
    reference: Vec<Vec<f32>>,
    mask: Vec<Vec<f32>>,
}

impl Step {
    fn new(rows: usize, g: usize) -> Step {
        const DELTAS: [f32; 6] = [-0.4, -0.05, 0.0, 0.05, 0.3, 1.2];
        let mut s = Step {
            advantages: Vec::new(),
            log_probs: Vec::new(),
            old: Vec::new(),
            reference: Vec::new(),
            mask: Vec::new(),
        };
        for r in 0..rows {
            let length = if g >= 2 && r % g == 1 {
                0
            } else {
                1 + r % WIDTH
            };
            let base = (r % 5) as f32 - 2.0;
            let old: Vec<f32> = (0..WIDTH)
                .map(|t| -1.5 - 0.3 * (t % 3) as f32 - 0.05 * (r % 4) as f32)
                .collect();
            s.log_probs.push(
                (0..WIDTH)
                    .map(|t| old[t] + DELTAS[(r + t) % DELTAS.len()])
                    .collect(),
            );
            s.reference
                .push((0..WIDTH).map(|t| old[t] - 0.02 * (t % 2) as f32).collect());
            s.old.push(old);
            s.advantages
                .push((0..WIDTH).map(|t| 0.7 * base + 0.1 * t as f32).collect());
            s.mask.push(
                (0..WIDTH)
                    .map(|t| if t < length { 1.0 } else { 0.0 })
                    .collect(),
            );
        }
        s
    }
}
