//! open-instruct's `--save_traces` shards: `DataPreparationActor` writes, after each step's
//! advantages, `{rollouts_save_path}/{run_name}_rollouts_{shard:06d}.jsonl`
//! (`open_instruct/rl_utils.py` `_save_rollouts`, commit e6c3044), one
//! `json.dumps(asdict(RolloutRecord))` per sample: `step`, `sample_idx`, `prompt_idx`,
//! `prompt_tokens`, `response_tokens`, `reward`, `advantage`, `finish_reason`, `dataset`,
//! `ground_truth`, `request_info`, `logprobs` (vLLM's sampling log-probs, one per response
//! token, or `null`; a bare `NaN` for the EOS appended to an empty response). A shard holds
//! whole steps (a new one about every 10000 samples); `{run_name}_metadata.jsonl` beside
//! them names the run, its `git_commit` and model, and is not read as rows.
//!
//! - **Groups** are (`step`, `prompt_idx`), `prompt_idx = sample_idx // n`: consecutive
//!   blocks of n lines of a step, as the `open-instruct` convention forms them. Not equal
//!   prompts: two groups of one prompt in a step keep their own advantages.
//! - **Step** is `step` as written: 0-based (the data-preparation step; grpo_fast's own loop
//!   counts from 1).
//! - **Order**: the writer runs on 2 threads, so two steps' lines can come out interleaved.
//!   Consecutive grouping needs a step's lines together and in `sample_idx` order, and the
//!   contract is one row per line in file order, so a step whose lines are split or out of
//!   order is an error naming the line, not silently regrouped.
//! - **Score** = `reward`; the logged advantage = `advantage`.
//!
//! Missing from the dump: the tool-output mask (every response token counts as trained on,
//! said in a note), the trainer's old and reference log-probs, and values. So the estimators
//! that run are the sequence-level ones and the token ones that need only scores and the
//! mask; no rollout correction (no old log-probs), no KL penalty (no reference), no GAE.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::json_line;
use crate::trainers::{
    DumpRow, Line, LineReader, LogProbColumns, Trainer, find_files, float_list, int_list,
    refused_score, required, score_fault,
};

/// The shards at `path` (one shard, or a directory holding a run's shards), in shard order.
pub fn files(path: &Path, name: &str) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        if metadata_run(path).is_some() && shard_of(path).is_none() {
            return Err(Error::data(format!(
                "{name}: open-instruct's metadata file, not a rollout shard"
            ))
            .with_hint("give a RUN_rollouts_NNNNNN.jsonl shard, or the directory holding them"));
        }
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = find_files(path, name, &|f| shard_of(f).is_some())?;
    files.sort_by_key(|f| (shard_of(f).map(|(_, n)| n), f.clone()));
    // a directory of several runs would mix their steps: one run is read
    let run_of = |f: &PathBuf| shard_of(f).map(|(run, _)| run);
    if let Some(first) = files.first()
        && let Some(other) = files.iter().find(|f| run_of(f) != run_of(first))
    {
        return Err(Error::data(format!(
            "{name}: holds the shards of two runs, {} ({}) and {} ({})",
            run_of(first).unwrap_or_default(),
            first.display(),
            run_of(other).unwrap_or_default(),
            other.display()
        ))
        .with_hint("give the directory or a shard of one run"));
    }
    Ok(files)
}

/// A shard's run name and number (`run1_rollouts_000003.jsonl` → ("run1", 3)).
fn shard_of(path: &Path) -> Option<(String, i64)> {
    let file = path.file_name()?.to_str()?;
    let (run, rest) = file.rsplit_once("_rollouts_")?;
    let n = rest.strip_suffix(".jsonl")?;
    if run.is_empty() || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((run.to_string(), n.parse().ok()?))
}

/// The run a `{run}_metadata.jsonl` file names.
fn metadata_run(path: &Path) -> Option<&str> {
    let run = path
        .file_name()?
        .to_str()?
        .strip_suffix("_metadata.jsonl")?;
    (!run.is_empty()).then_some(run)
}

/// A step already read: the `sample_idx` of its last line, and where that line is.
struct StepSeen {
    last_sample: i64,
    at: String,
}

#[derive(Default)]
pub struct OpenInstructReader {
    /// The step of the previous line.
    current: Option<i64>,
    /// Every step read so far (a step seen again after another one is an error).
    steps: HashMap<i64, StepSeen>,
    /// Rows whose `logprobs` is null (NaN log-probs written instead).
    null_log_probs: usize,
    /// Metadata files already noted, and their notes.
    metadata: Vec<PathBuf>,
    metadata_notes: Vec<String>,
}

impl OpenInstructReader {
    /// Note the run's metadata file beside `shard`, once.
    fn note_metadata(&mut self, shard: &Path) {
        let Some((run, _)) = shard_of(shard) else {
            return;
        };
        let path = shard.with_file_name(format!("{run}_metadata.jsonl"));
        if !path.is_file() || self.metadata.contains(&path) {
            return;
        }
        let shown = path.display().to_string();
        // informational only: a metadata file that cannot be read does not stop the run
        let note = match std::fs::read_to_string(&path) {
            Err(e) => format!("{shown}: cannot read it ({e})"),
            Ok(text) => {
                let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                match json_line::parse_json(first) {
                    Err(e) => format!("{shown}: not a JSON object ({e})"),
                    Ok(meta) => {
                        let get = |k: &str| meta.get(k).and_then(|v| v.as_str()).unwrap_or("?");
                        format!(
                            "open-instruct run {} at commit {} ({shown})",
                            get("run_name"),
                            get("git_commit")
                        )
                    }
                }
            }
        };
        self.metadata.push(path);
        self.metadata_notes.push(note);
    }

    /// Check that the line keeps its step's lines together and in `sample_idx` order.
    fn check_order(&mut self, step: i64, sample: i64, at: &str) -> Result<()> {
        let hint = "sort the lines by (step, sample_idx), keeping one copy of a step a restarted run appended twice (Python's json module reads the bare NaN)";
        let previous = self.current.replace(step);
        match self.steps.get_mut(&step) {
            None => {
                if sample != 0 {
                    return Err(Error::data(format!(
                        "{at}: step {step} starts at sample_idx {sample}, not 0: lines of the step are missing or out of order"
                    ))
                    .with_hint(hint));
                }
                self.steps.insert(
                    step,
                    StepSeen {
                        last_sample: sample,
                        at: at.to_string(),
                    },
                );
            }
            Some(seen) if previous != Some(step) => {
                return Err(Error::data(format!(
                    "{at}: a line of step {step} after step {}'s lines (step {step} was left at {}): open-instruct's 2 writer threads interleaved the steps, or a restarted run appended",
                    previous.map_or("?".to_string(), |p| p.to_string()),
                    seen.at
                ))
                .with_hint(hint));
            }
            Some(seen) => {
                if sample != seen.last_sample + 1 {
                    return Err(Error::data(format!(
                        "{at}: sample_idx {sample} follows {} in step {step}: lines are missing, repeated or out of order",
                        seen.last_sample
                    ))
                    .with_hint(hint));
                }
                seen.last_sample = sample;
                seen.at = at.to_string();
            }
        }
        Ok(())
    }
}

/// A required integer field.
fn int(fields: &Line<'_>, key: &str, at: &str) -> Result<i64> {
    let v = required(fields, key, at, Trainer::OpenInstruct)?;
    v.as_i64()
        .ok_or_else(|| Error::data(format!("{at}: `{key}` is {}, not an integer", v.kind())))
}

/// A required number field (a bare NaN included).
fn number(fields: &Line<'_>, key: &str, at: &str) -> Result<f64> {
    let v = required(fields, key, at, Trainer::OpenInstruct)?;
    v.as_f64()
        .ok_or_else(|| Error::data(format!("{at}: `{key}` is {}, not a number", v.kind())))
}

impl LineReader for OpenInstructReader {
    const FIELDS: &[(&str, &str)] = &[("rollout_log_probs", "`logprobs`")];
    const TREES: &[&str] = &["response_tokens", "logprobs"];
    const LOG_PROBS: LogProbColumns = LogProbColumns {
        rollout: true,
        old: false,
    };

    fn file(&mut self, path: &Path, _name: &str) -> Result<()> {
        self.note_metadata(path);
        Ok(())
    }

    fn row(&mut self, fields: &Line<'_>, at: &str) -> Result<DumpRow> {
        let step = int(fields, "step", at)?;
        let sample = int(fields, "sample_idx", at)?;
        let prompt = int(fields, "prompt_idx", at)?;
        let score = number(fields, "reward", at)?;
        let advantage = number(fields, "advantage", at)?;
        let tokens = int_list(
            &required(fields, "response_tokens", at, Trainer::OpenInstruct)?,
            at,
            "response_tokens",
        )?;
        let log_probs = match required(fields, "logprobs", at, Trainer::OpenInstruct)? {
            // the writer's `None` when the step's generation returned no log-probs
            json_line::Json::Null => {
                self.null_log_probs += 1;
                vec![f32::NAN; tokens.len()]
            }
            v => {
                let lp = float_list(&v, at, "logprobs")?;
                if lp.len() != tokens.len() {
                    return Err(Error::data(format!(
                        "{at}: `logprobs` has {} values, `response_tokens` {} tokens",
                        lp.len(),
                        tokens.len()
                    )));
                }
                lp.into_iter().map(|x| x as f32).collect()
            }
        };
        self.check_order(step, sample, at)?;
        Ok(DumpRow {
            step,
            group: format!("{step}:{prompt}"),
            score,
            mask: vec![1; tokens.len()],
            rollout_log_probs: Some(log_probs),
            old_log_probs: None,
            logged_advantage: Some(advantage).filter(|a| !a.is_nan()),
        })
    }

    fn score_error(&self, fields: &Line<'_>, at: &str, score: f64) -> Error {
        let raw = fields.iter().find(|f| f.key == "reward").map(|f| f.raw);
        let what = score_fault(score, raw).unwrap_or_else(|| format!("{score:?}"));
        refused_score(at, "reward", &what)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = self.metadata_notes.clone();
        notes.push(
            "open-instruct does not save the tool-output mask: every response token is counted as trained on".to_string(),
        );
        if self.null_log_probs > 0 {
            notes.push(format!(
                "{} row(s) have null `logprobs`: their rollout_log_probs are NaN",
                self.null_log_probs
            ));
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(step: i64, sample: i64, prompt: i64, extra: &str) -> String {
        format!(
            r#"{{"step": {step}, "sample_idx": {sample}, "prompt_idx": {prompt}, "prompt_tokens": [1, 101], "response_tokens": [201, 2], "reward": 1.0, "advantage": 0.5, "finish_reason": "stop", "dataset": "gsm8k", "ground_truth": "3", "request_info": {{}}{extra}}}"#
        )
    }

    fn read(reader: &mut OpenInstructReader, text: &str, at: &str) -> Result<DumpRow> {
        let fields = json_line::parse_object(text).expect("valid line");
        reader.row(&Line::from(fields), at)
    }

    #[test]
    fn a_line_is_one_row_of_its_step_and_prompt_group() {
        let mut r = OpenInstructReader::default();
        let row = read(
            &mut r,
            &line(0, 0, 0, r#", "logprobs": [-0.5, NaN]"#),
            "f line 1",
        )
        .expect("row");
        assert_eq!(row.step, 0);
        assert_eq!(row.group, "0:0");
        assert_eq!(row.score, 1.0);
        assert_eq!(row.mask, vec![1, 1]);
        assert_eq!(row.logged_advantage, Some(0.5));
        let lp = row.rollout_log_probs.expect("log-probs");
        assert_eq!(lp[0], -0.5);
        // the EOS appended to an empty response: a bare NaN stays NaN
        assert!(lp[1].is_nan());
        // the next prompt of the step is another group, whatever its prompt tokens
        let row = read(
            &mut r,
            &line(0, 1, 1, r#", "logprobs": [-1, -2]"#),
            "f line 2",
        )
        .expect("row");
        assert_eq!(row.group, "0:1");
    }

    #[test]
    fn null_log_probs_are_nan_and_counted() {
        let mut r = OpenInstructReader::default();
        let row = read(&mut r, &line(3, 0, 0, r#", "logprobs": null"#), "f line 1").expect("row");
        let lp = row.rollout_log_probs.expect("log-probs");
        assert_eq!(lp.len(), 2);
        assert!(lp.iter().all(|x| x.is_nan()));
        assert!(
            r.notes()
                .iter()
                .any(|n| n.starts_with("1 row(s) have null"))
        );
    }

    #[test]
    fn bad_fields_name_the_line_and_the_field() {
        let mut r = OpenInstructReader::default();
        let no_reward =
            line(0, 0, 0, r#", "logprobs": [-1, -2]"#).replace(r#""reward": 1.0, "#, "");
        let e = read(&mut r, &no_reward, "f line 7").unwrap_err();
        assert!(e.to_string().starts_with("f line 7: no `reward`"), "{e}");
        let text = line(0, 0, 0, r#", "logprobs": [-1, -2]"#).replace("1.0", r#""x""#);
        let e = read(&mut r, &text, "f line 8").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f line 8: `reward` is a string, not a number"
        );
        let e = read(&mut r, &line(0, 0, 0, r#", "logprobs": [-1]"#), "f line 9").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f line 9: `logprobs` has 1 values, `response_tokens` 2 tokens"
        );
        let e = read(&mut r, &line(0, 0, 0, ""), "f line 10").unwrap_err();
        assert!(e.to_string().contains("no `logprobs`"), "{e}");
    }

    #[test]
    fn interleaved_steps_are_an_error_naming_the_line() {
        let lp = r#", "logprobs": [-1, -2]"#;
        let mut r = OpenInstructReader::default();
        read(&mut r, &line(0, 0, 0, lp), "f line 1").expect("row");
        read(&mut r, &line(1, 0, 0, lp), "f line 2").expect("row");
        let e = read(&mut r, &line(0, 1, 0, lp), "f line 3").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "f line 3: a line of step 0 after step 1's lines (step 0 was left at f line 1)"
            ),
            "{e}"
        );
        assert!(e.hint().is_some_and(|h| h.contains("sort")));
        // within a step, sample_idx counts up by one
        let mut r = OpenInstructReader::default();
        read(&mut r, &line(0, 0, 0, lp), "f line 1").expect("row");
        let e = read(&mut r, &line(0, 2, 0, lp), "f line 2").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("f line 2: sample_idx 2 follows 0"),
            "{e}"
        );
        let mut r = OpenInstructReader::default();
        let e = read(&mut r, &line(5, 3, 0, lp), "f line 1").unwrap_err();
        assert!(e.to_string().contains("starts at sample_idx 3"), "{e}");
    }

    #[test]
    fn shards_sort_by_number_and_one_run_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let touch = |name: &str| std::fs::write(dir.path().join(name), "").expect("write");
        touch("r_rollouts_000010.jsonl");
        touch("r_rollouts_000002.jsonl");
        touch("r_metadata.jsonl");
        let got = files(dir.path(), "IN").expect("files");
        let names: Vec<_> = got
            .iter()
            .map(|f| {
                f.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            names,
            ["r_rollouts_000002.jsonl", "r_rollouts_000010.jsonl"]
        );
        let e = files(&dir.path().join("r_metadata.jsonl"), "M").unwrap_err();
        assert!(e.to_string().contains("metadata file"), "{e}");
        touch("other_rollouts_000000.jsonl");
        let e = files(dir.path(), "IN").unwrap_err();
        assert!(e.to_string().contains("two runs"), "{e}");
        assert!(
            e.to_string().contains("other") && e.to_string().contains(" r ("),
            "{e}"
        );
    }

    #[test]
    fn the_metadata_file_is_a_note() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shard = dir.path().join("r_rollouts_000000.jsonl");
        std::fs::write(
            dir.path().join("r_metadata.jsonl"),
            r#"{"run_name": "r", "git_commit": "abc", "model_name": "m", "timestamp": "t"}"#,
        )
        .expect("write");
        let mut r = OpenInstructReader::default();
        r.file(&shard, "s").expect("file");
        r.file(&shard, "s").expect("file");
        let notes = r.notes();
        assert_eq!(
            notes
                .iter()
                .filter(|n| n.contains("run r at commit abc"))
                .count(),
            1,
            "{notes:?}"
        );
        assert!(notes.iter().any(|n| n.contains("tool-output mask")));
    }
}
