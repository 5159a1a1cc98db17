//! `advcalc losses`: every policy loss's declaration ([`LossInfo`]) — its verl name (and bypass
//! mode's `loss_type`), what it computes in one line, where verl defines it, whether it works
//! per token or per row, the metrics verl's loss function returns, the configuration keys it
//! reads and what else to know — as JSON or a table, as `advcalc estimators` lists the
//! estimators.

use serde_json::{Value, json};

use crate::loss::LossMode;
use crate::loss::policy::{LossInfo, LossScope};

/// Why `clip_cov`, which verl 0.9.1 also registers, is not listed.
const CLIP_COV: &str = "clip_cov (verl 0.9.1 registers it too) is refused: verl picks its tokens with torch.randperm, which no replay reproduces.";

fn scope(i: &LossInfo) -> &'static str {
    match i.scope {
        LossScope::Token => "per token",
        LossScope::Row => "per row",
    }
}

/// The catalogue as JSON: an array of objects, in `LossMode::ALL` order (bypass mode's two
/// losses are two entries named `bypass_mode`, told apart by `loss_type`).
pub fn to_json() -> Value {
    Value::Array(
        LossMode::ALL
            .iter()
            .map(|&m| {
                let i = m.info();
                json!({
                    "name": m.name(),
                    "loss_type": i.loss_type,
                    "source": i.source(),
                    "summary": i.summary,
                    "scope": scope(i),
                    "metrics": i.metrics.names(),
                    "parameters": i.parameters,
                    "loss_mode_accepted": i.refused.is_none(),
                    "notes": i.notes,
                })
            })
            .collect(),
    )
}

/// The catalogue as an aligned table for people.
pub fn to_table() -> String {
    let width = LossMode::ALL
        .iter()
        .map(|m| m.name().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for m in LossMode::ALL {
        let i = m.info();
        out.push_str(&format!("{:width$}  {}\n", m.name(), i.summary));
        let mut line = format!("{:width$}    source: {}; {}", "", i.source(), scope(i));
        if let Some(t) = i.loss_type {
            line.push_str(&format!("; loss_type: {t}"));
        }
        let metrics = i.metrics.names();
        line.push_str(&format!(
            "; metrics: {}",
            if metrics.is_empty() {
                "-".to_string()
            } else {
                metrics.join(", ")
            }
        ));
        if !i.parameters.is_empty() {
            line.push_str(&format!("; parameters: {}", i.parameters.join(", ")));
        }
        out.push_str(&line);
        out.push('\n');
        for note in i.notes {
            out.push_str(&format!("{:width$}    note: {note}\n", ""));
        }
    }
    out.push_str(
        "\nEvery loss reads the advantages, log_probs, old_log_probs and response_mask;\n",
    );
    out.push_str("its loss is then aggregated by loss_agg_mode (docs/loss.md).\n");
    out.push_str(
        "Parameters are keys of actor_rollout_ref.actor unless named in full; clip_ratio_low and\nclip_ratio_high fall back to clip_ratio when null.\n",
    );
    out.push_str(CLIP_COV);
    out.push('\n');
    out
}

/// The docs' blocks generated from the declarations, by the name of their region
/// (`tests/docs.rs` keeps the files in step): the table of `docs/loss.md`.
pub fn doc_blocks() -> Vec<(&'static str, String)> {
    vec![("losses", doc_table())]
}

/// `docs/loss.md`'s table: one row per loss, in `LossMode::ALL` order.
fn doc_table() -> String {
    let code = |items: &[&str]| -> String {
        if items.is_empty() {
            "—".to_string()
        } else {
            let quoted: Vec<String> = items.iter().map(|x| format!("`{x}`")).collect();
            quoted.join(", ")
        }
    };
    let mut out = String::from(
        "| `loss_mode` | computes | verl | works | metrics | parameters |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for m in LossMode::ALL {
        let i = m.info();
        let name = match i.loss_type {
            Some(t) => format!("`{}` (`loss_type` `{t}`)", m.name()),
            None => format!("`{}`", m.name()),
        };
        out.push_str(&format!(
            "| {name} | {} | `{}` | {} | {} | {} |\n",
            // a `|` in a formula would end the cell
            i.summary.replace('|', "\\|"),
            i.source(),
            scope(i),
            code(&i.metrics.names()),
            code(i.parameters),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_loss_is_described_once() {
        let json = to_json();
        let list = json.as_array().unwrap();
        assert_eq!(list.len(), LossMode::ALL.len());
        for m in LossMode::ALL {
            let i = m.info();
            let found = list
                .iter()
                .filter(|e| e["name"] == m.name() && e["loss_type"] == json!(i.loss_type))
                .count();
            assert_eq!(found, 1, "{}", m.name());
        }
        let gpg = list.iter().find(|e| e["name"] == "gpg").unwrap();
        assert_eq!(gpg["metrics"], json!([]));
        assert_eq!(gpg["source"], "verl 0.9.1 trainer/ppo/core_algos.py:1707");
        let dro = list.iter().find(|e| e["name"] == "dro").unwrap();
        assert_eq!(dro["parameters"], json!(["policy_loss.dro_beta"]));
        assert_eq!(dro["metrics"], json!(["actor/ppo_kl"]));
        let table = to_table();
        assert!(table.contains("loss_type: reinforce; metrics: actor/ppo_kl"));
        assert!(table.contains("geo_mean     GMPO"));
        assert!(table.ends_with(&format!("{CLIP_COV}\n")));
    }
}
