//! A file that many threads read at once. `std::fs::File` clones share one cursor, so
//! parquet's `ChunkReader` for `File` races under parallel decoding; this one reads with
//! positional I/O (`pread`), which has no shared cursor.

use std::fs::File;
use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

#[derive(Debug, Clone)]
pub struct PositionalFile {
    file: Arc<File>,
    len: u64,
}

impl PositionalFile {
    /// The open file itself.
    pub fn file(&self) -> Arc<File> {
        self.file.clone()
    }

    pub fn new(file: File) -> std::io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(Self {
            file: Arc::new(file),
            len,
        })
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

impl ChunkReader for PositionalFile {
    // Buffered in large reads: copying a column chunk into the output goes through this
    // reader, and 8 KiB reads cost a system call each.
    type T = std::io::BufReader<PositionalReader>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::with_capacity(
            1 << 20,
            PositionalReader {
                file: self.file.clone(),
                pos: start,
            },
        ))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let mut buf = vec![0u8; length];
        let mut reader = PositionalReader {
            file: self.file.clone(),
            pos: start,
        };
        reader.read_exact(&mut buf).map_err(|e| {
            parquet::errors::ParquetError::EOF(format!(
                "cannot read {length} bytes at offset {start}: {e}"
            ))
        })?;
        Ok(buf.into())
    }
}
