//! prime-rl's rollout traces: `FileMonitor.log_episodes` writes
//! `{output_dir}/rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl`, one verifiers
//! `Episode.to_record()` per line (orjson, `exclude_none`; fixtures/trainers/dumps/README.md
//! "prime-rl", docs/reference/trainer-dumps.md §5).
//!
//! - **Files**: `train/effective/` of each step, in numeric step order: the cohort trained on,
//!   after credit assignment. A step with only `train/all/` (written on arrival, before any
//!   scoring) is read from there, said in a note: its rows have no logged advantage. Eval
//!   traces are never read. The older `step_N/train_rollouts.jsonl` (before prime-rl #2983)
//!   records no group, step or advantage and is refused.
//! - **Row**: one episode with exactly one trace. Its tokens are the nodes' `token_ids`/`mask`
//!   (each node a delta) along the root → leaf path of `parent` links; the response runs from
//!   the first sampled (mask-true) token to the end, tool and template tokens inside it mask 0;
//!   a trace with no sampled token has an empty response (no valid token: prime-rl's
//!   `iter_trainable_traces` leaves it out of its group, and so does the `prime-rl` convention).
//! - **Log-probs**: each node's `logprobs` is compact (one per mask-true token), spread back
//!   over the node's true positions (verifiers `Branch.spread`); 0.0 elsewhere.
//! - **Score** = Σ score·weight over `traces[0].rewards` (`Trace.reward`; the total is not
//!   stored). **Group** = `group.id`. **Step** = the directory's N (`run.work.step` is the
//!   dispatch step; a difference is noted once). **Logged advantage** = the first value of the
//!   first node's compact `advantages` (prime-rl writes the trace's scalar on every sampled
//!   token).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::json_line::Json;
use crate::trainers::{
    DumpRow, Line, LineReader, LogProbColumns, Trainer, field_tree, find_files, float_list,
    int_list, number_after, refused_score, required, score_fault,
};

/// The file name of the older layout (`rollouts/step_N/train_rollouts.jsonl`).
pub const OLD_FILE: &str = "train_rollouts.jsonl";

/// The file name of the current layout.
const FILE: &str = "traces.jsonl";

/// The step a `step_N` directory names.
fn step_dir(name: &str) -> Option<i64> {
    number_after(name, "step_", "").filter(|n| *n >= 0)
}

/// The N of the nearest `step_N` directory above `path`.
fn step_of(path: &Path) -> Option<i64> {
    path.ancestors()
        .skip(1)
        .find_map(|a| step_dir(a.file_name()?.to_str()?))
}

/// A current-layout training file: `step_N/train/{all,effective}/traces.jsonl`; its step and
/// whether it is `effective/`.
fn train_file(path: &Path) -> Option<(i64, bool)> {
    fn name(p: Option<&Path>) -> Option<&str> {
        p?.file_name()?.to_str()
    }
    if name(Some(path))? != FILE {
        return None;
    }
    let subset = path.parent()?;
    let effective = match name(Some(subset))? {
        "effective" => true,
        "all" => false,
        _ => return None,
    };
    let kind = subset.parent()?;
    if name(Some(kind))? != "train" {
        return None;
    }
    Some((step_dir(name(kind.parent())?)?, effective))
}

/// The refusal of prime-rl's older layout, found at `file`.
fn old_layout(file: &Path) -> Error {
    Error::data(format!(
        "{}: prime-rl's older rollout layout (step_N/train_rollouts.jsonl, before prime-rl PR #2983): its records exclude the group ids, steps and advantages",
        file.display()
    ))
    .with_hint("advcalc reads the current layout, rollouts/step_N/train/effective/traces.jsonl (prime-rl's file monitor)")
}

/// The dump's files at `path` (a run's output dir, its `rollouts/`, a `step_N` dir, or one
/// `traces.jsonl`), in step order: each step's `train/effective/`, else its `train/all/`.
pub fn files(path: &Path, name: &str) -> Result<Vec<PathBuf>> {
    if path.is_file() {
        if path.file_name().is_some_and(|f| f == OLD_FILE) {
            return Err(old_layout(path));
        }
        return Ok(vec![path.to_path_buf()]);
    }
    // per step: (effective, all)
    let mut steps: BTreeMap<i64, (Vec<PathBuf>, Vec<PathBuf>)> = BTreeMap::new();
    let found = find_files(path, name, &|f| {
        train_file(f).is_some() || f.file_name().is_some_and(|n| n == OLD_FILE)
    })?;
    let (current, old): (Vec<PathBuf>, Vec<PathBuf>) =
        found.into_iter().partition(|f| train_file(f).is_some());
    // a step of the older layout cannot be read: refused, never left out without a word
    if let Some(f) = old.first() {
        return Err(match current.first() {
            None => old_layout(f),
            Some(c) => Error::data(format!(
                "{}: a step in prime-rl's older rollout layout (step_N/train_rollouts.jsonl, before prime-rl PR #2983), beside steps in the current one ({}): its records exclude the group ids, steps and advantages, so the step cannot be read",
                f.display(),
                c.display()
            ))
            .with_hint("give the current layout's steps: their step_N directories, or a quoted glob such as 'rollouts/step_*/train/effective/traces.jsonl'"),
        });
    }
    // two runs' rollouts (the directories holding their step_N) would mix their steps
    let run_of = |f: &Path| f.ancestors().nth(4).map(Path::to_path_buf);
    if let Some(first) = current.first().and_then(|f| run_of(f))
        && let Some(other) = current
            .iter()
            .filter_map(|f| run_of(f))
            .find(|r| *r != first)
    {
        return Err(Error::data(format!(
            "{name}: holds the rollouts of more than one prime-rl run ({} and {})",
            first.display(),
            other.display()
        ))
        .with_hint("give one run's output directory (or its rollouts/)"));
    }
    for f in current {
        if let Some((step, effective)) = train_file(&f) {
            let entry = steps.entry(step).or_default();
            if effective {
                entry.0.push(f);
            } else {
                entry.1.push(f);
            }
        }
    }
    Ok(steps
        .into_values()
        .flat_map(|(effective, all)| if effective.is_empty() { all } else { effective })
        .collect())
}

/// Reads one episode per line.
#[derive(Default)]
pub struct PrimeRlReader {
    /// The current file's `step_N` (none for a lone file outside the layout).
    step: Option<i64>,
    /// Steps read from `train/all/` (no advantages yet).
    all_steps: Vec<i64>,
    /// The first line whose `run.work.step` differs from its directory's step.
    step_differs: Option<String>,
}

impl LineReader for PrimeRlReader {
    const FIELDS: &[(&str, &str)] = &[("rollout_log_probs", "the nodes' `logprobs`")];
    const TREES: &[&str] = &["traces", "group", "run"];
    const LOG_PROBS: LogProbColumns = LogProbColumns {
        rollout: true,
        old: false,
    };

    fn file(&mut self, path: &Path, _name: &str) -> Result<()> {
        self.step = step_of(path);
        if let Some((step, false)) = train_file(path)
            && !self.all_steps.contains(&step)
        {
            self.all_steps.push(step);
        }
        Ok(())
    }

    fn row(&mut self, fields: &Line<'_>, at: &str) -> Result<DumpRow> {
        let trainer = Trainer::PrimeRl;
        let traces = required(fields, "traces", at, trainer)?;
        let traces = traces.as_array().ok_or_else(|| {
            Error::data(format!("{at}: `traces` is {}, not a list", traces.kind()))
        })?;
        let [trace] = &*traces else {
            return Err(Error::data(format!(
                "{at}: `traces` holds {} traces; advcalc reads episodes of exactly one trace",
                traces.len()
            )));
        };
        let group = required(fields, "group", at, trainer)?;
        let group = group
            .get("id")
            .and_then(Json::as_str)
            .ok_or_else(|| Error::data(format!("{at}: no `group.id` string")))?
            .to_string();
        let work_step = match field_tree(fields, "run", at)? {
            Some(run) => match run.at(&["work", "step"]) {
                None => None,
                Some(s) => Some(s.as_i64().ok_or_else(|| {
                    Error::data(format!(
                        "{at}: `run.work.step` is {}, not an integer",
                        s.kind()
                    ))
                })?),
            },
            None => None,
        };
        let step = match (self.step, work_step) {
            (Some(dir), Some(work)) => {
                if dir != work && self.step_differs.is_none() {
                    self.step_differs = Some(format!("{at}: run.work.step {work}, step_{dir}"));
                }
                dir
            }
            (Some(dir), None) => dir,
            (None, Some(work)) => work,
            (None, None) => {
                return Err(Error::data(format!(
                    "{at}: no step: the file is not under a step_N directory and the line has no `run.work.step`"
                )));
            }
        };
        let tokens = path_tokens(trace, at)?;
        Ok(DumpRow {
            step,
            group,
            score: reward(trace, at)?,
            mask: tokens.mask,
            rollout_log_probs: Some(tokens.log_probs),
            old_log_probs: None,
            logged_advantage: tokens.advantage,
        })
    }

    fn score_error(&self, fields: &Line<'_>, at: &str, score: f64) -> Error {
        use crate::json_line::{Step, raw_at};
        let traces_raw = fields.iter().find(|f| f.key == "traces").map(|f| f.raw);
        let traces = field_tree(fields, "traces", at).ok().flatten();
        let trace = traces
            .as_ref()
            .and_then(Json::as_array)
            .and_then(|t| t.first().cloned());
        if let Some(Json::Object(entries)) = trace.as_ref().and_then(|t| t.get("rewards")) {
            for (name, r) in entries {
                let field = |f: &str| format!("traces[0].rewards.{name}.{f}");
                match r.get("score") {
                    None => {
                        return refused_score(
                            at,
                            &field("score"),
                            "absent (verifiers leaves out a None score), so the reward is NaN",
                        );
                    }
                    Some(Json::Null) => {
                        return refused_score(
                            at,
                            &field("score"),
                            "null (orjson writes a NaN as null), so the reward is NaN",
                        );
                    }
                    _ => {}
                }
                for f in ["score", "weight"] {
                    let Some(v) = r.get(f).and_then(Json::as_f64) else {
                        continue;
                    };
                    if !v.is_finite() {
                        let path = [
                            Step::Index(0),
                            Step::Key("rewards"),
                            Step::Key(name),
                            Step::Key(f),
                        ];
                        let raw = traces_raw.and_then(|t| raw_at(t, &path));
                        let what = score_fault(v, raw).unwrap_or_default();
                        return refused_score(at, &field(f), &what);
                    }
                }
            }
        }
        // finite scores and weights whose Σ score·weight is not
        let total = "the reward Σ score·weight over `traces[0].rewards`";
        let why = if score.is_finite() {
            format!(
                "is {score:?}, which overflows float32 (prime-rl's rewards tensor and advcalc's scores are float32)"
            )
        } else {
            "overflows float64".to_string()
        };
        Error::data(format!(
            "{at}: {total} {why} (pass --allow-nonfinite to let non-finite values through)"
        ))
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.all_steps.is_empty() {
            let steps: Vec<String> = self.all_steps.iter().map(|s| s.to_string()).collect();
            notes.push(format!(
                "prime-rl step(s) {} have only train/all/ traces (logged on arrival, before credit assignment): read from there, their rows have no logged advantage",
                steps.join(", ")
            ));
        }
        if let Some(first) = &self.step_differs {
            notes.push(format!(
                "the step is the directory's step_N (the arrival step), which differs from run.work.step (the dispatch step) in an asynchronous run; first at {first}"
            ));
        }
        notes
    }
}

/// A trace's response as advcalc's columns hold it.
#[derive(Debug, Clone, PartialEq)]
struct PathTokens {
    mask: Vec<i8>,
    log_probs: Vec<f32>,
    advantage: Option<f64>,
}

/// The trace's nodes in root → leaf order; an error unless they form one linear path.
fn linear_path<'a>(nodes: &'a [Json], at: &str) -> Result<Vec<&'a Json>> {
    let n = nodes.len();
    let mut child: Vec<Option<usize>> = vec![None; n];
    let mut root = None;
    for (i, node) in nodes.iter().enumerate() {
        match node.get("parent") {
            None | Some(Json::Null) => {
                if let Some(r) = root {
                    return Err(Error::data(format!(
                        "{at}: trace nodes {r} and {i} both have no `parent`; advcalc reads a trace whose nodes form one path"
                    )));
                }
                root = Some(i);
            }
            Some(p) => {
                let p = p
                    .as_i64()
                    .and_then(|p| usize::try_from(p).ok())
                    .filter(|&p| p < n && p != i)
                    .ok_or_else(|| {
                        Error::data(format!(
                            "{at}: trace node {i}: `parent` is not the index of another node"
                        ))
                    })?;
                if let Some(c) = child[p] {
                    return Err(Error::data(format!(
                        "{at}: trace node {p} has two children ({c} and {i}); advcalc reads a trace whose nodes form one path"
                    )));
                }
                child[p] = Some(i);
            }
        }
    }
    let mut path = Vec::with_capacity(n);
    let mut next = root;
    while let Some(i) = next {
        path.push(&nodes[i]);
        next = child[i];
        if path.len() > n {
            break;
        }
    }
    if path.len() != n {
        return Err(Error::data(format!(
            "{at}: the trace's nodes do not form one path from a root (`parent` links)"
        )));
    }
    Ok(path)
}

/// Concatenate the nodes' masks along the path, spread each node's compact `logprobs` over
/// its mask-true tokens, and cut the response from the first sampled token.
fn path_tokens(trace: &Json, at: &str) -> Result<PathTokens> {
    let nodes = trace
        .get("nodes")
        .ok_or_else(|| Error::data(format!("{at}: no `traces[0].nodes`")))?;
    let nodes = nodes.as_array().ok_or_else(|| {
        Error::data(format!(
            "{at}: `traces[0].nodes` is {}, not a list",
            nodes.kind()
        ))
    })?;
    let mut mask: Vec<i8> = Vec::new();
    let mut log_probs: Vec<f32> = Vec::new();
    let mut advantage = None;
    for (k, node) in linear_path(&nodes, at)?.into_iter().enumerate() {
        let what = |f: &str| format!("nodes[{k}].{f}");
        let field = |f: &str| {
            node.get(f)
                .ok_or_else(|| Error::data(format!("{at}: no `{}`", what(f))))
        };
        let ids = int_list(field("token_ids")?, at, &what("token_ids"))?;
        let m = field("mask")?;
        let m = m.as_array().ok_or_else(|| {
            Error::data(format!(
                "{at}: `{}` is {}, not a list",
                what("mask"),
                m.kind()
            ))
        })?;
        let m: Vec<bool> = m
            .iter()
            .map(|b| {
                b.as_bool().ok_or_else(|| {
                    Error::data(format!(
                        "{at}: `{}` holds {}, not a boolean",
                        what("mask"),
                        b.kind()
                    ))
                })
            })
            .collect::<Result<_>>()?;
        if m.len() != ids.len() {
            return Err(Error::data(format!(
                "{at}: `{}` has {} entries for {} token ids",
                what("mask"),
                m.len(),
                ids.len()
            )));
        }
        let sampled = m.iter().filter(|&&b| b).count();
        // an unsampled node may omit its (empty) logprobs
        let lp = match node.get("logprobs") {
            None | Some(Json::Null) if sampled == 0 => Vec::new(),
            None | Some(Json::Null) => {
                return Err(Error::data(format!(
                    "{at}: no `{}` for its {sampled} sampled tokens",
                    what("logprobs")
                )));
            }
            Some(v) => float_list(v, at, &what("logprobs"))?,
        };
        if lp.len() != sampled {
            return Err(Error::data(format!(
                "{at}: `{}` has {} values for {sampled} mask-true tokens",
                what("logprobs"),
                lp.len()
            )));
        }
        let mut values = lp.into_iter();
        for &b in &m {
            mask.push(b as i8);
            log_probs.push(if b {
                values.next().unwrap_or(0.0) as f32
            } else {
                0.0
            });
        }
        if advantage.is_none()
            && let Some(a) = node.get("advantages").filter(|a| **a != Json::Null)
        {
            advantage = float_list(a, at, &what("advantages"))?.first().copied();
        }
    }
    // no sampled token (an errored or untrainable trace): an empty response, which has no
    // valid token, as prime-rl's iter_trainable_traces leaves it out of the group
    let first = mask.iter().position(|&b| b == 1).unwrap_or(mask.len());
    Ok(PathTokens {
        mask: mask.split_off(first),
        log_probs: log_probs.split_off(first),
        advantage,
    })
}

/// `Trace.reward`: Σ score·weight over `rewards` (`{name: {score, weight}}`); a score that is
/// absent or null (orjson writes NaN as null; `exclude_none` drops None) makes the row NaN.
fn reward(trace: &Json, at: &str) -> Result<f64> {
    let Some(rewards) = trace.get("rewards") else {
        return Err(Error::data(format!("{at}: no `traces[0].rewards`")));
    };
    let Json::Object(entries) = rewards else {
        return Err(Error::data(format!(
            "{at}: `traces[0].rewards` is {}, not an object",
            rewards.kind()
        )));
    };
    let mut sum = 0.0;
    for (name, r) in entries {
        let number = |f: &str| -> Result<Option<f64>> {
            match r.get(f) {
                None | Some(Json::Null) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                    Error::data(format!(
                        "{at}: `traces[0].rewards.{name}.{f}` is {}, not a number",
                        v.kind()
                    ))
                }),
            }
        };
        if !matches!(r, Json::Object(_)) {
            return Err(Error::data(format!(
                "{at}: `traces[0].rewards.{name}` is {}, not {{score, weight}}",
                r.kind()
            )));
        }
        let weight = number("weight")?
            .ok_or_else(|| Error::data(format!("{at}: no `traces[0].rewards.{name}.weight`")))?;
        sum += number("score")?.unwrap_or(f64::NAN) * weight;
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(line: &str) -> Result<DumpRow> {
        let fields = crate::json_line::parse_object(line).unwrap();
        let mut r = PrimeRlReader {
            step: Some(3),
            ..Default::default()
        };
        r.row(&Line::from(fields), "f.jsonl line 7")
    }

    const NODES: &str = r#"[
        {"token_ids":[1,10,3],"mask":[false,false,false],"logprobs":[]},
        {"parent":0,"token_ids":[1,12,3,50,51],"mask":[false,false,false,true,true],"logprobs":[-0.5,-1.5],"advantages":[0.25,0.25]},
        {"parent":1,"token_ids":[3,1,13,60,2],"mask":[false,false,false,false,false],"logprobs":[]},
        {"parent":2,"token_ids":[1,12,70],"mask":[false,false,true],"logprobs":[-2.0],"advantages":[0.25]}
    ]"#;

    fn episode(traces: &str) -> String {
        format!(
            r#"{{"id":"e","group":{{"id":"g-1"}},"run":{{"work":{{"step":3}}}},"traces":{traces}}}"#
        )
        .replace('\n', " ")
    }

    fn trace(nodes: &str) -> String {
        format!(
            r#"{{"nodes":{nodes},"rewards":{{"correct":{{"score":1.0,"weight":1.0}},"format":{{"score":1.0,"weight":0.25}}}}}}"#
        )
    }

    #[test]
    fn nodes_concatenate_and_log_probs_spread() {
        let r = row(&episode(&format!("[{}]", trace(NODES)))).unwrap();
        // from the first sampled token (node 1's 50) to the end; the tool node and the
        // scaffold of the second turn mask 0
        assert_eq!(r.mask, vec![1, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(
            r.rollout_log_probs.unwrap(),
            vec![-0.5, -1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0]
        );
        assert_eq!(r.logged_advantage, Some(0.25));
        assert_eq!(r.group, "g-1");
        assert_eq!(r.step, 3);
    }

    #[test]
    fn nodes_follow_parent_links_not_list_order() {
        let nodes = r#"[
            {"parent":1,"token_ids":[9],"mask":[true],"logprobs":[-3.0]},
            {"token_ids":[1,8],"mask":[false,true],"logprobs":[-1.0]}
        ]"#;
        let r = row(&episode(&format!("[{}]", trace(nodes)))).unwrap();
        assert_eq!(r.mask, vec![1, 1]);
        assert_eq!(r.rollout_log_probs.unwrap(), vec![-1.0, -3.0]);
        assert_eq!(r.logged_advantage, None);
        // a branch is not one path
        let branch = r#"[
            {"token_ids":[1],"mask":[true],"logprobs":[-1.0]},
            {"parent":0,"token_ids":[2],"mask":[true],"logprobs":[-1.0]},
            {"parent":0,"token_ids":[3],"mask":[true],"logprobs":[-1.0]}
        ]"#;
        let e = row(&episode(&format!("[{}]", trace(branch)))).unwrap_err();
        assert!(e.to_string().contains("two children"), "{e}");
    }

    #[test]
    fn the_reward_is_the_weighted_sum() {
        let r = row(&episode(&format!("[{}]", trace(NODES)))).unwrap();
        assert_eq!(r.score, 1.25);
        let t = r#"{"nodes":[{"token_ids":[1],"mask":[true],"logprobs":[-1.0]}],"rewards":{"a":{"score":0.5,"weight":2.0},"b":{"score":-1.0,"weight":0.5}}}"#;
        assert_eq!(row(&episode(&format!("[{t}]"))).unwrap().score, 0.5);
        let t = r#"{"nodes":[{"token_ids":[1],"mask":[true],"logprobs":[-1.0]}],"rewards":{}}"#;
        assert_eq!(row(&episode(&format!("[{t}]"))).unwrap().score, 0.0);
    }

    #[test]
    fn an_episode_of_other_than_one_trace_is_refused_naming_the_line() {
        let t = trace(NODES);
        for traces in [format!("[{t},{t}]"), "[]".to_string()] {
            let e = row(&episode(&traces)).unwrap_err().to_string();
            assert!(e.contains("f.jsonl line 7"), "{e}");
            assert!(e.contains("exactly one trace"), "{e}");
        }
    }

    #[test]
    fn a_trace_without_a_sampled_token_has_an_empty_response() {
        let nodes = r#"[{"token_ids":[1,2],"mask":[false,false],"logprobs":[]}]"#;
        let r = row(&episode(&format!("[{}]", trace(nodes)))).unwrap();
        assert!(r.mask.is_empty() && r.rollout_log_probs.unwrap().is_empty());
        assert_eq!(r.logged_advantage, None);
    }

    #[test]
    fn log_prob_counts_must_match_the_mask() {
        let nodes = r#"[{"token_ids":[1,2],"mask":[true,true],"logprobs":[-1.0]}]"#;
        let e = row(&episode(&format!("[{}]", trace(nodes))))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("f.jsonl line 7") && e.contains("nodes[0].logprobs"),
            "{e}"
        );
    }

    #[test]
    fn a_dispatch_step_other_than_the_directorys_is_noted_once() {
        let line = episode(&format!("[{}]", trace(NODES))).replace("\"step\":3", "\"step\":2");
        let fields = crate::json_line::parse_object(&line).unwrap();
        let mut r = PrimeRlReader {
            step: Some(3),
            ..Default::default()
        };
        for n in 1..=2 {
            assert_eq!(
                r.row(&Line::from(fields.clone()), &format!("f line {n}"))
                    .unwrap()
                    .step,
                3
            );
        }
        let notes = r.notes();
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("f line 1") && notes[0].contains("run.work.step 2"));
    }

    #[test]
    fn in_may_be_the_run_its_rollouts_a_step_or_a_file() {
        let run = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/trainers/dumps/prime-rl/run1");
        let effective =
            |n: i64| run.join(format!("rollouts/step_{n}/train/effective/traces.jsonl"));
        assert_eq!(files(&run, "r").unwrap(), vec![effective(1), effective(2)]);
        assert_eq!(
            files(&run.join("rollouts"), "r").unwrap(),
            vec![effective(1), effective(2)]
        );
        assert_eq!(
            files(&run.join("rollouts/step_2"), "r").unwrap(),
            vec![effective(2)]
        );
        assert_eq!(files(&effective(1), "r").unwrap(), vec![effective(1)]);
        let old = run.with_file_name("run-old");
        let e = files(&old, "r").unwrap_err().to_string();
        assert!(
            e.contains("older") && e.contains("train_rollouts.jsonl"),
            "{e}"
        );
    }

    #[test]
    fn training_files_are_told_by_their_path() {
        let p = Path::new("run/rollouts/step_12/train/effective/traces.jsonl");
        assert_eq!(train_file(p), Some((12, true)));
        assert_eq!(step_of(p), Some(12));
        let p = Path::new("run/rollouts/step_2/train/all/traces.jsonl");
        assert_eq!(train_file(p), Some((2, false)));
        let p = Path::new("run/rollouts/step_2/eval/effective/traces.jsonl");
        assert_eq!(train_file(p), None);
    }
}
