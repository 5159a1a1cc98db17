//! IN's bytes by position, from many threads at once: a local file, or (with the `cloud`
//! feature) an object in a store.
//!
//! A local file is read with positional I/O (`pread`): `std::fs::File` clones share one
//! cursor, so parquet's `ChunkReader` for `File` races under parallel decoding. An object is
//! read by ranged GETs pinned to the ETag it had when opened (`positional/object.rs`); the column chunks
//! a row group needs are fetched ahead, at most one GET each ([`PositionalFile::prefetched`]),
//! so parquet's per-page reads are served from memory, not one request per page.
//!
//! Either refuses any read that would go past the end of IN before allocating anything: a
//! damaged footer or page header can declare any size (up to 2^63 bytes), and parquet sizes
//! its buffer from the declaration.

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

#[cfg(feature = "cloud")]
mod object;

#[derive(Debug, Clone)]
pub struct PositionalFile {
    backing: Backing,
    len: u64,
}

#[derive(Debug, Clone)]
enum Backing {
    File(Arc<File>),
    #[cfg(feature = "cloud")]
    Object(object::ObjectBacking),
}

impl PositionalFile {
    /// The open local file itself (`None` for an object).
    pub fn file(&self) -> Option<&Arc<File>> {
        match &self.backing {
            Backing::File(file) => Some(file),
            #[cfg(feature = "cloud")]
            Backing::Object(_) => None,
        }
    }

    pub fn new(file: File) -> std::io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(Self {
            backing: Backing::File(Arc::new(file)),
            len,
        })
    }

    /// An object opened for reading (its size is the one its HEAD gave).
    #[cfg(feature = "cloud")]
    pub fn object(source: crate::object::source::ObjectSource) -> Self {
        Self {
            len: source.size(),
            backing: Backing::Object(object::ObjectBacking::new(source)),
        }
    }

    /// The object this reads, if it reads one.
    #[cfg(feature = "cloud")]
    pub fn object_source(&self) -> Option<&crate::object::source::ObjectSource> {
        match &self.backing {
            Backing::Object(o) => Some(o.source()),
            Backing::File(_) => None,
        }
    }

    /// This reader with `ranges()` (byte ranges about to be read: a row group's column
    /// chunks) already in memory: for an object, at most one GET per range (ranges side by
    /// side share one, see `positional/object.rs`), all in flight at once, and reads inside them then
    /// cost no request; for a local file, the file itself (the kernel's page cache is its
    /// prefetch), `ranges` not even called.
    pub fn prefetched(
        &self,
        ranges: impl FnOnce() -> Vec<Range<u64>>,
    ) -> crate::error::Result<Self> {
        match &self.backing {
            Backing::File(_) => {
                let _ = ranges;
                Ok(self.clone())
            }
            #[cfg(feature = "cloud")]
            Backing::Object(o) => Ok(Self {
                backing: Backing::Object(o.prefetched(&ranges())?),
                len: self.len,
            }),
        }
    }
}

fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}

impl Length for PositionalFile {
    fn len(&self) -> u64 {
        self.len
    }
}

/// A reader with its own position.
pub struct PositionalReader {
    file: Arc<File>,
    pos: u64,
}

impl Read for PositionalReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = read_at(&self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// What `get_read` hands out: buffered positional reads of a local file, or an object's
/// bytes (from memory where prefetched).
pub enum RangeReader {
    // Buffered in large reads: copying a column chunk into the output goes through this
    // reader, and 8 KiB reads cost a system call each.
    File(std::io::BufReader<PositionalReader>),
    #[cfg(feature = "cloud")]
    Object(object::ObjectReader),
}

impl Read for RangeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            RangeReader::File(r) => r.read(buf),
            #[cfg(feature = "cloud")]
            RangeReader::Object(r) => r.read(buf),
        }
    }
}

impl ChunkReader for PositionalFile {
    type T = RangeReader;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        if start > self.len {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "cannot read at offset {start}: the file holds {} bytes",
                self.len
            )));
        }
        match &self.backing {
            Backing::File(file) => Ok(RangeReader::File(std::io::BufReader::with_capacity(
                1 << 20,
                PositionalReader {
                    file: file.clone(),
                    pos: start,
                },
            ))),
            #[cfg(feature = "cloud")]
            Backing::Object(o) => Ok(RangeReader::Object(o.reader(start, self.len))),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        // Checked before the buffer is allocated: the length comes from the file itself.
        if start
            .checked_add(length as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "cannot read {length} bytes at offset {start}: the file holds {} bytes",
                self.len
            )));
        }
        match &self.backing {
            Backing::File(file) => {
                let buf = read_exact_at(file, start, length).map_err(|e| {
                    parquet::errors::ParquetError::EOF(format!(
                        "cannot read {length} bytes at offset {start}: {e}"
                    ))
                })?;
                Ok(buf.into())
            }
            #[cfg(feature = "cloud")]
            Backing::Object(o) => o.get_bytes(start, length),
        }
    }
}

/// `length` bytes at `offset`. On Linux into memory that is not zeroed first: a column chunk
/// is tens of MiB, and zeroing it was a pass over it before the read's own.
fn read_exact_at(file: &File, offset: u64, length: usize) -> std::io::Result<Vec<u8>> {
    let mut buf: Vec<u8> = Vec::with_capacity(length);
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        while buf.len() < length {
            let done = buf.len();
            let at = libc::off_t::try_from(offset + done as u64)
                .map_err(|_| std::io::Error::other("offset out of range"))?;
            // SAFETY: the kernel writes at most `length - done` bytes into `buf`'s spare
            // capacity (it holds `length - done`); the length then grows by what it wrote.
            let n = unsafe {
                libc::pread(
                    file.as_raw_fd(),
                    buf.as_mut_ptr().add(done).cast(),
                    length - done,
                    at,
                )
            };
            match n {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                n if n < 0 => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
                // SAFETY: the `n` bytes after `done` were just written
                n => unsafe { buf.set_len(done + n as usize) },
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        buf.resize(length, 0);
        PositionalReader {
            file: Arc::new(file.try_clone()?),
            pos: offset,
        }
        .read_exact(&mut buf)?;
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ten-byte file, opened.
    fn ten_bytes() -> (tempfile::TempDir, std::path::PathBuf, PositionalFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let f = PositionalFile::new(File::open(&path).unwrap()).unwrap();
        (dir, path, f)
    }

    #[test]
    fn reads_past_the_end_are_refused_without_allocating() {
        let (_dir, _, f) = ten_bytes();
        assert_eq!(&f.get_bytes(2, 8).unwrap()[..], b"23456789");
        assert_eq!(f.get_bytes(10, 0).unwrap().len(), 0);
        // 2^40 bytes would abort the process if it were allocated.
        let e = f.get_bytes(4, 1 << 40).unwrap_err().to_string();
        assert!(e.contains("the file holds 10 bytes"), "{e}");
        assert!(f.get_bytes(u64::MAX, 2).is_err());
        assert!(f.get_bytes(9, 2).is_err());
        assert!(f.get_read(11).is_err());
        let mut rest = Vec::new();
        f.get_read(7).unwrap().read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"789");
    }

    #[test]
    fn a_file_cut_short_after_opening_is_an_error() {
        let (_dir, path, f) = ten_bytes();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(5)
            .unwrap();
        assert_eq!(&f.get_bytes(1, 4).unwrap()[..], b"1234");
        let e = f.get_bytes(2, 8).unwrap_err().to_string();
        assert!(e.contains("cannot read 8 bytes at offset 2"), "{e}");
    }
}
