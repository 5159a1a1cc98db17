//! Where each row of a verl JSONL dump starts: its file and byte offset, found by one scan of
//! the files on the first row request (a dump's rows are spooled without their text), so a
//! row's `input` and `output` are one seek and one line away however deep in the dump it is.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// Each row's (file, offset): its non-blank lines over the files, in order.
pub struct LineIndex {
    files: Vec<PathBuf>,
    starts: Vec<(u32, u64)>,
}

impl LineIndex {
    /// Scan `files` once.
    pub fn build(files: &[PathBuf]) -> Result<LineIndex> {
        let mut starts = Vec::new();
        for (k, file) in files.iter().enumerate() {
            let mut reader = BufReader::new(open(file)?);
            let mut line = Vec::new();
            let mut at = 0u64;
            loop {
                line.clear();
                let n = reader
                    .read_until(b'\n', &mut line)
                    .map_err(|e| read_error(file, e))?;
                if n == 0 {
                    break;
                }
                if line.iter().any(|b| !b.is_ascii_whitespace()) {
                    starts.push((k as u32, at));
                }
                at += n as u64;
            }
        }
        Ok(LineIndex {
            files: files.to_vec(),
            starts,
        })
    }

    /// Row `row`'s string fields, `input` and `output` first (the uid is shown elsewhere).
    pub fn text(&self, row: usize) -> Result<Vec<(String, String)>> {
        let Some(&(k, at)) = self.starts.get(row) else {
            return Ok(Vec::new());
        };
        let file = &self.files[k as usize];
        let mut f = open(file)?;
        f.seek(SeekFrom::Start(at))
            .map_err(|e| read_error(file, e))?;
        let mut line = String::new();
        BufReader::new(f)
            .read_line(&mut line)
            .map_err(|e| read_error(file, e))?;
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(&line) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<(String, String)> = Vec::new();
        for key in ["input", "output"] {
            if let Some(Value::String(t)) = fields.get(key) {
                out.push((key.to_string(), t.clone()));
            }
        }
        for (k, v) in &fields {
            if let Value::String(t) = v
                && !matches!(k.as_str(), "input" | "output" | "uid")
            {
                out.push((k.clone(), t.clone()));
            }
        }
        Ok(out)
    }
}

fn open(file: &Path) -> Result<std::fs::File> {
    std::fs::File::open(file)
        .map_err(|e| Error::data(format!("{}: cannot open", file.display())).with_source(e))
}

fn read_error(file: &Path, e: std::io::Error) -> Error {
    Error::data(format!("{}: cannot read", file.display())).with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_the_non_blank_lines_over_the_files_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("1.jsonl");
        let b = dir.path().join("2.jsonl");
        std::fs::write(
            &a,
            "{\"input\": \"q1\", \"output\": \"a1\"}\n\n{\"input\": \"q2\"}\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "  \n{\"output\": \"b1\", \"gts\": \"x\", \"uid\": \"u\"}",
        )
        .unwrap();
        let ix = LineIndex::build(&[a, b]).unwrap();
        let s = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(k, t)| (k.to_string(), t.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(ix.text(0).unwrap(), s(&[("input", "q1"), ("output", "a1")]));
        assert_eq!(ix.text(1).unwrap(), s(&[("input", "q2")]));
        assert_eq!(ix.text(2).unwrap(), s(&[("output", "b1"), ("gts", "x")]));
        assert!(ix.text(3).unwrap().is_empty());
    }
}
