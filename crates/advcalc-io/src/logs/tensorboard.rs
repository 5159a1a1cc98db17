//! TensorBoard event files (`events.out.tfevents.*`) read without TensorFlow: the TFRecord
//! framing (a length, its masked CRC-32C, the bytes, their masked CRC-32C) and the few
//! protobuf fields of `Event` and `Summary` a scalar needs (the step, and each value's tag
//! with its `simple_value`, or a one-element float/double `tensor` as newer writers use).
//!
//! A run still writing leaves a partial record at the end: the file is read up to its last
//! whole record and the rest is a note. A record whose CRC does not match before the end is
//! corruption, an error naming the file and the byte.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};

/// A file's scalars: `(step, tag) → value` (a later event for the same pair wins), with notes.
#[derive(Debug, Default)]
pub struct Scalars {
    pub values: BTreeMap<i64, BTreeMap<String, f64>>,
    pub notes: Vec<String>,
}

/// Read one event file's scalars into `into`.
pub fn read_file(path: &Path, into: &mut Scalars) -> Result<()> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::data(format!("{}: cannot read", path.display())).with_source(e))?;
    let name = path.display().to_string();
    let mut pos = 0usize;
    let mut records = 0usize;
    while pos < bytes.len() {
        let Some(header) = bytes.get(pos..pos + 12) else {
            into.notes
                .push(truncated(&name, records, bytes.len() - pos));
            break;
        };
        let len_bytes: [u8; 8] = header[..8].try_into().expect("8 bytes");
        let len_crc = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if masked_crc(&len_bytes) != len_crc {
            return Err(corrupt(&name, pos, "its length's checksum"));
        }
        let len = u64::from_le_bytes(len_bytes);
        let start = pos + 12;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .and_then(|e| e.checked_add(4));
        let Some(end) = end.filter(|&e| e <= bytes.len()) else {
            into.notes
                .push(truncated(&name, records, bytes.len() - pos));
            break;
        };
        let data = &bytes[start..end - 4];
        let crc = u32::from_le_bytes(bytes[end - 4..end].try_into().expect("4 bytes"));
        if masked_crc(data) != crc {
            if end == bytes.len() {
                into.notes
                    .push(truncated(&name, records, bytes.len() - pos));
                break;
            }
            return Err(corrupt(&name, pos, "its data's checksum"));
        }
        event(data, into).map_err(|why| corrupt(&name, pos, &why))?;
        records += 1;
        pos = end;
    }
    Ok(())
}

fn truncated(name: &str, records: usize, left: usize) -> String {
    format!(
        "{name}: read up to its last whole record ({records}); the {left} byte(s) after it are a partial record (a run still writing?)"
    )
}

fn corrupt(name: &str, at: usize, what: &str) -> Error {
    Error::data(format!(
        "{name}: the event record at byte {at} is corrupt ({what})"
    ))
    .with_hint("an event file is append-only: a bad record before the end is damage, not a run still writing")
}

/// One `Event`: its step and the scalars of its `summary`.
fn event(data: &[u8], into: &mut Scalars) -> std::result::Result<(), String> {
    let mut step = 0i64;
    let mut summaries: Vec<&[u8]> = Vec::new();
    for field in Fields::new(data) {
        match field? {
            (2, Wire::Varint(v)) => step = v as i64,
            (5, Wire::Bytes(b)) => summaries.push(b),
            _ => {}
        }
    }
    for summary in summaries {
        for field in Fields::new(summary) {
            if let (1, Wire::Bytes(value)) = field?
                && let Some((tag, v)) = summary_value(value)?
            {
                into.values.entry(step).or_default().insert(tag, v);
            }
        }
    }
    Ok(())
}

/// A `Summary.Value`'s tag and scalar, when it holds one.
fn summary_value(data: &[u8]) -> std::result::Result<Option<(String, f64)>, String> {
    let mut tag = None;
    let mut value = None;
    for field in Fields::new(data) {
        match field? {
            (1, Wire::Bytes(b)) => {
                tag = Some(String::from_utf8_lossy(b).into_owned());
            }
            (2, Wire::Fixed32(bits)) => value = Some(f32::from_bits(bits) as f64),
            (8, Wire::Bytes(tensor)) => value = value.or(tensor_scalar(tensor)?),
            _ => {}
        }
    }
    Ok(tag.zip(value))
}

/// A `TensorProto` of one float or double (`float_val`, `double_val` or `tensor_content`).
fn tensor_scalar(data: &[u8]) -> std::result::Result<Option<f64>, String> {
    let mut dtype = 0u64;
    let mut content: Option<&[u8]> = None;
    let mut floats: Vec<f64> = Vec::new();
    for field in Fields::new(data) {
        match field? {
            (1, Wire::Varint(d)) => dtype = d,
            (4, Wire::Bytes(b)) => content = Some(b),
            // float_val, packed or not
            (5, Wire::Fixed32(bits)) => floats.push(f32::from_bits(bits) as f64),
            (5, Wire::Bytes(b)) => floats.extend(
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4")) as f64),
            ),
            // double_val
            (6, Wire::Fixed64(bits)) => floats.push(f64::from_bits(bits)),
            (6, Wire::Bytes(b)) => floats.extend(
                b.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8"))),
            ),
            _ => {}
        }
    }
    if let [one] = floats.as_slice() {
        return Ok(Some(*one));
    }
    // DT_FLOAT = 1, DT_DOUBLE = 2
    Ok(match (dtype, content) {
        (1, Some(b)) if b.len() == 4 => Some(f32::from_le_bytes(b.try_into().expect("4")) as f64),
        (2, Some(b)) if b.len() == 8 => Some(f64::from_le_bytes(b.try_into().expect("8"))),
        _ => None,
    })
}

/// A protobuf field's value by wire type.
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// The fields of one protobuf message, in order.
struct Fields<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    fn new(data: &'a [u8]) -> Self {
        Fields { data, pos: 0 }
    }

    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .data
                .get(self.pos)
                .ok_or("a varint runs past the end")?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint longer than 10 bytes".into())
    }

    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or("a field runs past the end")?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = std::result::Result<(u64, Wire<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.data.len() {
            return None;
        }
        let field = (|| {
            let key = self.varint()?;
            let wire = match key & 7 {
                0 => Wire::Varint(self.varint()?),
                1 => Wire::Fixed64(u64::from_le_bytes(self.take(8)?.try_into().expect("8"))),
                2 => {
                    let n = usize::try_from(self.varint()?).map_err(|_| "a huge length")?;
                    Wire::Bytes(self.take(n)?)
                }
                5 => Wire::Fixed32(u32::from_le_bytes(self.take(4)?.try_into().expect("4"))),
                w => return Err(format!("wire type {w} is not one an event uses")),
            };
            Ok((key >> 3, wire))
        })();
        if field.is_err() {
            self.pos = self.data.len(); // stop after the first error
        }
        Some(field)
    }
}

/// TFRecord's masked CRC-32C.
fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    (crc.rotate_right(15)).wrapping_add(0xa282_ead8)
}

/// CRC-32C (Castagnoli), bitwise over a table built once.
fn crc32c(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0x82f6_3b78 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        t
    });
    let mut crc = !0u32;
    for &b in data {
        crc = table[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_of_the_standard_check_string() {
        // the CRC catalogue's check value of CRC-32/ISCSI (CRC-32C) for "123456789"
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    /// A record framing `data` as TFRecord does.
    fn record(data: &[u8]) -> Vec<u8> {
        let len = (data.len() as u64).to_le_bytes();
        let mut out = len.to_vec();
        out.extend(masked_crc(&len).to_le_bytes());
        out.extend(data);
        out.extend(masked_crc(data).to_le_bytes());
        out
    }

    /// An Event with `step` and one simple_value (protobuf encoded by hand, field by field).
    fn scalar_event(step: u8, tag: &str, v: f32) -> Vec<u8> {
        let mut value = vec![0x0a, tag.len() as u8];
        value.extend(tag.as_bytes());
        value.push(0x15); // field 2, fixed32
        value.extend(v.to_le_bytes());
        let mut summary = vec![0x0a, value.len() as u8];
        summary.extend(value);
        let mut event = vec![0x09]; // wall_time, fixed64
        event.extend(1.5f64.to_le_bytes());
        event.extend([0x10, step]); // step, varint
        event.push(0x2a); // summary, bytes
        event.push(summary.len() as u8);
        event.extend(summary);
        event
    }

    #[test]
    fn scalars_are_read_by_step_and_tag_and_a_partial_tail_is_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.out.tfevents.1.host");
        let mut bytes = record(b"\x1a\x0dbrain.Event:2"); // file_version
        bytes.extend(record(&scalar_event(1, "critic/score/mean", 0.5)));
        bytes.extend(record(&scalar_event(2, "critic/score/mean", 0.25)));
        let whole = bytes.len();
        bytes.extend(&record(&scalar_event(3, "critic/score/mean", 1.0))[..10]);
        std::fs::write(&path, &bytes).unwrap();
        let mut s = Scalars::default();
        read_file(&path, &mut s).unwrap();
        assert_eq!(s.values[&1]["critic/score/mean"], 0.5);
        assert_eq!(s.values[&2]["critic/score/mean"], 0.25);
        assert!(!s.values.contains_key(&3));
        assert_eq!(s.notes.len(), 1);
        assert!(s.notes[0].contains("partial record"), "{:?}", s.notes);
        // a damaged record before the end is an error naming the byte
        let mut bad = bytes[..whole].to_vec();
        let at = bad.len() - 10;
        bad[at] ^= 0xff;
        bad.extend(record(&scalar_event(3, "x", 1.0)));
        std::fs::write(&path, &bad).unwrap();
        let e = read_file(&path, &mut Scalars::default()).unwrap_err();
        assert!(e.to_string().contains("corrupt"), "{e}");
    }
}
