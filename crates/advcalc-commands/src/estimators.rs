//! `advcalc estimators`: every estimator's declaration ([`Info`]) — where it comes from, what
//! it computes in one line, the columns it needs, the settings it reads (for the GRPO/RLOO
//! family, under each `--convention`: `conventions::settings_under`) and whether it runs on
//! sequence-level input (verl's JSONL dumps) — as JSON or a table; and the docs' blocks
//! rendered from the same declarations ([`doc_blocks`]).

use serde_json::{Map, Value, json};

use advcalc_maths::estimators::conventions::{self, Convention};
use advcalc_maths::estimators::{Column, Estimator, Info, Kind, Overview};

/// The settings read under one convention; `None`: the convention has no such estimator.
type ConventionSettings = (Convention, Option<Vec<&'static str>>);

/// The settings `e` reads under each convention (`null`: the convention has no such
/// estimator); `None` outside the family, whose settings do not depend on the convention.
fn by_convention(e: Estimator) -> Option<Vec<ConventionSettings>> {
    conventions::in_family(e).then(|| {
        Convention::ALL
            .iter()
            .map(|&c| (c, conventions::settings_under(e, c).and_then(|r| r.ok())))
            .collect()
    })
}

/// The settings listed as the estimator's `parameters`: its own, or for a family member
/// `convention` and what it reads under the default convention.
fn parameters(e: Estimator) -> Vec<&'static str> {
    match conventions::settings_under(e, Convention::default()) {
        Some(Ok(list)) => std::iter::once("convention").chain(list).collect(),
        Some(Err(_)) | None => e.settings(),
    }
}

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
                let mut entry = json!({
                    "name": e.name(),
                    "source": i.source,
                    "summary": i.summary,
                    "kind": kind(i),
                    "columns": columns,
                    "parameters": parameters(e),
                    "sequence_level": i.sequence_level(),
                    "overview": overview_json(&i.overview),
                });
                if let Some(list) = by_convention(e) {
                    let map: Map<String, Value> = list
                        .into_iter()
                        .map(|(c, s)| (c.name().to_string(), json!(s)))
                        .collect();
                    entry["parameters_by_convention"] = Value::Object(map);
                }
                entry
            })
            .collect(),
    )
}

/// The estimator's row of `docs/estimators.md`'s overview ([`Overview`]), its variants'
/// under `variants` keyed by their setting.
fn overview_json(o: &Overview) -> Value {
    let variants: Map<String, Value> = o
        .variants
        .iter()
        .map(|(setting, v)| (setting.to_string(), overview_json(v)))
        .collect();
    json!({
        "section": o.section,
        "returns": o.returns,
        "whitening": o.whitening,
        "masked": o.masked,
        "singleton_group": o.singleton,
        "variants": variants,
    })
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
        let settings = parameters(e);
        if !settings.is_empty() {
            out.push_str(&format!("; settings: {}", settings.join(", ")));
        }
        if r.sequence_level() {
            out.push_str("; sequence-level");
        }
        out.push('\n');
        for (c, list) in by_convention(e).unwrap_or_default() {
            let what = match list {
                None => "no such estimator (refused)".to_string(),
                Some(l) if l.is_empty() => "-".to_string(),
                Some(l) => l.join(", "),
            };
            out.push_str(&format!(
                "{:width$}    under --convention {}: {what}\n",
                "",
                c.name()
            ));
        }
    }
    out.push_str("\nEvery estimator also reads response_mask and rm_scores (or a scalar score).\n");
    out.push_str(
        "`under --convention C` lines list what a GRPO/RLOO family member reads under each convention\n(other keys are ignored there, with a note).\n",
    );
    out.push_str(
        "Sequence-level estimators give one advantage per row from the rows' scores alone: they\nalso run on verl's JSONL dumps (one score per row, no tokens).\n",
    );
    out
}

/// The docs' blocks generated from the registry, each with the name its markers give
/// (`<!-- generated by `cargo test --test docs`: NAME -->` … `<!-- end generated -->`):
/// `tests/docs.rs` fails when a block in `README.md` or `docs/` differs from this, and
/// rewrites the blocks with `ADVCALC_BLESS=1`.
pub fn doc_blocks() -> Vec<(&'static str, String)> {
    vec![
        ("estimators-verl", overview_table(true)),
        ("estimators-additions", overview_table(false)),
        ("readme-estimators", readme_list()),
        ("jsonl-sequence-level", sequence_level_list()),
    ]
}

/// One row of an overview table: the estimators it describes (several when their cells are
/// the same), its `docs/conventions.md` section and its cells after the name.
struct Row {
    names: Vec<String>,
    section: Option<&'static str>,
    cells: [String; 5],
}

fn row(name: String, columns: &[Column], o: &Overview) -> Row {
    let needs = match o.needs {
        Some(needs) => needs.to_string(),
        None if columns.is_empty() => "—".to_string(),
        None => {
            let names: Vec<String> = columns.iter().map(|c| format!("`{}`", c.name())).collect();
            names.join(", ")
        }
    };
    let mut masked = if o.masked { "yes" } else { "**no**" }.to_string();
    if let Some(note) = o.masked_note {
        masked.push_str(&format!(" ({note})"));
    }
    Row {
        names: vec![name],
        section: o.section,
        cells: [
            needs,
            o.returns.to_string(),
            o.whitening.to_string(),
            masked,
            o.singleton.to_string(),
        ],
    }
}

/// `docs/estimators.md`'s overview of verl's estimators (`verl`) or of advcalc's additions,
/// those with a setting that makes them another (`Overview::variants`) included, ordered by
/// their `docs/conventions.md` section; consecutive rows with the same cells are one.
fn overview_table(verl: bool) -> String {
    let mut rows: Vec<Row> = Vec::new();
    for e in Estimator::ALL {
        let i = e.info();
        if e.is_verl() == verl {
            rows.push(row(format!("`{}`", e.name()), i.columns, &i.overview));
        }
        if !verl {
            for (setting, o) in i.overview.variants {
                rows.push(row(format!("`{}` + `{setting}`", e.name()), i.columns, o));
            }
        }
    }
    // stable: the registry's order within a section
    rows.sort_by_key(|r| r.section);
    let mut merged: Vec<Row> = Vec::new();
    for r in rows {
        match merged.last_mut() {
            Some(last) if last.section == r.section && last.cells == r.cells => {
                last.names.extend(r.names)
            }
            _ => merged.push(r),
        }
    }
    let mut out = String::from(
        "| estimator | also needs | `returns` | whitening | advantages masked? | singleton group |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in merged {
        let mut name = r.names.join(", ");
        if let Some(section) = r.section {
            name.push_str(&format!(" ({section})"));
        }
        out.push_str(&format!("| {name} | {} |\n", r.cells.join(" | ")));
    }
    out
}

/// The names of the estimators (verl's or advcalc's) that `keep` lets through, in the
/// registry's order, each in backticks.
fn names(verl: bool, keep: impl Fn(&Info) -> bool) -> String {
    let names: Vec<String> = Estimator::ALL
        .iter()
        .filter(|e| e.is_verl() == verl && keep(e.info()))
        .map(|e| format!("`{}`", e.name()))
        .collect();
    names.join(", ")
}

/// README's list of every estimator.
fn readme_list() -> String {
    bullet(&format!("verl 0.9.1: {}.", names(true, |_| true)))
        + &bullet(&format!("advcalc's additions: {}.", names(false, |_| true)))
}

/// `docs/jsonl.md`'s list of the estimators that run on sequence-level input.
fn sequence_level_list() -> String {
    bullet(&format!("verl's {};", names(true, Info::sequence_level)))
        + &bullet(&format!(
            "advcalc's {}.",
            names(false, Info::sequence_level)
        ))
}

/// A Markdown list item, wrapped at the docs' 96 columns.
fn bullet(text: &str) -> String {
    const WIDTH: usize = 96;
    let mut out = String::from("-");
    let mut line = 1;
    for word in text.split(' ') {
        if line + 1 + word.chars().count() > WIDTH {
            out.push_str("\n ");
            line = 1;
        }
        out.push(' ');
        out.push_str(word);
        line += 1 + word.chars().count();
    }
    out.push('\n');
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
        assert_eq!(
            to_json()[0]["overview"]["variants"]["whiten_advantages: false"]["section"],
            "A2"
        );
        // the nemo.* keys are read under nemo-rl only; rloo_loo_std reads only the grouping
        let json = to_json();
        let entry = |name: &str| {
            json.as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .unwrap()
                .clone()
        };
        let grpo = entry("grpo");
        assert_eq!(
            grpo["parameters"],
            json!(["convention", "norm_adv_by_std_in_grpo"])
        );
        let by = &grpo["parameters_by_convention"];
        assert_eq!(by["verl"], json!(["norm_adv_by_std_in_grpo"]));
        assert_eq!(by["trl"], json!(["norm_adv_by_std_in_grpo", "group_size"]));
        assert_eq!(
            by["nemo-rl"],
            json!([
                "norm_adv_by_std_in_grpo",
                "nemo.use_leave_one_out_baseline",
                "nemo.normalize_rewards",
                "nemo.group_by"
            ])
        );
        assert_eq!(
            by["skyrl"],
            json!(["norm_adv_by_std_in_grpo", "skyrl.advantage_batch_normalize"])
        );
        assert_eq!(
            entry("maxrl")["parameters_by_convention"]["trl"],
            Value::Null
        );
        assert_eq!(
            entry("rloo")["parameters_by_convention"]["trl"],
            json!(["group_size", "trl.normalize_advantages"])
        );
        assert_eq!(
            entry("rloo_loo_std")["parameters"],
            json!(["nemo.group_by"])
        );
        assert!(
            entry("rloo_loo_std")
                .get("parameters_by_convention")
                .is_none()
        );
        assert!(to_table().contains(
            "under --convention nemo-rl: norm_adv_by_std_in_grpo, nemo.use_leave_one_out_baseline"
        ));
        assert!(to_table().contains("; sequence-level"));
    }
}
