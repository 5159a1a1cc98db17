//! Token ids back to text with a Hugging Face `tokenizer.json`, for display (`advcalc view
//! --tokenizer`). Decoding only: the file's model vocabulary, added tokens and decoder are
//! read, nothing that encodes (merges, pre-tokenizer, post-processor). The `tokenizers`
//! crate would do it too, but it brings a large build (regex engines, Onig, rayon, serde's
//! derives) for what is a table lookup and a few string rewrites; the file is parsed with
//! this crate's own JSON reader ([`crate::json_line`]).
//!
//! [`Tokenizer::decode`] gives what `tokenizers`' `decode(ids, skip_special_tokens=False)`
//! gives (version 0.23.3; the fixtures under `fixtures/tokenizers/` are its output) for the
//! models BPE, Unigram, WordPiece and WordLevel and the decoders `ByteLevel` (GPT-2, Qwen,
//! Llama-3), `Metaspace`, `Replace` with a string pattern, `ByteFallback`, `Fuse`, `Strip`
//! (Llama-2's `Sequence`), `WordPiece` and `BPEDecoder`; any other decoder is refused when
//! the file is read. As in `tokenizers`, added tokens go through the decoder too (an added
//! token marked `normalized` as the text its normalizer makes of it, where that normalizer
//! is one of the simple ones: see `normalize`). An id that names no token, which
//! `tokenizers` drops, shows as `<unk:ID>` in its place. [`Tokenizer::pieces`] splits the
//! decoded text by token for a per-token display.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::error::{Error, Result};
use crate::json_line::{Json, parse_json};

/// A Hugging Face tokenizer.json, read for decoding only.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    /// The model's vocabulary, id → token.
    vocab: HashMap<u32, String>,
    /// The added tokens, id → the text the decoder is given (which takes precedence over
    /// the model's token of the same id, as in `tokenizers`).
    added: HashMap<u32, String>,
    /// `get_vocab_size(with_added_tokens=True)`.
    size: usize,
    /// The decoders in order (a `Sequence` flattened); `None`: no decoder, tokens are joined
    /// with spaces.
    decoder: Option<Vec<Decoder>>,
}

impl Tokenizer {
    /// Read and parse `path` (errors name it).
    pub fn open(path: &Path) -> Result<Tokenizer> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::data(format!("{name}: cannot read the tokenizer")).with_source(e)
        })?;
        Tokenizer::from_json(&text, &name)
    }

    /// Parse the text of a tokenizer.json; `name` (the file) prefixes the errors.
    pub fn from_json(text: &str, name: &str) -> Result<Tokenizer> {
        let tree = parse_json(text)
            .map_err(|e| Error::data(format!("{name}: not a tokenizer.json")).with_source(e))?;
        read_tokenizer(&tree).map_err(|e| e.context(name))
    }

    /// The number of tokens: the model's plus the added tokens it does not hold, as
    /// `tokenizers`' `get_vocab_size(with_added_tokens=True)` counts them (ids need not be
    /// below it where the file leaves gaps).
    pub fn vocab_size(&self) -> usize {
        self.size
    }

    /// The whole text, as `tokenizers`' `decode(ids, skip_special_tokens=False)` gives it,
    /// except that an id naming no token (negative, past the vocabulary, a gap), which
    /// `tokenizers` drops, shows as `<unk:ID>` where it stands: the text around it is the
    /// decode of the other ids. Never fails: bytes that make no UTF-8 show as U+FFFD.
    pub fn decode(&self, ids: &[i64]) -> String {
        self.pieces(ids).concat()
    }

    /// Each token's share of [`Tokenizer::decode`], one string per id, for a per-token
    /// display: `pieces(ids).concat() == decode(ids)` always.
    ///
    /// A piece is what its token adds in this sequence, not `decode([id])`: decoders that
    /// look at neighbours act as in the whole decode (Metaspace drops the first token's `▁`,
    /// `Strip` after `Fuse` trims the whole text's start, WordPiece joins `##` pieces). A
    /// character whose UTF-8 bytes are split over several tokens (byte-level BPE tokens, or
    /// `<0xXX>` byte-fallback tokens, cutting a multi-byte character) goes to the token that
    /// completes it, as a streaming decoder prints it; the earlier tokens show nothing for
    /// it. Bytes that make no character show as U+FFFD exactly as in the decode (one per
    /// maximal invalid sequence for the ByteLevel decoder, one per byte token for
    /// ByteFallback), each given to the token holding its last byte. An id naming no token
    /// is the piece `<unk:ID>`.
    pub fn pieces(&self, ids: &[i64]) -> Vec<String> {
        let mut known = Vec::with_capacity(ids.len());
        let mut out = vec![String::new(); ids.len()];
        for (at, &id) in ids.iter().enumerate() {
            match self.token(id) {
                Some(token) => known.push(Piece {
                    owner: at,
                    chars: token.chars().map(|c| (c, at)).collect(),
                }),
                None => out[at] = format!("<unk:{id}>"),
            }
        }
        let decoded = match &self.decoder {
            Some(chain) => chain.iter().fold(known, |pieces, d| d.apply(pieces)),
            None => join_with_spaces(known),
        };
        // Owners only grow along the text (every decoder keeps the tokens' order); the
        // running maximum makes the concatenation equal the decode regardless.
        let mut last = 0;
        for (c, owner) in decoded.into_iter().flat_map(|p| p.chars) {
            last = last.max(owner);
            out[last].push(c);
        }
        out
    }

    /// The text the decoder is given for `id`: an added token's, else the model's.
    fn token(&self, id: i64) -> Option<&str> {
        let id = u32::try_from(id).ok()?;
        self.added
            .get(&id)
            .or_else(|| self.vocab.get(&id))
            .map(String::as_str)
    }
}

/// One decoder of the chain.
#[derive(Debug, Clone, PartialEq)]
enum Decoder {
    /// GPT-2's bytes-to-unicode characters back to bytes, then UTF-8 (lossy).
    ByteLevel,
    /// `replacement` → space; `drop_first`: the first token's replacements are dropped
    /// (`prepend_scheme` other than `never`).
    Metaspace { replacement: char, drop_first: bool },
    /// A literal pattern replaced in each token.
    Replace {
        pattern: Vec<char>,
        content: Vec<char>,
    },
    /// Runs of `<0xXX>` tokens → the text of their bytes.
    ByteFallback,
    /// All tokens → one.
    Fuse,
    /// Up to `start` leading and `stop` trailing `content` characters off each token.
    Strip {
        content: char,
        start: usize,
        stop: usize,
    },
    /// `prefix` off the continuation tokens, a space before the others, then `cleanup`.
    WordPiece { prefix: Vec<char>, cleanup: bool },
    /// `suffix` → a space (nothing in the last token).
    Bpe { suffix: Vec<char> },
}

/// A token's text on its way through the decoders: each character with the index (in the
/// ids) of the token it comes from, and the token the piece stands for (inserted text goes
/// to it).
#[derive(Debug, Clone)]
struct Piece {
    owner: usize,
    chars: Vec<(char, usize)>,
}

impl Piece {
    fn text(&self) -> String {
        self.chars.iter().map(|&(c, _)| c).collect()
    }
}

impl Decoder {
    /// `decode_chain` of `tokenizers`, on pieces.
    fn apply(&self, pieces: Vec<Piece>) -> Vec<Piece> {
        match self {
            Decoder::ByteLevel => vec![byte_level(&pieces)],
            Decoder::Metaspace {
                replacement,
                drop_first,
            } => pieces
                .into_iter()
                .enumerate()
                .map(|(i, mut p)| {
                    p.chars = p
                        .chars
                        .into_iter()
                        .filter_map(|(c, o)| match c == *replacement {
                            true if i == 0 && *drop_first => None,
                            true => Some((' ', o)),
                            false => Some((c, o)),
                        })
                        .collect();
                    p
                })
                .collect(),
            // An empty pattern matches nothing (`tokenizers`' `Pattern for &str`).
            Decoder::Replace { pattern, .. } if pattern.is_empty() => pieces,
            Decoder::Replace { pattern, content } => pieces
                .into_iter()
                .map(|p| replace(p, pattern, content))
                .collect(),
            Decoder::ByteFallback => byte_fallback(pieces),
            Decoder::Fuse => {
                let owner = pieces.first().map_or(0, |p| p.owner);
                let chars = pieces.into_iter().flat_map(|p| p.chars).collect();
                vec![Piece { owner, chars }]
            }
            Decoder::Strip {
                content,
                start,
                stop,
            } => pieces
                .into_iter()
                .map(|mut p| {
                    let n = p.chars.len();
                    let head = p.chars.iter().take(*start);
                    let cut_start = head.take_while(|&&(c, _)| c == *content).count();
                    let tail = p.chars.iter().rev().take((*stop).min(n));
                    let cut_stop = n - tail.take_while(|&&(c, _)| c == *content).count();
                    // `tokenizers` panics where the cuts cross (a token of only `content`
                    // with both cuts over it); nothing is left of it here.
                    p.chars = match cut_start <= cut_stop {
                        true => p.chars[cut_start..cut_stop].to_vec(),
                        false => Vec::new(),
                    };
                    p
                })
                .collect(),
            Decoder::WordPiece { prefix, cleanup } => pieces
                .into_iter()
                .enumerate()
                .map(|(i, mut p)| {
                    if i != 0 {
                        let continues = p.chars.len() >= prefix.len()
                            && p.chars.iter().zip(prefix).all(|(&(c, _), &q)| c == q);
                        match continues {
                            true => drop(p.chars.drain(..prefix.len())),
                            false => p.chars.insert(0, (' ', p.owner)),
                        }
                    }
                    if *cleanup {
                        for (from, to) in CLEANUP {
                            let from: Vec<char> = from.chars().collect();
                            let to: Vec<char> = to.chars().collect();
                            p = replace(p, &from, &to);
                        }
                    }
                    p
                })
                .collect(),
            Decoder::Bpe { suffix } => {
                let last = pieces.len().saturating_sub(1);
                pieces
                    .into_iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let with: &[char] = if i == last { &[] } else { &[' '] };
                        replace(p, suffix, with)
                    })
                    .collect()
            }
        }
    }
}

/// The WordPiece decoder's `cleanup`: spaces `tokenizers` takes out around punctuation and
/// English contractions, in its order.
const CLEANUP: [(&str, &str); 11] = [
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
];

/// `str::replace` on a piece: every non-overlapping occurrence of `pattern`, from the left,
/// becomes `with`, given to the token of the occurrence's first character (an empty
/// pattern matches before every character and at the end, as `str::replace`'s does).
fn replace(p: Piece, pattern: &[char], with: &[char]) -> Piece {
    let mut chars = Vec::with_capacity(p.chars.len());
    let mut i = 0;
    while i < p.chars.len() {
        let here = &p.chars[i..];
        if here.len() >= pattern.len() && here.iter().zip(pattern).all(|(&(c, _), &q)| c == q) {
            let owner = p.chars[i].1;
            chars.extend(with.iter().map(|&c| (c, owner)));
            if !pattern.is_empty() {
                i += pattern.len();
                continue;
            }
        }
        chars.push(p.chars[i]);
        i += 1;
    }
    if pattern.is_empty() {
        let owner = p.chars.last().map_or(p.owner, |&(_, o)| o);
        chars.extend(with.iter().map(|&c| (c, owner)));
    }
    Piece {
        owner: p.owner,
        chars,
    }
}

/// No decoder: the tokens joined with spaces (each space given to the token after it).
fn join_with_spaces(pieces: Vec<Piece>) -> Vec<Piece> {
    let owner = pieces.first().map_or(0, |p| p.owner);
    let mut chars = Vec::new();
    for (i, p) in pieces.into_iter().enumerate() {
        if i > 0 {
            chars.push((' ', p.owner));
        }
        chars.extend(p.chars);
    }
    vec![Piece { owner, chars }]
}

/// The ByteLevel decoder: each token's characters mapped back to bytes through GPT-2's
/// bytes-to-unicode table (a token with a character outside it gives its own UTF-8 bytes),
/// then the bytes of all tokens as lossy UTF-8, as one piece.
fn byte_level(pieces: &[Piece]) -> Piece {
    let mut bytes: Vec<(u8, usize)> = Vec::new();
    for p in pieces {
        let mapped: Option<Vec<u8>> = p.chars.iter().map(|&(c, _)| char_byte(c)).collect();
        match mapped {
            Some(mapped) => bytes.extend(mapped.into_iter().zip(p.chars.iter().map(|&(_, o)| o))),
            None => {
                for &(c, o) in &p.chars {
                    let mut buf = [0; 4];
                    bytes.extend(c.encode_utf8(&mut buf).bytes().map(|b| (b, o)));
                }
            }
        }
    }
    Piece {
        owner: pieces.first().map_or(0, |p| p.owner),
        chars: lossy(&bytes),
    }
}

/// `String::from_utf8_lossy` of owned bytes: each character given to the token of its last
/// byte, each U+FFFD (one per maximal invalid sequence) to the token of that sequence's.
fn lossy(bytes: &[(u8, usize)]) -> Vec<(char, usize)> {
    let raw: Vec<u8> = bytes.iter().map(|&(b, _)| b).collect();
    let mut out = Vec::with_capacity(raw.len());
    let mut at = 0;
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            at += c.len_utf8();
            out.push((c, bytes[at - 1].1));
        }
        if !chunk.invalid().is_empty() {
            at += chunk.invalid().len();
            out.push((char::REPLACEMENT_CHARACTER, bytes[at - 1].1));
        }
    }
    out
}

/// The ByteFallback decoder: a run of `<0xXX>` tokens becomes the text of its bytes if they
/// are UTF-8, else one U+FFFD per byte token; other tokens pass.
fn byte_fallback(pieces: Vec<Piece>) -> Vec<Piece> {
    fn flush(run: &mut Vec<(u8, usize)>, out: &mut Vec<Piece>) {
        if run.is_empty() {
            return;
        }
        let raw: Vec<u8> = run.iter().map(|&(b, _)| b).collect();
        if std::str::from_utf8(&raw).is_ok() {
            out.push(Piece {
                owner: run[0].1,
                chars: lossy(run),
            });
        } else {
            out.extend(run.iter().map(|&(_, o)| Piece {
                owner: o,
                chars: vec![(char::REPLACEMENT_CHARACTER, o)],
            }));
        }
        run.clear();
    }
    let mut out = Vec::with_capacity(pieces.len());
    let mut run = Vec::new();
    for p in pieces {
        match byte_token(&p.text()) {
            Some(b) => run.push((b, p.chars.last().map_or(p.owner, |&(_, o)| o))),
            None => {
                flush(&mut run, &mut out);
                out.push(p);
            }
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The byte of a `<0xXX>` token, tested as `tokenizers` tests it.
fn byte_token(token: &str) -> Option<u8> {
    if token.len() == 6 && token.starts_with("<0x") && token.ends_with('>') {
        u8::from_str_radix(&token[3..5], 16).ok()
    } else {
        None
    }
}

/// The bytes GPT-2's bytes-to-unicode table shows as the characters U+0100 onwards, in
/// order (the others are their own Latin-1 character).
const SHIFTED: [u8; 68] = {
    let mut out = [0u8; 68];
    let (mut b, mut n) = (0usize, 0usize);
    while b < 256 {
        if !printable(b as u8) {
            out[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    out
};

/// The bytes the table shows as themselves: `!`..`~`, `¡`..`¬`, `®`..`ÿ`.
const fn printable(b: u8) -> bool {
    matches!(b, 33..=126 | 161..=172 | 174..=255)
}

/// The byte a character of the bytes-to-unicode table stands for.
fn char_byte(c: char) -> Option<u8> {
    let u = c as u32;
    match u8::try_from(u) {
        Ok(b) if printable(b) => Some(b),
        Ok(_) => None,
        Err(_) => u
            .checked_sub(256)
            .and_then(|i| SHIFTED.get(i as usize).copied()),
    }
}

/// The character of the bytes-to-unicode table for a byte.
fn byte_char(b: u8) -> char {
    if printable(b) {
        char::from(b)
    } else {
        let i = SHIFTED.iter().position(|&s| s == b).unwrap_or(0);
        char::from_u32(256 + i as u32).unwrap_or(char::REPLACEMENT_CHARACTER)
    }
}

/// The tokenizer the tree of a tokenizer.json describes.
fn read_tokenizer(tree: &Json) -> Result<Tokenizer> {
    let model = tree
        .get("model")
        .filter(|m| matches!(m, Json::Object(_)))
        .ok_or_else(|| Error::data("no `model` object: not a tokenizer.json"))?;
    let (vocab, model_tokens) = read_vocab(model).map_err(|e| e.context("model"))?;

    let normalizer = tree.get("normalizer").filter(|n| !matches!(n, Json::Null));
    let mut added = HashMap::new();
    let mut added_contents = HashSet::new();
    if let Some(list) = tree
        .get("added_tokens")
        .filter(|a| !matches!(a, Json::Null))
    {
        let list = list
            .as_array()
            .ok_or_else(|| Error::data(format!("`added_tokens` is {}", list.kind())))?;
        for (i, t) in list.into_owned().into_iter().enumerate() {
            let bad = |what: &str| Error::data(format!("added_tokens[{i}]: {what}"));
            let id = t
                .get("id")
                .and_then(Json::as_i64)
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| bad("no `id` that is a token id"))?;
            let content = t
                .get("content")
                .and_then(Json::as_str)
                .ok_or_else(|| bad("no `content` string"))?;
            if content.is_empty() {
                continue; // `tokenizers` ignores it
            }
            let normalized = t.get("normalized").and_then(Json::as_bool).unwrap_or(true);
            let text = match (normalized, normalizer) {
                (true, Some(n)) => normalize(n, content).unwrap_or_else(|| content.to_string()),
                _ => content.to_string(),
            };
            added.insert(id, text);
            added_contents.insert(content.to_string());
        }
    }
    let held = added_contents
        .iter()
        .filter(|c| model_tokens.contains(c.as_str()))
        .count();
    let size = model_tokens.len() + added_contents.len() - held;

    let decoder = match tree.get("decoder") {
        None | Some(Json::Null) => None,
        Some(d) => {
            let mut chain = Vec::new();
            read_decoder(d, &mut chain).map_err(|e| e.context("decoder"))?;
            Some(chain)
        }
    };
    Ok(Tokenizer {
        vocab,
        added,
        size,
        decoder,
    })
}

/// The model's id → token map, and its distinct tokens (for the vocabulary's size).
fn read_vocab(model: &Json) -> Result<(HashMap<u32, String>, HashSet<&str>)> {
    let kind = model.get("type").and_then(Json::as_str);
    if let Some(k) = kind
        && !matches!(k, "BPE" | "WordPiece" | "WordLevel" | "Unigram")
    {
        return Err(Error::data(format!(
            "model type `{k}` is not supported (BPE, Unigram, WordPiece, WordLevel are)"
        )));
    }
    let bad_id = |token: &str| Error::data(format!("the id of `{token}` is not a token id"));
    let mut vocab = HashMap::new();
    let mut tokens = HashSet::new();
    match model.get("vocab") {
        // BPE, WordPiece, WordLevel: {token: id}
        Some(Json::Object(fields)) if kind != Some("Unigram") => {
            for (token, id) in fields {
                let id = id
                    .as_i64()
                    .and_then(|id| u32::try_from(id).ok())
                    .ok_or_else(|| bad_id(token))?;
                vocab.insert(id, token.clone());
                tokens.insert(token.as_str());
            }
        }
        // Unigram: [[piece, score], ...], the id being the place
        Some(list @ (Json::Array(_) | Json::Ints(_) | Json::Floats(_)))
            if matches!(kind, None | Some("Unigram")) =>
        {
            let Json::Array(items) = list else {
                return Err(Error::data(
                    "`vocab` holds numbers, not [piece, score] pairs",
                ));
            };
            for (id, item) in items.iter().enumerate() {
                let piece = item
                    .as_array()
                    .and_then(|pair| pair.first().and_then(|p| p.as_str().map(String::from)))
                    .ok_or_else(|| Error::data(format!("vocab[{id}] is not [piece, score]")))?;
                let id32 = u32::try_from(id).map_err(|_| bad_id(&piece))?;
                vocab.insert(id32, piece);
            }
            for item in items {
                if let Json::Array(pair) = item
                    && let Some(Json::Str(piece)) = pair.first()
                {
                    tokens.insert(piece.as_str());
                }
            }
        }
        Some(other) => {
            return Err(Error::data(format!(
                "`vocab` is {} where model type {} needs {}",
                other.kind(),
                kind.unwrap_or("(none)"),
                if kind == Some("Unigram") {
                    "an array"
                } else {
                    "an object"
                }
            )));
        }
        None => return Err(Error::data("no `vocab`")),
    }
    Ok((vocab, tokens))
}

/// Append the decoder `d` to `chain` (a `Sequence` flattened: decoding a sequence is
/// decoding by each of its decoders in turn).
fn read_decoder(d: &Json, chain: &mut Vec<Decoder>) -> Result<()> {
    let kind = d
        .get("type")
        .and_then(Json::as_str)
        .ok_or_else(|| Error::data("no `type`"))?;
    let string = |key: &str| {
        d.get(key)
            .and_then(Json::as_str)
            .ok_or_else(|| Error::data(format!("{kind}: no `{key}` string")))
    };
    let one_char = |key: &str| {
        let s = string(key)?;
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Ok(c),
            _ => Err(Error::data(format!("{kind}: `{key}` is not one character"))),
        }
    };
    let count = |key: &str| {
        d.get(key)
            .and_then(Json::as_i64)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| Error::data(format!("{kind}: no `{key}` count")))
    };
    let decoder = match kind {
        "Sequence" => {
            let list = d
                .get("decoders")
                .and_then(Json::as_array)
                .ok_or_else(|| Error::data("Sequence: no `decoders` array"))?;
            for (i, inner) in list.iter().enumerate() {
                read_decoder(inner, chain).map_err(|e| e.context(format!("decoders[{i}]")))?;
            }
            return Ok(());
        }
        "ByteLevel" => Decoder::ByteLevel,
        "Metaspace" => {
            let scheme = d.get("prepend_scheme").and_then(Json::as_str);
            let add_prefix_space = d.get("add_prefix_space").and_then(Json::as_bool);
            Decoder::Metaspace {
                replacement: one_char("replacement")?,
                drop_first: scheme != Some("never") && add_prefix_space != Some(false),
            }
        }
        "Replace" => {
            let pattern = d.get("pattern");
            let Some(pattern) = pattern.and_then(|p| p.get("String")).and_then(Json::as_str) else {
                return Err(Error::data(match pattern.and_then(|p| p.get("Regex")) {
                    Some(_) => "Replace: a `Regex` pattern is not supported".to_string(),
                    None => "Replace: no `pattern` string".to_string(),
                }));
            };
            Decoder::Replace {
                pattern: pattern.chars().collect(),
                content: string("content")?.chars().collect(),
            }
        }
        "ByteFallback" => Decoder::ByteFallback,
        "Fuse" => Decoder::Fuse,
        "Strip" => Decoder::Strip {
            content: one_char("content")?,
            start: count("start")?,
            stop: count("stop")?,
        },
        "WordPiece" => Decoder::WordPiece {
            prefix: d
                .get("prefix")
                .and_then(Json::as_str)
                .unwrap_or("##")
                .chars()
                .collect(),
            cleanup: d.get("cleanup").and_then(Json::as_bool).unwrap_or(true),
        },
        "BPEDecoder" => Decoder::Bpe {
            suffix: d
                .get("suffix")
                .and_then(Json::as_str)
                .unwrap_or("</w>")
                .chars()
                .collect(),
        },
        other => {
            return Err(Error::data(format!(
                "decoder type `{other}` is not supported (ByteLevel, Metaspace, Replace, \
                 ByteFallback, Fuse, Strip, WordPiece, BPEDecoder and a Sequence of them are)"
            )));
        }
    };
    chain.push(decoder);
    Ok(())
}

/// An added token's text as the normalizer `n` makes it (what `tokenizers` gives the
/// decoder for an added token marked `normalized`), where `n` is one of the simple
/// normalizers: `Sequence`, `Prepend`, `Replace` with a string pattern, `Lowercase`,
/// `Strip`, `ByteLevel`, and the Unicode normal forms and `StripAccents` on ASCII text
/// (which they leave as it is). `None` for any other (the token's own text is used).
fn normalize(n: &Json, text: &str) -> Option<String> {
    let kind = n.get("type").and_then(Json::as_str)?;
    match kind {
        "Sequence" => n
            .get("normalizers")?
            .as_array()?
            .iter()
            .try_fold(text.to_string(), |t, inner| normalize(inner, &t)),
        "Prepend" if text.is_empty() => Some(String::new()),
        "Prepend" => Some(format!("{}{text}", n.get("prepend")?.as_str()?)),
        "Replace" => {
            let pattern = n.get("pattern")?.get("String")?.as_str()?;
            let content = n.get("content")?.as_str()?;
            Some(match pattern.is_empty() {
                true => text.to_string(),
                false => text.replace(pattern, content),
            })
        }
        "Lowercase" => Some(text.chars().flat_map(char::to_lowercase).collect()),
        "Strip" => {
            let left = n.get("strip_left").and_then(Json::as_bool).unwrap_or(true);
            let right = n.get("strip_right").and_then(Json::as_bool).unwrap_or(true);
            let t = if left { text.trim_start() } else { text };
            Some(if right { t.trim_end() } else { t }.to_string())
        }
        "ByteLevel" => Some(text.bytes().map(byte_char).collect()),
        "NFC" | "NFD" | "NFKC" | "NFKD" | "StripAccents" if text.is_ascii() => {
            Some(text.to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixtures: tokenizers trained and decoded by Hugging Face `tokenizers`
    /// (`fixtures/tokenizers/generate.py`).
    fn fixtures() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tokenizers")
    }

    fn expected() -> Json {
        let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
        parse_json(&text).unwrap()
    }

    fn ids(list: &Json) -> Vec<i64> {
        list.ints().unwrap().to_vec()
    }

    #[test]
    fn tokenizer_decodes_as_hugging_face_does() {
        let expected = expected();
        let Some(Json::Object(all)) = expected.get("tokenizers") else {
            panic!("expected.json has no tokenizers");
        };
        assert_eq!(all.len(), 6);
        for (name, want) in all {
            let tok = Tokenizer::open(&fixtures().join(name).join("tokenizer.json")).unwrap();
            assert_eq!(
                tok.vocab_size() as i64,
                want.get("vocab_size").unwrap().as_i64().unwrap(),
                "{name}"
            );
            let cases = want.get("cases").unwrap().as_array().unwrap();
            assert!(cases.len() > 20, "{name}");
            for case in cases.iter() {
                let ids = ids(case.get("ids").unwrap());
                let text = case.get("decode").unwrap().as_str().unwrap();
                assert_eq!(tok.decode(&ids), text, "{name}: {ids:?}");
                let pieces = tok.pieces(&ids);
                assert_eq!(pieces.len(), ids.len(), "{name}: {ids:?}");
                assert_eq!(pieces.concat(), text, "{name}: {ids:?}");
            }
            let singles = want.get("single").unwrap().as_array().unwrap();
            for (id, text) in singles.iter().enumerate() {
                let text = text.as_str().unwrap();
                assert_eq!(tok.decode(&[id as i64]), text, "{name}: [{id}]");
                assert_eq!(tok.pieces(&[id as i64]), [text], "{name}: [{id}]");
            }
        }
    }

    #[test]
    fn tokenizer_shows_an_unknown_id_in_its_place() {
        let expected = expected();
        let want = expected.at(&["tokenizers", "byte_level_bpe"]).unwrap();
        let tok = Tokenizer::open(&fixtures().join("byte_level_bpe/tokenizer.json")).unwrap();
        let unknown = [-1, 1 << 40, i64::from(u32::MAX), 100_000, i64::MIN];
        for case in want.get("cases").unwrap().as_array().unwrap().iter() {
            let known = ids(case.get("ids").unwrap());
            let text = case.get("decode").unwrap().as_str().unwrap();
            // an unknown id before, between and after the others
            let mut with = Vec::new();
            for (i, &id) in known.iter().enumerate() {
                with.push(unknown[i % unknown.len()]);
                with.push(id);
            }
            with.push(-7);
            let pieces = tok.pieces(&with);
            assert_eq!(pieces.len(), with.len());
            for (piece, &id) in pieces.iter().zip(&with) {
                if unknown.contains(&id) || id == -7 {
                    assert_eq!(piece, &format!("<unk:{id}>"));
                }
            }
            // the rest is what Hugging Face decodes of the known ids (which drops unknowns)
            let known_only: String = pieces
                .iter()
                .zip(&with)
                .filter(|(_, id)| !unknown.contains(id) && **id != -7)
                .map(|(p, _)| p.as_str())
                .collect();
            assert_eq!(known_only, text, "{known:?}");
            assert_eq!(tok.decode(&with), pieces.concat());
        }
        assert_eq!(tok.decode(&[-5]), "<unk:-5>");
        assert_eq!(tok.decode(&[]), "");
        assert!(tok.pieces(&[]).is_empty());
    }

    /// A byte-level vocabulary by hand: 😀 is F0 9F 98 80, "ðŁĺĢ" in GPT-2's table.
    /// (`tokenizers` 0.23.3 decodes [0, 1, 2] to "😀a", [0, 2] to "\u{FFFD}a" and [1, 0] to
    /// three U+FFFD: 98 and 80 stray, F0 9F cut short.)
    const SPLIT_EMOJI: &str = r#"{"added_tokens": [], "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": {"ðŁ": 0, "ĺĢ": 1, "a": 2}, "merges": []}}"#;

    #[test]
    fn tokenizer_pieces_give_a_split_character_to_the_token_completing_it() {
        let tok = Tokenizer::from_json(SPLIT_EMOJI, "split.json").unwrap();
        assert_eq!(tok.vocab_size(), 3);
        assert_eq!(tok.decode(&[0, 1, 2]), "😀a");
        assert_eq!(tok.pieces(&[0, 1, 2]), ["", "😀", "a"]);
        assert_eq!(tok.pieces(&[0, 2]), ["\u{FFFD}", "a"]);
        assert_eq!(tok.pieces(&[1, 0]), ["\u{FFFD}\u{FFFD}", "\u{FFFD}"]);
        assert_eq!(tok.pieces(&[0, 7, 1]), ["", "<unk:7>", "😀"]);
    }

    #[test]
    fn tokenizer_refuses_a_malformed_file_naming_it() {
        let err = |text: &str| {
            Tokenizer::from_json(text, "bad.json")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(err("{\"model\": "), "bad.json: not a tokenizer.json");
        assert_eq!(
            err("[1, 2]"),
            "bad.json: no `model` object: not a tokenizer.json"
        );
        assert_eq!(
            err(r#"{"model": {"type": "BPE", "vocab": {"a": -1}}}"#),
            "bad.json: model: the id of `a` is not a token id"
        );
        assert_eq!(
            err(r#"{"model": {"type": "Unigram", "vocab": {"a": 0}}}"#),
            "bad.json: model: `vocab` is an object where model type Unigram needs an array"
        );
        assert_eq!(
            err(r#"{"model": {"type": "Weird", "vocab": {}}}"#),
            "bad.json: model: model type `Weird` is not supported (BPE, Unigram, WordPiece, \
             WordLevel are)"
        );
        assert_eq!(
            err(r#"{"model": {"vocab": {}}, "added_tokens": [{"content": "x"}]}"#),
            "bad.json: added_tokens[0]: no `id` that is a token id"
        );
        let ctc = r#"{"model": {"vocab": {}}, "decoder": {"type": "Sequence",
            "decoders": [{"type": "Fuse"}, {"type": "CTC", "pad_token": "<pad>"}]}}"#;
        assert!(
            err(ctc)
                .starts_with("bad.json: decoder: decoders[1]: decoder type `CTC` is not supported"),
            "{}",
            err(ctc)
        );
        let regex = r#"{"model": {"vocab": {}}, "decoder": {"type": "Replace",
            "pattern": {"Regex": " +"}, "content": " "}}"#;
        assert_eq!(
            err(regex),
            "bad.json: decoder: Replace: a `Regex` pattern is not supported"
        );

        let missing = fixtures().join("no-such-dir/tokenizer.json");
        let e = Tokenizer::open(&missing).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: cannot read the tokenizer", missing.display())
        );
    }

    #[test]
    fn tokenizer_byte_table_is_gpt2s() {
        // bytes_to_unicode: printable Latin-1 as itself, the 68 others from U+0100 on
        assert_eq!(byte_char(b'!'), '!');
        assert_eq!(byte_char(b' '), 'Ġ');
        assert_eq!(byte_char(b'\n'), 'Ċ');
        assert_eq!(byte_char(0xAD), 'Ń');
        for b in 0..=255u8 {
            assert_eq!(char_byte(byte_char(b)), Some(b));
        }
        assert_eq!(char_byte(' '), None);
        assert_eq!(char_byte('\u{144}'), None);
    }
}
