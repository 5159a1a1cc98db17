//! One line of a JSONL file as Python's `json.dumps` writes it: a JSON object whose values
//! may also be the bare tokens `NaN`, `Infinity` and `-Infinity` (Python's default
//! `allow_nan=True`, which is how verl's dumps carry a NaN score). Standard JSON parsers
//! refuse those tokens, so this small parser reads the dialect itself.
//!
//! A line becomes its top-level fields in order, each value classified (null, bool,
//! integer, float, string, or anything else kept as its JSON text exactly as written), which
//! is all a column needs. A key given twice keeps its last value, as Python's `json.loads`.
//! [`read_lines`] gives a file's non-blank lines, each with where it is, to the JSONL readers.

/// Call `each` with every non-blank line of `path` and where it is ("FILE line N", lines
/// counted from 1), checked to be UTF-8; the number of such lines. Blank lines are skipped
/// (writers end every file with a newline). Ctrl-C is checked every 1024 lines.
pub fn read_lines(
    path: &std::path::Path,
    mut each: impl FnMut(String, &str) -> crate::error::Result<()>,
) -> crate::error::Result<usize> {
    use crate::error::Error;
    use std::io::BufRead;
    let file = path.display().to_string();
    let handle = std::fs::File::open(path)
        .map_err(|e| Error::data(format!("{file}: cannot open")).with_source(e))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, handle);
    let mut buf = Vec::new();
    let (mut line, mut rows) = (0usize, 0usize);
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::data(format!("{file}: cannot read")).with_source(e))?;
        if n == 0 {
            return Ok(rows);
        }
        line += 1;
        if line.is_multiple_of(1024) {
            crate::interrupt::check()?;
        }
        let at = format!("{file} line {line}");
        let text = std::str::from_utf8(&buf)
            .map_err(|e| Error::data(format!("{at}: not valid UTF-8")).with_source(e))?;
        if text.trim().is_empty() {
            continue;
        }
        rows += 1;
        each(at, text)?;
    }
}

/// One field value of a line.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonValue {
    Null,
    Bool(bool),
    /// A number without fraction or exponent that fits an `i64`.
    Int(i64),
    /// Any other number, and `NaN`, `Infinity`, `-Infinity`.
    Float(f64),
    Str(String),
    /// An array or object (its text is the field's `raw`).
    Json,
}

/// One top-level field of a line: its key, its value, and the value's JSON text exactly as
/// written.
#[derive(Debug, Clone, PartialEq)]
pub struct Field<'a> {
    pub key: String,
    pub value: JsonValue,
    pub raw: &'a str,
}

impl JsonValue {
    /// The value as a number (an integer or a float), if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            JsonValue::Int(i) => Some(i as f64),
            JsonValue::Float(x) => Some(x),
            _ => None,
        }
    }
}

/// Why a line is not a JSON object: what was expected, at which byte (counted from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at column {}", self.message, self.column)
    }
}

impl std::error::Error for SyntaxError {}

/// The fields of one line, in order (a key given twice keeps its last value, in the place of
/// its first). The line must hold one JSON object and nothing else but whitespace.
pub fn parse_object(line: &str) -> Result<Vec<Field<'_>>, SyntaxError> {
    object(line, false)
}

/// [`parse_object`]'s top-level fields, but a nested value (an array or object) is only
/// bracket-matched, not checked: for a first read that needs the fields' kinds of lines a
/// second read parses fully (the readers of other trainers' dumps). A nested value's syntax
/// errors are left to that read.
pub fn parse_object_shallow(line: &str) -> Result<Vec<Field<'_>>, SyntaxError> {
    object(line, true)
}

fn object(line: &str, shallow: bool) -> Result<Vec<Field<'_>>, SyntaxError> {
    let mut p = Parser {
        text: line,
        pos: 0,
        shallow,
    };
    p.skip_ws();
    if p.peek() != Some(b'{') {
        return Err(p.error("expected a JSON object (`{`)"));
    }
    let fields = p.object_fields()?;
    p.skip_ws();
    if p.pos != line.len() {
        return Err(p.error("unexpected text after the object"));
    }
    Ok(fields)
}

/// A whole JSON value as a tree, in the same dialect (bare `NaN`, `Infinity`): what the
/// readers of other trainers' dumps walk (nested token lists, message graphs).
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    /// A non-empty array of integers only (each fits an `i64`), kept compact: token lists
    /// are most of a trainer dump's bytes, and a tree node per token would cost four times
    /// the memory and an allocation per list grown item by item.
    Ints(Vec<i64>),
    /// A non-empty array of numbers, at least one of them not an integer (`NaN` and the
    /// infinities included), each as [`Json::as_f64`] converts it: log-prob lists.
    Floats(Vec<f64>),
    /// Keys in order as written (a key given twice keeps both; [`Json::get`] finds the last).
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The value of `key` in an object (the last one written), else `None`.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(fields) => fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value at a path of object keys.
    pub fn at(&self, path: &[&str]) -> Option<&Json> {
        path.iter().try_fold(self, |v, k| v.get(k))
    }

    /// An array's items as trees (a compact array's made on the spot: the paths that want
    /// its numbers read [`Json::ints`] and [`Json::floats`] instead).
    pub fn as_array(&self) -> Option<std::borrow::Cow<'_, [Json]>> {
        use std::borrow::Cow;
        match self {
            Json::Array(items) => Some(Cow::Borrowed(items)),
            Json::Ints(v) => Some(Cow::Owned(v.iter().map(|&i| Json::Int(i)).collect())),
            Json::Floats(v) => Some(Cow::Owned(v.iter().map(|&x| Json::Float(x)).collect())),
            _ => None,
        }
    }

    /// The items of an array of integers, without a tree per item; `None` for any other
    /// value (an array holding anything but integers included).
    pub fn ints(&self) -> Option<&[i64]> {
        match self {
            Json::Ints(v) => Some(v),
            Json::Array(items) if items.is_empty() => Some(&[]),
            _ => None,
        }
    }

    /// The items of an array of numbers as f64 (integers converted as [`Json::as_f64`]
    /// does); `None` for any other value.
    pub fn floats(&self) -> Option<std::borrow::Cow<'_, [f64]>> {
        use std::borrow::Cow;
        match self {
            Json::Floats(v) => Some(Cow::Borrowed(v)),
            Json::Ints(v) => Some(Cow::Owned(v.iter().map(|&i| i as f64).collect())),
            Json::Array(items) if items.is_empty() => Some(Cow::Borrowed(&[])),
            _ => None,
        }
    }

    /// The one item of an array of one item, as a tree; `Err` gives the array's length
    /// (`None`: not an array).
    pub fn into_single(self) -> std::result::Result<Json, (Option<usize>, Json)> {
        match self {
            Json::Array(mut items) if items.len() == 1 => Ok(items.remove(0)),
            Json::Ints(v) if v.len() == 1 => Ok(Json::Int(v[0])),
            Json::Floats(v) if v.len() == 1 => Ok(Json::Float(v[0])),
            Json::Array(ref items) => Err((Some(items.len()), self)),
            Json::Ints(ref v) => Err((Some(v.len()), self)),
            Json::Floats(ref v) => Err((Some(v.len()), self)),
            other => Err((None, other)),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Json::Int(i) => Some(i),
            _ => None,
        }
    }

    /// A number (an integer or a float) as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Json::Int(i) => Some(i as f64),
            Json::Float(x) => Some(x),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Json::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// What kind of value it is, for messages ("an array", "a string", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Int(_) | Json::Float(_) => "a number",
            Json::Str(_) => "a string",
            Json::Array(_) | Json::Ints(_) | Json::Floats(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// The one element of an array of one element (`[x]`, as NeMo-RL's writer wraps every
/// value in a batch of one): `x` classified, with its text; `None` for anything else.
pub fn single_element(raw: &str) -> Option<(JsonValue, &str)> {
    let mut p = Parser {
        text: raw,
        pos: 0,
        shallow: true,
    };
    p.skip_ws();
    if p.peek() != Some(b'[') {
        return None;
    }
    p.pos += 1;
    p.skip_ws();
    let start = p.pos;
    let value = p.value(1).ok()?;
    let inner = &raw[start..p.pos];
    p.skip_ws();
    if p.peek() != Some(b']') {
        return None;
    }
    p.pos += 1;
    p.skip_ws();
    (p.pos == raw.len()).then_some((value, inner))
}

/// One step of a path into a JSON value: an object's key, or an array's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'k> {
    Key(&'k str),
    Index(usize),
}

/// The text of the value at `path` inside the JSON value `text`, exactly as written (for a
/// key given twice, its last value, as [`Json::get`] finds it); `None` when the path is not
/// there. For messages that show a nested value as the file wrote it (a tree holds `1e400`
/// and `Infinity` alike as inf).
pub fn raw_at<'a>(text: &'a str, path: &[Step<'_>]) -> Option<&'a str> {
    let mut p = Parser {
        text,
        pos: 0,
        shallow: false,
    };
    p.skip_ws();
    for step in path {
        match (*step, p.peek()?) {
            (Step::Key(want), b'{') => {
                p.pos += 1;
                let mut found = None;
                loop {
                    p.skip_ws();
                    if p.peek()? == b'}' {
                        break;
                    }
                    let key = p.string().ok()?;
                    p.skip_ws();
                    if p.peek()? != b':' {
                        return None;
                    }
                    p.pos += 1;
                    p.skip_ws();
                    let start = p.pos;
                    p.skip_value(1).ok()?;
                    if key == want {
                        found = Some(start);
                    }
                    p.skip_ws();
                    match p.peek()? {
                        b',' => p.pos += 1,
                        b'}' => break,
                        _ => return None,
                    }
                }
                p.pos = found?;
            }
            (Step::Index(want), b'[') => {
                p.pos += 1;
                for _ in 0..want {
                    p.skip_ws();
                    p.skip_value(1).ok()?;
                    p.skip_ws();
                    if p.peek()? != b',' {
                        return None;
                    }
                    p.pos += 1;
                }
                p.skip_ws();
                if p.peek()? == b']' {
                    return None;
                }
            }
            _ => return None,
        }
    }
    let start = p.pos;
    p.skip_value(1).ok()?;
    Some(&text[start..p.pos])
}

/// Check that `text` is one JSON value (surrounding whitespace allowed) without building
/// it: the errors [`parse_json`] would give, at the same columns.
pub fn check_json(text: &str) -> Result<(), SyntaxError> {
    let mut p = Parser {
        text,
        pos: 0,
        shallow: false,
    };
    p.skip_ws();
    p.skip_value(1)?;
    p.skip_ws();
    if p.pos != text.len() {
        return Err(p.error("unexpected text after the value"));
    }
    Ok(())
}

/// One JSON value (the whole text, surrounding whitespace allowed) as a tree.
pub fn parse_json(text: &str) -> Result<Json, SyntaxError> {
    let mut p = Parser {
        text,
        pos: 0,
        shallow: false,
    };
    p.skip_ws();
    let value = p.tree(1)?;
    p.skip_ws();
    if p.pos != text.len() {
        return Err(p.error("unexpected text after the value"));
    }
    Ok(value)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    /// Find the end of nested values by their brackets only, without checking what is
    /// inside ([`parse_object_shallow`]).
    shallow: bool,
}

/// Nesting deeper than this is refused rather than risk the stack.
const MAX_DEPTH: usize = 512;

impl<'a> Parser<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    fn error(&self, message: &str) -> SyntaxError {
        let found = match self.text[self.pos..].chars().next() {
            None => "the end of the line".to_string(),
            Some(c) => format!("`{c}`"),
        };
        SyntaxError {
            column: self.pos + 1,
            message: format!("{message}, found {found}"),
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8, what: &str) -> Result<(), SyntaxError> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// An object's key (at its opening quote) and the `:` after it, with the whitespace
    /// around that.
    fn key(&mut self) -> Result<String, SyntaxError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a key in double quotes"));
        }
        let key = self.string()?;
        self.skip_ws();
        self.expect(b':', "expected `:` after the key")?;
        self.skip_ws();
        Ok(key)
    }

    /// The top-level object's fields (at `{`).
    fn object_fields(&mut self) -> Result<Vec<Field<'a>>, SyntaxError> {
        self.pos += 1;
        let mut fields: Vec<Field<'a>> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(fields);
        }
        loop {
            self.skip_ws();
            let key = self.key()?;
            let start = self.pos;
            let value = self.value(1)?;
            let raw = &self.text[start..self.pos];
            match fields.iter_mut().find(|f| f.key == key) {
                Some(field) => (field.value, field.raw) = (value, raw),
                None => fields.push(Field { key, value, raw }),
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(fields);
                }
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    /// One value (at its first byte), classified.
    fn value(&mut self, depth: usize) -> Result<JsonValue, SyntaxError> {
        match self.peek() {
            Some(b'"') => Ok(JsonValue::Str(self.string()?)),
            Some(b'{' | b'[') if self.shallow => {
                self.skip_brackets()?;
                Ok(JsonValue::Json)
            }
            Some(b'{' | b'[') => {
                self.skip_nested(depth)?;
                Ok(JsonValue::Json)
            }
            Some(b't') => self.word("true", JsonValue::Bool(true)),
            Some(b'f') => self.word("false", JsonValue::Bool(false)),
            Some(b'n') => self.word("null", JsonValue::Null),
            Some(b'N') => self.word("NaN", JsonValue::Float(f64::NAN)),
            Some(b'I') => self.word("Infinity", JsonValue::Float(f64::INFINITY)),
            Some(b'-') if self.text[self.pos..].starts_with("-Infinity") => {
                self.word("-Infinity", JsonValue::Float(f64::NEG_INFINITY))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error("expected a value")),
        }
    }

    fn word(&mut self, word: &str, value: JsonValue) -> Result<JsonValue, SyntaxError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("expected a value"))
        }
    }

    /// A number (at its first byte), classified and converted.
    fn number(&mut self) -> Result<JsonValue, SyntaxError> {
        if let Some(value) = self.short_number() {
            return Ok(value);
        }
        let start = self.pos;
        let integer = self.scan_number()?;
        let text = &self.text[start..self.pos];
        if integer && let Ok(i) = text.parse::<i64>() {
            return Ok(JsonValue::Int(i));
        }
        // Rust's parser takes every JSON number (a huge one becomes ±inf, as in Python's
        // float()).
        text.parse::<f64>()
            .map(JsonValue::Float)
            .map_err(|_| SyntaxError {
                column: start + 1,
                message: format!("`{text}` is not a number"),
            })
    }

    /// The common forms of a number converted in the one scan, as the rest of
    /// [`Parser::number`] would convert them: an integer of at most 18 digits, and `-?D.D`
    /// (no exponent) whose digits make an integer m ≤ 2^53 with k ≤ 22 of them after the
    /// point. m and 10^k are then exact doubles, so m / 10^k is the correctly rounded value
    /// (Clinger's fast path, which Rust's parser takes too). `None`, with the position
    /// unchanged, for anything else (a long mantissa, an exponent, a syntax error).
    fn short_number(&mut self) -> Option<JsonValue> {
        const POW10: [f64; 23] = [
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
            1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
        ];
        let b = self.bytes();
        let negative = b.get(self.pos) == Some(&b'-');
        let first = self.pos + usize::from(negative);
        let mut i = first;
        let mut m: u64 = 0;
        while let Some(&d) = b.get(i)
            && d.is_ascii_digit()
            && i - first < 18
        {
            m = m * 10 + u64::from(d - b'0');
            i += 1;
        }
        let int_digits = i - first;
        // no digit, a leading zero (`01`: the full path words the error), or a longer one
        if int_digits == 0
            || (int_digits > 1 && b[first] == b'0')
            || b.get(i).is_some_and(u8::is_ascii_digit)
        {
            return None;
        }
        match b.get(i) {
            Some(b'e' | b'E') => None,
            Some(b'.') => {
                let point = i + 1;
                i = point;
                while let Some(&d) = b.get(i)
                    && d.is_ascii_digit()
                    && int_digits + (i - point) < 18
                {
                    m = m * 10 + u64::from(d - b'0');
                    i += 1;
                }
                let k = i - point;
                if k == 0
                    || matches!(b.get(i), Some(b'e' | b'E' | b'0'..=b'9'))
                    || m > 1 << 53
                    || k > 22
                {
                    return None;
                }
                let x = m as f64 / POW10[k];
                self.pos = i;
                Some(JsonValue::Float(if negative { -x } else { x }))
            }
            _ => {
                // at most 18 digits: an i64
                let v = m as i64;
                self.pos = i;
                Some(JsonValue::Int(if negative { -v } else { v }))
            }
        }
    }

    /// Past a number by JSON's grammar, `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`,
    /// without converting it (a nested value being skipped); whether it is an integer.
    fn scan_number(&mut self) -> Result<bool, SyntaxError> {
        let digits = |p: &mut Self| {
            let from = p.pos;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.pos += 1;
            }
            p.pos > from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        if self.peek() == Some(b'0') {
            self.pos += 1;
        } else if !digits(self) {
            return Err(self.error("expected a digit"));
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            integer = false;
            if !digits(self) {
                return Err(self.error("expected a digit after `.`"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            integer = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        Ok(integer)
    }

    /// A string (at its opening quote), unescaped.
    fn string(&mut self) -> Result<String, SyntaxError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = &self.text[self.pos..];
            let Some(stop) = rest.find(['"', '\\']) else {
                self.pos = self.text.len();
                return Err(self.error("unterminated string"));
            };
            let chunk = &rest[..stop];
            if let Some(bad) = chunk.find(|c: char| (c as u32) < 0x20) {
                self.pos += bad;
                return Err(self.error("control character in a string"));
            }
            out.push_str(chunk);
            self.pos += stop;
            if self.peek() == Some(b'"') {
                self.pos += 1;
                return Ok(out);
            }
            // a backslash escape
            self.pos += 1;
            let Some(e) = self.peek() else {
                return Err(self.error("unterminated escape"));
            };
            self.pos += 1;
            match e {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let high = self.hex4()?;
                    let c = if (0xD800..0xDC00).contains(&high)
                        && self.text[self.pos..].starts_with("\\u")
                    {
                        let save = self.pos;
                        self.pos += 2;
                        let low = self.hex4()?;
                        if (0xDC00..0xE000).contains(&low) {
                            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                        } else {
                            // not a pair: a lone surrogate, then another escape
                            self.pos = save;
                            None
                        }
                    } else {
                        char::from_u32(high)
                    };
                    // Python writes lone surrogates as \udXXX; they are not text
                    out.push(c.unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                _ => {
                    self.pos -= 1;
                    return Err(self.error("invalid escape"));
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let digits = self.text.get(self.pos..self.pos + 4);
        match digits.and_then(|d| u32::from_str_radix(d, 16).ok()) {
            Some(v) if digits.is_some_and(|d| d.bytes().all(|b| b.is_ascii_hexdigit())) => {
                self.pos += 4;
                Ok(v)
            }
            _ => Err(self.error("expected 4 hex digits after \\u")),
        }
    }

    /// One value (at its first byte) as a tree.
    fn tree(&mut self, depth: usize) -> Result<Json, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let (open, close) = match self.peek() {
            Some(b'{') => (b'{', b'}'),
            Some(b'[') => (b'[', b']'),
            _ => {
                return Ok(match self.value(depth)? {
                    JsonValue::Null => Json::Null,
                    JsonValue::Bool(b) => Json::Bool(b),
                    JsonValue::Int(i) => Json::Int(i),
                    JsonValue::Float(x) => Json::Float(x),
                    JsonValue::Str(s) => Json::Str(s),
                    JsonValue::Json => unreachable!("value() classifies only scalars here"),
                });
            }
        };
        if open == b'['
            && depth < MAX_DEPTH
            && let Some(numbers) = self.number_array(depth)?
        {
            return Ok(numbers);
        }
        self.pos += 1;
        let (mut items, mut fields) = (Vec::new(), Vec::new());
        self.skip_ws();
        if self.peek() != Some(close) {
            loop {
                self.skip_ws();
                let key = if open == b'{' {
                    Some(self.key()?)
                } else {
                    None
                };
                let value = self.tree(depth + 1)?;
                match key {
                    Some(k) => fields.push((k, value)),
                    None => items.push(value),
                }
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(c) if c == close => break,
                    _ => {
                        return Err(self.error(if open == b'{' {
                            "expected `,` or `}`"
                        } else {
                            "expected `,` or `]`"
                        }));
                    }
                }
            }
        }
        self.pos += 1;
        Ok(if open == b'{' {
            Json::Object(fields)
        } else {
            Json::Array(items)
        })
    }

    /// An array (at `[`) whose items are all numbers, as [`Json::Ints`] or [`Json::Floats`];
    /// `None`, with the position unchanged, when it is empty or an item is anything else
    /// (the general path reads it, and words any error). A syntax error inside a number, or
    /// between items, is the one the general path gives at the same place.
    fn number_array(&mut self, depth: usize) -> Result<Option<Json>, SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        let mut ints: Vec<i64> = Vec::new();
        let mut floats: Option<Vec<f64>> = None;
        loop {
            self.skip_ws();
            if !matches!(self.peek(), Some(b'-' | b'0'..=b'9' | b'N' | b'I')) {
                self.pos = start;
                return Ok(None);
            }
            match (self.value(depth + 1)?, &mut floats) {
                (JsonValue::Int(i), None) => ints.push(i),
                (JsonValue::Int(i), Some(f)) => f.push(i as f64),
                (JsonValue::Float(x), None) => {
                    let mut f: Vec<f64> = ints.iter().map(|&i| i as f64).collect();
                    f.reserve(ints.capacity().saturating_sub(f.len()));
                    f.push(x);
                    floats = Some(f);
                }
                (JsonValue::Float(x), Some(f)) => f.push(x),
                // a word that is not a number (`Nonsense`) is refused by `value` above
                _ => {
                    self.pos = start;
                    return Ok(None);
                }
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Some(match floats {
                        Some(f) => Json::Floats(f),
                        None => Json::Ints(ints),
                    }));
                }
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    /// Skip one value (at its first byte), checking its syntax without converting numbers or
    /// building strings: the inside of a nested value a line's reader does not classify.
    fn skip_value(&mut self, depth: usize) -> Result<(), SyntaxError> {
        match self.peek() {
            Some(b'{' | b'[') => self.skip_nested(depth),
            Some(b'"') => self.skip_string(),
            Some(b'-' | b'0'..=b'9') if !self.text[self.pos..].starts_with("-Infinity") => {
                self.scan_number().map(|_| ())
            }
            _ => self.value(depth).map(|_| ()),
        }
    }

    /// Past a string (at its opening quote), checking its escapes, without unescaping it.
    fn skip_string(&mut self) -> Result<(), SyntaxError> {
        self.pos += 1;
        loop {
            let rest = &self.bytes()[self.pos..];
            let Some(stop) = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            else {
                self.pos = self.text.len();
                return Err(self.error("unterminated string"));
            };
            self.pos += stop;
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => {
                            self.pos += 1;
                            self.hex4()?;
                        }
                        None => return Err(self.error("unterminated escape")),
                        _ => return Err(self.error("invalid escape")),
                    }
                }
                _ => return Err(self.error("control character in a string")),
            }
        }
    }

    /// Past an array or object (at `[` or `{`) by counting its brackets outside strings.
    fn skip_brackets(&mut self) -> Result<(), SyntaxError> {
        let bytes = self.bytes();
        let mut depth = 0usize;
        let mut i = self.pos;
        while i < bytes.len() {
            match bytes[i] {
                b'[' | b'{' => depth += 1,
                b']' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        self.pos = i + 1;
                        return Ok(());
                    }
                }
                b'"' => {
                    i += 1;
                    while i < bytes.len() && bytes[i] != b'"' {
                        // an escape's next byte is never the closing quote
                        i += if bytes[i] == b'\\' { 2 } else { 1 };
                    }
                }
                _ => {}
            }
            i += 1;
        }
        self.pos = bytes.len();
        Err(self.error("unterminated array or object"))
    }

    /// Skip an array or object (at `[` or `{`), checking its syntax.
    fn skip_nested(&mut self, depth: usize) -> Result<(), SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let (open, close) = match self.peek() {
            Some(b'{') => (b'{', b'}'),
            _ => (b'[', b']'),
        };
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(close) {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if open == b'{' {
                self.key()?;
            }
            self.skip_value(depth + 1)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {
                    return Err(self.error(if open == b'{' {
                        "expected `,` or `}`"
                    } else {
                        "expected `,` or `]`"
                    }));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::JsonValue::*;
    use super::*;

    fn values(line: &str) -> Vec<JsonValue> {
        parse_object(line)
            .unwrap()
            .into_iter()
            .map(|f| f.value)
            .collect()
    }

    #[test]
    fn a_nested_value_is_found_as_written() {
        let text =
            r#"[{"rewards": {"a": {"score": 1e400, "weight": 1}, "b": {"score": Infinity}}}, {}]"#;
        let at = |path: &[Step<'_>]| raw_at(text, path);
        let score = |name| {
            [
                Step::Index(0),
                Step::Key("rewards"),
                Step::Key(name),
                Step::Key("score"),
            ]
        };
        assert_eq!(at(&score("a")), Some("1e400"));
        assert_eq!(at(&score("b")), Some("Infinity"));
        assert_eq!(at(&score("c")), None);
        assert_eq!(at(&[Step::Index(1)]), Some("{}"));
        assert_eq!(at(&[Step::Index(2)]), None);
        assert_eq!(at(&[Step::Key("x")]), None);
        // a key given twice: its last value
        assert_eq!(
            raw_at(r#"{"k": 1, "k": [2]}"#, &[Step::Key("k")]),
            Some("[2]")
        );
    }

    #[test]
    fn a_shallow_read_matches_brackets_only() {
        let line = r#"{"a": [1, "]}", {"b": [2]}], "c": 3.5, "d": [x y]}"#;
        let f = parse_object_shallow(line).unwrap();
        assert_eq!(f[0].raw, r#"[1, "]}", {"b": [2]}]"#);
        assert_eq!((f[1].key.as_str(), &f[1].value), ("c", &Float(3.5)));
        // the inside is not checked: the full read refuses it
        assert_eq!(f[2].raw, "[x y]");
        assert!(parse_object(line).is_err());
        assert!(parse_object_shallow(r#"{"a": [1, 2"#).is_err());
    }

    #[test]
    fn a_batch_of_one_is_unwrapped() {
        assert_eq!(single_element("[1.5]"), Some((Float(1.5), "1.5")));
        assert_eq!(single_element(" [ [1, 2] ] "), Some((Json, "[1, 2]")));
        assert_eq!(single_element("[1, 2]"), None);
        assert_eq!(single_element("[]"), None);
        assert_eq!(single_element("1"), None);
    }

    #[test]
    fn a_tree_keeps_nesting_nan_and_key_order() {
        let v = parse_json(r#"{"a": [1, 2.5, NaN, -Infinity], "b": {"c": "x\n", "d": null}, "e": [[1], []], "b": true}"#).unwrap();
        // an array of numbers is kept compact, its integers as f64 beside a float
        let a = v.get("a").unwrap().as_array().unwrap();
        assert_eq!(a[0], super::Json::Float(1.0));
        assert_eq!(a[1].as_f64(), Some(2.5));
        assert!(a[2].as_f64().unwrap().is_nan());
        assert_eq!(a[3].as_f64(), Some(f64::NEG_INFINITY));
        assert_eq!(v.get("b"), Some(&super::Json::Bool(true)));
        assert_eq!(
            v.at(&["e"]).unwrap().as_array().unwrap()[1],
            super::Json::Array(vec![])
        );
        let super::Json::Object(fields) = &v else {
            panic!()
        };
        assert_eq!(fields[1].1.at(&["c"]).unwrap().as_str(), Some("x\n"));
        assert!(
            parse_json("[1, 2")
                .unwrap_err()
                .message
                .contains("expected `,` or `]`")
        );
        assert!(parse_json("[1] x").is_err());
        assert_eq!(parse_json(" 3 ").unwrap(), super::Json::Int(3));
    }

    #[test]
    fn arrays_of_numbers_are_compact() {
        use super::Json as J;
        assert_eq!(parse_json("[1, -2, 3]").unwrap(), J::Ints(vec![1, -2, 3]));
        assert_eq!(
            parse_json("[[7]]").unwrap(),
            J::Array(vec![J::Ints(vec![7])])
        );
        let f = parse_json("[1, -0.5, NaN]").unwrap();
        assert_eq!(f.floats().unwrap()[..2], [1.0, -0.5]);
        assert_eq!(f.ints(), None);
        assert_eq!(J::Ints(vec![4]).floats().unwrap()[..], [4.0]);
        // not all numbers: the general tree
        assert_eq!(
            parse_json("[1, \"a\"]").unwrap(),
            J::Array(vec![J::Int(1), J::Str("a".into())])
        );
        assert_eq!(parse_json("[]").unwrap().ints(), Some(&[][..]));
        // the errors are the general path's, at the same column
        for (text, column) in [("[1, 2", 6), ("[1,]", 4), ("[1, 02]", 6), ("[1, Nan]", 5)] {
            assert_eq!(parse_json(text).unwrap_err().column, column, "{text}");
        }
        assert_eq!(J::Ints(vec![5]).into_single(), Ok(J::Int(5)));
        assert_eq!(
            J::Floats(vec![1.0, 2.5]).into_single().map_err(|e| e.0),
            Err(Some(2))
        );
    }

    #[test]
    fn reads_a_line_as_verl_writes_it() {
        // json.dumps({...}, ensure_ascii=False): ", " and ": " separators, NaN as a bare token
        let line = r#"{"input": "Q: 1+1? \"é\"", "output": "2\n", "gts": null, "score": NaN, "step": 3, "acc": true, "pred": [1, 2.5, NaN], "meta": {"a": "}"}}"#;
        let fields = parse_object(line).unwrap();
        let keys: Vec<&str> = fields.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "input", "output", "gts", "score", "step", "acc", "pred", "meta"
            ]
        );
        let v = values(line);
        assert_eq!(v[0], Str("Q: 1+1? \"é\"".into()));
        assert_eq!(fields[0].raw, r#""Q: 1+1? \"é\"""#);
        assert_eq!(v[1], Str("2\n".into()));
        assert_eq!(v[2], Null);
        assert!(matches!(v[3], Float(x) if x.is_nan()));
        assert_eq!(fields[3].raw, "NaN");
        assert_eq!(v[4], Int(3));
        assert_eq!(v[5], Bool(true));
        assert_eq!((&v[6], fields[6].raw), (&Json, "[1, 2.5, NaN]"));
        assert_eq!((&v[7], fields[7].raw), (&Json, r#"{"a": "}"}"#));
    }

    #[test]
    fn numbers_and_infinities() {
        let f = values(
            r#"{"a": -0.5, "b": 1e3, "c": Infinity, "d": -Infinity, "e": -7, "f": 99999999999999999999}"#,
        );
        assert_eq!(f[0], Float(-0.5));
        assert_eq!(f[1], Float(1000.0));
        assert_eq!(f[2], Float(f64::INFINITY));
        assert_eq!(f[3], Float(f64::NEG_INFINITY));
        assert_eq!(f[4], Int(-7));
        assert_eq!(f[5], Float(1e20));
        assert_eq!(f[1].as_f64(), Some(1000.0));
        assert_eq!(f[4].as_f64(), Some(-7.0));
        assert_eq!(Str("1".into()).as_f64(), None);
    }

    #[test]
    fn short_numbers_convert_as_the_full_parser_does() {
        // generated texts of every short form against Rust's own parser, bit for bit
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut texts: Vec<String> = [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1.5",
            "-2.25",
            "9007199254740992.0",
            "9007199254740993.0",
            "0.1",
            "123456789012345678",
            "-123456789012345678",
            "0.30000000000000004",
            "-0.6931471805599453",
            "1.0000000000000002",
            "3.14159",
            "-1.2345",
        ]
        .map(String::from)
        .to_vec();
        for _ in 0..20_000 {
            let r = next();
            let int = (r >> 8) % 10u64.pow(1 + (r % 17) as u32);
            let frac = next() % 10u64.pow(1 + (r >> 60) as u32 % 12);
            let sign = if r & 1 == 1 { "-" } else { "" };
            let width = 1 + (r >> 40) as usize % 20;
            texts.push(format!("{sign}{int}"));
            texts.push(format!("{sign}{int}.{frac}"));
            texts.push(format!("{sign}0.{frac:0>width$}"));
        }
        let mut short = 0;
        for t in &texts {
            let mut p = Parser {
                text: t,
                pos: 0,
                shallow: false,
            };
            let Some(value) = p.short_number() else {
                continue;
            };
            short += 1;
            assert_eq!(p.pos, t.len(), "{t}: the whole number is read");
            match (value, t.parse::<i64>(), t.parse::<f64>()) {
                (Int(v), Ok(i), _) => assert_eq!(v, i, "{t}"),
                (Float(x), Err(_), Ok(y)) => assert_eq!(x.to_bits(), y.to_bits(), "{t}"),
                (other, _, _) => panic!("{t}: {other:?}"),
            }
        }
        assert!(
            short > texts.len() / 2,
            "the short path takes most: {short}"
        );
        // the forms left to the full path, position unchanged
        for t in [
            "01",
            "1e5",
            "1.5E3",
            "1.",
            "-",
            "x",
            "1234567890123456789",
            "0.12345678901234567",
            "99999999999999999.9",
        ] {
            let mut p = Parser {
                text: t,
                pos: 0,
                shallow: false,
            };
            assert_eq!(p.short_number(), None, "{t}");
            assert_eq!(p.pos, 0);
        }
    }

    #[test]
    fn escapes_and_surrogate_pairs() {
        assert_eq!(
            values(r#"{"s": "\u00e9\ud83d\ude00\t\/"}"#),
            [Str("é😀\t/".into())]
        );
        // a lone surrogate (Python writes them) becomes U+FFFD
        assert_eq!(values(r#"{"s": "\ud800x"}"#), [Str("\u{fffd}x".into())]);
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        let f = parse_object(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        let f: Vec<(&str, &JsonValue, &str)> = f
            .iter()
            .map(|f| (f.key.as_str(), &f.value, f.raw))
            .collect();
        assert_eq!(f, vec![("a", &Int(3), "3"), ("b", &Int(2), "2")]);
    }

    #[test]
    fn malformed_lines_name_the_column() {
        for (line, column) in [
            (r#"{"a": 1"#, 8),
            (r#"{"a" 1}"#, 6),
            (r#"{"a": 01}"#, 8),
            (r#"{"a": nan}"#, 7),
            (r#"{"a": "x}"#, 10),
            (r#"{"a": [1, 2}"#, 12),
            (r#"[1, 2]"#, 1),
            (r#"{"a": 1} x"#, 10),
            (r#"{a: 1}"#, 2),
            (r#"{"a": "\x"}"#, 9),
            (r#"{"a": 1.}"#, 9),
            ("", 1),
        ] {
            let e = parse_object(line).unwrap_err();
            assert_eq!(e.column, column, "{line}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let line = format!("{{\"a\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_object(&line).unwrap_err().message.contains("deeply"));
    }
}
