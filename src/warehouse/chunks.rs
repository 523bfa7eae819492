//! A stored file's encoded column chunks, read without decoding: its footer with the page index
//! (so copies keep their page statistics), the byte ranges of its row groups' column chunks
//! grouped into bounded range reads, and those ranges fetched one or two ahead. A fetched range
//! is a Parquet [`ChunkReader`] over the part of the file it holds, which is what
//! `SerializedRowGroupWriter::append_column` copies a chunk from.

use std::ops::Range;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{
    PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData,
};
use parquet::file::reader::{ChunkReader, Length};

use super::object_reader::StoreFileReader;

/// Range reads in flight per file, including the one being copied.
const PREFETCH: usize = 2;

/// Bytes read from the end of a file for its footer and page index in one request (more are read
/// if they do not fit).
const FOOTER_HINT: usize = 256 << 10;

/// Reads the footer of `path` (`size` bytes long) with its page index, if it has one.
pub async fn metadata_with_page_index(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    size: u64,
) -> Result<ParquetMetaData> {
    let mut reader = StoreFileReader::new(store.clone(), path.clone(), size);
    ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .with_prefetch_hint(Some(FOOTER_HINT))
        .load_and_finish(&mut reader, size)
        .await
}

/// One range read: the columns `columns` of row group `row_group`, which lie in `bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// Row group index.
    pub row_group: usize,
    /// Column indices, consecutive.
    pub columns: Range<usize>,
    /// Bytes of the file that hold them.
    pub bytes: Range<u64>,
}

/// Where a column chunk lies in its file (dictionary page first, if any).
fn chunk_range(rg: &RowGroupMetaData, col: usize) -> Result<Range<u64>> {
    let c = rg.column(col);
    let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
    let len = c.compressed_size();
    match (u64::try_from(start), u64::try_from(len)) {
        (Ok(s), Ok(l)) => Ok(s..s + l),
        _ => Err(ParquetError::General(format!(
            "column chunk {col} has a negative offset or size ({start}, {len})"
        ))),
    }
}

/// Groups each row group's column chunks, in order, into range reads of about `target` bytes:
/// consecutive chunks that are adjacent in the file share a read until it would exceed
/// `target` (a single chunk larger than `target` is read alone).
pub fn plan_fetches(meta: &ParquetMetaData, target: u64) -> Result<Vec<Fetch>> {
    let mut out: Vec<Fetch> = Vec::new();
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let mut current: Option<Fetch> = None;
        for col in 0..rg.num_columns() {
            let r = chunk_range(rg, col)?;
            match &mut current {
                Some(f) if f.bytes.end == r.start && r.end - f.bytes.start <= target => {
                    f.columns.end = col + 1;
                    f.bytes.end = r.end;
                }
                _ => {
                    out.extend(current.take());
                    current = Some(Fetch {
                        row_group: g,
                        columns: col..col + 1,
                        bytes: r,
                    });
                }
            }
        }
        out.extend(current);
    }
    Ok(out)
}

/// The planned ranges of `path`, fetched in order with up to [`PREFETCH`] reads in flight.
pub fn fetch_all(
    store: Arc<dyn ObjectStore>,
    path: Path,
    file_len: u64,
    fetches: Vec<Fetch>,
) -> BoxStream<'static, Result<(Fetch, Fetched)>> {
    futures::stream::iter(fetches)
        .map(move |f| {
            let (store, path) = (store.clone(), path.clone());
            async move {
                let data = store
                    .get_range(&path, f.bytes.clone())
                    .await
                    .map_err(|e| ParquetError::External(Box::new(e)))?;
                if data.len() as u64 != f.bytes.end - f.bytes.start {
                    return Err(ParquetError::General(format!(
                        "{path}: asked for bytes {:?}, got {}",
                        f.bytes,
                        data.len()
                    )));
                }
                let fetched = Fetched {
                    offset: f.bytes.start,
                    data,
                    file_len,
                };
                Ok((f, fetched))
            }
        })
        .buffered(PREFETCH)
        .boxed()
}

/// Part of a file, held in memory: bytes `offset..offset + data.len()` of a `file_len`-byte file.
#[derive(Debug, Clone)]
pub struct Fetched {
    offset: u64,
    data: Bytes,
    file_len: u64,
}

impl Fetched {
    /// `data` as bytes `offset..` of a `file_len`-byte file.
    pub fn new(offset: u64, data: Bytes, file_len: u64) -> Self {
        Self {
            offset,
            data,
            file_len,
        }
    }

    fn slice(&self, start: u64, len: Option<usize>) -> Result<Bytes> {
        let held = self.offset..self.offset + self.data.len() as u64;
        let from = start
            .checked_sub(self.offset)
            .filter(|_| start <= held.end)
            .ok_or_else(|| ParquetError::General(format!("byte {start} is outside {held:?}")))?
            as usize;
        let to = match len {
            Some(l) if from + l <= self.data.len() => from + l,
            Some(l) => {
                return Err(ParquetError::General(format!(
                    "bytes {start}..{} are outside {held:?}",
                    start + l as u64
                )));
            }
            None => self.data.len(),
        };
        Ok(self.data.slice(from..to))
    }
}

impl Length for Fetched {
    fn len(&self) -> u64 {
        self.file_len
    }
}

impl ChunkReader for Fetched {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> Result<Self::T> {
        Ok(self.slice(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes> {
        self.slice(start, Some(length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn fetched_serves_only_what_it_holds() {
        let f = Fetched::new(100, Bytes::from_static(b"abcdef"), 1000);
        assert_eq!(f.len(), 1000);
        assert_eq!(&f.get_bytes(102, 3).unwrap()[..], b"cde");
        let mut s = String::new();
        f.get_read(104).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "ef");
        assert!(f.get_bytes(99, 1).is_err());
        assert!(f.get_bytes(104, 3).is_err());
        assert!(f.get_read(107).is_err());
        let mut rest = Vec::new();
        f.get_read(106).unwrap().read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }
}
