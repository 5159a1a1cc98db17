//! The comparison as stable JSON (documented in docs/compare.md) and as aligned tables for a
//! terminal (what `compare` prints; `report` reads the JSON).

use serde_json::{Value, json};

use super::summary::{Comparison, VariantSummary};
use crate::analysis::Warning;
use crate::analysis::buckets::BUCKETS;
use crate::analysis::fragile::{fragile_findings, fragile_json, fragile_rows};
use crate::analysis::logged::LoggedCheck;
use crate::analysis::table::Table;
use crate::numbers::{fixed6, pct2};

impl Comparison {
    /// The comparison as JSON (documented in README and `docs/pipelines.md`).
    pub fn to_json(&self) -> Value {
        let fragile = self
            .fragile
            .as_ref()
            .map(|f| fragile_findings(f, &self.conventions))
            .unwrap_or_default();
        let listed = |ws: &[Warning]| -> Vec<Value> {
            ws.iter()
                .map(|w| json!({ "code": w.code, "message": w.message }))
                .collect()
        };
        let variants = self
            .variants
            .iter()
            .map(|v| {
                let mut m = v.tokens.to_json();
                m.insert("label".into(), json!(v.label));
                m.insert("estimator".into(), json!(v.estimator));
                m.insert("weight_correct".into(), json!(v.weight_correct));
                m.insert("weight_incorrect".into(), json!(v.weight_incorrect));
                m.insert("abs_share_correct".into(), json!(v.abs_share_correct));
                m.insert(
                    "pass_rate_buckets".into(),
                    match &v.buckets {
                        Some(b) => Value::Array(
                            b.iter()
                                .zip(BUCKETS)
                                .map(|(b, name)| {
                                    json!({
                                        "pass_rate": name,
                                        "groups": b.groups,
                                        "rows": b.rows,
                                        "valid_tokens": b.valid_tokens,
                                        "mean_abs_advantage": b.mean_abs,
                                    })
                                })
                                .collect(),
                        ),
                        None => Value::Null,
                    },
                );
                m.insert("warnings".into(), json!(v.warnings));
                Value::Object(m)
            })
            .collect::<Vec<_>>();
        let pairs = self
            .pairs
            .iter()
            .map(|p| {
                json!({
                    "a": p.a,
                    "b": p.b,
                    "tokens": p.tokens,
                    "sign_agreement": p.sign_agreement,
                    "rows": p.rows,
                    "rank_correlation": p.rank_correlation,
                })
            })
            .collect::<Vec<_>>();
        json!({
            "file": self.file,
            "rows": self.rows,
            "correct_rows": self.correct_rows,
            "correct_above": self.correct_above,
            "variants": variants,
            "pairs": pairs,
            "fragile_groups": self.fragile.as_ref().map_or(Value::Null, fragile_json),
            "warnings": listed(&fragile.0),
            "notes": listed(&fragile.1),
            "logged_advantages": self.logged.as_ref().map_or(Value::Null, LoggedCheck::to_json),
        })
    }

    /// The comparison as aligned tables.
    pub fn render(&self) -> String {
        let mut t = Table::new("", self.variants.iter().map(|v| v.label.clone()));
        let num = |f: &dyn Fn(&VariantSummary) -> String| -> Vec<String> {
            self.variants.iter().map(f).collect()
        };
        t.row("valid tokens", num(&|v| v.tokens.valid_tokens.to_string()));
        t.row("mean", num(&|v| fixed6(v.tokens.mean)));
        t.row("std", num(&|v| fixed6(v.tokens.std)));
        t.row("min", num(&|v| fixed6(v.tokens.min)));
        t.row("max", num(&|v| fixed6(v.tokens.max)));
        t.row("exactly zero", num(&|v| pct2(v.tokens.zero_fraction)));
        t.row("Σ adv, correct rows", num(&|v| fixed6(v.weight_correct)));
        t.row(
            "Σ adv, incorrect rows",
            num(&|v| fixed6(v.weight_incorrect)),
        );
        t.row("|adv| on correct rows", num(&|v| pct2(v.abs_share_correct)));
        let mut out = format!(
            "{}: {} rows, {} correct (score > {})\n\n",
            self.file, self.rows, self.correct_rows, self.correct_above
        );
        out += &t.render();
        if let Some(first) = self.variants[0].buckets.as_ref() {
            let mut b = Table::new(
                "mean |adv| by group pass rate",
                std::iter::once("groups".to_string())
                    .chain(self.variants.iter().map(|v| v.label.clone())),
            );
            for (k, name) in BUCKETS.iter().enumerate() {
                let mut cells = vec![first[k].groups.to_string()];
                cells.extend(self.variants.iter().map(|v| {
                    v.buckets
                        .as_ref()
                        .and_then(|b| b[k].mean_abs)
                        .map_or("-".into(), fixed6)
                }));
                b.row(name, cells);
            }
            out += "\n";
            out += &b.render();
        } else {
            out += "\n(no uid column: no pass-rate buckets)\n";
        }
        if !self.pairs.is_empty() {
            let mut p = Table::new(
                "pair",
                ["sign agreement", "rank corr (rows)"].map(String::from),
            );
            for pair in &self.pairs {
                p.row(
                    &format!("{} vs {}", pair.a, pair.b),
                    vec![
                        pair.sign_agreement.map_or("-".into(), pct2),
                        pair.rank_correlation
                            .map_or("-".into(), |r| format!("{r:.4}")),
                    ],
                );
            }
            out += "\n";
            out += &p.render();
        }
        if let Some(f) = self.fragile.as_ref().filter(|f| f.any()) {
            out += "\n";
            let rows = fragile_rows(f);
            let width = rows
                .iter()
                .map(|(k, _)| k.chars().count())
                .max()
                .unwrap_or(0);
            for (k, v) in rows {
                out += &format!("{k:<width$}  {v}\n");
            }
            let (warnings, notes) = fragile_findings(f, &self.conventions);
            for w in warnings {
                out += &format!("warning[{}]: {}\n", w.code, w.message);
            }
            for n in notes {
                out += &format!("note[{}]: {}\n", n.code, n.message);
            }
        }
        if let Some(check) = &self.logged {
            out += "\n";
            out += &check.render();
        }
        out
    }
}
