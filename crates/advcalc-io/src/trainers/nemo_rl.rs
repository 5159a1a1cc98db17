//! NeMo-RL's `train_data_step{N}.jsonl`: `grpo_train` (`nemo_rl/algorithms/grpo.py`, commit
//! `7ea279ab`) hands each step's training batch to `Logger.log_batched_dict_as_jsonl`, which
//! writes `{log_dir}/exp_NNN/train_data_step{N}.jsonl` (N = `total_steps + 1`, 1-based), one
//! JSON object per row (`fixtures/trainers/dumps/README.md`, NeMo-RL). The writer iterates
//! micro-batches of one row, so **every value is wrapped in a batch dimension of 1**
//! (`"rewards": [1.0]`, `"token_ids": [[...]]`); only `idx` is bare. Token fields
//! (`token_ids`, `token_loss_mask`, `advantages`, `generation_logprobs`, `prev_logprobs`) are
//! prompt + response, right-padded to the step's longest row; `input_lengths` is the unpadded
//! length. `val_data_step{N}.jsonl` (content and rewards only) is never read.
//!
//! - **Step**: only the file name says it (`train_data_step{N}.jsonl` → N).
//! - **Response**: `token_loss_mask` is 1 on generated tokens only, so the prompt is the prefix
//!   before its first 1 and the response runs from there to `input_lengths` (the rest is
//!   padding). Environment/tool tokens inside it keep their mask 0. This is exact when the
//!   first message after the prompt is generated, as in NeMo-RL's rollouts.
//! - **Groups**: NeMo-RL groups rows whose prompt token ids are identical (`torch.unique` over
//!   the prompts) within a step; the dump writes no group id, so rows with equal prompt prefixes
//!   are one group, labelled `{step}:{k}` with k the prompt's order of first appearance.
//! - **Log-probs**: `generation_logprobs` (the sampler's) and `prev_logprobs` (the trainer's
//!   before the update) both score `token_ids[t]` at position t, so they are cut at the same
//!   span as the mask.
//! - **Logged advantage**: NeMo-RL expands the row's scalar over every position; the value at
//!   the first response position is taken.
//! - **`sample_loss_mask` 0** (overlong-filtered rows): NeMo-RL still counts the row in its
//!   group's baseline and writes its advantage, and only weights its loss by 0; the mask is kept
//!   so advcalc's advantages match NeMo-RL's, and the field stays as a passthrough column.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::json_line::Json;
use crate::trainers::{
    DumpRow, Line, LineReader, LogProbColumns, Trainer, field_tree, find_files, float_list,
    int_list, number_after, refused_score, required, score_fault,
};

const PREFIX: &str = "train_data_step";
const SUFFIX: &str = ".jsonl";

/// The dump's files at `path` (one `train_data_stepN.jsonl`, an `exp_NNN` directory, or the
/// log dir above it), in step order.
pub fn files(path: &Path, name: &str) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        if file.is_some_and(|f| f.starts_with("val_data_step")) {
            return Err(Error::data(format!(
                "{name}: NeMo-RL's validation dump holds no tokens or advantages"
            ))
            .with_hint("give a train_data_stepN.jsonl file or its exp_NNN directory"));
        }
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = find_files(path, name, &|f| step_of(f).is_some())?;
    // two exp_NNN runs under one log dir would mix their steps
    let mut dirs: Vec<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    dirs.dedup();
    if let [a, b, ..] = dirs.as_slice() {
        return Err(Error::data(format!(
            "{name}: holds NeMo-RL train_data_step files in more than one directory ({} and {})",
            a.display(),
            b.display()
        ))
        .with_hint("give one run's directory (exp_NNN)"));
    }
    files.sort_by_key(|f| (step_of(f), f.clone()));
    Ok(files)
}

/// The step a file's name gives (`train_data_step12.jsonl` → 12).
fn step_of(path: &Path) -> Option<i64> {
    number_after(path.file_name()?.to_str()?, PREFIX, SUFFIX)
}

/// Reads NeMo-RL's rows; the groups are formed per file (one step each).
#[derive(Default)]
pub struct NemoRlReader {
    step: i64,
    /// The step's prompts (token ids) → their group index.
    prompts: HashMap<Vec<i64>, usize>,
    /// Rows without a trained token (empty responses).
    no_response: usize,
    /// Rows whose `advantages` differ over their trained tokens.
    uneven_advantage: usize,
    /// Rows with `sample_loss_mask` 0.
    sample_masked: usize,
}

/// The one row inside a field's batch dimension (NeMo-RL writes micro-batches of one row).
fn unbatch(v: Json, key: &str, at: &str) -> Result<Json> {
    v.into_single().map_err(|(len, other)| match len {
        Some(n) => Error::data(format!(
            "{at}: `{key}` has a batch dimension of {n}, not 1 (NeMo-RL writes one row per line)"
        )),
        None => Error::data(format!(
            "{at}: `{key}` is {}, not a list of one row (NeMo-RL wraps every value in a batch dimension of 1)",
            other.kind()
        )),
    })
}

fn field(fields: &Line<'_>, key: &str, at: &str) -> Result<Json> {
    unbatch(required(fields, key, at, Trainer::NemoRl)?, key, at)
}

fn number(v: &Json, key: &str, at: &str) -> Result<f64> {
    v.as_f64()
        .ok_or_else(|| Error::data(format!("{at}: `{key}` holds {}, not a number", v.kind())))
}

impl LineReader for NemoRlReader {
    const FIELDS: &[(&str, &str)] = &[
        ("rollout_log_probs", "`generation_logprobs`"),
        ("old_log_probs", "`prev_logprobs`"),
        ("response_mask", "`token_loss_mask`"),
    ];
    // every value is wrapped in a batch of one (`make_microbatch_iterator(1)`)
    const BATCHED: bool = true;
    const TREES: &[&str] = &[
        "rewards",
        "input_lengths",
        "token_ids",
        "token_loss_mask",
        "advantages",
        "generation_logprobs",
        "prev_logprobs",
        "sample_loss_mask",
    ];
    const LOG_PROBS: LogProbColumns = LogProbColumns {
        rollout: true,
        old: true,
    };

    fn file(&mut self, path: &Path, name: &str) -> Result<()> {
        self.step = step_of(path).ok_or_else(|| {
            Error::data(format!(
                "{name}: the step is not in the file's name (NeMo-RL writes train_data_stepN.jsonl, the only place the step is recorded)"
            ))
        })?;
        self.prompts.clear();
        Ok(())
    }

    fn row(&mut self, fields: &Line<'_>, at: &str) -> Result<DumpRow> {
        let score = number(&field(fields, "rewards", at)?, "rewards", at)?;
        let key = "input_lengths";
        let length = field(fields, key, at)?;
        let length = length.as_i64().ok_or_else(|| {
            Error::data(format!(
                "{at}: `{key}` holds {}, not an integer",
                length.kind()
            ))
        })?;
        let ids = int_list(&field(fields, "token_ids", at)?, at, "token_ids")?;
        let mask = int_list(
            &field(fields, "token_loss_mask", at)?,
            at,
            "token_loss_mask",
        )?;
        let floats = |key: &str| -> Result<Vec<f64>> {
            let v = float_list(&field(fields, key, at)?, at, key)?;
            if v.len() != ids.len() {
                return Err(Error::data(format!(
                    "{at}: `{key}` has {} positions, `token_ids` {}",
                    v.len(),
                    ids.len()
                )));
            }
            Ok(v)
        };
        if mask.len() != ids.len() {
            return Err(Error::data(format!(
                "{at}: `token_loss_mask` has {} positions, `token_ids` {}",
                mask.len(),
                ids.len()
            )));
        }
        let advantages = floats("advantages")?;
        let generation = floats("generation_logprobs")?;
        let prev = floats("prev_logprobs")?;
        let end = usize::try_from(length)
            .ok()
            .filter(|&n| n <= ids.len())
            .ok_or_else(|| {
                Error::data(format!(
                    "{at}: `input_lengths` is {length}, outside 0..={} (the length of `token_ids`)",
                    ids.len()
                ))
            })?;
        if let Some(bad) = mask.iter().find(|&&m| m != 0 && m != 1) {
            return Err(Error::data(format!(
                "{at}: `token_loss_mask` holds {bad}, not 0 or 1"
            )));
        }
        if let Some(t) = mask[end..].iter().position(|&m| m == 1) {
            return Err(Error::data(format!(
                "{at}: `token_loss_mask` is 1 at position {}, past `input_lengths` {end}",
                end + t
            )));
        }
        if let Some(s) = field_tree(fields, "sample_loss_mask", at)? {
            let s = number(&unbatch(s, "sample_loss_mask", at)?, "sample_loss_mask", at)?;
            if s == 0.0 {
                self.sample_masked += 1;
            }
        }
        // the prompt: up to the first generated token (all of the row when none is)
        let start = mask.iter().position(|&m| m == 1).unwrap_or(end);
        if start == end {
            self.no_response += 1;
        }
        let next = self.prompts.len();
        let k = *self.prompts.entry(ids[..start].to_vec()).or_insert(next);
        let span = start..end;
        let logged = advantages.get(start).or(advantages.first()).copied();
        if let Some(first) = logged {
            let same = |a: f64| a.to_bits() == first.to_bits() || a == first;
            let uneven = span.clone().any(|t| mask[t] == 1 && !same(advantages[t]));
            if uneven {
                self.uneven_advantage += 1;
            }
        }
        let f32s = |v: &[f64]| v[span.clone()].iter().map(|&x| x as f32).collect();
        Ok(DumpRow {
            step: self.step,
            group: format!("{}:{k}", self.step),
            score,
            mask: mask[span.clone()].iter().map(|&m| m as i8).collect(),
            rollout_log_probs: Some(f32s(&generation)),
            old_log_probs: Some(f32s(&prev)),
            logged_advantage: logged,
        })
    }

    fn score_error(&self, fields: &Line<'_>, at: &str, score: f64) -> Error {
        // the reward as written inside its batch of one (`"rewards": [NaN]`)
        let raw = fields
            .iter()
            .find(|f| f.key == "rewards")
            .and_then(|f| crate::json_line::single_element(f.raw))
            .map(|(_, raw)| raw);
        let what = score_fault(score, raw).unwrap_or_else(|| format!("{score:?}"));
        refused_score(at, "rewards", &what)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.no_response > 0 {
            notes.push(format!(
                "{} NeMo-RL row(s) have no token with token_loss_mask 1: their responses are empty",
                self.no_response
            ));
        }
        if self.uneven_advantage > 0 {
            notes.push(format!(
                "{} NeMo-RL row(s) hold different `advantages` over their trained tokens (NeMo-RL writes one scalar per row): the first response position's is taken as the logged advantage",
                self.uneven_advantage
            ));
        }
        if self.sample_masked > 0 {
            notes.push(format!(
                "{} NeMo-RL row(s) have sample_loss_mask 0 (overlong-filtered or masked): NeMo-RL trains them with loss weight 0 but counts them in their group's baseline, and advcalc computes their advantages as NeMo-RL does (sample_loss_mask stays as a passthrough column)",
                self.sample_masked
            ));
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line of one row: prompt `prompt`, response `response` (mask `mask`), `pad` padding.
    fn line(prompt: &[i64], response: &[i64], mask: &[i64], pad: usize, reward: f64) -> String {
        let ids: Vec<i64> = prompt
            .iter()
            .chain(response)
            .copied()
            .chain(std::iter::repeat_n(9, pad))
            .collect();
        let m: Vec<i64> = std::iter::repeat_n(0, prompt.len())
            .chain(mask.iter().copied())
            .chain(std::iter::repeat_n(0, pad))
            .collect();
        let n = ids.len();
        let lp: Vec<f64> = (0..n).map(|t| -(t as f64) / 8.0).collect();
        let j = |v: &dyn std::fmt::Debug| format!("{v:?}");
        format!(
            r#"{{"content": [["q", "a"]], "rewards": [{reward:?}], "input_lengths": [{}], "token_ids": [{}], "token_loss_mask": [{}], "sample_loss_mask": [1.0], "advantages": [{}], "generation_logprobs": [{}], "prev_logprobs": [{}], "idx": 0}}"#,
            prompt.len() + response.len(),
            j(&ids),
            j(&m),
            j(&vec![0.5f64; n]),
            j(&lp),
            j(&lp),
        )
    }

    fn read(reader: &mut NemoRlReader, text: &str, at: &str) -> Result<DumpRow> {
        let fields = crate::json_line::parse_object(text).unwrap();
        reader.row(&Line::from(fields), at)
    }

    fn reader(step: &str) -> NemoRlReader {
        let mut r = NemoRlReader::default();
        r.file(Path::new(step), step).unwrap();
        r
    }

    #[test]
    fn a_two_row_step() {
        let mut r = reader("exp_001/train_data_step3.jsonl");
        // row 1: a tool call (mask 0) inside the response, then 3 padding tokens
        let a = line(&[1, 2, 3], &[4, 5, 6, 7], &[1, 0, 0, 1], 3, 1.0);
        let b = line(&[1, 2, 8], &[4], &[1], 6, 0.0);
        let c = line(&[1, 2, 3], &[5], &[1], 6, 0.0);
        let a = read(&mut r, &a, "f line 1").unwrap();
        assert_eq!(a.step, 3);
        assert_eq!(a.group, "3:0");
        assert_eq!(a.mask, vec![1, 0, 0, 1]);
        assert_eq!(a.score, 1.0);
        assert_eq!(a.logged_advantage, Some(0.5));
        // positions 3..7 score the response tokens
        assert_eq!(
            a.rollout_log_probs.unwrap(),
            vec![-0.375, -0.5, -0.625, -0.75]
        );
        let b = read(&mut r, &b, "f line 2").unwrap();
        assert_eq!(b.group, "3:1");
        assert_eq!(b.mask, vec![1]);
        assert_eq!(b.old_log_probs.unwrap().len(), 1);
        let c = read(&mut r, &c, "f line 3").unwrap();
        assert_eq!(c.group, "3:0");
        // a new file is a new step: its groups start again
        r.file(Path::new("train_data_step4.jsonl"), "x").unwrap();
        let d = line(&[1, 2, 8], &[4], &[1], 0, 0.0);
        assert_eq!(read(&mut r, &d, "g line 1").unwrap().group, "4:0");
        assert!(r.notes().is_empty());
    }

    #[test]
    fn a_batch_dimension_other_than_one_is_refused() {
        let mut r = reader("train_data_step1.jsonl");
        let text = line(&[1], &[2], &[1], 0, 1.0).replace("[1.0]", "[1.0, 2.0]");
        let e = read(&mut r, &text, "f line 7").unwrap_err();
        assert!(e.message().contains("f line 7"), "{}", e.message());
        assert!(e.message().contains("`rewards`"), "{}", e.message());
        assert!(e.message().contains("batch dimension of 2"));
        let text = line(&[1], &[2], &[1], 0, 1.0).replace(r#""rewards": [1.0]"#, r#""x": 1"#);
        let e = read(&mut r, &text, "f line 8").unwrap_err();
        assert!(
            e.message().contains("f line 8: no `rewards`"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn lengths_must_agree() {
        let mut r = reader("train_data_step1.jsonl");
        let text = line(&[1], &[2], &[1], 1, 1.0).replace("[[0.5, 0.5, 0.5]]", "[[0.5, 0.5]]");
        let e = read(&mut r, &text, "f line 2").unwrap_err();
        assert!(
            e.message().contains("`advantages` has 2 positions"),
            "{}",
            e.message()
        );
        let text = line(&[1], &[2], &[1], 0, 1.0)
            .replace(r#""input_lengths": [2]"#, r#""input_lengths": [3]"#);
        let e = read(&mut r, &text, "f line 3").unwrap_err();
        assert!(
            e.message().contains("`input_lengths` is 3"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn rows_without_a_trained_token_and_masked_samples_are_noted() {
        let mut r = reader("train_data_step1.jsonl");
        let text = line(&[1, 2], &[3], &[0], 1, 1.0);
        let row = read(&mut r, &text, "f line 1").unwrap();
        assert!(row.mask.is_empty());
        assert_eq!(row.rollout_log_probs.unwrap().len(), 0);
        let text = line(&[1], &[2], &[1], 0, 1.0).replace(
            r#""sample_loss_mask": [1.0]"#,
            r#""sample_loss_mask": [0.0]"#,
        );
        let row = read(&mut r, &text, "f line 2").unwrap();
        assert_eq!(row.mask, vec![1]);
        let notes = r.notes();
        assert_eq!(notes.len(), 2);
        assert!(notes[0].starts_with("1 NeMo-RL row(s) have no token"));
        assert!(notes[1].contains("sample_loss_mask 0"));
    }

    #[test]
    fn the_step_comes_from_the_file_name() {
        let mut r = NemoRlReader::default();
        assert!(r.file(Path::new("a/train_data_step12.jsonl"), "x").is_ok());
        assert_eq!(r.step, 12);
        assert!(r.file(Path::new("a/rows.jsonl"), "x").is_err());
    }
}
