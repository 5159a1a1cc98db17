//! Numerically fragile groups (docs/inspect.md, `equal_inexact_scores` and
//! `tight_spread_groups`): groups where the trainers' float arithmetic departs from the exact
//! group-normalised advantage that advcalc writes. advcalc computes group statistics in f64
//! and keeps the exact answer as its output; this finding says where, and by about how much,
//! each trainer's own arithmetic would differ (docs/conventions.md, "Float residue").
//!
//! Two kinds of group (≥ 2 rows, finite scores):
//! - **equal inexact scores**: every row has the same score `x`, but float32 cannot average
//!   `n` copies of it exactly: some `k·x` (k ≤ n) is not a float32, so a torch reduction's
//!   mean can land an ulp or two away from `x` — depending on its summation order — while
//!   the std of equal values is 0 or a residue of the same size. The exact advantage is 0;
//!   a trainer dividing by `σ + ε` gives between `u/(2u + ε)` and `2u/ε` (u: the ulp of x).
//!   A score such as 0.5 (every `k·x` exact) is safe.
//! - **tight spread**: the scores differ, but so little that a trainer's ε, or float32
//!   rounding of the mean (and NeMo-RL's one-pass `E[x²] − E[x]²` variance), changes
//!   `(s − μ)/σ` by more than [`TIGHT_SPREAD_DEPARTURE`]. The relative departure of a
//!   two-pass rule is estimated as `ε/(σ + ε) + ulp32(μ)/σ`, an estimate of the size, not an
//!   emulation of any one kernel's order. NeMo-RL's one-pass leave-one-out std is emulated
//!   in float32, row order (`rloo_loo_std::one_pass_f32`), against the exact answer: this
//!   also catches groups whose *other* rows are equal but inexact (seven 0.3 and one 1.0),
//!   where NeMo's residue σ turns the exact 0.7 into thousands (NeMo#1518).
//!
//! The trainers' rules ([`RULES`]) are those of docs/conventions.md C2; the magnitudes the
//! trainers' own code gives on such groups are measured by the cross-trainer corpus
//! (docs/trainer-corpus.md) and quoted in docs/conventions.md.

use serde_json::{Value, json};

use super::Warning;
use crate::numbers::{num, pct};
use advcalc_maths::estimators::conventions::Convention;
use advcalc_maths::estimators::groups::Grouping;
use advcalc_maths::estimators::rloo_loo_std::{NemoOptions, one_pass_f32, rloo_loo_std};

/// A tight-spread group is reported when some trainer's arithmetic changes its normalised
/// advantages by more than this fraction: beyond 1 %, trainers visibly disagree on the same
/// batch, and a group-normalised advantage no longer means "standard deviations from the
/// group mean".
pub const TIGHT_SPREAD_DEPARTURE: f64 = 0.01;

/// NeMo's one-pass emulation costs O(n²) per group; larger groups (a `uid` that is not a
/// prompt, usually) are not evaluated for NeMo.
const ONE_PASS_MAX_ROWS: usize = 256;

/// How a trainer normalises a group, as far as the residue is concerned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FragileRule {
    /// The trainer and estimator, e.g. `verl grpo, SkyRL grpo`.
    pub trainer: &'static str,
    /// `σ + ε`.
    pub epsilon: f64,
    /// Computed in float32 (else float64, as open-instruct's numpy).
    pub float32: bool,
    /// A one-pass `E[x²] − E[x]²` leave-one-out variance behind a `σ > 0` gate (NeMo-RL).
    pub one_pass: bool,
    /// The trainer clips the advantage afterwards (OpenRLHF's `reward.clip_range`).
    pub clip: Option<f64>,
    /// The `--convention`s whose runs this rule's arithmetic concerns: a finding on the
    /// rule is a warning for them, a note for the others.
    pub conventions: &'static [Convention],
}

impl FragileRule {
    /// Whether a run under one of `conventions` uses this rule.
    pub fn concerns(&self, conventions: &[Convention]) -> bool {
        self.conventions.iter().any(|c| conventions.contains(c))
    }
}

/// The group-normalising rules of docs/conventions.md C2.
pub const RULES: [FragileRule; 5] = [
    FragileRule {
        trainer: "verl grpo, SkyRL grpo",
        epsilon: 1e-6,
        float32: true,
        one_pass: false,
        clip: None,
        conventions: &[Convention::Verl, Convention::Skyrl],
    },
    FragileRule {
        trainer: "TRL grpo",
        epsilon: 1e-4,
        float32: true,
        one_pass: false,
        clip: None,
        conventions: &[Convention::Trl],
    },
    FragileRule {
        trainer: "OpenRLHF group_norm",
        epsilon: 1e-9,
        float32: true,
        one_pass: false,
        clip: Some(10.0),
        conventions: &[Convention::Openrlhf],
    },
    FragileRule {
        trainer: "NeMo-RL grpo (rloo_loo_std)",
        epsilon: 1e-6,
        float32: true,
        one_pass: true,
        clip: None,
        conventions: &[Convention::NemoRl],
    },
    FragileRule {
        trainer: "open-instruct standard",
        epsilon: 1e-8,
        float32: false,
        one_pass: false,
        clip: None,
        conventions: &[Convention::OpenInstruct],
    },
];

/// What one rule's arithmetic gives on a step's fragile groups.
#[derive(Debug, Clone, PartialEq)]
pub struct Departure {
    /// The trainer's rule.
    pub rule: FragileRule,
    /// On the equal-inexact-score groups: the range of |advantage| it gives where the exact
    /// answer is 0: a mean residue `r` of 1 or 2 ulp of the score over `σ + ε`, where the std
    /// σ of equal values is itself 0 to 2 ulp (kernels differ): from `u/(2u + ε)` to `2u/ε`
    /// (NeMo: its one-pass arithmetic in row order); `None` when it gives 0 there (float64) or
    /// there is no such group.
    pub equal_scores: Option<(f64, f64)>,
    /// The same after the trainer's clip, when it clips.
    pub equal_scores_clipped: Option<(f64, f64)>,
    /// On the tight-spread groups: the largest estimated relative departure from the exact
    /// `(s − μ)/σ`; `None` when there is no such group.
    pub tight_spread: Option<f64>,
}

/// A step's numerically fragile groups.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fragile {
    /// Groups of ≥ 2 equal scores float32 cannot average exactly.
    pub equal_inexact_groups: u64,
    /// Their rows.
    pub equal_inexact_rows: u64,
    /// The equal score of largest magnitude among them (the one that gives the largest
    /// residue).
    pub equal_inexact_example: Option<f64>,
    /// Groups whose spread some rule's ε or float32 arithmetic changes by more than
    /// [`TIGHT_SPREAD_DEPARTURE`].
    pub tight_spread_groups: u64,
    /// Their rows.
    pub tight_spread_rows: u64,
    /// Per rule, in [`RULES`] order; empty when there is no fragile group.
    pub departures: Vec<Departure>,
}

impl Fragile {
    /// Whether there is anything to report.
    pub fn any(&self) -> bool {
        self.equal_inexact_groups + self.tight_spread_groups > 0
    }
}

/// The spacing of float32 numbers at `x` (its ulp).
pub fn ulp32(x: f64) -> f64 {
    let f = (x as f32).abs();
    if !f.is_finite() {
        return f64::NAN;
    }
    (f32::from_bits(f.to_bits() + 1) - f) as f64
}

/// Whether float32 averages `n` copies of `x` exactly in any summation order: every partial
/// sum `k·x` (k ≤ n) is a float32 (then `n·x / n` is `x` exactly). `x` is taken as float32,
/// as the trainers hold rewards; `k·x` is exact in f64 (a 24-bit significand times k).
pub fn mean_is_exact(x: f64, n: usize) -> bool {
    let x = x as f32 as f64;
    (2..=n).all(|k| {
        let kx = k as f64 * x;
        (kx as f32) as f64 == kx
    })
}

/// `(n, mean, sample σ)` of a group, in f64.
fn moments(s: &[f64]) -> (f64, f64, f64) {
    let n = s.len() as f64;
    let mean = s.iter().sum::<f64>() / n;
    let var = s.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (n, mean, var.sqrt())
}

/// One rule's relative departure from the exact `(s − μ)/σ` on a group with a spread
/// (σ > 0): estimated for a two-pass rule; for NeMo's one-pass leave-one-out std, its
/// float32 arithmetic in row order against the exact answer, per row
/// `|a32 − a| / max(|a|, 1)` (a residue σ behind the `σ > 0` gate can turn an exact 0.7
/// into thousands, NeMo#1518).
fn spread_departure(rule: &FragileRule, s: &[f64]) -> f64 {
    if rule.one_pass && s.len() > ONE_PASS_MAX_ROWS {
        return 0.0; // not evaluated (see ONE_PASS_MAX_ROWS)
    }
    if rule.one_pass {
        let grouping = Grouping {
            group_of_row: vec![0; s.len()],
            n_groups: 1,
        };
        let exact = rloo_loo_std(s, &grouping, NemoOptions::default());
        let f32 = one_pass_f32(s, &grouping, NemoOptions::default());
        return exact
            .iter()
            .zip(&f32)
            .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
            .fold(0.0, f64::max);
    }
    let (n, mean, sd) = moments(s);
    // open-instruct divides by the population std
    let sigma = if rule.float32 {
        sd
    } else {
        sd * ((n - 1.0) / n).sqrt()
    };
    let mut d = rule.epsilon / (sigma + rule.epsilon);
    if rule.float32 {
        d += ulp32(mean) / sigma;
    }
    d
}

/// The fragile groups among `groups` (each a group's scores, in row order).
pub fn fragile_groups(groups: &[Vec<f64>]) -> Fragile {
    let mut f = Fragile::default();
    let mut worst_spread = [0.0f64; RULES.len()];
    let mut nemo_equal: Option<(f64, f64)> = None;
    for s in groups {
        if s.len() < 2 || s.iter().any(|x| !x.is_finite()) {
            continue;
        }
        let x = s[0];
        if s.iter().all(|&y| y == x) {
            if mean_is_exact(x, s.len()) {
                continue;
            }
            f.equal_inexact_groups += 1;
            f.equal_inexact_rows += s.len() as u64;
            if f.equal_inexact_example.is_none_or(|e| x.abs() > e.abs()) {
                f.equal_inexact_example = Some(x);
            }
            if s.len() > ONE_PASS_MAX_ROWS {
                continue; // NeMo not evaluated; the two-pass rules' range needs no emulation
            }
            // NeMo's one-pass leave-one-out arithmetic in row order (advcalc's emulation)
            let grouping = Grouping {
                group_of_row: vec![0; s.len()],
                n_groups: 1,
            };
            let a = one_pass_f32(s, &grouping, NemoOptions::default());
            let big = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            nemo_equal = Some(nemo_equal.map_or((big, big), |(lo, hi)| (lo.min(big), hi.max(big))));
            continue;
        }
        let d: Vec<f64> = RULES.iter().map(|r| spread_departure(r, s)).collect();
        if d.iter().any(|&v| v > TIGHT_SPREAD_DEPARTURE) {
            f.tight_spread_groups += 1;
            f.tight_spread_rows += s.len() as u64;
            for (w, v) in worst_spread.iter_mut().zip(&d) {
                *w = w.max(*v);
            }
        }
    }
    if !f.any() {
        return f;
    }
    let ulp = f.equal_inexact_example.map(ulp32);
    f.departures = RULES
        .iter()
        .zip(worst_spread)
        .map(|(rule, worst)| {
            let equal_scores = match (ulp, rule.float32, rule.one_pass) {
                (None, _, _) | (_, false, _) => None,
                (Some(_), true, true) => nemo_equal.filter(|&(_, hi)| hi > 0.0),
                (Some(u), true, false) => {
                    Some((u / (2.0 * u + rule.epsilon), 2.0 * u / rule.epsilon))
                }
            };
            let equal_scores_clipped = rule.clip.and_then(|c| {
                equal_scores
                    .filter(|&(_, hi)| hi > c)
                    .map(|(lo, hi)| (lo.min(c), hi.min(c)))
            });
            Departure {
                rule: *rule,
                equal_scores,
                equal_scores_clipped,
                tight_spread: (f.tight_spread_groups > 0).then_some(worst),
            }
        })
        .collect();
    f
}

/// `fragile_groups` in the JSON (docs/inspect.md).
pub fn fragile_json(f: &Fragile) -> Value {
    let pair = |p: Option<(f64, f64)>| p.map_or(Value::Null, |(lo, hi)| json!([lo, hi]));
    json!({
        "equal_inexact_scores": {
            "groups": f.equal_inexact_groups,
            "rows": f.equal_inexact_rows,
            "example_score": f.equal_inexact_example.map_or(Value::Null, Value::from),
        },
        "tight_spread": {
            "groups": f.tight_spread_groups,
            "rows": f.tight_spread_rows,
            "departure_threshold": TIGHT_SPREAD_DEPARTURE,
        },
        "trainers": f.departures.iter().map(|d| json!({
            "trainer": d.rule.trainer,
            "epsilon": d.rule.epsilon,
            "float32": d.rule.float32,
            "equal_scores_abs_advantage": pair(d.equal_scores),
            "equal_scores_abs_advantage_clipped": pair(d.equal_scores_clipped),
            "tight_spread_relative_departure": d.tight_spread.map_or(Value::Null, Value::from),
        })).collect::<Vec<_>>(),
    })
}

/// A relative departure for people: a percentage, or `N×` past 10 (a residue that turns an
/// advantage of 0.7 into 7428 is not usefully a percentage).
pub fn departure(t: f64) -> String {
    if t >= 10.0 {
        format!("{}×", num(t))
    } else {
        pct(t)
    }
}

/// `n group` / `n groups`.
pub fn groups(n: u64) -> String {
    format!("{n} group{}", if n == 1 { "" } else { "s" })
}

/// The table rows of a step's fragile groups: counts, then one row per trainer.
pub fn fragile_rows(f: &Fragile) -> Vec<(String, String)> {
    let mut rows = vec![(
        "fragile groups".to_string(),
        format!(
            "{} ({} rows) of equal inexact scores{}; {} ({} rows) of tight spread",
            groups(f.equal_inexact_groups),
            f.equal_inexact_rows,
            f.equal_inexact_example
                .map(|x| format!(" (e.g. {})", num(x)))
                .unwrap_or_default(),
            groups(f.tight_spread_groups),
            f.tight_spread_rows
        ),
    )];
    for d in &f.departures {
        let mut parts = Vec::new();
        if f.equal_inexact_groups > 0 {
            parts.push(match d.equal_scores {
                None => "equal scores: 0 (exact)".to_string(),
                Some((lo, hi)) => format!(
                    "equal scores: |a| from {} to {}{}",
                    num(lo),
                    num(hi),
                    d.equal_scores_clipped
                        .map(|(_, c)| format!(" (at most {} after its clip)", num(c)))
                        .unwrap_or_default()
                ),
            });
        }
        if let Some(t) = d.tight_spread {
            parts.push(format!("tight spread: up to {} off", departure(t)));
        }
        rows.push((format!("  {}", d.rule.trainer), parts.join("; ")));
    }
    rows
}

/// The findings of a step's numerically fragile groups (also `compare`'s): which trainers'
/// arithmetic departs from the exact answer there, and by about how much. A finding is a
/// warning when it concerns the trainer of the run (`conventions`: `--convention`, verl by
/// default), and a note when only other trainers' arithmetic departs: `(warnings, notes)`.
pub fn fragile_findings(f: &Fragile, conventions: &[Convention]) -> (Vec<Warning>, Vec<Warning>) {
    let (mut warnings, mut notes) = (Vec::new(), Vec::new());
    let who = |pick: &dyn Fn(&Departure) -> Option<String>| -> String {
        f.departures
            .iter()
            .filter_map(|d| pick(d).map(|what| format!("{} {what}", d.rule.trainer)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let concerned = |departs: &dyn Fn(&Departure) -> bool| {
        f.departures
            .iter()
            .any(|d| d.rule.concerns(conventions) && departs(d))
    };
    let run = conventions
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ");
    if f.equal_inexact_groups > 0 {
        let departs = who(&|d| {
            d.equal_scores.map(|(_, hi)| {
                format!(
                    "up to ±{}{}",
                    num(hi),
                    d.equal_scores_clipped
                        .map(|(_, c)| format!(" (±{} after its clip)", num(c)))
                        .unwrap_or_default()
                )
            })
        });
        let exact = who(&|d| d.equal_scores.is_none().then(|| "0".to_string()));
        let finding = Warning {
            code: "equal_inexact_scores",
            message: format!(
                "{} ({} rows) of equal scores that float32 cannot average exactly (e.g. {}): the exact advantage is 0, as advcalc writes, but a trainer's float32 mean lands an ulp or two off while the std is 0 or a residue as small, so it trains on noise, the same sign on every row of the group: {departs} per row; {exact}. Round rewards to multiples of a power of two (e.g. 1/1024), or drop zero-variance groups before training",
                groups(f.equal_inexact_groups),
                f.equal_inexact_rows,
                f.equal_inexact_example.map(num).unwrap_or_default(),
            ),
        };
        if concerned(&|d| d.equal_scores.is_some()) {
            warnings.push(finding);
        } else {
            notes.push(not_this_run(finding, &run));
        }
    }
    if f.tight_spread_groups > 0 {
        let over = |d: &Departure| d.tight_spread.is_some_and(|t| t > TIGHT_SPREAD_DEPARTURE);
        let departs = who(&|d| {
            d.tight_spread
                .filter(|&t| t > TIGHT_SPREAD_DEPARTURE)
                .map(|t| format!("up to {}", departure(t)))
        });
        let finding = Warning {
            code: "tight_spread_groups",
            message: format!(
                "{} ({} rows) with scores so close (within the group, or among a row's leave-one-out siblings for NeMo-RL) that a trainer's ε or float32 arithmetic changes their normalised advantages by more than {}: {departs} off the exact answer; trainers disagree on these rows. Rescale the rewards, or use a mean-only estimator (drgrpo) for such groups",
                groups(f.tight_spread_groups),
                f.tight_spread_rows,
                pct(TIGHT_SPREAD_DEPARTURE),
            ),
        };
        if concerned(&over) {
            warnings.push(finding);
        } else {
            notes.push(not_this_run(finding, &run));
        }
    }
    (warnings, notes)
}

/// A fragile-group finding that concerns only other trainers than the run's: a note that
/// says so first.
fn not_this_run(finding: Warning, run: &str) -> Warning {
    Warning {
        code: finding.code,
        message: format!(
            "not this run's trainer ({run}: its arithmetic stays within the threshold here), other trainers': {}",
            finding.message
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulps_by_hand() {
        // 0.3 lies in [0.25, 0.5): spacing 2^−2 · 2^−23 = 2^−25
        assert_eq!(ulp32(0.3), 2f64.powi(-25));
        assert_eq!(ulp32(1.0), 2f64.powi(-23));
        assert_eq!(ulp32(0.5), 2f64.powi(-24));
    }

    // 0.5, 0, 1, 0.25, 0.75: every k·x is a float32 for small k. 0.3 as float32 is
    // 10066330·2^−25 (a 24-bit odd significand): 3·x needs 26 bits. 0.1 likewise.
    #[test]
    fn which_means_are_exact() {
        for x in [0.5, 0.0, 1.0, 0.25, 0.75, 3.0, -2.0] {
            assert!(mean_is_exact(x, 8), "{x}");
        }
        for x in [0.3, 0.1, 0.7, 1.0 / 3.0] {
            assert!(!mean_is_exact(x, 8), "{x}");
        }
        // two copies are always exact (doubling is exact)
        assert!(mean_is_exact(0.3, 2));
    }

    // Eight rows of 0.3 are flagged; eight rows of 0.5 are not. With u = ulp(0.3) = 2^−25 =
    // 2.980232e−8, from u/(2u + ε) to 2u/ε: verl/SkyRL .028126–.059605, TRL
    // 2.978457e−4–5.960464e−4, OpenRLHF .491750–59.60464 (10 after its clip), open-instruct
    // (float64) nothing.
    #[test]
    fn equal_non_dyadic_scores() {
        let f = fragile_groups(&[vec![0.3; 8], vec![0.5; 8], vec![1.0, 0.0]]);
        assert_eq!((f.equal_inexact_groups, f.equal_inexact_rows), (1, 8));
        assert_eq!(f.tight_spread_groups, 0);
        let close = |(lo, hi): (f64, f64), want: (f64, f64)| {
            assert!(
                (lo - want.0).abs() < 1e-5 * want.0 && (hi - want.1).abs() < 1e-5 * want.1,
                "{lo} {hi}"
            )
        };
        close(f.departures[0].equal_scores.unwrap(), (0.028126, 0.059605));
        close(
            f.departures[1].equal_scores.unwrap(),
            (2.978457e-4, 5.960464e-4),
        );
        close(f.departures[2].equal_scores.unwrap(), (0.49175, 59.60464));
        close(
            f.departures[2].equal_scores_clipped.unwrap(),
            (0.49175, 10.0),
        );
        assert_eq!(f.departures[0].equal_scores_clipped, None);
        assert_eq!(f.departures[4].equal_scores, None);
        assert!(f.departures.iter().all(|d| d.tight_spread.is_none()));
        // nothing fragile: no departures listed
        let f = fragile_groups(&[vec![0.5; 8], vec![1.0, 0.0, 0.0]]);
        assert!(!f.any() && f.departures.is_empty());
    }

    // [1, 1.001]: σ = .000707107 (sample), ulp32(1.0005)/σ = 1.192093e−7/.000707107 =
    // .000169 for every float32 rule. TRL: 1e−4/(σ + 1e−4) = .123906 (+ .000169); verl:
    // 1e−6/(σ + 1e−6) = .001412 (+ .000169). Flagged (TRL > 1 %).
    // [0, 1]: σ = .707107, every rule well under 1 %: not flagged.
    #[test]
    fn tight_spreads() {
        let f = fragile_groups(&[vec![1.0, 1.001], vec![0.0, 1.0]]);
        assert_eq!((f.tight_spread_groups, f.tight_spread_rows), (1, 2));
        let trl = f.departures[1].tight_spread.unwrap();
        assert!((trl - (0.123906 + 0.000169)).abs() < 1e-5, "{trl}");
        let verl = f.departures[0].tight_spread.unwrap();
        assert!((verl - (0.001412 + 0.000169)).abs() < 1e-5, "{verl}");
        assert_eq!(f.equal_inexact_groups, 0);
        assert!(f.departures.iter().all(|d| d.equal_scores.is_none()));
    }

    #[test]
    fn singletons_and_non_finite_groups_are_skipped() {
        let f = fragile_groups(&[vec![0.3], vec![0.3, f64::NAN, 0.3]]);
        assert!(!f.any());
    }

    // NeMo#1518: seven rows of 0.3 and one of 1.0. Every two-pass rule is robust (σ = .247),
    // but NeMo's float32 one-pass σ of the 1.0 row's others is a residue > 0, so its exact .7
    // is divided by it.
    #[test]
    fn nemo_one_pass_residue() {
        let mut s = vec![0.3f32 as f64; 8];
        s[7] = 1.0;
        let f = fragile_groups(&[s]);
        assert_eq!((f.tight_spread_groups, f.equal_inexact_groups), (1, 0));
        assert!(f.departures[3].tight_spread.unwrap() > 100.0);
        assert!(f.departures[0].tight_spread.unwrap() < TIGHT_SPREAD_DEPARTURE);
    }
}
