//! The inspect report: per-step findings and their warnings, as stable JSON (documented
//! key by key in docs/inspect.md) and as aligned tables for a terminal.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::analysis::Warning;
use crate::analysis::fragile::{Fragile, fragile_json, fragile_rows};
use crate::analysis::logged::LoggedCheck;
use crate::numbers::{num, pct};
use crate::shaping::scores::Layout;

use super::distribution::Distribution;
use super::tally::ColumnCounts;
use super::thresholds::{RATIO_EXTREME, RATIO_HIGH, RATIO_LOW};

/// The findings, per step.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The input's name (`<stdin>` for `-`).
    pub file: String,
    /// The `--layout` the dump was read with.
    pub layout: Layout,
    /// What was not checked and why, and configuration notes.
    pub notes: Vec<String>,
    /// One section per `step` value, in step order (one section without a step column).
    pub steps: Vec<StepReport>,
    /// How the file was made, when advcalc wrote it: its `advcalc.*` key-value metadata
    /// (`docs/inspect.md`), keys without the prefix, in file order.
    pub provenance: Vec<(String, String)>,
    /// Another trainer's dump: its logged advantages against advcalc's (docs/trainers.md).
    pub logged: Option<LoggedCheck>,
}

/// One step's findings.
#[derive(Debug, Clone, Default)]
pub struct StepReport {
    /// The `step` value; `None` without a step column (the whole file).
    pub step: Option<i64>,
    /// Rows in the step.
    pub rows: u64,
    /// Positions: every element of the token lists, mask 0 included.
    pub tokens: u64,
    /// Mask-1 tokens of the input mask (policy tokens).
    pub valid_tokens: u64,
    /// Rows with no mask-1 token, empty responses and V1 padding rows included.
    pub rows_without_valid_token: u64,
    /// verl V1 padding rows (a `pad…` uid, one token, mask and score 0): expected, and left
    /// out of the group and score checks.
    pub v1_padding_rows: u64,
    /// `None` under `--layout padded`, where trailing mask-0 tokens are padding.
    pub rows_ending_in_tool_token: Option<u64>,
    /// IN has one score per row and no tokens (verl's JSONL, a TRL dump): the token checks
    /// (mask, tool spans, KL, mismatch) do not apply, and the text table leaves them out.
    pub sequence_level: bool,
    /// Rows with a non-zero, non-NaN score on a mask-0 position.
    pub masked_reward_rows: u64,
    /// Mask-0 positions with a non-zero, non-NaN score.
    pub masked_reward_tokens: u64,
    /// Tool spans (runs of mask-0 tokens followed by a mask-1 token) per row.
    pub tool_spans: ToolSpans,
    /// `None` without a `uid` column.
    pub groups: Option<Groups>,
    /// Numerically fragile groups (`fragile.rs`); `None` without a `uid` column.
    pub fragile: Option<Fragile>,
    /// Per-row score sums (over every position), V1 padding rows left out.
    pub score_sum: ScoreSums,
    /// `None` without `old_log_probs` and `ref_log_prob`.
    pub kl: Option<Kl>,
    /// `None` without `old_log_probs` and `rollout_log_probs`.
    pub mismatch: Option<Mismatch>,
    /// `None` unless rejection sampling is configured and runs.
    pub rejection: Option<Rejection>,
    /// NaN/±inf (and, for log-prob columns, positive values) per inspected column.
    pub columns: Vec<ColumnCounts>,
    /// Advantage statistics of the configured estimator (`-e`), rendered as a section of
    /// its own when present.
    pub advantages: Option<Value>,
    /// The step's warnings, in report order.
    pub warnings: Vec<Warning>,
    /// Findings that concern other trainers than the run's (`--convention`), with the code
    /// they would warn under; they do not count as warnings (`--deny-warnings`).
    pub notes: Vec<Warning>,
}

/// Tool spans per row: rows with 0, 1, 2, 3 or more spans, the mean and the maximum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSpans {
    /// Rows with 0, 1, 2, and 3 or more spans.
    pub rows: [u64; 4],
    /// Mean spans per row; `None` for a step without rows.
    pub mean: Option<f64>,
    /// Most spans in one row.
    pub max: u64,
}

/// uid groups of one step (V1 padding rows left out).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Groups {
    /// Distinct `uid`s.
    pub count: u64,
    /// size → number of groups.
    pub sizes: BTreeMap<usize, u64>,
    /// `actor_rollout_ref.rollout.n`, when configured.
    pub expected_size: Option<i64>,
    /// Groups whose score sums are all equal.
    pub no_signal: u64,
}

/// The distribution of per-row score sums (finite sums of non-padding rows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoreSums {
    /// Quantiles and mean of the finite sums; `None` when no row has one.
    pub distribution: Option<Distribution>,
    /// Rows whose score sum is NaN or ±inf (left out of the distribution).
    pub non_finite_rows: u64,
}

/// KL magnitude, k1 = old_log_probs − ref_log_prob over valid tokens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kl {
    /// Valid tokens where both log-probs are finite: the per-token means' denominator.
    pub tokens: u64,
    /// Mean k1 per token; `None` when `tokens` is 0.
    pub mean_k1: Option<f64>,
    /// Mean |k1| per token; `None` when `tokens` is 0.
    pub mean_abs_k1: Option<f64>,
    /// Mean over the step's rows of each row's Σ k1; `None` for a step without rows.
    pub mean_row_sum_k1: Option<f64>,
    /// With `algorithm.use_kl_in_reward`: what the configured penalty does to the rewards.
    pub shaping: Option<KlShaping>,
}

/// What the configured KL penalty does to the rewards (rows shaped as `run` shapes them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KlShaping {
    /// `algorithm.kl_penalty`.
    pub estimator: String,
    /// β (`algorithm.kl_ctrl.kl_coef`).
    /// With an adaptive controller this is the initial β (a note says so).
    pub coef: f64,
    /// Rows whose score sum and shaped reward sum are both non-zero and of opposite signs.
    pub rows_sign_flipped: u64,
    /// Mean |β·Σ kld·m| per row, over rows where penalty and score sum are finite; `None`
    /// when there is none.
    pub mean_abs_penalty: Option<f64>,
    /// Mean |score sum| per row, over the same rows as `mean_abs_penalty`.
    pub mean_abs_score_sum: Option<f64>,
}

/// Train/rollout mismatch over valid tokens with finite old and rollout log-probs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mismatch {
    /// Valid tokens where both log-probs are finite.
    pub tokens: u64,
    /// Mean |old − rollout| per token; `None` when `tokens` is 0.
    pub mean_abs_diff: Option<f64>,
    /// Tokens whose ratio exp(old − rollout) is outside [`RATIO_LOW`, `RATIO_HIGH`] ([0.5, 2]):
    /// those truncated IS or rejection at verl's default threshold would act on.
    pub ratio_outside: u64,
    /// Tokens whose ratio is above `RATIO_EXTREME` (10).
    pub ratio_extreme: u64,
}

/// What the configured rejection sampling removes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rejection {
    /// Valid tokens before rejection.
    pub valid_tokens: u64,
    /// Valid tokens whose mask rejection sets from 1 to 0.
    pub rejected_tokens: u64,
    /// Rows with a valid token before rejection.
    pub rows_with_valid_token: u64,
    /// Of those, rows left with no valid token.
    pub rows_fully_rejected: u64,
    /// Mask-0 positions the rejected mask sets to 1: always 0 unless advcalc has a bug.
    pub outside_mask: u64,
}

/// `a / b`, `None` when `b` is 0.
pub fn fraction(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

fn opt(x: Option<f64>) -> Value {
    x.map_or(Value::Null, Value::from)
}

impl Report {
    /// The report as JSON (the stable, documented form: docs/inspect.md).
    pub fn to_json(&self) -> Value {
        json!({
            "file": self.file,
            "layout": layout_name(self.layout),
            "notes": self.notes,
            "steps": self.steps.iter().map(StepReport::to_json).collect::<Vec<_>>(),
            "warnings": self.warnings(),
            "logged_advantages": self.logged.as_ref().map_or(Value::Null, LoggedCheck::to_json),
            "provenance": self
                .provenance
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect::<Map<String, Value>>(),
        })
    }

    /// How many warnings the report raises.
    pub fn warnings(&self) -> usize {
        self.steps.iter().map(|s| s.warnings.len()).sum::<usize>()
            + usize::from(self.logged.as_ref().is_some_and(LoggedCheck::warns))
    }

    /// The report as aligned tables for a terminal.
    pub fn render(&self) -> String {
        let mut out = format!(
            "advcalc inspect: {} ({} layout)\n",
            self.file,
            layout_name(self.layout)
        );
        for note in &self.notes {
            out += &format!("note: {note}\n");
        }
        if !self.provenance.is_empty() {
            out += "\nwritten by advcalc\n";
            let rows: Vec<(String, String)> = self
                .provenance
                .iter()
                .filter(|(k, _)| k.as_str() != "config")
                .cloned()
                .collect();
            out += &aligned(&rows);
            if let Some((_, config)) = self.provenance.iter().find(|(k, _)| k == "config") {
                out += "  configuration:\n";
                for line in config.lines() {
                    out += &format!("    {line}\n");
                }
            }
        }
        for step in &self.steps {
            out.push('\n');
            out += &step.render();
        }
        if let Some(check) = &self.logged {
            out.push('\n');
            out += &check.render();
            if check.warns() {
                out += &format!(
                    "warning: logged_advantages_differ: {} of {} rows differ from advcalc's recomputation beyond float32 rounding, {} of them for no float32 reason{}\n",
                    check.differing,
                    check.compared,
                    check.differing - check.fragile,
                    if check.causes.is_empty() {
                        ": a setting the dump does not record (docs/trainers.md lists them)"
                    } else {
                        ""
                    }
                );
            }
        }
        let n = self.warnings();
        out += &format!("\n{n} warning{}\n", if n == 1 { "" } else { "s" });
        out
    }
}

fn layout_name(layout: Layout) -> &'static str {
    match layout {
        Layout::Ragged => "ragged",
        Layout::Padded => "padded",
    }
}

impl StepReport {
    /// The step as one element of the report's `steps` (keys in docs/inspect.md).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        put("step", self.step.map_or(Value::Null, Value::from));
        put("rows", self.rows.into());
        put("tokens", self.tokens.into());
        put("valid_tokens", self.valid_tokens.into());
        put(
            "valid_token_fraction",
            opt(fraction(self.valid_tokens, self.tokens)),
        );
        put(
            "rows_without_valid_token",
            self.rows_without_valid_token.into(),
        );
        put("v1_padding_rows", self.v1_padding_rows.into());
        put(
            "rows_ending_in_tool_token",
            self.rows_ending_in_tool_token
                .map_or(Value::Null, Value::from),
        );
        put(
            "masked_rewards",
            json!({ "rows": self.masked_reward_rows, "tokens": self.masked_reward_tokens }),
        );
        let t = &self.tool_spans;
        put(
            "tool_spans",
            json!({
                "rows_with_0": t.rows[0],
                "rows_with_1": t.rows[1],
                "rows_with_2": t.rows[2],
                "rows_with_3_or_more": t.rows[3],
                "mean": opt(t.mean),
                "max": t.max,
            }),
        );
        put(
            "groups",
            self.groups.as_ref().map_or(Value::Null, |g| {
                json!({
                    "count": g.count,
                    "size_histogram": g.sizes.iter()
                        .map(|(k, v)| (k.to_string(), Value::from(*v)))
                        .collect::<Map<_, _>>(),
                    "expected_size": g.expected_size,
                    "no_signal": g.no_signal,
                    "no_signal_fraction": opt(fraction(g.no_signal, g.count)),
                })
            }),
        );
        put(
            "fragile_groups",
            self.fragile.as_ref().map_or(Value::Null, fragile_json),
        );
        let d = self.score_sum.distribution;
        let q = |f: fn(&Distribution) -> f64| opt(d.as_ref().map(f));
        put(
            "score_sum",
            json!({
                "rows": d.map_or(0, |d| d.count),
                "non_finite_rows": self.score_sum.non_finite_rows,
                "min": q(|d| d.min),
                "p5": q(|d| d.p5),
                "p25": q(|d| d.p25),
                "median": q(|d| d.median),
                "p75": q(|d| d.p75),
                "p95": q(|d| d.p95),
                "max": q(|d| d.max),
                "mean": q(|d| d.mean),
            }),
        );
        put(
            "kl",
            self.kl.as_ref().map_or(Value::Null, |k| {
                json!({
                    "tokens": k.tokens,
                    "mean_k1": opt(k.mean_k1),
                    "mean_abs_k1": opt(k.mean_abs_k1),
                    "mean_row_sum_k1": opt(k.mean_row_sum_k1),
                    "shaping": k.shaping.as_ref().map_or(Value::Null, |s| json!({
                        "kl_penalty": s.estimator,
                        "kl_coef": s.coef,
                        "rows_sign_flipped": s.rows_sign_flipped,
                        "sign_flipped_fraction": opt(fraction(s.rows_sign_flipped, self.rows)),
                        "mean_abs_penalty": opt(s.mean_abs_penalty),
                        "mean_abs_score_sum": opt(s.mean_abs_score_sum),
                    })),
                })
            }),
        );
        put(
            "train_rollout_mismatch",
            self.mismatch.as_ref().map_or(Value::Null, |x| {
                json!({
                    "tokens": x.tokens,
                    "mean_abs_diff": opt(x.mean_abs_diff),
                    "ratio_range": [RATIO_LOW, RATIO_HIGH],
                    "ratio_outside": x.ratio_outside,
                    "ratio_outside_fraction": opt(fraction(x.ratio_outside, x.tokens)),
                    "ratio_extreme_above": RATIO_EXTREME,
                    "ratio_extreme": x.ratio_extreme,
                    "ratio_extreme_fraction": opt(fraction(x.ratio_extreme, x.tokens)),
                })
            }),
        );
        put(
            "rejection",
            self.rejection.as_ref().map_or(Value::Null, |r| {
                json!({
                    "valid_tokens": r.valid_tokens,
                    "rejected_tokens": r.rejected_tokens,
                    "rejected_token_fraction": opt(fraction(r.rejected_tokens, r.valid_tokens)),
                    "rows_with_valid_token": r.rows_with_valid_token,
                    "rows_fully_rejected": r.rows_fully_rejected,
                    "rows_fully_rejected_fraction":
                        opt(fraction(r.rows_fully_rejected, r.rows_with_valid_token)),
                    "mask0_tokens_set": r.outside_mask,
                })
            }),
        );
        put(
            "non_finite",
            self.columns
                .iter()
                .map(|c| (c.name.clone(), json!({ "nan": c.nan, "inf": c.inf })))
                .collect::<Map<_, _>>()
                .into(),
        );
        put(
            "positive_log_probs",
            self.columns
                .iter()
                .filter(|c| c.log_prob)
                .map(|c| (c.name.clone(), Value::from(c.positive)))
                .collect::<Map<_, _>>()
                .into(),
        );
        put("advantages", self.advantages.clone().unwrap_or(Value::Null));
        let listed = |ws: &[Warning]| -> Value {
            ws.iter()
                .map(|w| json!({ "code": w.code, "message": w.message }))
                .collect::<Vec<_>>()
                .into()
        };
        put("warnings", listed(&self.warnings));
        put("notes", listed(&self.notes));
        Value::Object(m)
    }

    /// The finding/value rows of this step's table.
    fn table(&self) -> Vec<(String, String)> {
        let mut rows: Vec<(String, String)> = Vec::new();
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        row("rows", self.rows.to_string());
        if !self.sequence_level {
            self.token_rows(&mut row);
        } else if self.v1_padding_rows > 0 {
            row("verl V1 padding rows", self.v1_padding_rows.to_string());
        }
        self.group_and_score_rows(&mut row);
        if !self.sequence_level {
            self.log_prob_rows(&mut row);
        }
        if let Some(r) = &self.rejection {
            row(
                "rejected valid tokens",
                format!(
                    "{}{}",
                    r.rejected_tokens,
                    paren_pct(fraction(r.rejected_tokens, r.valid_tokens))
                ),
            );
            row(
                "rows fully rejected",
                format!(
                    "{}{}",
                    r.rows_fully_rejected,
                    paren_pct(fraction(r.rows_fully_rejected, r.rows_with_valid_token))
                ),
            );
        }
        row("non-finite values", list_or_none(self.non_finite()));
        if self.columns.iter().any(|c| c.log_prob) {
            let positive: Vec<String> = self
                .columns
                .iter()
                .filter(|c| c.positive > 0)
                .map(|c| format!("{} {}", c.name, c.positive))
                .collect();
            row("positive log-probs", list_or_none(positive));
        }
        rows
    }

    /// The rows about tokens: masks, tool tokens, rewards on mask-0 tokens, tool spans.
    fn token_rows(&self, row: &mut impl FnMut(&str, String)) {
        row("tokens", self.tokens.to_string());
        row(
            "valid tokens (mask 1)",
            format!(
                "{}{}",
                self.valid_tokens,
                paren_pct(fraction(self.valid_tokens, self.tokens))
            ),
        );
        row(
            "rows without a valid token",
            self.rows_without_valid_token.to_string(),
        );
        row("verl V1 padding rows", self.v1_padding_rows.to_string());
        row(
            "rows ending in a tool token",
            self.rows_ending_in_tool_token
                .map_or("not checked (--layout padded)".into(), |n| n.to_string()),
        );
        row(
            "rewards on mask-0 tokens",
            format!(
                "{} rows, {} tokens",
                self.masked_reward_rows, self.masked_reward_tokens
            ),
        );
        let t = &self.tool_spans;
        row(
            "tool spans per row",
            format!(
                "0: {}, 1: {}, 2: {}, 3+: {} rows (mean {}, max {})",
                t.rows[0],
                t.rows[1],
                t.rows[2],
                t.rows[3],
                num_opt(t.mean),
                t.max
            ),
        );
    }

    /// The rows about groups and scores.
    fn group_and_score_rows(&self, row: &mut impl FnMut(&str, String)) {
        match &self.groups {
            None => row("groups", "not checked (no uid column)".into()),
            Some(g) => {
                row("groups", g.count.to_string());
                row(
                    "group sizes",
                    format!(
                        "{}{}",
                        histogram(&g.sizes),
                        g.expected_size
                            .map(|n| format!(" (rollout.n = {n})"))
                            .unwrap_or_default()
                    ),
                );
                row(
                    "groups with all-equal scores",
                    format!(
                        "{}{}",
                        g.no_signal,
                        paren_pct(fraction(g.no_signal, g.count))
                    ),
                );
            }
        }
        if let Some(f) = self.fragile.as_ref().filter(|f| f.any()) {
            for (k, v) in fragile_rows(f) {
                row(&k, v);
            }
        }
        match &self.score_sum.distribution {
            None => row("score sum per row", "no rows".into()),
            Some(d) => {
                row(
                    "score sum per row",
                    format!(
                        "min {}, p5 {}, p25 {}, median {}, p75 {}, p95 {}, max {}",
                        num(d.min),
                        num(d.p5),
                        num(d.p25),
                        num(d.median),
                        num(d.p75),
                        num(d.p95),
                        num(d.max)
                    ),
                );
                row("score sum mean", num(d.mean));
            }
        }
        if self.score_sum.non_finite_rows > 0 {
            row(
                "non-finite score sums",
                match self.score_sum.non_finite_rows {
                    1 => "1 row".to_string(),
                    n => format!("{n} rows"),
                },
            );
        }
    }

    /// The rows about log-probabilities: KL and the train/rollout mismatch.
    fn log_prob_rows(&self, row: &mut impl FnMut(&str, String)) {
        match &self.kl {
            None => row(
                "KL (old − ref)",
                "not checked (needs old_log_probs and ref_log_prob)".into(),
            ),
            Some(k) => {
                row(
                    "KL k1 = old − ref per token",
                    format!(
                        "mean {}, mean |k1| {} ({} tokens)",
                        num_opt(k.mean_k1),
                        num_opt(k.mean_abs_k1),
                        k.tokens
                    ),
                );
                row("KL k1 sum per row, mean", num_opt(k.mean_row_sum_k1));
                if let Some(s) = &k.shaping {
                    row(
                        "KL penalty in reward",
                        format!("{}, β = {}", s.estimator, num(s.coef)),
                    );
                    row(
                        "mean |β·ΣKL| vs mean |score|",
                        format!(
                            "{} vs {}",
                            num_opt(s.mean_abs_penalty),
                            num_opt(s.mean_abs_score_sum)
                        ),
                    );
                    row(
                        "rows whose sign the KL flips",
                        format!(
                            "{}{}",
                            s.rows_sign_flipped,
                            paren_pct(fraction(s.rows_sign_flipped, self.rows))
                        ),
                    );
                }
            }
        }
        match &self.mismatch {
            None => row(
                "train/rollout mismatch",
                "not checked (needs old_log_probs and rollout_log_probs)".into(),
            ),
            Some(x) => {
                row(
                    "mean |old − rollout|",
                    format!("{} ({} tokens)", num_opt(x.mean_abs_diff), x.tokens),
                );
                row(
                    &format!("ratio outside [{RATIO_LOW}, {RATIO_HIGH}]"),
                    format!(
                        "{}{}",
                        x.ratio_outside,
                        paren_pct(fraction(x.ratio_outside, x.tokens))
                    ),
                );
                row(
                    &format!("ratio above {RATIO_EXTREME}"),
                    format!(
                        "{}{}",
                        x.ratio_extreme,
                        paren_pct(fraction(x.ratio_extreme, x.tokens))
                    ),
                );
            }
        }
    }

    /// "column N NaN, M inf" for each column with non-finite values.
    pub fn non_finite(&self) -> Vec<String> {
        self.non_finite_in(|_| true)
    }

    /// [`StepReport::non_finite`] of the columns `which` names.
    pub fn non_finite_in(&self, which: impl Fn(&str) -> bool) -> Vec<String> {
        self.columns
            .iter()
            .filter(|c| c.nan + c.inf > 0 && which(&c.name))
            .map(|c| format!("{} {} NaN, {} inf", c.name, c.nan, c.inf))
            .collect()
    }

    /// The advantage statistics' rows: one per key (values as compact JSON).
    fn advantage_table(&self) -> Option<Vec<(String, String)>> {
        Some(match self.advantages.as_ref()? {
            Value::Object(m) => m
                .iter()
                .map(|(k, v)| {
                    let text = match v {
                        Value::Number(x) => num(x.as_f64().unwrap_or(f64::NAN)),
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), text)
                })
                .collect(),
            other => vec![("value".to_string(), other.to_string())],
        })
    }

    /// The step's table, then its warnings.
    pub fn render(&self) -> String {
        let mut out = match self.step {
            Some(s) => format!("step {s}\n"),
            None => "all rows\n".to_string(),
        };
        out += &aligned(&self.table());
        if let Some(rows) = self.advantage_table() {
            out += "advantages\n";
            out += &aligned(&rows);
        }
        for w in &self.warnings {
            out += &format!("warning: {}: {}\n", w.code, w.message);
        }
        for n in &self.notes {
            out += &format!("note: {}: {}\n", n.code, n.message);
        }
        out
    }
}

/// Two columns, indented, the values aligned (widths in characters).
fn aligned(rows: &[(String, String)]) -> String {
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("  {k}{}  {v}\n", " ".repeat(width - k.chars().count())))
        .collect()
}

fn list_or_none(items: Vec<String>) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join("; ")
    }
}

/// `size: groups` pairs, e.g. `8: 3 groups, 7: 1 group`.
pub fn histogram(sizes: &BTreeMap<usize, u64>) -> String {
    sizes
        .iter()
        .map(|(size, n)| format!("{size}: {n} group{}", if *n == 1 { "" } else { "s" }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// ` (12.5%)`, or nothing when the fraction is undefined.
fn paren_pct(f: Option<f64>) -> String {
    f.map(|f| format!(" ({})", pct(f))).unwrap_or_default()
}

fn num_opt(x: Option<f64>) -> String {
    x.map_or("n/a".into(), num)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_size_histogram() {
        let mut sizes = BTreeMap::new();
        sizes.insert(8, 3);
        sizes.insert(7, 1);
        assert_eq!(histogram(&sizes), "7: 1 group, 8: 3 groups");
    }

    #[test]
    fn table_is_aligned_and_warnings_follow() {
        let step = StepReport {
            step: Some(2),
            rows: 4,
            tokens: 8,
            valid_tokens: 6,
            warnings: vec![Warning {
                code: "x",
                message: "y".into(),
            }],
            ..Default::default()
        };
        let text = step.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "step 2");
        // Every value starts in the same column.
        let col = |l: &str| l.find("  4").or(l.find("  8"));
        assert!(lines[1].starts_with("  rows "));
        assert_eq!(col(lines[1]), col(lines[2]));
        assert!(lines[3].ends_with("6 (75.0%)"));
        assert_eq!(*lines.last().unwrap(), "warning: x: y");
        let report = Report {
            steps: vec![step],
            ..Default::default()
        };
        assert_eq!(report.warnings(), 1);
        assert!(report.render().ends_with("\n1 warning\n"));
        assert_eq!(report.to_json()["steps"][0]["warnings"][0]["code"], "x");
    }

    #[test]
    fn advantages_are_a_section_of_their_own() {
        // The section as `inspect -e` builds it (`add_advantages`): `TokenStats::to_json` plus
        // the estimator's name. Valid-token advantages [1.5, -0.5, 0, -1]: mean 0, population
        // std √((2.25 + 0.25 + 0 + 1)/4) = √0.875 = 0.93541435, min -1, max 1.5, one zero of
        // four tokens.
        let stats = crate::analysis::tokens::TokenStats {
            valid_tokens: 4,
            mean: 0.0,
            std: 0.875f64.sqrt(),
            min: -1.0,
            max: 1.5,
            zero_fraction: 0.25,
        };
        let mut json = stats.to_json();
        let keys: Vec<&str> = json.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["max", "mean", "min", "std", "valid_tokens", "zero_fraction"]
        );
        json.insert("estimator".into(), "grpo".into());
        let step = StepReport {
            advantages: Some(json.into()),
            ..Default::default()
        };
        // Keys in order, values aligned; numbers as the rest of the table writes them (at
        // most four decimals), strings without quotes.
        let text = step.render();
        let section = "\nadvantages\n\
                       \x20 estimator      grpo\n\
                       \x20 max            1.5\n\
                       \x20 mean           0\n\
                       \x20 min            -1\n\
                       \x20 std            0.9354\n\
                       \x20 valid_tokens   4\n\
                       \x20 zero_fraction  0.25\n";
        assert!(text.ends_with(section), "{text}");
        let adv = &step.to_json()["advantages"];
        assert_eq!(adv["estimator"], "grpo");
        assert_eq!(adv["valid_tokens"], 4);
        assert_eq!(adv["min"], -1.0);
        assert_eq!(adv["max"], 1.5);
        assert_eq!(adv["zero_fraction"], 0.25);
        crate::test_support::assert_close(
            "std",
            &[adv["std"].as_f64().unwrap()],
            &[0.935414346693],
            1e-12,
            0.0,
        );
        assert_eq!(StepReport::default().to_json()["advantages"], Value::Null);
    }
}
