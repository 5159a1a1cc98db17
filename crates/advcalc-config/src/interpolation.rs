//! OmegaConf interpolation, as `OmegaConf.to_container(cfg, resolve=True)` resolves it: verl
//! loads its configs with OmegaConf, a Hydra run saves them with their `${...}` unresolved,
//! and recipes use them, so advcalc resolves them the same way before reading a key.
//!
//! Supported: absolute `${a.b.c}` (anywhere in the file, `${l.0}` and `${l[0]}` into lists),
//! relative `${.x}` / `${..x}`, interpolation inside a larger string (`run_${a}` inserts
//! Python's `str()` of the value: `True`, `None`, `1e-05`), nested ones (`${a.${k}}`,
//! `${oc.env:X,${a}}`), the escape `\${`, and the resolvers `oc.env` (a string, or the
//! default's `str()`, `null` staying null), `oc.decode` and `oc.select`. Any other resolver
//! is an error that names it; a missing key or a cycle is an error naming the chain.
//!
//! Resolution is lazy in the same sense as OmegaConf's: only the nodes asked for (the
//! sections advcalc reads) and what they point to are resolved, so an unset environment
//! variable in `trainer:` does not stop advcalc (it would stop verl, at its own access).

use super::value::Value;

/// Why an interpolation did not resolve: `at` is the dotted key holding it, `chain` the keys
/// followed to get there (the first is `at`), `failure` what kind of failure it is (for the
/// caller's hint: never read from the message).
#[derive(Debug, Clone, PartialEq)]
pub struct InterpolationError {
    /// The keys followed, the first holding the interpolation.
    pub chain: Vec<String>,
    /// What went wrong, as OmegaConf says it.
    pub message: String,
    /// The kind of failure (for the caller's hint).
    pub failure: Failure,
}

/// What kind of failure stopped an interpolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A key named by `${...}` does not exist.
    MissingKey,
    /// `oc.env` of an unset variable, without a default.
    MissingVariable,
    /// A resolver advcalc does not implement.
    UnsupportedResolver,
    /// Anything else: a cycle, bad syntax, bad resolver arguments, limits.
    Other,
}

/// A failure inside the resolver: its kind and message.
struct Fail {
    failure: Failure,
    message: String,
}

impl Fail {
    fn new(failure: Failure, message: String) -> Self {
        Fail { failure, message }
    }
}

impl From<String> for Fail {
    fn from(message: String) -> Self {
        Fail::new(Failure::Other, message)
    }
}

impl From<&str> for Fail {
    fn from(message: &str) -> Self {
        Fail::new(Failure::Other, message.to_string())
    }
}

impl InterpolationError {
    /// The dotted key whose value failed.
    pub fn at(&self) -> &str {
        self.chain.first().map_or("", String::as_str)
    }
}

type Res<T> = Result<T, String>;

/// Environment lookups go through this, so tests need not touch the process environment.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The subtree at `path` of `root` with every interpolation in it resolved.
pub fn resolve(root: &Value, path: &[String], env: Env<'_>) -> Result<Value, InterpolationError> {
    let mut r = Resolver {
        root,
        env,
        stack: Vec::new(),
    };
    r.node(path)
        .map_err(|Fail { failure, message }| InterpolationError {
            chain: r.stack.clone(),
            message,
            failure,
        })
}

/// Whether a string holds an interpolation OmegaConf would resolve.
pub fn has_interpolation(s: &str) -> bool {
    s.contains("${")
}

/// The resolver's results: a failure knows its kind.
type Resolving<T> = Result<T, Fail>;

struct Resolver<'a> {
    root: &'a Value,
    env: Env<'a>,
    /// The dotted keys being resolved, outermost first (for cycles and messages).
    stack: Vec<String>,
}

impl Resolver<'_> {
    fn node(&mut self, path: &[String]) -> Resolving<Value> {
        let raw = lookup(self.root, path).ok_or_else(|| {
            Fail::new(
                Failure::MissingKey,
                format!("interpolation key `{}` not found", path.join(".")),
            )
        })?;
        match raw {
            Value::Str(s) if has_interpolation(s) => {
                let dotted = path.join(".");
                if let Some(i) = self.stack.iter().position(|p| *p == dotted) {
                    let mut cycle = self.stack[i..].to_vec();
                    cycle.push(dotted);
                    return Err(format!("recursive interpolation: {}", cycle.join(" -> ")).into());
                }
                self.stack.push(dotted);
                let s = s.clone();
                let value = self.string(&s, path)?;
                self.stack.pop();
                Ok(value)
            }
            Value::Map(m) => {
                let keys: Vec<String> = m.keys().cloned().collect();
                let mut out = super::value::Map::new();
                for k in keys {
                    let mut p = path.to_vec();
                    p.push(k.clone());
                    out.insert(k, self.node(&p)?);
                }
                Ok(Value::Map(out))
            }
            Value::Seq(items) => {
                let n = items.len();
                let mut out = Vec::with_capacity(n);
                for i in 0..n {
                    let mut p = path.to_vec();
                    p.push(i.to_string());
                    out.push(self.node(&p)?);
                }
                Ok(Value::Seq(out))
            }
            other => Ok(other.clone()),
        }
    }

    /// A string value: one interpolation alone keeps the target's type; anything else is a
    /// string built from the parts.
    fn string(&mut self, s: &str, at: &[String]) -> Resolving<Value> {
        // bounded, so that no file can exhaust the stack of the recursive resolver
        if self.stack.len() > MAX_CHAIN {
            return Err(format!("a chain of more than {MAX_CHAIN} interpolations").into());
        }
        if nesting(s) > MAX_NESTING {
            return Err(format!("interpolations nested more than {MAX_NESTING} deep").into());
        }
        let parts = parse_top(s)?;
        self.concat(&parts, at)
    }

    fn concat(&mut self, parts: &[Piece], at: &[String]) -> Resolving<Value> {
        if let [Piece::Interp(i)] = parts {
            return self.interp(i, at);
        }
        let mut out = String::new();
        for part in parts {
            match part {
                Piece::Text(t) => out.push_str(t),
                Piece::Interp(i) => out.push_str(&self.interp(i, at)?.py_str()),
            }
        }
        Ok(Value::Str(out))
    }

    fn interp(&mut self, i: &Interp, at: &[String]) -> Resolving<Value> {
        match i {
            Interp::Node(key) => {
                let key = self.concat(key, at)?.py_str();
                let path = target(&key, at)?;
                let value = self.node(&path)?;
                if value == Value::Str("???".into()) {
                    return Err(format!(
                        "`{}` is a mandatory value (`???`) that was never set",
                        path.join(".")
                    )
                    .into());
                }
                Ok(value)
            }
            Interp::Resolver { name, args } => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(self.arg(a, at)?);
                }
                self.call(name, values, at)
            }
        }
    }

    fn arg(&mut self, arg: &Arg, at: &[String]) -> Resolving<Value> {
        match arg {
            Arg::Quoted(parts) => Ok(Value::Str(self.concat_str(parts, at)?)),
            Arg::Plain(parts) => match parts.as_slice() {
                [Piece::Interp(_)] => self.concat(parts, at),
                [Piece::Text(t)] => Ok(primitive(t.trim())),
                [] => Ok(Value::Str(String::new())),
                _ => Ok(Value::Str(self.concat_str(parts, at)?.trim().to_string())),
            },
        }
    }

    fn concat_str(&mut self, parts: &[Piece], at: &[String]) -> Resolving<String> {
        let mut out = String::new();
        for part in parts {
            match part {
                Piece::Text(t) => out.push_str(t),
                Piece::Interp(i) => out.push_str(&self.interp(i, at)?.py_str()),
            }
        }
        Ok(out)
    }

    fn call(&mut self, name: &str, args: Vec<Value>, at: &[String]) -> Resolving<Value> {
        match name {
            "oc.env" => {
                let (key, default) = match args.as_slice() {
                    [key] => (key.py_str(), None),
                    [key, default] => (key.py_str(), Some(default.clone())),
                    _ => return Err("oc.env takes a variable name and an optional default".into()),
                };
                match ((self.env)(&key), default) {
                    (Some(v), _) => Ok(Value::Str(v)),
                    (None, Some(Value::Null)) => Ok(Value::Null),
                    (None, Some(d)) => Ok(Value::Str(d.py_str())),
                    (None, None) => Err(Fail::new(
                        Failure::MissingVariable,
                        format!("environment variable `{key}` not found"),
                    )),
                }
            }
            "oc.decode" => match args.as_slice() {
                [Value::Null] => Ok(Value::Null),
                [Value::Str(s)] => {
                    let t = s.as_str();
                    if t.starts_with('[') || t.starts_with('{') {
                        return Err(format!(
                            "oc.decode of a list or dict (`{t}`) is not supported by advcalc"
                        )
                        .into());
                    }
                    Ok(decode(t))
                }
                [other] => Err(format!(
                    "`oc.decode` can only take strings or None as input, but `{}` is not a string",
                    other.py_str()
                )
                .into()),
                _ => Err("oc.decode takes one argument".into()),
            },
            "oc.select" => {
                let (key, default) = match args.as_slice() {
                    [key] => (key.py_str(), Value::Null),
                    [key, default] => (key.py_str(), default.clone()),
                    _ => return Err("oc.select takes a key and an optional default".into()),
                };
                let path = target(&key, at)?;
                match lookup(self.root, &path) {
                    Some(_) => self.node(&path),
                    None => Ok(default),
                }
            }
            other => Err(Fail::new(
                Failure::UnsupportedResolver,
                format!(
                    "unsupported interpolation resolver `{other}` (advcalc resolves oc.env, oc.decode and oc.select)"
                ),
            )),
        }
    }
}

/// Longest chain of interpolations through other keys.
const MAX_CHAIN: usize = 200;
/// Deepest `${` inside `${`.
const MAX_NESTING: usize = 32;

/// How deep `${` nest in `s` (an upper bound: quotes and escapes are not considered).
fn nesting(s: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && b.get(i + 1) == Some(&b'{') {
            depth += 1;
            max = max.max(depth);
            i += 1;
        } else if b[i] == b'}' {
            depth = depth.saturating_sub(1);
        }
        i += 1;
    }
    max
}

/// The node at a path; list items by index.
fn lookup<'v>(root: &'v Value, path: &[String]) -> Option<&'v Value> {
    let parts: Vec<&str> = path.iter().map(String::as_str).collect();
    root.at(&parts)
}

/// The absolute path an interpolation key names, seen from the node at `at`. OmegaConf:
/// `.x` is a sibling of the node, each further dot one level up.
fn target(key: &str, at: &[String]) -> Res<Vec<String>> {
    // `a[0].b` is `a.0.b`
    let key = key.replace('[', ".").replace(']', "");
    let dots = key.chars().take_while(|&c| c == '.').count();
    let rest = &key[dots..];
    let mut path: Vec<String> = if dots == 0 {
        Vec::new()
    } else {
        // the container holding the node, then one level up per extra dot
        let up = dots; // the node itself plus dots - 1 levels
        if up > at.len() {
            return Err(format!(
                "relative interpolation `${{{key}}}` goes above the top of the file"
            ));
        }
        at[..at.len() - up].to_vec()
    };
    if rest.is_empty() {
        return Err(format!("interpolation key `{key}` names no key"));
    }
    for part in rest.split('.') {
        if part.is_empty() {
            return Err(format!("interpolation key `{key}` has an empty part"));
        }
        path.push(part.to_string());
    }
    Ok(path)
}

/// OmegaConf's grammar primitives for an unquoted resolver argument: null, true/false (any
/// case), integers and floats (underscores between digits), else the text as a string.
fn primitive(t: &str) -> Value {
    match t.to_ascii_lowercase().as_str() {
        "null" => return Value::Null,
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    let digits_ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with('_')
            && !s.ends_with('_')
            && !s.contains("__")
            && s.chars().all(|c| c.is_ascii_digit() || c == '_')
    };
    let unsigned = t.trim_start_matches(['+', '-']);
    if t.len() - unsigned.len() <= 1 && digits_ok(unsigned) {
        let clean: String = t.chars().filter(|&c| c != '_').collect();
        let int_part = unsigned.replace('_', "");
        if (int_part == "0" || !int_part.starts_with('0'))
            && let Ok(n) = clean.parse::<i64>()
        {
            return Value::Int(n);
        }
    }
    if let Some(x) = grammar_float(t) {
        return Value::Float(x);
    }
    Value::Str(t.to_string())
}

/// OmegaConf's FLOAT token: `1.5`, `.5`, `1.`, `1e-3`, `1.5e3`, `inf`, `nan` (signed).
fn grammar_float(t: &str) -> Option<f64> {
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    let negative = t.starts_with('-');
    let lower = body.to_ascii_lowercase();
    let x = match lower.as_str() {
        "inf" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            let (mantissa, exp) = match lower.split_once('e') {
                Some((m, e)) => (m, Some(e)),
                None => (lower.as_str(), None),
            };
            let ok_digits = |s: &str| {
                s.is_empty()
                    || (!s.starts_with('_')
                        && !s.ends_with('_')
                        && !s.contains("__")
                        && s.chars().all(|c| c.is_ascii_digit() || c == '_'))
            };
            let (int, frac) = match mantissa.split_once('.') {
                Some((i, f)) => (i, Some(f)),
                None => (mantissa, None),
            };
            if !ok_digits(int) || !frac.is_none_or(ok_digits) {
                return None;
            }
            if int.is_empty() && frac.is_none_or(str::is_empty) {
                return None;
            }
            match exp {
                None if frac.is_none() => return None, // an integer, not a float
                None => {}
                Some(e) => {
                    let e = e.strip_prefix(['+', '-']).unwrap_or(e);
                    if e.is_empty() || !ok_digits(e) {
                        return None;
                    }
                }
            }
            let clean: String = lower.chars().filter(|&c| c != '_').collect();
            let clean = clean.replace(".e", ".0e");
            let clean = if clean.ends_with('.') {
                format!("{clean}0")
            } else {
                clean
            };
            clean.parse::<f64>().ok()?
        }
    };
    Some(if negative { -x } else { x })
}

/// `oc.decode`: the string as a grammar element (no trimming: `' 7 '` stays a string).
fn decode(s: &str) -> Value {
    if s.trim() != s {
        return Value::Str(s.to_string());
    }
    let quoted = s.len() >= 2
        && ((s.starts_with('\'') && s.ends_with('\'')) || (s.starts_with('"') && s.ends_with('"')));
    if quoted {
        return Value::Str(s[1..s.len() - 1].to_string());
    }
    primitive(s)
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Interp(Interp),
}

#[derive(Debug, Clone, PartialEq)]
enum Interp {
    Node(Vec<Piece>),
    Resolver { name: String, args: Vec<Arg> },
}

#[derive(Debug, Clone, PartialEq)]
enum Arg {
    Quoted(Vec<Piece>),
    Plain(Vec<Piece>),
}

/// A top-level string: text, `\${` (a literal `${`), `\\${` (a backslash, then an
/// interpolation), and interpolations.
fn parse_top(s: &str) -> Res<Vec<Piece>> {
    let chars: Vec<char> = s.chars().collect();
    parse_parts(&chars, s, true)
}

/// `${...}` starting at `start`: the interpolation and the index after its `}`.
fn parse_interp(chars: &[char], start: usize, whole: &str) -> Res<(Interp, usize)> {
    let end = matching_brace(chars, start + 2)
        .ok_or_else(|| format!("unterminated interpolation in `{whole}`"))?;
    let inner: Vec<char> = chars[start + 2..end].to_vec();
    // a resolver: `name:` with name [A-Za-z_][A-Za-z0-9_.]* at the start (after spaces)
    let lead = inner.iter().take_while(|c| c.is_whitespace()).count();
    let name_len = inner[lead..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '.')
        .count();
    let name: String = inner[lead..lead + name_len].iter().collect();
    let resolver = name_len > 0
        && inner.get(lead + name_len) == Some(&':')
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    let interp = if resolver {
        let args = split_args(&inner[lead + name_len + 1..], whole)?;
        Interp::Resolver { name, args }
    } else {
        let key: String = inner.iter().collect();
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("empty interpolation `${{}}` in `{whole}`"));
        }
        let kchars: Vec<char> = key.chars().collect();
        Interp::Node(parse_inner(&kchars, whole)?)
    };
    Ok((interp, end + 1))
}

/// The index of the `}` closing the interpolation whose content starts at `from`.
fn matching_brace(chars: &[char], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = from;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) => {
                if c == '\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '$' if chars.get(i + 1) == Some(&'{') => {
                    depth += 1;
                    i += 1;
                }
                '}' if depth == 0 => return Some(i),
                '}' => depth -= 1,
                _ => {}
            },
        }
        i += 1;
    }
    None
}

/// Text with nested interpolations (a key, an argument, a quoted string's content).
fn parse_inner(chars: &[char], whole: &str) -> Res<Vec<Piece>> {
    parse_parts(chars, whole, false)
}

/// Text and interpolations; `escapes`: the top level's `\${` and `\\${` (OmegaConf's grammar
/// has them only there).
fn parse_parts(chars: &[char], whole: &str, escapes: bool) -> Res<Vec<Piece>> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        let at = |j: usize, pat: &str| chars[j..].iter().copied().take(pat.len()).eq(pat.chars());
        if escapes && at(i, "\\\\${") {
            text.push('\\');
            i += 2;
        } else if escapes && at(i, "\\${") {
            text.push_str("${");
            i += 3;
        } else if at(i, "${") {
            if !text.is_empty() {
                parts.push(Piece::Text(std::mem::take(&mut text)));
            }
            let (interp, next) = parse_interp(chars, i, whole)?;
            parts.push(Piece::Interp(interp));
            i = next;
        } else {
            text.push(chars[i]);
            i += 1;
        }
    }
    if !text.is_empty() {
        parts.push(Piece::Text(text));
    }
    Ok(parts)
}

/// Resolver arguments, split at the commas outside quotes and nested interpolations.
fn split_args(chars: &[char], whole: &str) -> Res<Vec<Arg>> {
    let mut raw: Vec<Vec<char>> = vec![Vec::new()];
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let current = raw.last_mut().expect("one argument at least");
        match quote {
            Some(q) => {
                current.push(c);
                if c == '\\' && i + 1 < chars.len() {
                    current.push(chars[i + 1]);
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    current.push(c);
                }
                '$' if chars.get(i + 1) == Some(&'{') => {
                    depth += 1;
                    current.extend(['$', '{']);
                    i += 1;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    current.push(c);
                }
                ',' if depth == 0 => raw.push(Vec::new()),
                _ => current.push(c),
            },
        }
        i += 1;
    }
    if raw.len() == 1 && raw[0].iter().all(|c| c.is_whitespace()) {
        return Ok(Vec::new());
    }
    raw.into_iter()
        .map(|a| {
            let s: String = a.iter().collect();
            let t = s.trim();
            let q = t.chars().next();
            if t.len() >= 2 && matches!(q, Some('\'' | '"')) && t.ends_with(q.unwrap_or(' ')) {
                let inner: String = t[1..t.len() - 1].replace(
                    &format!("\\{}", q.unwrap_or(' ')),
                    &q.unwrap_or(' ').to_string(),
                );
                let ic: Vec<char> = inner.chars().collect();
                Ok(Arg::Quoted(parse_inner(&ic, whole)?))
            } else {
                let tc: Vec<char> = t.chars().collect();
                Ok(Arg::Plain(parse_inner(&tc, whole)?))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml11;

    fn env(key: &str) -> Option<String> {
        (key == "ADVCALC_TEST_GAMMA").then(|| "0.97".to_string())
    }

    fn resolved(yaml: &str) -> Result<Value, InterpolationError> {
        let root = yaml11::parse(yaml).unwrap();
        resolve(&root, &[], &env)
    }

    fn get(yaml: &str, key: &str) -> Value {
        let v = resolved(yaml).unwrap_or_else(|e| panic!("{e:?}"));
        let parts: Vec<&str> = key.split('.').collect();
        v.at(&parts).cloned().unwrap()
    }

    /// Each expectation is what OmegaConf 2.4.0's `to_container(resolve=True)` gives.
    #[test]
    fn resolves_as_omegaconf() {
        use Value::*;
        assert_eq!(get("a: ${b}\nb: 0.5", "a"), Float(0.5));
        assert_eq!(
            get(
                "b: 1.0\nc: true\nd: null\ne: 1e-5\na: x_${b}_${c}_${d}_${e}",
                "a"
            ),
            Str("x_1.0_True_None_1e-05".into())
        );
        assert_eq!(get("s:\n  x: 1\n  y: ${.x}\n  z: ${..s.x}", "s.y"), Int(1));
        assert_eq!(get("s:\n  x: 1\n  y: ${.x}\n  z: ${..s.x}", "s.z"), Int(1));
        assert_eq!(get("s:\n  t:\n    a: ${...x}\nx: 5", "s.t.a"), Int(5));
        assert_eq!(get("k: x\ns:\n  x: 3\na: ${s.${k}}", "a"), Int(3));
        assert_eq!(get("a: \\${b}", "a"), Str("${b}".into()));
        assert_eq!(get("a: \\\\${b}\nb: 1", "a"), Str("\\1".into()));
        assert_eq!(get("l: [1, 2]\na: ${l.1}", "a"), Int(2));
        assert_eq!(get("l: [1, 2]\na: ${l[0]}", "a"), Int(1));
        assert_eq!(get("a: ${ b }\nb: 2", "a"), Int(2));
        assert_eq!(get("a: ' ${b}'\nb: 2", "a"), Str(" 2".into()));
        assert_eq!(get("s:\n  x: 1\na: ${s}", "a.x"), Int(1));
        assert_eq!(get("a: $b}", "a"), Str("$b}".into()));
    }

    #[test]
    fn resolvers() {
        use Value::*;
        assert_eq!(
            get("a: ${oc.env:ADVCALC_TEST_GAMMA}", "a"),
            Str("0.97".into())
        );
        assert_eq!(get("a: ${oc.env:NOPE_X,0.5}", "a"), Str("0.5".into()));
        assert_eq!(get("a: ${oc.env:NOPE_X,1e-3}", "a"), Str("0.001".into()));
        assert_eq!(get("a: ${oc.env:NOPE_X,1_0}", "a"), Str("10".into()));
        assert_eq!(
            get("a: ${oc.env:NOPE_X, abc def }", "a"),
            Str("abc def".into())
        );
        assert_eq!(get("a: ${oc.env:NOPE_X,true}", "a"), Str("True".into()));
        assert_eq!(get("a: ${oc.env:NOPE_X,null}", "a"), Null);
        assert_eq!(get("a: ${oc.env:NOPE_X,'0.5'}", "a"), Str("0.5".into()));
        assert_eq!(
            get("a: ${oc.env:NOPE_X,${b}}\nb: 0.25", "a"),
            Str("0.25".into())
        );
        assert_eq!(get("a: ${oc.decode:'0.5'}", "a"), Float(0.5));
        assert_eq!(
            get("a: ${oc.decode:${oc.env:NOPE_X,'1e-3'}}", "a"),
            Float(0.001)
        );
        assert_eq!(
            get("a: ${oc.decode:${oc.env:NOPE_X,yes}}", "a"),
            Str("yes".into())
        );
        assert_eq!(get("a: ${oc.decode:' 7 '}", "a"), Str(" 7 ".into()));
        assert_eq!(get("a: ${oc.select:b.c,7}", "a"), Int(7));
        assert_eq!(get("a: ${oc.select:b,7}\nb: 2", "a"), Int(2));
    }

    #[test]
    fn errors_name_the_chain() {
        let e = resolved("a: ${b}\nb: ${a}").unwrap_err();
        assert!(e.message.contains("a -> b -> a"), "{e:?}");
        assert_eq!(e.failure, Failure::Other);
        let e = resolved("a: ${b}").unwrap_err();
        assert!(e.message.contains("`b` not found"), "{e:?}");
        assert_eq!(e.at(), "a");
        assert_eq!(e.failure, Failure::MissingKey);
        let e = resolved("a: ${foo:1}").unwrap_err();
        assert!(e.message.contains("`foo`"), "{e:?}");
        assert_eq!(e.failure, Failure::UnsupportedResolver);
        let e = resolved("a: ${oc.env:NOPE_X}").unwrap_err();
        assert!(e.message.contains("NOPE_X"), "{e:?}");
        assert_eq!(e.failure, Failure::MissingVariable);
        // the kind comes through the interpolations that led to it
        let e = resolved("a: x_${b}\nb: ${oc.env:NOPE_X}").unwrap_err();
        assert_eq!((e.at(), e.failure), ("a", Failure::MissingVariable));
        let e = resolved("a: ???\nb: ${a}").unwrap_err();
        assert!(e.message.contains("mandatory"), "{e:?}");
        assert_eq!(e.failure, Failure::Other);
        assert!(resolved("a: ${}").is_err());
        // no stack exhaustion: long chains and deep nesting are refused
        let mut chain = String::from("k0: 1\n");
        for i in 1..3000 {
            chain += &format!("k{i}: ${{k{}}}\n", i - 1);
        }
        let root = yaml11::parse(&chain).unwrap();
        let e = resolve(&root, &["k2999".to_string()], &env).unwrap_err();
        assert!(e.message.contains("chain"), "{e:?}");
        let deep = format!("a: '{}x{}'", "${".repeat(5000), "}".repeat(5000));
        assert!(resolved(&deep).is_err());
        assert!(resolved("a: ${b").is_err());
        let e = resolved("a: ${oc.decode:1e-3}").unwrap_err();
        assert!(e.message.contains("oc.decode"), "{e:?}");
        let e = resolved("x: 1\ns:\n  a: ${c.d}\nc: ${x}").unwrap_err();
        assert_eq!(e.chain, ["s.a"]);
    }
}
