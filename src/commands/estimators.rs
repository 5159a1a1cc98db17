//! `advcalc estimators`: every estimator's declaration ([`Info`]) — where it comes from, what
//! it computes in one line, the columns it needs, the settings it reads and whether it runs
//! on sequence-level input (verl's JSONL dumps) — as JSON or a table.

use serde_json::{Value, json};

use crate::estimators::{Estimator, Info, Kind};

/// The catalogue as JSON: an array of objects, in `Estimator::ALL` order.
pub fn to_json() -> Value {
    Value::Array(
        Estimator::ALL
            .iter()
            .map(|&e| {
                let i = e.info();
                let columns: Vec<&str> = ["response_mask", "rm_scores | score"]
                    .into_iter()
                    .chain(i.columns.iter().map(|c| c.name()))
                    .collect();
                json!({
                    "name": e.name(),
                    "source": i.source,
                    "summary": i.summary,
                    "kind": kind(i),
                    "columns": columns,
                    "parameters": i.settings,
                    "sequence_level": i.sequence_level(),
                })
            })
            .collect(),
    )
}

fn kind(i: &Info) -> &'static str {
    match i.kind {
        Kind::Outcome => "outcome",
        Kind::Token => "token-level",
    }
}

/// The catalogue as an aligned table for people.
pub fn to_table() -> String {
    let width = Estimator::ALL
        .iter()
        .map(|e| e.name().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for e in Estimator::ALL {
        let r = e.info();
        out.push_str(&format!("{:width$}  {}\n", e.name(), r.summary));
        let extra = if r.columns.is_empty() {
            "-".to_string()
        } else {
            let names: Vec<&str> = r.columns.iter().map(|c| c.name()).collect();
            names.join(", ")
        };
        out.push_str(&format!(
            "{:width$}    source: {}; {}; columns: {extra}",
            "",
            r.source,
            kind(r)
        ));
        if !r.settings.is_empty() {
            out.push_str(&format!("; settings: {}", r.settings.join(", ")));
        }
        if r.sequence_level() {
            out.push_str("; sequence-level");
        }
        out.push('\n');
    }
    out.push_str("\nEvery estimator also reads response_mask and rm_scores (or a scalar score).\n");
    out.push_str(
        "Sequence-level estimators give one advantage per row from the rows' scores alone: they\nalso run on verl's JSONL dumps (one score per row, no tokens).\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_estimator_is_described_once() {
        let json = to_json();
        let names: Vec<&str> = json
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), Estimator::ALL.len());
        for e in Estimator::ALL {
            assert_eq!(
                names.iter().filter(|&&n| n == e.name()).count(),
                1,
                "{}",
                e.name()
            );
            assert!(!e.info().summary.is_empty());
        }
    }

    #[test]
    fn the_grpo_and_rloo_families_are_sequence_level_and_token_estimators_are_not() {
        let sequence: Vec<&str> = Estimator::ALL
            .iter()
            .filter(|e| e.info().sequence_level())
            .map(|e| e.name())
            .collect();
        assert_eq!(
            sequence,
            [
                "grpo",
                "grpo_vectorized",
                "grpo_passk",
                "rloo",
                "rloo_vectorized",
                "gpg",
                "drgrpo",
                "grpo_batch_std",
                "maxrl",
                "rloo_loo_std",
                "openrlhf_group_norm",
                "openrlhf_dr_grpo",
                "openrlhf_rloo",
            ]
        );
        // every token-level estimator says what it needs
        for e in Estimator::ALL {
            if e.info().kind == Kind::Token && !e.is_openrlhf() {
                assert!(!e.info().sequence_level(), "{}", e.name());
            }
        }
        assert_eq!(to_json()[0]["sequence_level"], false);
        assert!(to_table().contains("; sequence-level"));
    }
}
