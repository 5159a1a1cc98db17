//! A text table: columns aligned by their widest cell, two spaces apart, one column
//! left-aligned (the labels) and the others right-aligned (the numbers), what `compare` and
//! `check` print.

/// Rows of cells under a header.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// The left-aligned column (the first by default).
    left: usize,
}

impl Table {
    /// A header of `corner` (above the row labels) and `columns`.
    pub fn new(corner: &str, columns: impl IntoIterator<Item = String>) -> Self {
        let mut header = vec![corner.to_string()];
        header.extend(columns);
        Table {
            header,
            rows: Vec::new(),
            left: 0,
        }
    }

    /// Left-align column `column` instead of the first (which is then right-aligned).
    pub fn left_aligned(mut self, column: usize) -> Self {
        self.left = column;
        self
    }

    /// A row: its label and its cells.
    pub fn row(&mut self, label: &str, cells: Vec<String>) {
        let mut r = vec![label.to_string()];
        r.extend(cells);
        self.rows.push(r);
    }

    /// The table, a line per row, trailing spaces trimmed.
    pub fn render(&self) -> String {
        let width = |c: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.header.len()).map(width).collect();
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (cell, &w))| {
                    if c == self.left {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            out += cells.join("  ").trim_end();
            out += "\n";
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns() {
        let mut t = Table::new("", ["a".to_string(), "bbbb".to_string()]);
        t.row("mean", vec!["1.5".into(), "2".into()]);
        // "mean" sets the label width (4), "1.5" the first column (3), "bbbb" the second.
        assert_eq!(t.render(), "        a  bbbb\nmean  1.5     2\n");
    }

    #[test]
    fn another_column_left_aligned() {
        let mut t = Table::new("step", ["metric".to_string(), "v".to_string()]).left_aligned(1);
        t.row("1", vec!["a/b".into(), "0.5".into()]);
        t.row("10", vec!["c".into(), "2".into()]);
        assert_eq!(
            t.render(),
            "step  metric    v\n   1  a/b     0.5\n  10  c         2\n"
        );
    }
}
