//! One libtest-mimic trial per directory of a corpus's `cases/`, named after it, failing with
//! the case's problems (the first few of them).

use std::path::Path;

use libtest_mimic::Trial;

/// At most this many problems of one case are printed.
const SHOWN: usize = 12;

/// A trial per case directory under `root`, each running `check` on its directory.
pub fn case_trials(root: &Path, check: fn(&Path) -> Vec<String>) -> Vec<Trial> {
    super::case_dirs(root)
        .into_iter()
        .map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            Trial::test(name, move || {
                let problems = check(&dir);
                if problems.is_empty() {
                    return Ok(());
                }
                let mut text = format!("{} problem(s):\n", problems.len());
                for p in problems.iter().take(SHOWN) {
                    text += &format!("  {p}\n");
                }
                Err(text.into())
            })
        })
        .collect()
}
