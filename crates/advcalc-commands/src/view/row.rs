//! One row's tokens: its row group read and run through pass 2 under every variant (and the
//! loss replay), the row's slices cut out as signals the page colours tokens by, with the
//! dump's own text and token ids beside them.

use std::fmt::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type, UInt32Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use serde_json::{Value, json};

use crate::data::TokenRole;
use crate::error::Result;
use crate::io::tokenizer::Tokenizer;

use super::index::{NO_GROUP, Snapshot};

/// Row-level text columns shown under the strip, in this order when present (any other
/// string column follows).
const TEXT_FIRST: [&str; 8] = [
    "prompt",
    "prompts",
    "input",
    "query",
    "response",
    "completion",
    "output",
    "responses_text",
];

/// Columns holding a response's token ids, aligned with its response positions.
const TOKEN_IDS: [&str; 5] = [
    "responses",
    "response_ids",
    "completion_ids",
    "token_ids",
    "output_ids",
];

/// Token columns shown whether or not a variant reads them (KL is old − ref).
const LOG_PROBS: [TokenRole; 4] = [
    TokenRole::OldLogProbs,
    TokenRole::RefLogProb,
    TokenRole::RolloutLogProbs,
    TokenRole::Values,
];

/// Token columns shown as they are when the dump has them.
const ENTROPY: [&str; 2] = ["entropy", "entropys"];

/// The columns a row's request reads besides the engines': text, token ids, entropy.
pub fn display_columns(schema: &arrow_schema::Schema) -> Vec<usize> {
    schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            matches!(
                f.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) || TOKEN_IDS.contains(&f.name().as_str())
                || ENTROPY.contains(&f.name().as_str())
                || LOG_PROBS.iter().any(|r| r.column() == f.name())
        })
        .map(|(i, _)| i)
        .collect()
}

/// Row `row`'s JSON: what the row view draws.
pub fn row_json(snapshot: &Snapshot, row: usize, tokenizer: Option<&Tokenizer>) -> Result<String> {
    let input = &snapshot.opened.dataset;
    let units = input.units();
    let u = units.partition_point(|x| x.start <= row) - 1;
    let mut columns = snapshot.projection.clone();
    columns.extend(display_columns(&input.schema()));
    columns.sort_unstable();
    columns.dedup();
    let batch = input.read_unit(u, Some(&columns))?;
    let outputs = snapshot.outputs(u, &batch)?;
    let i = row - units[u].start;
    let index = &snapshot.index;
    let n = index.labels.len();
    let g = &outputs[0].group;
    let s = g.span(i);
    let mask = &g.mask.values[s.clone()];

    let mut signals: Vec<(String, Vec<f32>)> = Vec::new();
    for (label, o) in index.labels.iter().zip(&outputs[..n]) {
        signals.push((
            format!("advantage:{label}"),
            o.outputs.advantages[s.clone()].to_vec(),
        ));
    }
    if let Some(o) = outputs[..n].iter().find(|o| o.outputs.returns.is_some()) {
        let r = o.outputs.returns.as_ref().expect("found");
        signals.push(("returns".into(), r[s.clone()].to_vec()));
    }
    signals.push((
        "reward".into(),
        outputs[0].outputs.token_level_rewards[s.clone()].to_vec(),
    ));
    signals.push(("score".into(), g.scores[s.clone()].to_vec()));
    for (label, o) in index.labels.iter().zip(&outputs[..n]) {
        if let Some(w) = &o.outputs.rollout_is_weights {
            signals.push((format!("is_weight:{label}"), w[s.clone()].to_vec()));
        }
        let rejected: Vec<f32> = mask
            .iter()
            .zip(&o.mask[s.clone()])
            .map(|(&before, &after)| f32::from(before != 0.0 && after == 0.0))
            .collect();
        if rejected.iter().any(|&x| x != 0.0) || o.outputs.rollout_is_weights.is_some() {
            signals.push((format!("rejected:{label}"), rejected));
        }
    }
    if snapshot.has_loss {
        let o = outputs.last().expect("the loss replay's");
        if let Some(l) = &o.outputs.loss {
            signals.push(("grad_weight".into(), l.grad_weights[s.clone()].to_vec()));
            signals.push(("pg_loss".into(), l.pg_losses[s.clone()].to_vec()));
        }
    }
    // the log-probs as the engine read them, else (a column no variant reads) from the batch
    let token = |role: TokenRole| -> Option<Vec<f32>> {
        g.token(role)
            .map(|v| v[s.clone()].to_vec())
            .or_else(|| {
                batch
                    .column_by_name(role.column())
                    .and_then(|c| floats_of_row(c, i))
            })
            .filter(|v| v.len() == s.len())
    };
    let (old, reference) = (token(TokenRole::OldLogProbs), token(TokenRole::RefLogProb));
    if let (Some(old), Some(reference)) = (&old, &reference) {
        signals.push((
            "kl".into(),
            old.iter().zip(reference).map(|(a, b)| a - b).collect(),
        ));
    }
    for (role, name) in [
        (TokenRole::OldLogProbs, "old_log_prob"),
        (TokenRole::RefLogProb, "ref_log_prob"),
        (TokenRole::RolloutLogProbs, "rollout_log_prob"),
        (TokenRole::Values, "value"),
    ] {
        if let Some(v) = token(role) {
            signals.push((name.into(), v));
        }
    }
    for name in ENTROPY {
        if let Some(v) = batch.column_by_name(name).and_then(|c| floats_of_row(c, i))
            && v.len() == s.len()
        {
            signals.push(("entropy".into(), v));
            break;
        }
    }

    let scores = &g.scores[s.clone()];
    let mut reward_at: Vec<usize> = (0..scores.len()).filter(|&t| scores[t] != 0.0).collect();
    if reward_at.is_empty() {
        reward_at.extend(mask.iter().rposition(|&m| m != 0.0));
    }
    let mut text: Vec<(String, String)> = Vec::new();
    let schema = batch.schema();
    let mut names: Vec<&str> = TEXT_FIRST.to_vec();
    names.extend(schema.fields().iter().map(|f| f.name().as_str()));
    for name in names {
        // the uid is in the row's header already
        if name == "uid" || text.iter().any(|(n, _)| n == name) {
            continue;
        }
        if let Some(v) = batch.column_by_name(name).and_then(|c| string_of_row(c, i)) {
            text.push((name.to_string(), v));
        }
    }
    // a verl JSONL dump's rows are spooled without their text: read from the row's own line
    if let Some(lines) = snapshot.jsonl_lines()? {
        text.extend(lines.text(row)?);
    }
    let ids = TOKEN_IDS
        .iter()
        .find_map(|name| batch.column_by_name(name).and_then(|c| ids_of_row(c, i)));
    let info = index.row_group[row];
    let meta = json!({
        "row": row,
        "rows": index.rows,
        "step": index.steps[index.row_step[row] as usize].step,
        "step_index": index.row_step[row],
        "group": (info != NO_GROUP).then_some(info),
        "uid": (info != NO_GROUP).then(|| index.groups[info as usize].uid.clone()),
        "score": index.score[row],
        "correct": index.correct[row],
        "length": index.length[row],
        "tokens": s.len(),
        "labels": index.labels,
        "row_advantages": index.advantage.iter().map(|a| a[row]).collect::<Vec<_>>(),
        "logged": index.logged.as_ref().and_then(|l| l[row]),
        "reward_at": reward_at,
        "text": text.into_iter().map(|(k, v)| json!({"column": k, "text": v})).collect::<Vec<_>>(),
        "token_ids": ids.as_ref().map(|v| if v.len() == s.len() { json!(v) } else { Value::Null }),
        "pieces": match (&ids, tokenizer) {
            (Some(v), Some(t)) if v.len() == s.len() => json!(t.pieces(v)),
            _ => Value::Null,
        },
        "decoded": match (&ids, tokenizer) {
            (Some(v), Some(t)) => json!(t.decode(v)),
            _ => Value::Null,
        },
    });
    let mut out = String::with_capacity(64 + signals.len() * s.len() * 10);
    out.push_str("{\"meta\":");
    out.push_str(&meta.to_string());
    out.push_str(",\"mask\":");
    floats(&mut out, mask);
    out.push_str(",\"signals\":{");
    for (k, (name, values)) in signals.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(name.as_str()).to_string());
        out.push(':');
        floats(&mut out, values);
    }
    out.push_str("}}");
    Ok(out)
}

/// `values` as a JSON array, each the shortest decimal that reads back as the same f32 (NaN
/// and ±inf as null).
fn floats(out: &mut String, values: &[f32]) {
    out.push('[');
    for (k, v) in values.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        if v.is_finite() {
            let _ = write!(out, "{v}");
        } else {
            out.push_str("null");
        }
    }
    out.push(']');
}

fn string_of_row(column: &ArrayRef, i: usize) -> Option<String> {
    if column.is_null(i) {
        return None;
    }
    match column.data_type() {
        DataType::Utf8 => Some(column.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Some(column.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => Some(column.as_string_view().value(i).to_string()),
        _ => None,
    }
}

fn list_value(column: &ArrayRef, i: usize) -> Option<ArrayRef> {
    if column.is_null(i) {
        return None;
    }
    match column.data_type() {
        DataType::List(_) => Some(column.as_list::<i32>().value(i)),
        DataType::LargeList(_) => Some(column.as_list::<i64>().value(i)),
        _ => None,
    }
}

fn ids_of_row(column: &ArrayRef, i: usize) -> Option<Vec<i64>> {
    let v = list_value(column, i)?;
    match v.data_type() {
        DataType::Int64 => Some(v.as_primitive::<Int64Type>().values().to_vec()),
        DataType::Int32 => Some(
            v.as_primitive::<Int32Type>()
                .values()
                .iter()
                .map(|&x| x as i64)
                .collect(),
        ),
        DataType::UInt32 => Some(
            v.as_primitive::<UInt32Type>()
                .values()
                .iter()
                .map(|&x| x as i64)
                .collect(),
        ),
        _ => None,
    }
}

fn floats_of_row(column: &ArrayRef, i: usize) -> Option<Vec<f32>> {
    let v = list_value(column, i)?;
    match v.data_type() {
        DataType::Float32 => Some(v.as_primitive::<Float32Type>().values().to_vec()),
        DataType::Float64 => Some(
            v.as_primitive::<Float64Type>()
                .values()
                .iter()
                .map(|&x| x as f32)
                .collect(),
        ),
        _ => None,
    }
}
