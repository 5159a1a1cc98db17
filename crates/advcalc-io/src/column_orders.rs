//! OUT's float columns under the type-defined column order, as IN's writer (pyarrow) marks
//! them. parquet 60 marks every float column `IEEE_754_TOTAL_ORDER` in the footer (and has
//! no setting for it); Arrow C++ (pyarrow 26, DuckDB's reader alike) then drops the min/max
//! statistics of those columns, so an engine that prunes by statistics read OUT worse than
//! IN, the copied chunks' statistics included. The min/max both writers compute exclude NaN,
//! which is what the type-defined order asks of floats, so the footer's `column_orders`
//! entries are rewritten in place: in Thrift's compact protocol the two orders are one-field
//! unions of an empty struct, `1C 00 00` and `2C 00 00`, the same length, so no offset moves.
//!
//! The footer ends `… <column_orders: list of N unions> 00 <len> PAR1` when the writer adds
//! nothing after it (no encryption); anything else leaves the file as it is.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

/// The union's field header for `TYPE_ORDER` (id 1) and `IEEE_754_TOTAL_ORDER` (id 2),
/// each a struct.
const TYPE_ORDER: u8 = 0x1C;
const IEEE_754: u8 = 0x2C;

/// Rewrite `file`'s IEEE 754 column orders as type-defined ones; `leaves` is the schema's
/// leaf count. Whether anything was rewritten.
pub fn type_defined_floats(file: &mut File, leaves: usize) -> std::io::Result<bool> {
    let len = file.seek(SeekFrom::End(0))?;
    // the list: header (≤ 6 bytes), 3 bytes a leaf, the struct's stop; then length and magic
    let want = (3 * leaves as u64 + 8 + 8).min(len);
    let start = len - want;
    let mut tail = vec![0u8; want as usize];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut tail)?;
    let Some(at) = orders_at(&tail, leaves) else {
        return Ok(false);
    };
    let mut changed = false;
    for k in 0..leaves {
        let b = &mut tail[at + 3 * k];
        if *b == IEEE_754 {
            *b = TYPE_ORDER;
            changed = true;
        }
    }
    if changed {
        file.seek(SeekFrom::Start(start + at as u64))?;
        file.write_all(&tail[at..at + 3 * leaves])?;
    }
    Ok(changed)
}

/// Where, in `tail` (the file's last bytes), the `leaves` column orders begin, if the footer
/// ends as described above.
fn orders_at(tail: &[u8], leaves: usize) -> Option<usize> {
    let n = tail.len();
    if n < 8 || &tail[n - 4..] != b"PAR1" || leaves == 0 {
        return None;
    }
    let stop = n - 9; // the FileMetaData struct's stop byte
    if tail[stop] != 0 {
        return None;
    }
    let at = stop.checked_sub(3 * leaves)?;
    let unions_ok = (0..leaves).all(|k| {
        let u = &tail[at + 3 * k..at + 3 * k + 3];
        matches!(u[0], TYPE_ORDER | IEEE_754) && u[1] == 0 && u[2] == 0
    });
    if !unions_ok {
        return None;
    }
    // the list header: size and element type (struct, 0xC) in one byte below 15 elements,
    // else 0xFC then the size as a varint
    let header_ok = if leaves < 15 {
        at >= 1 && tail[at - 1] == ((leaves as u8) << 4 | 0x0C)
    } else {
        let mut varint = Vec::new();
        let mut v = leaves as u64;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                varint.push(b);
                break;
            }
            varint.push(b | 0x80);
        }
        let h = varint.len() + 1;
        at >= h && tail[at - h] == 0xFC && tail[at - h + 1..at] == varint[..]
    };
    header_ok.then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A footer tail: list header, unions, stop, length, magic.
    fn tail(orders: &[u8]) -> Vec<u8> {
        let mut t = vec![0x19, ((orders.len() as u8) << 4) | 0x0C];
        for &o in orders {
            t.extend([o, 0, 0]);
        }
        t.push(0);
        t.extend(100u32.to_le_bytes());
        t.extend(b"PAR1");
        t
    }

    #[test]
    fn the_ieee_entries_become_type_defined_and_the_rest_stay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        let mut bytes = b"PAR1 anything before the footer's end".to_vec();
        bytes.extend(tail(&[TYPE_ORDER, IEEE_754, IEEE_754, TYPE_ORDER]));
        std::fs::write(&path, &bytes).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        assert!(type_defined_floats(&mut f, 4).unwrap());
        drop(f);
        let after = std::fs::read(&path).unwrap();
        let mut want = b"PAR1 anything before the footer's end".to_vec();
        want.extend(tail(&[TYPE_ORDER; 4]));
        assert_eq!(after, want);
    }

    #[test]
    fn a_footer_of_another_shape_is_left_alone() {
        // the wrong leaf count, a stray byte, no magic
        let t = tail(&[IEEE_754, IEEE_754]);
        assert!(orders_at(&t, 3).is_none());
        let mut stray = t.clone();
        let n = stray.len();
        stray[n - 9] = 7;
        assert!(orders_at(&stray, 2).is_none());
        assert!(orders_at(&t[..t.len() - 1], 2).is_none());
        assert_eq!(orders_at(&t, 2), Some(2));
    }

    #[test]
    fn fifteen_or_more_leaves_use_the_long_list_header() {
        let mut t = vec![0x19, 0xFC, 20];
        for _ in 0..20 {
            t.extend([IEEE_754, 0, 0]);
        }
        t.push(0);
        t.extend(1u32.to_le_bytes());
        t.extend(b"PAR1");
        assert_eq!(orders_at(&t, 20), Some(3));
    }
}
