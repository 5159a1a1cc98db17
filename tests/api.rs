//! The workspace's public items are all documented, and the project's own clients keep to
//! the facade: no library crate hides a public module or item from the docs
//! (`#[doc(hidden)]`), and the binary (`src/main.rs`) and the Python package's native module
//! (`python/src/lib.rs`, which `cargo test` never compiles) name `advcalc`'s API only, never
//! a lower floor (`advcalc_maths`, `advcalc_config`, `advcalc_io`) directly
//! (docs/architecture.md). The check reads the sources: comments and strings skipped.

use std::path::{Path, PathBuf};

/// The clients that must keep to the facade.
const CLIENTS: [&str; 2] = ["src/main.rs", "python/src/lib.rs"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.rs` file of the library crates: `src/` and each `crates/*/src/`.
fn library_sources() -> Vec<PathBuf> {
    let mut dirs = vec![root().join("src")];
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        dirs.push(entry.expect("an entry").path().join("src"));
    }
    let mut files = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The lines of `code` that hide an item from the docs.
fn hidden_items(code: &str) -> Vec<String> {
    code.lines()
        .filter(|l| l.trim_start().starts_with("#[doc(hidden)]"))
        .map(|l| l.trim().to_string())
        .collect()
}

/// The lower floors `code` names directly (`advcalc_io::x`, `use advcalc_maths::{..}`).
fn lower_floors(code: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for floor in ["advcalc_maths", "advcalc_config", "advcalc_io"] {
        let mut at = 0;
        while let Some(pos) = code[at..].find(floor) {
            let start = at + pos;
            at = start + floor.len();
            let before = code[..start].chars().next_back();
            let after = code[at..].chars().next();
            if !before.is_some_and(ident) && !after.is_some_and(ident) {
                found.push(floor.to_string());
            }
        }
    }
    found
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

#[test]
fn no_library_crate_hides_an_item_from_the_docs() {
    let files = library_sources();
    assert!(files.len() > 100, "the walk found {} files", files.len());
    let hidden: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let rel = f.strip_prefix(root()).unwrap().display().to_string();
            hidden_items(&read(f))
                .into_iter()
                .map(move |line| format!("{rel}: {line}"))
        })
        .collect();
    assert!(
        hidden.is_empty(),
        "document the item, or keep it to its crate (a test or benchmark that needs an \
         internal uses the lower floor's crate, whose items are documented):\n{}",
        hidden.join("\n")
    );
}

#[test]
fn the_binary_and_the_python_package_use_the_facade_only() {
    for client in CLIENTS {
        let code = code_only(&read(&root().join(client)));
        let floors = lower_floors(&code);
        assert!(
            floors.is_empty(),
            "{client} names {floors:?}: the clients use `advcalc`'s API (re-export what they \
             need from src/lib.rs)"
        );
    }
    // the check sees the clients' paths at all (a parser that finds nothing passes anything)
    let python = advcalc_segments(&code_only(&read(&root().join(CLIENTS[1]))));
    for expected in ["commands", "input", "dataset", "cli", "Error", "Engine"] {
        assert!(
            python.iter().any(|s| s == expected),
            "{expected}: {python:?}"
        );
    }
}

/// The public types, traits and aliases `code` declares (`pub struct Name`, ...).
fn public_type_names(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("pub ")?;
            let rest = ["struct ", "enum ", "trait ", "type "]
                .iter()
                .find_map(|k| rest.strip_prefix(k))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            name.starts_with(|c: char| c.is_ascii_uppercase())
                .then_some(name)
        })
        .collect()
}

// One name per concept (docs/architecture.md's glossary): no two public types of the
// workspace share a name, so a name read anywhere means one thing.
#[test]
fn no_two_public_types_of_the_workspace_share_a_name() {
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in library_sources() {
        let rel = f.strip_prefix(root()).unwrap().display().to_string();
        for name in public_type_names(&code_only(&read(&f))) {
            seen.entry(name).or_default().push(rel.clone());
        }
    }
    assert!(seen.len() > 200, "only {} public types found", seen.len());
    let shared: Vec<String> = seen
        .iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| format!("{name}: {}", files.join(", ")))
        .collect();
    assert!(
        shared.is_empty(),
        "public types sharing a name:\n{}",
        shared.join("\n")
    );
}

#[test]
fn the_checks_find_what_they_look_for() {
    assert_eq!(
        public_type_names(
            "pub struct Info {\n    pub enum_field: u8,\n}\npub(crate) struct Hidden;\n  pub enum Kind { A }\npub type Result<T> = T;\npub fn f() {}"
        ),
        ["Info", "Kind", "Result"]
    );
    assert_eq!(
        hidden_items("/// doc\n#[doc(hidden)]\npub mod io;\n    #[doc(hidden)] pub fn f() {}"),
        ["#[doc(hidden)]", "#[doc(hidden)] pub fn f() {}"]
    );
    let planted = |text: &str| lower_floors(&code_only(text));
    assert_eq!(
        planted("fn f() { advcalc_io::read::decoding(); }"),
        ["advcalc_io"]
    );
    assert_eq!(
        planted("use advcalc_maths::{data::GroupKey, loss};\nuse ::advcalc_config::Value;"),
        ["advcalc_maths", "advcalc_config"]
    );
    // not a use: comments, strings, longer names, the facade
    assert!(
        planted(
            "// advcalc_io::read\n/* advcalc_maths */\nlet s = \"advcalc_config\";\n\
             use advcalc::input::InputFile;\nmy_advcalc_io::x();\nadvcalc_iox::y();"
        )
        .is_empty()
    );
    assert_eq!(
        advcalc_segments("use advcalc::{\n    Config,\n    commands::{inspect, compare},\n};"),
        ["Config", "commands"]
    );
}
