//! Every `advcalc` command in README.md and docs/*.md, run as a reader would run it: one
//! trial per command (named `FILE:LINE`), in a working directory holding the files the docs
//! name (`in.parquet`, `dumps/`, `rollout_data_dir/`, `ppo.yaml`, a TRL output directory, ...)
//! made from the shipped fixtures, with `fixtures/` beside them. A command must exit 0 (or
//! the status its comment names, `# exit 1`), and where the doc shows its output (a block
//! whose lines start with `$ advcalc`), print that output, `...` standing for any lines.
//! Commands that need what a test machine lacks (object storage; they run against moto in
//! tests/object_storage*.rs) are listed as ignored with the reason, never silently skipped.
//! `advcalc view` serves until stopped: it must print its URL, then it is stopped.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use libtest_mimic::{Arguments, Failed, Trial};

use common::{copy_dir, read_parquet, write_parquet};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A command found in a doc.
struct DocCommand {
    file: String,
    line: usize,
    /// The command line, continuation lines joined.
    text: String,
    /// The output the doc shows for it (a `$ ` block), if any.
    output: Option<Vec<String>>,
    expected_exit: i32,
}

/// The docs' commands, in file and line order.
fn commands() -> Vec<DocCommand> {
    let mut out = Vec::new();
    for path in common::doc_files() {
        let name = path.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        let mut in_block = false;
        while i < lines.len() {
            let l = lines[i];
            if l.trim_start().starts_with("```") {
                in_block = !in_block;
                i += 1;
                continue;
            }
            if !in_block {
                i += 1;
                continue;
            }
            let shown = l.starts_with("$ ");
            let body = l.strip_prefix("$ ").unwrap_or(l);
            if !is_command(body) {
                i += 1;
                continue;
            }
            let start = i + 1;
            let mut text = body.to_string();
            while text.ends_with('\\') && i + 1 < lines.len() {
                text.pop();
                i += 1;
                text += " ";
                text += lines[i].trim();
            }
            let mut output = None;
            if shown {
                let mut o = Vec::new();
                while i + 1 < lines.len()
                    && !lines[i + 1].trim_start().starts_with("```")
                    && !lines[i + 1].starts_with("$ ")
                {
                    i += 1;
                    o.push(lines[i].to_string());
                }
                output = Some(o);
            }
            let expected_exit = if text.contains("# exit 1") { 1 } else { 0 };
            out.push(DocCommand {
                file: name.clone(),
                line: start,
                text: strip_comment(&text),
                output,
                expected_exit,
            });
            i += 1;
        }
    }
    out
}

/// `advcalc SUBCOMMAND ...` or `advcalc --version`: not a usage synopsis (`[OPTIONS]`, or a
/// placeholder in capitals: `LOG`, `DUMPS/`, `outputs/RUN.jsonl`) nor a line of output
/// (`advcalc check: ...`, `advcalc: 256 rows ...`).
fn is_command(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("advcalc ") else {
        return false;
    };
    let first = rest.split_whitespace().next().unwrap_or("");
    let placeholder = strip_comment(rest).split_whitespace().any(|word| {
        word.split(['/', '.'])
            .any(|part| part.len() >= 2 && part.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
    });
    !first.ends_with(':')
        && !placeholder
        && !line.contains("[OPTIONS]")
        && !line.contains("[-c FILE]")
}

/// The command without its trailing `# comment` (a `#` after whitespace, outside quotes).
fn strip_comment(text: &str) -> String {
    let mut quote = None;
    let chars: Vec<char> = text.chars().collect();
    for (k, &c) in chars.iter().enumerate() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if k > 0 && chars[k - 1].is_whitespace() => {
                return chars[..k].iter().collect::<String>().trim_end().to_string();
            }
            _ => {}
        }
    }
    text.trim_end().to_string()
}

/// The files the docs name, made once from the fixtures.
fn base() -> &'static Path {
    static BASE: OnceLock<tempfile::TempDir> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let b = dir.path();
        let fx = repo().join("fixtures");
        let demo = fx.join("demo.parquet");
        for name in ["in.parquet", "dump.parquet", "rollouts.parquet"] {
            std::fs::copy(&demo, b.join(name)).unwrap();
        }
        // the hook's dumps: the demo as four steps of 64 rows, step=10..13
        let batch = read_parquet(&demo);
        std::fs::create_dir(b.join("dumps")).unwrap();
        for k in 0..4 {
            let path = b.join(format!("dumps/step={}.parquet", 10 + k));
            write_parquet(&path, &batch.slice(64 * k, 64), 32);
        }
        // verl's rollout_data_dir: its JSONL dumps, one file per step
        copy_dir(&fx.join("verl/jsonl_v1/two_steps"), &b.join("rollout_data_dir"));
        std::fs::remove_file(b.join("rollout_data_dir/expected.json")).unwrap();
        copy_dir(&b.join("rollout_data_dir"), &b.join("DIR"));
        // configs
        let trainer = "# a verl trainer config as Hydra saves it (excerpt)\n\
            algorithm:\n  adv_estimator: grpo\n  norm_adv_by_std_in_grpo: true\n  use_kl_in_reward: false\n\
            actor_rollout_ref:\n  actor:\n    ppo_mini_batch_size: 16\n    ppo_micro_batch_size_per_gpu: 8\n    loss_agg_mode: token-mean\n  rollout:\n    n: 8\n    response_length: 512\n\
            data:\n  max_response_length: 512\n";
        for name in ["ppo.yaml", "ppo_trainer.yaml", "verl_trainer.yaml", "trainer.yaml"] {
            std::fs::write(b.join(name), trainer).unwrap();
        }
        std::fs::create_dir_all(b.join("outputs/run/.hydra")).unwrap();
        std::fs::write(b.join("outputs/run/.hydra/config.yaml"), trainer).unwrap();
        std::fs::write(b.join("run_a.yaml"), "algorithm:\n  adv_estimator: grpo\n").unwrap();
        std::fs::write(b.join("run_b.yaml"), "algorithm:\n  adv_estimator: rloo\n").unwrap();
        // docs/config.md's recipe
        std::fs::write(
            b.join("recipe.yaml"),
            "algorithm:\n  gamma: ${algorithm.lam}\n  lam: 0.95\n  use_kl_in_reward: true\n",
        )
        .unwrap();
        // other trainers' output directories
        let dumps = fx.join("trainers/dumps");
        copy_dir(&dumps.join("trl/run1"), &b.join("trl_output_dir"));
        copy_dir(&dumps.join("nemo-rl/run1"), &b.join("nemo_rl_logs/exp_001"));
        copy_dir(&dumps.join("nemo-rl/run1"), &b.join("nemo_logs/exp_001"));
        copy_dir(&dumps.join("prime-rl/run1"), &b.join("prime_output_dir"));
        copy_dir(&dumps.join("open-instruct/run1"), &b.join("open_instruct_traces"));
        std::fs::copy(
            fx.join("tokenizers/byte_level_bpe/tokenizer.json"),
            b.join("tokenizer.json"),
        )
        .unwrap();
        dir
    })
    .path()
}

/// A fresh working directory: the base's entries linked in, `fixtures/` too.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(base()).unwrap() {
        let e = e.unwrap();
        std::os::unix::fs::symlink(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    std::os::unix::fs::symlink(repo().join("fixtures"), dir.path().join("fixtures")).unwrap();
    dir
}

/// Why a command cannot run here, if it cannot.
fn cannot_run(text: &str) -> Option<&'static str> {
    if ["s3://", "gs://", "az://", "https://"]
        .iter()
        .any(|s| text.contains(s))
    {
        return Some("object storage: the cloud feature against moto, tests/object_storage*.rs");
    }
    None
}

fn run(cmd: &DocCommand) -> Result<(), Failed> {
    let dir = workdir();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_advcalc"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    if cmd.text.starts_with("advcalc view ") {
        return view(cmd, dir.path(), &path);
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(&cmd.text)
        .current_dir(dir.path())
        .env("PATH", &path)
        .env("NO_COLOR", "1")
        .output()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    if code != cmd.expected_exit {
        return Err(format!(
            "{}:{}: `{}` exited {code}, not {}\n{stderr}",
            cmd.file, cmd.line, cmd.text, cmd.expected_exit
        )
        .into());
    }
    if let Some(expected) = &cmd.output {
        let got: Vec<String> = stdout
            .lines()
            .chain(stderr.lines())
            .map(|l| l.trim_end().to_string())
            .collect();
        if !matches(expected, &got) {
            return Err(format!(
                "{}:{}: `{}` prints something else than the doc shows\n--- the doc\n{}\n--- the command\n{}",
                cmd.file,
                cmd.line,
                cmd.text,
                expected.join("\n"),
                got.join("\n")
            )
            .into());
        }
    }
    Ok(())
}

/// `advcalc view`: it prints its URL, then it is stopped.
fn view(cmd: &DocCommand, dir: &Path, path: &str) -> Result<(), Failed> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {}", cmd.text))
        .current_dir(dir)
        .env("PATH", path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .ok();
    let _ = child.kill();
    let out = child.wait_with_output().ok();
    if line.starts_with("http://127.0.0.1:") && line.contains("/?token=") {
        Ok(())
    } else {
        Err(format!(
            "{}:{}: `{}` printed no URL: {line:?} {}",
            cmd.file,
            cmd.line,
            cmd.text,
            out.map(|o| String::from_utf8_lossy(&o.stderr).to_string())
                .unwrap_or_default()
        )
        .into())
    }
}

/// `got` is `expected`, each `...` line standing for any lines (none included).
fn matches(expected: &[String], got: &[String]) -> bool {
    match expected.split_first() {
        None => got.is_empty(),
        Some((e, rest)) if e.trim() == "..." => {
            (0..=got.len()).any(|skip| matches(rest, &got[skip..]))
        }
        Some((e, rest)) => got
            .split_first()
            .is_some_and(|(g, more)| g == e.trim_end() && matches(rest, more)),
    }
}

/// The matcher itself: `...` stands for any lines, nothing else does.
fn dots_stand_for_any_lines() -> Result<(), Failed> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cases = [
        (
            matches(&s(&["a", "...", "d"]), &s(&["a", "b", "c", "d"])),
            true,
        ),
        (matches(&s(&["a", "...", "d"]), &s(&["a", "d"])), true),
        (matches(&s(&["a", "...", "d"]), &s(&["a", "b"])), false),
        (matches(&s(&["a", "b"]), &s(&["a", "b", "c"])), false),
    ];
    for (k, (got, want)) in cases.iter().enumerate() {
        if got != want {
            return Err(format!("case {k}: {got}, not {want}").into());
        }
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = vec![Trial::test("the matcher", dots_stand_for_any_lines)];
    trials.extend(commands().into_iter().map(|cmd| {
        let name = format!("{}:{}", cmd.file, cmd.line);
        let skip = cannot_run(&cmd.text);
        Trial::test(name, move || run(&cmd)).with_ignored_flag(skip.is_some())
    }));
    libtest_mimic::run(&args, trials).exit();
}
