//! YAML text → [`Value`] as `OmegaConf.load` reads it: PyYAML's YAML 1.1 SafeLoader with
//! OmegaConf's loader changes. The same file must mean the same thing to verl and to
//! advcalc, and YAML 1.2 readers disagree with PyYAML on plain scalars (`yes`, `on`, `010`,
//! `1:30`, `1_000`), so the scalars are typed here, from the parser's events, not by the
//! YAML crate. What is mirrored:
//!
//! - plain scalars resolved by PyYAML's implicit resolvers (bool, float, int, merge, null),
//!   with OmegaConf's extra float pattern (`1e-3`, `1_000.5`) and without timestamps;
//!   quoted and block scalars are strings;
//! - PyYAML's constructors for ints (`0x1F`, `017` octal, `0b101`, `1:30` base 60,
//!   underscores) and floats (`.inf`, `-.Inf`, `.nan`, `1:30.5`);
//! - the standard tags `!!str !!int !!float !!bool !!null !!map !!seq` (others refused, as
//!   PyYAML's SafeLoader refuses them);
//! - merge keys (`<<: *base`, `<<: [*a, *b]`) with OmegaConf's precedence, duplicate keys
//!   refused (OmegaConf's loader does), one document per stream;
//! - OmegaConf's limit of 10,000 expanded nodes (aliases counted each time they are used),
//!   which also bounds alias bombs; recursive aliases refused.
//!
//! The event parser is `saphyr-parser` (pure Rust, maintained; `docs/config.md` says why).

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

use super::value::{Map, Value};

/// OmegaConf's default `max_yaml_expanded_nodes`.
const MAX_NODES: usize = 10_000;
/// Nesting deeper than this is refused before anything recursive walks the tree.
const MAX_DEPTH: usize = 200;

/// A file OmegaConf would refuse, with the place.
#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub column: usize,
    /// What the parser said.
    pub message: String,
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "line {} column {}: {}",
                self.line, self.column, self.message
            )
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for YamlError {}

fn err(span: &Span, message: impl Into<String>) -> YamlError {
    YamlError {
        line: span.start.line(),
        column: span.start.col() + 1,
        message: message.into(),
    }
}

/// Parse one YAML document (an empty stream is `Null`).
pub fn parse(text: &str) -> Result<Value, YamlError> {
    let mut builder = Builder::default();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| YamlError {
            line: e.marker().line(),
            column: e.marker().col() + 1,
            message: e.info().to_string(),
        })?;
        builder.event(event, &span)?;
    }
    Ok(builder.document.unwrap_or(Value::Null))
}

/// A mapping key as PyYAML's `flatten_mapping` sees it.
struct Key {
    value: Value,
    /// A key that resolved to a string (PyYAML's default scalar tag): only these are checked
    /// for duplicates, as OmegaConf's loader does.
    is_str: bool,
    merge: bool,
    span: Span,
}

enum Frame {
    Seq {
        items: Vec<Value>,
        anchor: usize,
        nodes: usize,
    },
    Map {
        entries: Vec<(Key, Value)>,
        key: Option<Key>,
        anchor: usize,
        nodes: usize,
        span: Span,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    /// Finished anchored nodes: (value, expanded node count); `None` while being built.
    anchors: HashMap<usize, Option<(Value, usize)>>,
    documents: usize,
    document: Option<Value>,
    /// Nodes so far, aliases expanded.
    nodes: usize,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: &Span) -> Result<(), YamlError> {
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(err(span, "expected a single document in the stream"));
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let merge = style == ScalarStyle::Plain && tag.is_none() && text == "<<"
                    || tag.as_deref().is_some_and(|t| core(t) == Some("merge"));
                let value = if merge {
                    Value::Str("<<".into())
                } else {
                    scalar(&text, style, tag.as_deref(), span)?
                };
                let is_str = matches!(value, Value::Str(_));
                self.node(value, 1, anchor, span, is_str, merge)?;
            }
            Event::Alias(id) => match self.anchors.get(&id) {
                Some(Some((value, nodes))) => {
                    let (value, nodes) = (value.clone(), *nodes);
                    let is_str = matches!(value, Value::Str(_));
                    self.node(value, nodes, 0, span, is_str, false)?;
                }
                Some(None) => return Err(err(span, "YAML recursive aliases are not supported")),
                None => return Err(err(span, "found undefined alias")),
            },
            Event::SequenceStart(anchor, tag) => {
                collection_tag(tag.as_deref(), "seq", span)?;
                self.open(anchor, span)?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    anchor,
                    nodes: 1,
                });
            }
            Event::MappingStart(anchor, tag) => {
                collection_tag(tag.as_deref(), "map", span)?;
                self.open(anchor, span)?;
                self.stack.push(Frame::Map {
                    entries: Vec::new(),
                    key: None,
                    anchor,
                    nodes: 1,
                    span: *span,
                });
            }
            Event::SequenceEnd => {
                if let Some(Frame::Seq {
                    items,
                    anchor,
                    nodes,
                }) = self.stack.pop()
                {
                    self.close(Value::Seq(items), nodes, anchor, span)?;
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map {
                    entries,
                    anchor,
                    nodes,
                    span: start,
                    ..
                }) = self.stack.pop()
                {
                    let map = flatten(entries, &start)?;
                    self.close(Value::Map(map), nodes, anchor, span)?;
                }
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn open(&mut self, anchor: usize, span: &Span) -> Result<(), YamlError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(err(span, format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        if let Some(Frame::Map { key: None, .. }) = self.stack.last() {
            return Err(err(
                span,
                "found unhashable key (a list or mapping as a key)",
            ));
        }
        self.count(1, span)?;
        if anchor > 0 {
            self.anchors.insert(anchor, None);
        }
        Ok(())
    }

    fn count(&mut self, nodes: usize, span: &Span) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > MAX_NODES {
            return Err(err(
                span,
                format!(
                    "YAML node expansion exceeds OmegaConf's limit of {MAX_NODES} nodes (aliases count each time they are used)"
                ),
            ));
        }
        Ok(())
    }

    /// A finished collection: record its anchor, hand it to the parent.
    fn close(
        &mut self,
        value: Value,
        nodes: usize,
        anchor: usize,
        span: &Span,
    ) -> Result<(), YamlError> {
        if anchor > 0 {
            self.anchors.insert(anchor, Some((value.clone(), nodes)));
        }
        self.attach(value, nodes, span, false, false)
    }

    /// A scalar or an alias.
    fn node(
        &mut self,
        value: Value,
        nodes: usize,
        anchor: usize,
        span: &Span,
        is_str: bool,
        merge: bool,
    ) -> Result<(), YamlError> {
        self.count(nodes, span)?;
        if anchor > 0 {
            self.anchors.insert(anchor, Some((value.clone(), nodes)));
        }
        self.attach(value, nodes, span, is_str, merge)
    }

    fn attach(
        &mut self,
        value: Value,
        nodes: usize,
        span: &Span,
        is_str: bool,
        merge: bool,
    ) -> Result<(), YamlError> {
        let key_position = matches!(self.stack.last(), Some(Frame::Map { key: None, .. }));
        if merge && !key_position {
            return Err(err(span, "a merge key `<<` used as a value"));
        }
        match self.stack.last_mut() {
            None => self.document = Some(value),
            Some(Frame::Seq {
                items, nodes: n, ..
            }) => {
                items.push(value);
                *n = n.saturating_add(nodes);
            }
            Some(Frame::Map {
                entries,
                key,
                nodes: n,
                ..
            }) => {
                *n = n.saturating_add(nodes);
                match key.take() {
                    None => {
                        if matches!(value, Value::Seq(_) | Value::Map(_)) {
                            return Err(err(
                                span,
                                "found unhashable key (a list or mapping as a key)",
                            ));
                        }
                        *key = Some(Key {
                            value,
                            is_str,
                            merge,
                            span: *span,
                        });
                    }
                    Some(k) => entries.push((k, value)),
                }
            }
        }
        Ok(())
    }
}

/// PyYAML's `flatten_mapping` with OmegaConf's duplicate-key check, then `construct_mapping`:
/// explicit keys win over merged ones; of several merged mappings the first wins; a key
/// keeps the position where it first appeared.
fn flatten(entries: Vec<(Key, Value)>, span: &Span) -> Result<Map, YamlError> {
    let mut explicit: Vec<String> = Vec::new();
    for (key, _) in &entries {
        if key.is_str && !key.merge {
            let name = key.value.py_str();
            if explicit.contains(&name) {
                return Err(err(
                    &key.span,
                    format!("found duplicate key {name} (while constructing a mapping)"),
                ));
            }
            explicit.push(name);
        }
    }
    let mut merged: Vec<(String, Value)> = Vec::new();
    let mut own: Vec<(String, Value)> = Vec::new();
    for (key, value) in entries {
        if !key.merge {
            own.push((key_name(&key.value), value));
            continue;
        }
        let maps = match value {
            Value::Map(m) => vec![m],
            Value::Seq(items) => {
                let mut maps = Vec::new();
                for item in items {
                    match item {
                        Value::Map(m) => maps.push(m),
                        _ => {
                            return Err(err(
                                span,
                                "expected a mapping for merging, but found another node",
                            ));
                        }
                    }
                }
                maps.reverse();
                maps
            }
            _ => {
                return Err(err(
                    span,
                    "expected a mapping or list of mappings for merging",
                ));
            }
        };
        for m in maps {
            merged.extend(m);
        }
    }
    let mut map = Map::new();
    for (k, v) in merged {
        if !explicit.contains(&k) {
            map.insert(k, v);
        }
    }
    for (k, v) in own {
        map.insert(k, v);
    }
    Ok(map)
}

/// A key as its Python `str()`: `yes:` is the key True in Python, `1:` the key 1.
fn key_name(v: &Value) -> String {
    v.py_str()
}

/// The suffix of a `tag:yaml.org,2002:` tag.
fn core(tag: &Tag) -> Option<&str> {
    (tag.handle == "tag:yaml.org,2002:").then_some(tag.suffix.as_str())
}

fn tag_name(tag: &Tag) -> String {
    match core(tag) {
        Some(s) => format!("!!{s}"),
        None => format!("{}{}", tag.handle, tag.suffix),
    }
}

fn collection_tag(tag: Option<&Tag>, kind: &str, span: &Span) -> Result<(), YamlError> {
    match tag {
        None => Ok(()),
        Some(t) if core(t) == Some(kind) || (t.handle == "!" && t.suffix.is_empty()) => Ok(()),
        Some(t) => Err(err(
            span,
            format!(
                "could not determine a constructor for the tag {} (OmegaConf's safe loader)",
                tag_name(t)
            ),
        )),
    }
}

fn scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    span: &Span,
) -> Result<Value, YamlError> {
    let Some(tag) = tag else {
        return match style {
            ScalarStyle::Plain => implicit(text, span),
            _ => Ok(Value::Str(text.to_string())),
        };
    };
    if tag.handle == "!" && tag.suffix.is_empty() {
        return Ok(Value::Str(text.to_string())); // the non-specific tag `!`
    }
    let bad = |what: &str| {
        err(
            span,
            format!("invalid {what} `{text}` for tag {}", tag_name(tag)),
        )
    };
    match core(tag) {
        Some("str") => Ok(Value::Str(text.to_string())),
        Some("null") => Ok(Value::Null),
        Some("bool") => match text.to_lowercase().as_str() {
            "yes" | "true" | "on" => Ok(Value::Bool(true)),
            "no" | "false" | "off" => Ok(Value::Bool(false)),
            _ => Err(bad("boolean")),
        },
        Some("int") => construct_int(text).map_err(|_| bad("integer")),
        Some("float") => construct_float(text).ok_or_else(|| bad("float")),
        _ => Err(err(
            span,
            format!(
                "could not determine a constructor for the tag {} (OmegaConf's safe loader)",
                tag_name(tag)
            ),
        )),
    }
}

/// A plain scalar through the implicit resolvers, in PyYAML's order (bool, float, int, merge,
/// null, value), then OmegaConf's float pattern, which it appends last.
fn implicit(text: &str, span: &Span) -> Result<Value, YamlError> {
    const BOOLS: [&str; 18] = [
        "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
        "on", "On", "ON", "off", "Off", "OFF",
    ];
    if BOOLS.contains(&text) {
        let lower = text.to_lowercase();
        return Ok(Value::Bool(matches!(lower.as_str(), "yes" | "true" | "on")));
    }
    if is_pyyaml_float(text) {
        return construct_float(text).ok_or_else(|| err(span, format!("invalid float `{text}`")));
    }
    if is_pyyaml_int(text) {
        return construct_int(text).map_err(|m| err(span, m));
    }
    if matches!(text, "~" | "null" | "Null" | "NULL" | "") {
        return Ok(Value::Null);
    }
    if text == "=" {
        return Err(err(
            span,
            "could not determine a constructor for the tag tag:yaml.org,2002:value (a plain `=`)",
        ));
    }
    if is_omegaconf_float(text) {
        return construct_float(text).ok_or_else(|| err(span, format!("invalid float `{text}`")));
    }
    Ok(Value::Str(text.to_string()))
}

/// A tiny matcher over bytes for the resolver patterns (no regex crate in the build).
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Self {
        Cursor {
            b: s.as_bytes(),
            i: 0,
        }
    }
    fn done(&self) -> bool {
        self.i == self.b.len()
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn eat_if(&mut self, f: impl Fn(u8) -> bool) -> bool {
        match self.peek() {
            Some(c) if f(c) => {
                self.i += 1;
                true
            }
            _ => false,
        }
    }
    /// Zero or more; returns the count.
    fn many(&mut self, f: impl Fn(u8) -> bool) -> usize {
        let start = self.i;
        while self.eat_if(&f) {}
        self.i - start
    }
    fn sign(&mut self) {
        let _ = self.eat(b'-') || self.eat(b'+');
    }
    fn rest_is(&self, s: &str) -> bool {
        &self.b[self.i..] == s.as_bytes()
    }
}

fn digit(c: u8) -> bool {
    c.is_ascii_digit()
}
fn digit_(c: u8) -> bool {
    c.is_ascii_digit() || c == b'_'
}

/// Try `f` on a fresh cursor over `s`: true when it consumes all of `s`.
fn whole(s: &str, f: impl Fn(&mut Cursor<'_>) -> bool) -> bool {
    let mut c = Cursor::new(s);
    f(&mut c) && c.done()
}

/// `(?::[0-5]?[0-9])+`
fn sexagesimal_tail(c: &mut Cursor<'_>) -> bool {
    let mut n = 0;
    while c.peek() == Some(b':') {
        c.i += 1;
        let first = c.eat_if(digit);
        if !first {
            return false;
        }
        // `[0-5]?[0-9]`: one digit, or two with the first in 0-5
        let save = c.i;
        if c.eat_if(digit) && c.b[save - 1] > b'5' {
            return false;
        }
        n += 1;
    }
    n > 0
}

/// `[eE][-+][0-9]+` (PyYAML: sign required) or `[eE][-+]?[0-9]+` (OmegaConf).
fn exponent(c: &mut Cursor<'_>, sign_required: bool) -> bool {
    if !(c.eat(b'e') || c.eat(b'E')) {
        return false;
    }
    if !(c.eat(b'-') || c.eat(b'+')) && sign_required {
        return false;
    }
    c.many(digit) > 0
}

fn optional(c: &mut Cursor<'_>, f: impl Fn(&mut Cursor<'_>) -> bool) {
    let save = c.i;
    if !f(c) {
        c.i = save;
    }
}

fn inf_nan(s: &str) -> bool {
    whole(s, |c| {
        c.sign();
        c.eat(b'.') && (c.rest_is("inf") || c.rest_is("Inf") || c.rest_is("INF")) && {
            c.i = c.b.len();
            true
        }
    }) || matches!(s, ".nan" | ".NaN" | ".NAN")
}

/// PyYAML's float resolver.
fn is_pyyaml_float(s: &str) -> bool {
    // [-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    whole(s, |c| {
        c.sign();
        c.eat_if(digit) && {
            c.many(digit_);
            c.eat(b'.')
        } && {
            c.many(digit_);
            optional(c, |c| exponent(c, true));
            true
        }
    })
    // \.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    || whole(s, |c| {
        c.eat(b'.') && c.eat_if(digit) && {
            c.many(digit_);
            optional(c, |c| exponent(c, true));
            true
        }
    })
    // [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    || whole(s, |c| {
        c.sign();
        c.eat_if(digit) && {
            c.many(digit_);
            sexagesimal_tail(c)
        } && c.eat(b'.') && {
            c.many(digit_);
            true
        }
    })
    || inf_nan(s)
}

/// `[0-9]+(?:_[0-9]+)*`
fn digits_underscored(c: &mut Cursor<'_>) -> bool {
    if c.many(digit) == 0 {
        return false;
    }
    loop {
        let save = c.i;
        if c.eat(b'_') && c.many(digit) > 0 {
            continue;
        }
        c.i = save;
        return true;
    }
}

/// The float pattern OmegaConf's loader adds (exponents without a dot or a sign).
fn is_omegaconf_float(s: &str) -> bool {
    whole(s, |c| {
        c.sign();
        digits_underscored(c) && c.eat(b'.') && {
            c.many(digit_);
            optional(c, |c| exponent(c, false));
            true
        }
    }) || whole(s, |c| {
        c.sign();
        digits_underscored(c) && exponent(c, false)
    }) || whole(s, |c| {
        c.eat(b'.') && digits_underscored(c) && {
            optional(c, |c| exponent(c, true));
            true
        }
    }) || whole(s, |c| {
        c.sign();
        digits_underscored(c) && sexagesimal_tail(c) && c.eat(b'.') && {
            c.many(digit_);
            true
        }
    }) || inf_nan(s)
}

/// PyYAML's int resolver.
fn is_pyyaml_int(s: &str) -> bool {
    whole(s, |c| {
        c.sign();
        c.eat(b'0') && c.eat(b'b') && c.many(|x| matches!(x, b'0' | b'1' | b'_')) > 0
    }) || whole(s, |c| {
        c.sign();
        c.eat(b'0') && c.many(|x| matches!(x, b'0'..=b'7' | b'_')) > 0
    }) || whole(s, |c| {
        c.sign();
        c.eat(b'0') || (c.eat_if(|x| matches!(x, b'1'..=b'9')) && c.many(digit_) < usize::MAX)
    }) || whole(s, |c| {
        c.sign();
        c.eat(b'0') && c.eat(b'x') && c.many(|x| x.is_ascii_hexdigit() || x == b'_') > 0
    }) || whole(s, |c| {
        c.sign();
        c.eat_if(|x| matches!(x, b'1'..=b'9')) && {
            c.many(digit_);
            sexagesimal_tail(c)
        }
    })
}

/// PyYAML's `construct_yaml_int`.
fn construct_int(text: &str) -> Result<Value, String> {
    let clean: String = text.chars().filter(|&c| c != '_').collect();
    let (negative, body) = match clean.as_bytes().first() {
        Some(b'-') => (true, &clean[1..]),
        Some(b'+') => (false, &clean[1..]),
        _ => (false, clean.as_str()),
    };
    let parse = |digits: &str, radix: u32| -> Result<i128, String> {
        i128::from_str_radix(digits, radix).map_err(|_| format!("invalid integer `{text}`"))
    };
    let magnitude: i128 = if body == "0" {
        0
    } else if let Some(b) = body.strip_prefix("0b") {
        parse(b, 2)?
    } else if let Some(x) = body.strip_prefix("0x") {
        parse(x, 16)?
    } else if body.starts_with('0') {
        parse(body, 8)?
    } else if body.contains(':') {
        let mut total: i128 = 0;
        for part in body.split(':') {
            total = total
                .checked_mul(60)
                .and_then(|t| t.checked_add(parse(part, 10).ok()?))
                .ok_or_else(|| format!("invalid integer `{text}`"))?;
        }
        total
    } else {
        parse(body, 10)?
    };
    let n = if negative { -magnitude } else { magnitude };
    i64::try_from(n)
        .map(Value::Int)
        .map_err(|_| format!("integer `{text}` does not fit in 64 bits"))
}

/// PyYAML's `construct_yaml_float` (Python's `float()` on what is left).
fn construct_float(text: &str) -> Option<Value> {
    let clean: String = text
        .chars()
        .filter(|&c| c != '_')
        .collect::<String>()
        .to_lowercase();
    let (sign, body) = match clean.as_bytes().first() {
        Some(b'-') => (-1.0, &clean[1..]),
        Some(b'+') => (1.0, &clean[1..]),
        _ => (1.0, clean.as_str()),
    };
    let x = if body == ".inf" {
        f64::INFINITY
    } else if body == ".nan" {
        f64::NAN
    } else if body.contains(':') {
        let mut total = 0.0;
        for part in body.split(':') {
            total = total * 60.0 + float_digits(part)?;
        }
        total
    } else {
        float_digits(body)?
    };
    Some(Value::Float(sign * x))
}

/// Python's `float()` on the digit forms the resolvers let through (`1.`, `.5`, `1.e5`).
fn float_digits(s: &str) -> Option<f64> {
    if s.is_empty() {
        return None;
    }
    let fixed = match s.find(['e']) {
        // Rust wants a digit after the point before an exponent: `1.e5` → `1.0e5`
        Some(e) if s[..e].ends_with('.') => format!("{}0{}", &s[..e], &s[e..]),
        _ => s.to_string(),
    };
    fixed.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Value {
        match parse(&format!("a: {text}\n")).unwrap() {
            Value::Map(m) => m.get("a").cloned().unwrap(),
            other => panic!("{other:?}"),
        }
    }

    /// Each expectation is what `OmegaConf.load` gives (omegaconf 2.4.0, PyYAML 6.0.4).
    #[test]
    fn scalars_resolve_as_omegaconf_reads_them() {
        use Value::*;
        for (text, want) in [
            ("yes", Bool(true)),
            ("No", Bool(false)),
            ("on", Bool(true)),
            ("OFF", Bool(false)),
            ("'yes'", Str("yes".into())),
            ("y", Str("y".into())),
            ("1_000", Int(1000)),
            ("1__0", Int(10)),
            ("0x1F", Int(31)),
            ("010", Int(8)),
            ("08", Str("08".into())),
            ("0b101", Int(5)),
            ("1:30", Int(90)),
            ("-1:30", Int(-90)),
            ("1e-3", Float(0.001)),
            ("1.0e-3", Float(0.001)),
            ("1e3", Float(1000.0)),
            ("1E+3", Float(1000.0)),
            (".5", Float(0.5)),
            ("1.", Float(1.0)),
            ("+1.5", Float(1.5)),
            ("1_000.5", Float(1000.5)),
            ("1:30.5", Float(90.5)),
            (".inf", Float(f64::INFINITY)),
            ("-.Inf", Float(f64::NEG_INFINITY)),
            ("~", Null),
            ("", Null),
            ("NULL", Null),
            ("\"1e-3\"", Str("1e-3".into())),
            ("!!str 1", Str("1".into())),
            ("!!float 1", Float(1.0)),
            ("!!int '7'", Int(7)),
            ("!!bool yes", Bool(true)),
            ("0.5_2", Float(0.52)),
            ("0.5_2.0", Str("0.5_2.0".into())),
            ("2_0.5", Float(20.5)),
            ("1e", Str("1e".into())),
            ("e5", Str("e5".into())),
            ("${algorithm.lam}", Str("${algorithm.lam}".into())),
            ("???", Str("???".into())),
        ] {
            assert_eq!(one(text), want, "{text}");
        }
        assert!(matches!(one(".nan"), Float(x) if x.is_nan()));
    }

    #[test]
    fn merge_keys_duplicates_and_documents() {
        let v = parse(
            "base: &b\n  x: 1\n  y: 2\nother: &o\n  y: 3\n  z: 4\nc:\n  <<: [*b, *o]\n  x: 9\n",
        )
        .unwrap();
        let c = v.at(&["c"]).unwrap().as_map().unwrap();
        let pairs: Vec<(String, Value)> = c.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        // as OmegaConf: {'y': 2, 'z': 4, 'x': 9}
        assert_eq!(
            pairs,
            vec![
                ("y".into(), Value::Int(2)),
                ("z".into(), Value::Int(4)),
                ("x".into(), Value::Int(9)),
            ]
        );
        assert!(
            parse("a: 1\na: 2\n")
                .unwrap_err()
                .message
                .contains("duplicate key a")
        );
        assert!(parse("a: 1\n---\nb: 2\n").is_err());
        assert!(parse("a: !!python/name:os.system x\n").is_err());
        assert!(parse("a: &x [*x]\n").is_err());
        assert_eq!(parse("").unwrap(), Value::Null);
    }

    #[test]
    fn alias_bombs_hit_the_node_limit() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..6 {
            let prev = format!("*a{}", i - 1);
            text += &format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", "));
        }
        let e = parse(&text).unwrap_err();
        assert!(e.message.contains("10000"), "{e}");
        let deep = "[".repeat(5000);
        assert!(parse(&deep).is_err());
    }
}
