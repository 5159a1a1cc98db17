//! Other trainers' JSONL dumps, mutated: whatever a line holds (a number turned into a string,
//! null, an empty list, a huge or non-finite number; a line cut short), `advcalc run` either
//! reads the dump or refuses it with one error naming the file and the line, never a panic
//! and never another exit code. The mutations start from the dumps the trainers' own writers
//! made (`fixtures/trainers/dumps/`) and are deterministic (a fixed seed).

mod common;

use std::path::Path;

use common::{advcalc, stderr};

/// A small deterministic generator (64-bit LCG, high bits).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

const REPLACEMENTS: [&str; 8] = [
    "\"x\"", "null", "[]", "-1", "1e400", "NaN", "[[1, 2]]", "{}",
];

/// `line` with one mutation: a run of digits replaced, or the line cut short.
fn mutate(line: &str, rng: &mut Lcg) -> String {
    if rng.below(8) == 0 {
        let mut cut = rng.below(line.len());
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        return line[..cut].to_string();
    }
    let digits: Vec<usize> = line
        .char_indices()
        .filter(|&(i, c)| {
            c.is_ascii_digit() && (i == 0 || !line[..i].ends_with(|p: char| p.is_ascii_digit()))
        })
        .map(|(i, _)| i)
        .collect();
    if digits.is_empty() {
        return line.to_string();
    }
    let start = digits[rng.below(digits.len())];
    let end = line[start..]
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-'))
        .map_or(line.len(), |n| start + n);
    let with = REPLACEMENTS[rng.below(REPLACEMENTS.len())];
    format!("{}{with}{}", &line[..start], &line[end..])
}

fn mutated_runs(fixture: &str, rel: &str, seed: u64) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
    let lines: Vec<String> = std::fs::read_to_string(&src)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut rng = Lcg(seed);
    let (mut refused, mut read) = (0, 0);
    for trial in 0..30 {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(rel);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let text: Vec<String> = lines
            .iter()
            .map(|l| {
                if rng.below(3) == 0 {
                    mutate(l, &mut rng)
                } else {
                    l.clone()
                }
            })
            .collect();
        std::fs::write(&file, text.join("\n") + "\n").unwrap();
        let out = dir.path().join("out.parquet");
        let done = advcalc()
            .arg("run")
            .arg("-q")
            .arg(dir.path())
            .arg(&out)
            .arg("--allow-nonfinite")
            .output()
            .unwrap();
        let err = stderr(&done);
        assert!(!err.contains("panicked"), "{fixture} trial {trial}: {err}");
        match done.status.code() {
            Some(0) => read += 1,
            Some(1) => {
                refused += 1;
                let first = err.lines().next().unwrap_or_default();
                assert!(
                    first.starts_with("error: ") && first.contains(&file.display().to_string()),
                    "{fixture} trial {trial}: the error does not name the file: {err}"
                );
                assert!(
                    !out.exists(),
                    "{fixture} trial {trial}: OUT written on an error"
                );
            }
            code => panic!("{fixture} trial {trial}: exit {code:?}: {err}"),
        }
    }
    // the mutations are strong enough to be refused, and mild enough to be read at times
    assert!(refused > 0, "{fixture}: no mutation was refused");
    assert!(read > 0, "{fixture}: every mutation was refused");
}

#[test]
fn nemo_rl_lines_mutated() {
    mutated_runs(
        "fixtures/trainers/dumps/nemo-rl/run1/exp_001/train_data_step1.jsonl",
        "train_data_step1.jsonl",
        1,
    );
}

#[test]
fn prime_rl_lines_mutated() {
    mutated_runs(
        "fixtures/trainers/dumps/prime-rl/run1/rollouts/step_1/train/effective/traces.jsonl",
        "rollouts/step_1/train/effective/traces.jsonl",
        2,
    );
}

#[test]
fn open_instruct_lines_mutated() {
    mutated_runs(
        "fixtures/trainers/dumps/open-instruct/run1/run1_rollouts_000000.jsonl",
        "run1_rollouts_000000.jsonl",
        3,
    );
}
