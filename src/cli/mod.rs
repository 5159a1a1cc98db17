//! The `advcalc` command line: [`main`] parses arguments (`args.rs`), calls the library, prints
//! errors (`error:`, `caused by:` lines, then `hint:`) and maps them to exit codes (0 success,
//! 1 bad data or I/O, 2 usage). `src/main.rs` is only the binary's allocator and a call to it.

mod args;

use std::io::IsTerminal;

use clap::Parser;

use crate::Error;
use args::{Cli, Command, RunArgs};

/// The `advcalc` command: parse `args` (the first is the program's name, as in
/// [`std::env::args_os`]), run the command, print its output and errors, and return the exit
/// status (0 success, 1 bad data or I/O, 2 usage, 128 + signal when stopped). The binary calls it
/// with its own arguments, and the Python package's `advcalc` command with its own, so that a
/// training image with the wheel and no Rust has the same command line. It installs the
/// process's SIGINT/SIGTERM handlers and a panic hook: call it as the process's last work.
/// Usage errors (an unknown flag, `--help`, `--version`) print clap's message and exit the
/// process with clap's code, as the binary always did.
pub fn main<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    no_huge_pages();
    stop_on_signals();
    // Panics inside the Parquet decoder are caught and reported as data errors; keep the
    // default report for any other panic (a bug of ours).
    crate::input::quiet_decoder_panics();
    let cli = Cli::parse_from(args);
    let code = match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprint!("{}", report(&e));
            e.exit_code() as u8
        }
    };
    // an embedding process (Python) may exit without flushing Rust's buffer
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    code
}

fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Estimators { json } => {
            let text = if json {
                serde_json::to_string_pretty(&crate::commands::estimators::to_json())
                    .unwrap_or_default()
                    + "\n"
            } else {
                crate::commands::estimators::to_table()
            };
            print_stdout(&text)
        }
        Command::Losses { json } => {
            let text = if json {
                serde_json::to_string_pretty(&crate::commands::losses::to_json())
                    .unwrap_or_default()
                    + "\n"
            } else {
                crate::commands::losses::to_table()
            };
            print_stdout(&text)
        }
        Command::Config(args) => {
            let options = crate::commands::config::ConfigOptions {
                json: args.json,
                origins: args.origins,
            };
            let file = args::config_text(args.config.as_deref())?;
            let (text, notes) = crate::commands::config::show(&args.sources(&file), options)?;
            for note in notes {
                eprintln!("note: {note}");
            }
            print_stdout(&text)
        }
        Command::Inspect(args) => {
            let (config, options) = args.resolve(std::io::stderr().is_terminal())?;
            let report = crate::commands::inspect::inspect(&config, &options)?;
            let text = if args.json {
                serde_json::to_string_pretty(&report.to_json()).unwrap_or_default() + "\n"
            } else {
                report.render()
            };
            print_stdout(&text)?;
            if args.deny_warnings && report.warnings() > 0 {
                return Err(Error::data(format!(
                    "{}: {} warning(s) raised (--deny-warnings)",
                    options.input.display(),
                    report.warnings()
                )));
            }
            Ok(())
        }
        Command::Compare(args) => {
            let (variants, options) = args.resolve(std::io::stderr().is_terminal())?;
            if !args.quiet {
                for v in &variants {
                    for note in &v.config.notes {
                        eprintln!("note: {}: {note}", v.label);
                    }
                }
            }
            let comparison = crate::commands::compare::compare(&variants, &options)?;
            if !args.quiet {
                for v in &comparison.variants {
                    for warning in &v.warnings {
                        eprintln!("warning: {}: {warning}", v.label);
                    }
                }
            }
            let text = if args.json {
                serde_json::to_string_pretty(&comparison.to_json()).unwrap_or_default() + "\n"
            } else {
                comparison.render()
            };
            print_stdout(&text)
        }
        Command::Report(args) => {
            let (variants, options) = args.resolve(std::io::stderr().is_terminal())?;
            if !args.quiet {
                for v in &variants {
                    for note in &v.config.notes {
                        eprintln!("note: {}: {note}", v.label);
                    }
                }
            }
            let summary = crate::commands::report::report(&variants, &options)?;
            if !args.quiet {
                eprintln!(
                    "advcalc: {} rows, {} of 7 sections, {} warning{} -> {}",
                    summary.rows,
                    summary.sections,
                    summary.warnings,
                    if summary.warnings == 1 { "" } else { "s" },
                    options.output.display()
                );
            }
            Ok(())
        }
        Command::Check(args) => {
            let (variant, options) = args.resolve(std::io::stderr().is_terminal())?;
            if !args.quiet {
                for note in &variant.config.notes {
                    eprintln!("note: {note}");
                }
            }
            let report = crate::commands::check::check(&variant, &options)?;
            if !args.quiet {
                for w in &report.warnings {
                    eprintln!("warning: {w}");
                }
            }
            let text = if args.json {
                serde_json::to_string_pretty(&report.to_json()).unwrap_or_default() + "\n"
            } else {
                report.render()
            };
            print_stdout(&text)?;
            match report.first_divergence() {
                Some(c) => Err(Error::data(format!(
                    "{}: {} of {} logged values differ from the dumps; the first: step {}, {}",
                    report.log,
                    report.diverging(),
                    report.compared.len(),
                    c.step,
                    c.metric
                ))),
                None => Ok(()),
            }
        }
        Command::View(args) => {
            let (variants, options) = args.resolve()?;
            if !args.quiet {
                for v in &variants {
                    for note in &v.config.notes {
                        eprintln!("note: {}: {note}", v.label);
                    }
                }
            }
            if !options.host.is_loopback() {
                let shown = match options.host {
                    std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                    v4 => v4.to_string(),
                };
                eprintln!(
                    "warning: listening on {shown}: anyone who can reach this machine and has the URL's token can read these rollouts"
                );
                if options.host.is_unspecified() {
                    eprintln!(
                        "note: the URL names this machine as seen from itself; from another machine, put this machine's name in its place"
                    );
                }
            }
            let server = crate::commands::view::Server::start(variants, options)?;
            // the URL first, alone on its line: scripts and the Python package read it
            print_stdout(&format!("{}\n", server.url()))?;
            if !args.quiet {
                eprintln!("advcalc view: serving until Ctrl-C");
            }
            server.serve_until(|| crate::interrupt::requested().is_some());
            Ok(())
        }
        Command::Loss(args) => run_command(&args.run, true, args.json),
        Command::Run(args) => run_command(&args, false, false),
    }
}

/// `run`, or `loss` (the loss stage on; its length-bias view printed as a table, or with
/// `json` as JSON on stdout).
fn run_command(args: &RunArgs, loss: bool, json: bool) -> Result<(), Error> {
    let (config, options, dataset) = args.resolve(std::io::stderr().is_terminal(), loss)?;
    if json && crate::io::format::is_stdio(&options.output) {
        return Err(
            Error::usage("--json writes to stdout, where OUT `-` writes too")
                .with_hint("write OUT to a file, or leave out --json"),
        );
    }
    let say = |line: &str| {
        if !args.quiet {
            eprintln!("{line}");
        }
    };
    for note in &config.notes {
        say(&format!("note: {note}"));
    }
    let summary = crate::run_with(&config, &options, &dataset)?;
    for note in &summary.notes {
        say(&format!("note: {note}"));
    }
    for warning in &summary.warnings {
        say(&format!("warning: {warning}"));
    }
    let files = match (summary.files, summary.kept) {
        (1, _) => String::new(),
        (n, 0) => format!(" from {n} files"),
        (n, k) => format!(" from {n} files ({k} kept by --resume)"),
    };
    say(&format!(
        "advcalc: {} rows in {} batch{}{files} -> {} ({})",
        summary.rows,
        summary.training_batches,
        if summary.training_batches == 1 {
            ""
        } else {
            "es"
        },
        options.output.display(),
        match &config.loss {
            Some(l) => format!("loss {}, {}", l.mode.name(), l.agg.name()),
            None => config.algorithm.adv_estimator.name().to_string(),
        }
    ));
    if let Some((view, table)) = &summary.length_bias {
        if json {
            print_stdout(&(serde_json::to_string_pretty(view).unwrap_or_default() + "\n"))?;
        } else {
            say(table.trim_end());
        }
    }
    Ok(())
}

/// An error as printed on stderr: `error: ...`, one `caused by: ...` line per cause, then
/// `hint: ...` on its own line when the error suggests a fix.
fn report(e: &Error) -> String {
    let mut text = format!("error: {e}\n");
    let mut last = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        // Wrappers often repeat their cause (`Io error: X`, then `X`): say each thing once.
        let line = cause.to_string();
        if !last.contains(&line) {
            text += &format!("caused by: {line}\n");
            last = line;
        }
        source = cause.source();
    }
    if let Some(hint) = e.hint() {
        text += &format!("hint: {hint}\n");
    }
    text
}

/// SIGINT (Ctrl-C) and SIGTERM (`timeout`, Ray, Kubernetes, Slurm) ask the run to stop: it
/// unwinds through the error path, which removes its temporary files, and exits 130 / 143. A
/// second signal ends the process at once, as the default action would.
fn stop_on_signals() {
    #[cfg(target_os = "linux")]
    {
        extern "C" fn on_signal(signal: libc::c_int) {
            if crate::interrupt::requested().is_some() {
                // SAFETY: signal and raise are async-signal-safe; restoring the default action
                // and raising again ends the process as an unhandled signal would.
                unsafe {
                    libc::signal(signal, libc::SIG_DFL);
                    libc::raise(signal);
                }
            }
            crate::interrupt::request_stop(signal);
        }
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler only stores an integer (and re-raises on a second signal),
            // which is async-signal-safe.
            unsafe {
                libc::signal(signal, on_signal as *const () as libc::sighandler_t);
            }
        }
    }
}

/// Opt out of transparent huge pages. mimalloc asks for them on its arenas; each fault then
/// zeroes (and may first compact memory for) 2 MiB where a row group touches a few KiB,
/// which cost up to a third of a run's time in system calls (docs/benchmarks.md).
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with PR_SET_THP_DISABLE takes plain integers and only sets a flag of
    // this process; failure (an old kernel) leaves the default, which is still correct.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Write to stdout; a closed pipe (`advcalc estimators | head`) is not an error.
fn print_stdout(text: &str) -> Result<(), Error> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::data("cannot write to standard output").with_source(e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_repeated_by_its_wrapper_is_printed_once() {
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "Io error: {}", self.0)
            }
        }
        impl std::error::Error for Wrapper {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let io = std::io::Error::other("failed to fill whole buffer");
        let e = Error::data("x.parquet: cannot decode row group 0").with_source(Wrapper(io));
        assert_eq!(
            report(&e),
            "error: x.parquet: cannot decode row group 0\ncaused by: Io error: failed to fill whole buffer\n"
        );
    }

    #[test]
    fn the_hint_comes_last_on_its_own_line() {
        let e = Error::data("cannot write the metrics")
            .with_source(std::io::Error::other("disk full"))
            .with_hint("free some space");
        assert_eq!(
            report(&e),
            "error: cannot write the metrics\ncaused by: disk full\nhint: free some space\n"
        );
        assert_eq!(report(&Error::usage("bad")), "error: bad\n");
    }
}
