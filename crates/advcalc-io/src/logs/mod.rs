//! What a trainer logged per step, read as the trainers write it (`advcalc check`,
//! docs/check.md): verl's `file` logger (JSON lines `{"step": N, "data": {...}}`), its
//! `console` logger's lines in a captured stdout, TensorBoard event files (verl's and
//! NeMo-RL's `tensorboard` backends), and TRL's `trainer_state.json` (`log_history`).
//!
//! Every reader gives the same thing: per step, the numeric metrics by their logged names
//! ([`Logged`]); what is not a number is left out, and what a reader had to assume is a note.

pub mod tensorboard;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::json_line::{Json, parse_json};

/// How the log was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// verl's `file` backend: one JSON object per line, `{"step": N, "data": {...}}`.
    VerlFile,
    /// verl's `console` backend: `step:N - key:value - ...` lines in a captured stdout.
    VerlConsole,
    /// TensorBoard event files (verl's and NeMo-RL's `tensorboard` backends).
    TensorBoard,
    /// TRL's `trainer_state.json`: `log_history`, one entry per logging step.
    TrlState,
}

impl LogFormat {
    /// The format's name in messages and JSON.
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::VerlFile => "verl file logger",
            LogFormat::VerlConsole => "verl console logger",
            LogFormat::TensorBoard => "TensorBoard events",
            LogFormat::TrlState => "TRL trainer_state.json",
        }
    }
}

/// A run's log: per step, each numeric metric by its logged name.
#[derive(Debug)]
pub struct Logged {
    pub format: LogFormat,
    /// The log as given.
    pub name: String,
    pub steps: BTreeMap<i64, BTreeMap<String, f64>>,
    /// What the reader assumed or skipped (a partial last record, a line it could not read).
    pub notes: Vec<String>,
    /// How far each logged value may be from the value the trainer had: half a unit in its
    /// last printed place for the console logger's numbers (empty for the other formats,
    /// which keep full precision).
    pub resolution: BTreeMap<i64, BTreeMap<String, f64>>,
}

impl Logged {
    /// The resolution of one logged value (0 at full precision).
    pub fn resolution(&self, step: i64, metric: &str) -> f64 {
        self.resolution
            .get(&step)
            .and_then(|m| m.get(metric))
            .copied()
            .unwrap_or(0.0)
    }
}

/// Read `path`: a file of one of the formats, a TensorBoard log directory, or a TRL output
/// or checkpoint directory (its last checkpoint's `trainer_state.json`).
pub fn read(path: &Path) -> Result<Logged> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::usage(format!("{name}: cannot open the log")).with_source(e))?;
    if meta.is_dir() {
        let events = event_files(path);
        if !events.is_empty() {
            return read_tensorboard(&name, &events);
        }
        if let Some(state) = trainer_state(path) {
            let mut logged = read_trl(&state)?;
            logged.name = name;
            return Ok(logged);
        }
        return Err(Error::usage(format!(
            "{name}: neither TensorBoard event files (events.out.tfevents.*) nor a TRL trainer_state.json under it"
        ))
        .with_hint("give verl's file log (a .jsonl), its captured console output, a TensorBoard log directory or TRL's output directory"));
    }
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if file_name.starts_with("events.out.tfevents") {
        return read_tensorboard(&name, &[path.to_path_buf()]);
    }
    if file_name == "trainer_state.json" {
        return read_trl(path);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::data(format!("{name}: cannot read the log")).with_source(e))?;
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if first.trim_start().starts_with('{') {
        read_verl_file(&name, &text)
    } else {
        read_verl_console(&name, &text)
    }
}

/// `events.out.tfevents.*` files under `dir` (three levels at most), sorted by path.
fn event_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() && depth < 3 {
                todo.push((p, depth + 1));
            } else if kind.is_file()
                && e.file_name()
                    .to_string_lossy()
                    .starts_with("events.out.tfevents")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// TRL's state: `dir/trainer_state.json`, else the highest `checkpoint-N/`'s.
fn trainer_state(dir: &Path) -> Option<PathBuf> {
    let direct = dir.join("trainer_state.json");
    if direct.is_file() {
        return Some(direct);
    }
    let mut checkpoints: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let n = e
                .file_name()
                .to_string_lossy()
                .strip_prefix("checkpoint-")?
                .parse()
                .ok()?;
            let state = e.path().join("trainer_state.json");
            state.is_file().then_some((n, state))
        })
        .collect();
    checkpoints.sort();
    checkpoints.pop().map(|(_, p)| p)
}

fn read_tensorboard(name: &str, files: &[PathBuf]) -> Result<Logged> {
    let mut scalars = tensorboard::Scalars::default();
    for f in files {
        tensorboard::read_file(f, &mut scalars)?;
    }
    if files.len() > 1 {
        scalars.notes.insert(
            0,
            format!(
                "{name}: {} event files read in name order (a later value of a step and tag wins)",
                files.len()
            ),
        );
    }
    Ok(Logged {
        format: LogFormat::TensorBoard,
        name: name.to_string(),
        steps: scalars.values,
        notes: scalars.notes,
        resolution: BTreeMap::new(),
    })
}

/// A JSON number as f64 (`NaN` and the infinities as verl's `json.dumps` writes them).
fn number(v: &Json) -> Option<f64> {
    match v {
        Json::Int(i) => Some(*i as f64),
        Json::Float(f) => Some(*f),
        Json::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

fn read_verl_file(name: &str, text: &str) -> Result<Logged> {
    let mut steps: BTreeMap<i64, BTreeMap<String, f64>> = BTreeMap::new();
    let mut notes = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (k, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed = match parse_json(line) {
            Ok(v) => v,
            // a run still writing: its last line may be cut
            Err(_) if k + 1 == lines.len() && !text.ends_with('\n') => {
                notes.push(format!(
                    "{name}: its last line is incomplete (a run still writing?): left out"
                ));
                break;
            }
            Err(e) => {
                return Err(Error::data(format!(
                    "{name} line {}: not JSON ({e})",
                    k + 1
                ))
                .with_hint("verl's file logger writes one {\"step\": N, \"data\": {...}} object per line"));
            }
        };
        let (Some(step), Some(Json::Object(data))) =
            (parsed.get("step").and_then(number), parsed.get("data"))
        else {
            return Err(Error::data(format!(
                "{name} line {}: not verl's file logger's {{\"step\": N, \"data\": {{...}}}}",
                k + 1
            )));
        };
        let entry = steps.entry(step as i64).or_default();
        for (key, value) in data {
            if let Some(v) = number(value) {
                entry.insert(key.clone(), v);
            }
        }
    }
    Ok(Logged {
        format: LogFormat::VerlFile,
        name: name.to_string(),
        steps,
        notes,
        resolution: BTreeMap::new(),
    })
}

fn read_verl_console(name: &str, text: &str) -> Result<Logged> {
    let mut steps: BTreeMap<i64, BTreeMap<String, f64>> = BTreeMap::new();
    let mut other = 0usize;
    let mut resolution: BTreeMap<i64, BTreeMap<String, f64>> = BTreeMap::new();
    for line in text.lines() {
        match console_line(line) {
            Some((step, metrics)) => {
                for (key, value, half_unit) in metrics {
                    resolution
                        .entry(step)
                        .or_default()
                        .insert(key.clone(), half_unit);
                    steps.entry(step).or_default().insert(key, value);
                }
            }
            None if !line.trim().is_empty() => other += 1,
            None => {}
        }
    }
    if steps.is_empty() {
        return Err(Error::data(format!(
            "{name}: no line of verl's console logger (`step:N - key:value - ...`), nor a JSON log"
        ))
        .with_hint("give verl's file log (trainer.logger including 'file'), its captured console output, a TensorBoard log directory or TRL's trainer_state.json"));
    }
    let mut notes = Vec::new();
    if other > 0 {
        notes.push(format!(
            "{name}: {other} other line(s) of the captured output skipped"
        ));
    }
    Ok(Logged {
        format: LogFormat::VerlConsole,
        name: name.to_string(),
        steps,
        notes,
        resolution,
    })
}

/// A console line's metric: its name, value, and half a unit of its last printed place.
type ConsoleValue = (String, f64, f64);

/// One console line: `step:N - key:value - key:value`, anywhere in the line (a prefix from
/// Ray's log forwarding, `(TaskRunner pid=...)`, is allowed); each value with half a unit
/// of its last printed decimal place.
fn console_line(line: &str) -> Option<(i64, Vec<ConsoleValue>)> {
    let at = line.find("step:")?;
    let mut parts = line[at..].split(" - ");
    let step: i64 = parts.next()?.strip_prefix("step:")?.trim().parse().ok()?;
    let mut metrics = Vec::new();
    for part in parts {
        let (key, value) = part.rsplit_once(':')?;
        let mut value = value.trim();
        // numpy 2's repr of a numpy scalar, as pprint prints it: np.float64(3.125)
        if let Some(inner) = value
            .strip_prefix("np.")
            .and_then(|v| v.split_once('('))
            .and_then(|(_, rest)| rest.strip_suffix(')'))
        {
            value = inner;
        }
        if let Ok(v) = value.parse::<f64>() {
            metrics.push((key.trim().to_string(), v, half_unit(value)));
        }
    }
    Some((step, metrics))
}

/// Half a unit in the last place of a printed decimal (`0.500` → 0.0005; `3` → 0.5; an
/// exponent scales it).
fn half_unit(text: &str) -> f64 {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    0.5 * 10f64.powi(exponent - decimals)
}

fn read_trl(path: &Path) -> Result<Logged> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::data(format!("{name}: cannot read")).with_source(e))?;
    let state = parse_json(&text).map_err(|e| Error::data(format!("{name}: not JSON ({e})")))?;
    let Some(Json::Array(history)) = state.get("log_history") else {
        return Err(Error::data(format!(
            "{name}: no log_history (TRL's trainer_state.json has one)"
        )));
    };
    let mut steps: BTreeMap<i64, BTreeMap<String, f64>> = BTreeMap::new();
    for entry in history {
        let (Json::Object(fields), Some(step)) = (entry, entry.get("step").and_then(number)) else {
            continue;
        };
        let into = steps.entry(step as i64).or_default();
        for (k, v) in fields {
            if k != "step"
                && let Some(v) = number(v)
            {
                into.insert(k.clone(), v);
            }
        }
    }
    Ok(Logged {
        format: LogFormat::TrlState,
        name,
        steps,
        notes: Vec::new(),
        resolution: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_lines_with_and_without_a_ray_prefix() {
        let (step, m) =
            console_line("step:3 - critic/score/mean:0.500 - timing_s/gen:1.2").unwrap();
        assert_eq!(step, 3);
        assert_eq!(
            m,
            vec![
                ("critic/score/mean".into(), 0.5, 0.0005),
                ("timing_s/gen".into(), 1.2, 0.05)
            ]
        );
        assert_eq!(half_unit("1.5e-3"), 0.5e-4);
        let (_, m) =
            console_line("step:2 - num_turns/min:np.int32(2) - num_turns/mean:np.float64(3.125)")
                .unwrap();
        assert_eq!(m[0].1, 2.0);
        assert_eq!(m[1].1, 3.125);
        let (step, m) =
            console_line("(TaskRunner pid=77) step:12 - response_length/mean:231.0").unwrap();
        assert_eq!((step, m.len()), (12, 1));
        assert!(console_line("Training Progress: 10%").is_none());
    }

    #[test]
    fn a_file_log_with_a_cut_last_line_keeps_the_whole_ones_with_a_note() {
        let text = "{\"step\": 1, \"data\": {\"a\": 1.5, \"b\": \"x\"}}\n{\"step\": 2, \"data\": {\"a\": 2";
        let l = read_verl_file("f.jsonl", text).unwrap();
        assert_eq!(l.steps.len(), 1);
        assert_eq!(l.steps[&1]["a"], 1.5);
        assert!(!l.steps[&1].contains_key("b"));
        assert!(l.notes[0].contains("incomplete"));
        let e = read_verl_file("f.jsonl", "{\"step\": 1}\n").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
    }
}
