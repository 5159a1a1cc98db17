//! Writing the page: escaping, numbers that carry where they come from, and the style sheet.
//! Every number the page states is read out of the JSON `inspect --json`, `compare --json` or
//! `run --metrics` would print for the same input, by a JSON pointer, and is written with
//! that source and pointer in `data-src`/`data-path` and its exact value in `data-value`, so a
//! test (or a reader's script) can check the page against the commands.

use serde_json::Value;

use crate::numbers::{sig, sig_pct};

/// `s` with `&`, `<`, `>` and `"` escaped (text and attribute values alike).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// How a number is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Four significant digits (integers as they are).
    Plain,
    /// A fraction shown as a percentage.
    Percent,
}

/// A JSON value at `pointer` of `json` (named `src` in the page) as a `<span>` that carries
/// its source, pointer and exact value; `—` for null or a missing value.
pub fn num(src: &str, json: &Value, pointer: &str, style: Style) -> String {
    let v = json.pointer(pointer);
    let exact = match v {
        Some(Value::Number(n)) => n.to_string(),
        _ => "null".to_string(),
    };
    let shown = match v.and_then(Value::as_f64) {
        Some(x) => show(x, v.is_some_and(|v| v.is_u64() || v.is_i64()), style),
        None => "—".to_string(),
    };
    format!(
        "<span class=\"n\" data-src=\"{}\" data-path=\"{}\" data-value=\"{}\">{}</span>",
        escape(src),
        escape(pointer),
        exact,
        shown
    )
}

/// A number for the eye: integers whole, others to four significant digits.
pub fn show(x: f64, integer: bool, style: Style) -> String {
    match style {
        Style::Percent => sig_pct(x),
        Style::Plain if integer => format!("{}", x as i64),
        Style::Plain => sig(x),
    }
}

/// A JSON pointer token: `~` and `/` escaped (RFC 6901).
pub fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The style sheet: readable on screen and on paper, no fonts fetched.
pub const CSS: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: #1d1d1f; background: #fff; margin: 0 auto; max-width: 1080px; padding: 24px 32px 64px; line-height: 1.45; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 2px; padding-top: 12px; border-top: 2px solid #e4e4e4; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p { margin: 6px 0; }
.meta { color: #555; font-size: 14px; }
.caption { color: #333; font-style: italic; margin: 2px 0 12px; }
.why { background: #f6f6f6; border-left: 4px solid #bbb; padding: 8px 12px; color: #444; }
nav ol { columns: 2; font-size: 14px; padding-left: 20px; }
a { color: #0b5cad; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 14px; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 3px 10px; text-align: right; vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; }
td.l, th.l { text-align: left; white-space: nowrap; }
.legend { font-size: 13px; color: #333; margin: 2px 0 0 56px; }
.figcap { font-size: 13px; color: #444; margin: 4px 0 0; max-width: 290px; }
.dash { display: inline-block; width: 20px; height: 0; border-top: 2px dashed; vertical-align: 4px; margin-right: 4px; }
.why-row { font-size: 14px; color: #333; margin: 0 0 4px; }
.n { font-variant-numeric: tabular-nums; }
ul.warnings { list-style: none; padding: 0; }
ul.warnings li { border-left: 4px solid #d55e00; background: #fff6f0; padding: 6px 10px; margin: 6px 0; font-size: 14px; }
ul.notes li { font-size: 13px; color: #444; }
code { background: #f2f2f2; padding: 0 4px; border-radius: 3px; font-size: 90%; }
.ok { border-left: 4px solid #009e73; background: #effaf6; padding: 6px 10px; }
.fig { margin: 8px 0; overflow-x: auto; }
.fig svg { max-width: 100%; height: auto; }
.grid { display: flex; flex-wrap: wrap; gap: 8px; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; margin-right: 4px; }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  h2 { break-after: avoid; }
  .fig, table, section > p { break-inside: avoid; }
  nav { display: none; }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_keep_their_source_and_exact_value() {
        let j = json!({"a": [{"x": 0.123456789}], "n": 42, "z": null, "k/m": 0.5});
        assert_eq!(
            num("compare", &j, "/a/0/x", Style::Plain),
            "<span class=\"n\" data-src=\"compare\" data-path=\"/a/0/x\" data-value=\"0.123456789\">0.1235</span>"
        );
        assert!(num("c", &j, "/n", Style::Plain).ends_with(">42</span>"));
        assert!(num("c", &j, "/z", Style::Plain).contains("data-value=\"null\">—<"));
        assert!(num("c", &j, "/missing", Style::Plain).contains(">—<"));
        assert!(
            num("c", &j, &format!("/{}", token("k/m")), Style::Percent).ends_with(">50%</span>")
        );
    }

    #[test]
    fn escaped() {
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
