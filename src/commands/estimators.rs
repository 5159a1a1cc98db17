//! `advcalc estimators`: every estimator's declaration ([`Info`]) — where it comes from, what
//! it computes in one line, the columns it needs and the settings it reads — as JSON or a
//! table.

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
        out.push('\n');
    }
    out.push_str("\nEvery estimator also reads response_mask and rm_scores (or a scalar score).\n");
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
}
