//! Copying IN's column chunks into OUT inside the kernel.
//!
//! parquet's writer appends a copied column chunk by reading its bytes from a `ChunkReader`
//! and writing them to the output (`std::io::copy` through its own buffer): a `pread` into
//! user space, two memory copies, a `write` back. Here the reader side hands out placeholder
//! bytes without reading anything, and the writer side, told in advance which stretch of its
//! byte stream is a copy of which stretch of IN, drops the placeholders and has the kernel
//! copy the real bytes from IN to OUT (`copy_file_range`; `pread`/`write` where the file
//! systems do not support it). parquet still counts every byte, so its offsets and footer are
//! exactly what a plain copy gives: the output is byte-identical. IN an object: the copied
//! bytes are the column chunks fetched ahead for the row group (one ranged GET each, see
//! `PositionalFile::prefetched`), written from memory.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

use crate::positional::PositionalFile;

/// A stretch of the output stream that is a copy of IN's bytes `from..from + len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Splice {
    /// Position in the output stream (bytes written before it).
    pub at: u64,
    pub len: u64,
    /// Offset in IN.
    pub from: u64,
}

/// The splices announced and not yet written, in stream order.
pub type Splices = Arc<Mutex<VecDeque<Splice>>>;

/// IN as parquet's writer sees it when appending a copied chunk: `get_read` yields
/// placeholder bytes (the `SpliceWriter` replaces them); `get_bytes` reads for real.
pub struct PlaceholderSource(pub PositionalFile);

pub struct Placeholders;

impl Read for Placeholders {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // The contents never reach the file: the writer drops them.
        Ok(buf.len())
    }
}

impl Length for PlaceholderSource {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl ChunkReader for PlaceholderSource {
    type T = Placeholders;

    fn get_read(&self, _start: u64) -> parquet::errors::Result<Placeholders> {
        Ok(Placeholders)
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.0.get_bytes(start, length)
    }
}

/// The output file: buffers what parquet writes, and turns announced splices into kernel
/// copies from IN.
pub struct SpliceWriter {
    file: File,
    source: PositionalFile,
    splices: Splices,
    /// Bytes received and not yet written (all before any pending splice).
    buf: Vec<u8>,
    /// Stream position of `buf[0]`.
    pos: u64,
    /// Placeholder bytes received for the splice at the queue's front.
    pending: u64,
}

const BUFFER: usize = 4 << 20;

impl SpliceWriter {
    pub fn new(file: File, source: PositionalFile, splices: Splices) -> Self {
        SpliceWriter {
            file,
            source,
            splices,
            buf: Vec::with_capacity(BUFFER),
            pos: 0,
            pending: 0,
        }
    }

    /// Read the splices from `source` from now on (IN with the next row group's chunks
    /// prefetched); every splice announced so far must have been written (after `flush`).
    pub fn set_source(&mut self, source: PositionalFile) {
        self.source = source;
    }

    /// Everything written (after `flush`): the file, for syncing.
    pub fn into_file(mut self) -> io::Result<File> {
        self.flush()?;
        Ok(self.file)
    }

    fn front(&self) -> Option<Splice> {
        self.splices
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .front()
            .copied()
    }

    fn write_buf(&mut self) -> io::Result<()> {
        self.file.write_all(&self.buf)?;
        self.pos += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Copy the placeholder bytes received so far for the front splice.
    fn copy_pending(&mut self) -> io::Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        let s = self
            .front()
            .ok_or_else(|| io::Error::other("splice queue empty"))?;
        let done = self.pos - s.at;
        match self.source.file() {
            Some(source) => copy_range(source, s.from + done, &mut self.file, self.pending)?,
            None => {
                let len = usize::try_from(self.pending).map_err(io::Error::other)?;
                let bytes = self
                    .source
                    .get_bytes(s.from + done, len)
                    .map_err(io::Error::other)?;
                self.file.write_all(&bytes)?;
            }
        }
        self.pos += self.pending;
        self.pending = 0;
        if self.pos == s.at + s.len {
            self.splices
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
        }
        Ok(())
    }
}

impl Write for SpliceWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        // Stream position of data[0].
        let at = self.pos + self.buf.len() as u64 + self.pending;
        match self.front() {
            Some(s) if at >= s.at => {
                if at >= s.at + s.len {
                    return Err(io::Error::other("a splice was skipped"));
                }
                if self.pending == 0 {
                    self.write_buf()?;
                }
                let n = (data.len() as u64).min(s.at + s.len - at);
                self.pending += n;
                if at + n == s.at + s.len {
                    self.copy_pending()?;
                }
                Ok(n as usize)
            }
            next => {
                let room = next.map_or(u64::MAX, |s| s.at - at);
                let n = (data.len() as u64).min(room) as usize;
                self.buf.extend_from_slice(&data[..n]);
                if self.buf.len() >= BUFFER {
                    self.write_buf()?;
                }
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.pending > 0 {
            self.copy_pending()?;
        }
        self.write_buf()?;
        self.file.flush()
    }
}

/// Copy `len` bytes of `source` from `offset` to `dest`'s current position.
fn copy_range(source: &File, offset: u64, dest: &mut File, len: u64) -> io::Result<()> {
    let mut done = 0;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        while done < len {
            let mut off_in = (offset + done) as libc::loff_t;
            // SAFETY: both descriptors are open files we own; `off_in` is a valid pointer and
            // the output offset is the file's own position (null).
            let n = unsafe {
                libc::copy_file_range(
                    source.as_raw_fd(),
                    &mut off_in,
                    dest.as_raw_fd(),
                    std::ptr::null_mut(),
                    (len - done) as usize,
                    0,
                )
            };
            if n > 0 {
                done += n as u64;
                continue;
            }
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "input ended inside a column chunk",
                ));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // Not supported between these files: copy through user space instead.
                Some(
                    libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EPERM,
                ) => {
                    break;
                }
                Some(libc::EINTR) => continue,
                _ => return Err(e),
            }
        }
    }
    copy_through_user_space(source, offset + done, dest, len - done)
}

/// `pread` and `write`, 1 MiB at a time: where the kernel cannot copy between the files
/// (other file systems, older kernels, other systems).
fn copy_through_user_space(
    source: &File,
    offset: u64,
    dest: &mut File,
    len: u64,
) -> io::Result<()> {
    let mut chunk = vec![0u8; len.min(1 << 20) as usize];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(chunk.len() as u64) as usize;
        read_exact_at(source, &mut chunk[..n], offset + done)?;
        dest.write_all(&chunk[..n])?;
        done += n as u64;
    }
    Ok(())
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0;
        while done < buf.len() {
            let n = std::os::windows::fs::FileExt::seek_read(
                file,
                &mut buf[done..],
                offset + done as u64,
            )?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_space_copy_gives_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let input: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(dir.path().join("in"), &input).unwrap();
        let source = File::open(dir.path().join("in")).unwrap();
        let mut out = File::create(dir.path().join("out")).unwrap();
        out.write_all(b"head").unwrap();
        // more than one 1 MiB chunk, from an odd offset
        copy_through_user_space(&source, 12_345, &mut out, 2_500_000).unwrap();
        drop(out);
        let mut expected = b"head".to_vec();
        expected.extend_from_slice(&input[12_345..12_345 + 2_500_000]);
        assert_eq!(std::fs::read(dir.path().join("out")).unwrap(), expected);
        // a stretch past the end of IN is an error, not a short file
        let mut out = File::create(dir.path().join("short")).unwrap();
        assert!(copy_through_user_space(&source, 2_999_000, &mut out, 5_000).is_err());
    }

    /// Write `parts` (real bytes, or a splice of IN) through the writer in small pieces and
    /// check the file equals what a plain copy would give.
    #[test]
    fn splices_become_the_input_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let input: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.path().join("in"), &input).unwrap();
        let source = PositionalFile::new(File::open(dir.path().join("in")).unwrap()).unwrap();
        let splices: Splices = Default::default();
        let out = File::create(dir.path().join("out")).unwrap();
        let mut w = SpliceWriter::new(out, source, splices.clone());
        let mut expected = Vec::new();
        // real, splice, splice back to back, real, splice at the end
        let plan: [(bool, usize, usize); 5] = [
            (false, 0, 1000),
            (true, 500, 30_000),
            (true, 70_000, 20_000),
            (false, 0, 12_345),
            (true, 99_000, 1000),
        ];
        let mut at = 0u64;
        for (splice, from, len) in plan {
            if splice {
                splices.lock().unwrap().push_back(Splice {
                    at,
                    len: len as u64,
                    from: from as u64,
                });
                expected.extend_from_slice(&input[from..from + len]);
                // placeholders in odd-sized pieces
                let junk = vec![0xAAu8; len];
                for piece in junk.chunks(777) {
                    w.write_all(piece).unwrap();
                }
            } else {
                let real: Vec<u8> = (0..len).map(|i| (i % 13) as u8 + 100).collect();
                expected.extend_from_slice(&real);
                w.write_all(&real).unwrap();
            }
            at += len as u64;
        }
        w.into_file().unwrap();
        assert!(splices.lock().unwrap().is_empty());
        assert_eq!(std::fs::read(dir.path().join("out")).unwrap(), expected);
    }
}
