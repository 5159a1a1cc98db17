//! The project's own clients use the documented API only: the binary (`src/main.rs`) and the
//! Python package's native module (`python/src/lib.rs`, which `cargo test` never compiles)
//! name no path through a module `src/lib.rs` hides from the docs (`#[doc(hidden)] pub mod`, or
//! `#[doc(hidden)] pub use` of a lower crate's module).
//! Those modules are public only for the benchmarks, the integration tests and the fuzz
//! targets (docs/architecture.md). The check reads the sources: every `advcalc::...` path,
//! `use` groups (`advcalc::{a, b::c}`) included, comments and strings skipped.

use std::path::Path;

/// The clients that must keep to the documented API.
const CLIENTS: [&str; 2] = ["src/main.rs", "python/src/lib.rs"];

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The modules `src/lib.rs` declares `#[doc(hidden)] pub mod NAME;` or re-exports from a
/// lower crate as `#[doc(hidden)] pub use advcalc_maths::NAME;`.
fn hidden_modules() -> Vec<String> {
    let lib = read("src/lib.rs");
    let mut hidden = Vec::new();
    let mut after_hidden = false;
    for line in lib.lines().map(str::trim) {
        if line == "#[doc(hidden)]" {
            after_hidden = true;
            continue;
        }
        if after_hidden
            && let Some(rest) = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub use advcalc_maths::"))
        {
            hidden.push(rest.trim_end_matches(';').trim().to_string());
        }
        after_hidden = after_hidden && line.starts_with("#[");
    }
    hidden
}

/// `text` without its comments, string and character literals (each replaced by a space), so
/// a path is only found in code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if rest.starts_with(&['/', '*']) {
            i += 2;
            while i < chars.len() && !chars[i..].starts_with(&['*', '/']) {
                i += 1;
            }
            i += 2;
        } else if chars[i] == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if chars[i] == '\'' && rest.len() > 2 && (rest[1] == '\\' || rest[2] == '\'') {
            // a char literal (a lifetime `'a` is kept)
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        out.push(' ');
    }
    out
}

/// The first segments of the paths below `advcalc::` in `code`: `advcalc::a::b` gives `a`,
/// `advcalc::{a, b::c, self}` gives `a`, `b` and `self`.
fn advcalc_segments(code: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(pos) = code[at..].find("advcalc") {
        let start = at + pos;
        at = start + "advcalc".len();
        // `advcalc` itself, not the end of a longer name or a segment of another path
        // (`x::advcalc`); a leading `::advcalc` (`use ::advcalc`) is the crate
        let prefix = code[..start].trim_end().strip_suffix("::");
        if code[..start].chars().next_back().is_some_and(ident)
            || prefix.is_some_and(|p| p.chars().next_back().is_some_and(ident))
        {
            continue;
        }
        let rest = code[at..].trim_start();
        let Some(rest) = rest.strip_prefix("::") else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // the top level of the group: split at commas outside nested braces
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            found.push(first_segment(&item));
        } else {
            found.push(first_segment(rest));
        }
    }
    found.retain(|s| !s.is_empty());
    found
}

fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|&c| c.is_alphanumeric() || c == '_')
        .collect()
}

/// Each use of a hidden module by a client, as `FILE: advcalc::MODULE`.
fn hidden_uses(hidden: &[String], clients: &[(&str, String)]) -> Vec<String> {
    let mut uses = Vec::new();
    for (file, text) in clients {
        for segment in advcalc_segments(&code_only(text)) {
            if hidden.contains(&segment) {
                uses.push(format!("{file}: advcalc::{segment}"));
            }
        }
    }
    uses
}

#[test]
fn the_binary_and_the_python_package_use_no_module_hidden_from_the_docs() {
    let hidden = hidden_modules();
    // the modules the comment in src/lib.rs names; a change there must be deliberate
    assert_eq!(hidden, ["io"]);
    let clients: Vec<(&str, String)> = CLIENTS.iter().map(|&f| (f, read(f))).collect();
    // the check sees the clients' paths at all (a parser that finds nothing passes anything)
    let python = advcalc_segments(&code_only(&clients[1].1));
    for expected in ["commands", "input", "dataset", "cli", "Error", "Engine"] {
        assert!(
            python.iter().any(|s| s == expected),
            "{expected}: {python:?}"
        );
    }
    let uses = hidden_uses(&hidden, &clients);
    assert!(
        uses.is_empty(),
        "the project's clients must use documented items only (re-export or wrap what they \
         need in a documented module of src/lib.rs):\n{}",
        uses.join("\n")
    );
}

#[test]
fn the_check_finds_a_hidden_path_in_every_form() {
    // the parser's test, with a list of its own (the real one is checked above)
    let hidden: Vec<String> = ["data", "estimators", "io", "shaping"]
        .map(String::from)
        .to_vec();
    let planted = |text: &str| hidden_uses(&hidden, &[("client.rs", text.to_string())]);
    assert_eq!(
        planted("fn f() { advcalc::io::read::decoding(); }"),
        ["client.rs: advcalc::io"]
    );
    assert_eq!(
        planted("use advcalc::{\n    Config,\n    estimators::{groups::Grouping, gae},\n};"),
        ["client.rs: advcalc::estimators"]
    );
    assert_eq!(
        planted("use advcalc :: { shaping, data::GroupKey };"),
        ["client.rs: advcalc::shaping", "client.rs: advcalc::data"]
    );
    assert_eq!(
        planted("use ::advcalc::io::dataset::Dataset;"),
        ["client.rs: advcalc::io"]
    );
    // not a use: comments, strings, other crates' modules, the documented API
    assert!(
        planted(
            "// advcalc::io::read\n/* advcalc::data */\nlet s = \"advcalc::shaping\";\n\
             use std::io::Read;\nuse advcalc::input::InputFile;\nmy_advcalc::io::x();"
        )
        .is_empty()
    );
}
