//! The segment being written: opened lazily (named by the first sequence number it will hold) from
//! a pre-allocated [`spare`](super::spare) when one is ready, rotated at `segment_size`, and after
//! a failed write cut back at once to its last good byte —
//! so a batch whose clients were told "not stored" never reappears at recovery — then left for a
//! fresh segment (a file-size limit or a bad region stays with the file). If even the cut fails,
//! nothing more is written until a later cut succeeds.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tracing::{error, info};

use super::segment::{SegmentIds, SegmentMeta, file_name, sync_dir};
use super::spare::Spares;

/// The open segment and what is known about it.
pub(super) struct LogFile {
    dir: PathBuf,
    segment_size: u64,
    file: Option<File>,
    /// Bytes of whole, synced batches in `file`.
    len: u64,
    /// The open file's pre-allocated size (0: not pre-allocated, writes append).
    capacity: u64,
    spares: Spares,
    /// A failed batch past `len` still has to be cut off.
    needs_cut: bool,
    /// Every live segment (the open one last), shared with segment collection.
    segments: Arc<Mutex<Vec<SegmentMeta>>>,
}

impl LogFile {
    pub fn new(dir: PathBuf, segment_size: u64, segments: Arc<Mutex<Vec<SegmentMeta>>>) -> Self {
        LogFile {
            spares: Spares::new(&dir, segment_size),
            dir,
            segment_size,
            file: None,
            len: 0,
            capacity: 0,
            needs_cut: false,
            segments,
        }
    }

    /// Writes and fsyncs `buf` (records `first_seq..=last_seq`; `ids` are its client ids, for
    /// the archive). On error the partial batch is still in the file: call
    /// [`LogFile::cut_failed`] (the next call cuts it otherwise).
    pub fn append(
        &mut self,
        buf: &[u8],
        (first_seq, last_seq): (u64, u64),
        ids: &mut SegmentIds,
    ) -> std::io::Result<()> {
        if self.needs_cut {
            self.cut()?;
        }
        if self.capacity > 0 && self.len > 0 && self.len + buf.len() as u64 > self.capacity {
            self.leave();
        }
        if self.file.is_none() {
            let spare = self.spares.take();
            let (f, meta) = open_segment(&self.dir, first_seq, spare.as_deref())?;
            info!(segment = %meta.path.display(), preallocated = spare.is_some(), "WAL segment opened");
            self.segments.lock().expect("segments lock").push(meta);
            self.len = 0;
            self.capacity = if spare.is_some() {
                self.segment_size
            } else {
                0
            };
            self.file = Some(f);
        }
        let f = self.file.as_mut().expect("opened above");
        // Always at the end of the good bytes, never at the file's offset: after a cut that
        // kept the file, the offset may still point past a failed write.
        // In a pre-allocated segment the write runs on to the end of its last block with the
        // zeros already there (see [`write_padded_at`]).
        let end = self.capacity;
        match write_padded_at(f, buf, self.len, end).and_then(|_| f.sync_data()) {
            Ok(()) => {
                self.len += buf.len() as u64;
                if let Some(cur) = self.segments.lock().expect("segments lock").last_mut() {
                    cur.last_seq = Some(cur.last_seq.map_or(last_seq, |l| l.max(last_seq)));
                    if ids.count > 0 {
                        let mine = cur.ids.get_or_insert_with(|| SegmentIds {
                            newest: i64::MIN,
                            ..SegmentIds::default()
                        });
                        mine.chunks.append(&mut ids.chunks);
                        mine.count += ids.count;
                        mine.newest = mine.newest.max(ids.newest);
                    }
                }
                if self.capacity == 0 && self.len >= self.segment_size {
                    self.file = None; // the next batch opens a new segment
                }
                Ok(())
            }
            Err(e) => {
                // Cut by the caller ([`LogFile::cut_failed`]), once it has stopped buffered
                // acknowledgements: the cut syncs, which can take a while on a busy disk.
                self.needs_cut = true;
                Err(e)
            }
        }
    }

    /// After a failed [`LogFile::append`]: cuts the partial batch off at once (or, if even that
    /// fails, before the next write).
    pub fn cut_failed(&mut self) {
        if self.needs_cut
            && let Err(c) = self.cut()
        {
            error!(error = %c, "cannot cut a failed WAL write off its segment; will retry before writing again");
        }
    }

    /// Cuts the segment back to its last good byte; after a failure, the next batch goes to a
    /// fresh segment unless this one is still empty.
    fn cut(&mut self) -> std::io::Result<()> {
        if let Some(f) = self.file.as_ref() {
            f.set_len(self.len).and_then(|_| f.sync_data())?;
            // Cut, a pre-allocated file is an appending one now.
            self.capacity = 0;
            if self.len > 0 {
                self.file = None;
            }
        }
        self.needs_cut = false;
        Ok(())
    }

    /// Leaves a full pre-allocated segment for a new one, giving back its unused zeros (recovery
    /// reads a zero tail as the end of a segment either way, so a failure here costs only disk).
    fn leave(&mut self) {
        if let Some(f) = self.file.take()
            && let Err(e) = f.set_len(self.len).and_then(|_| f.sync_data())
        {
            error!(error = %e, "cannot trim the unused tail of a full WAL segment");
        }
    }

    /// At shutdown: a last attempt at a pending cut, then a final sync.
    pub fn close(mut self) {
        if self.needs_cut
            && let Err(e) = self.cut()
        {
            error!(error = %e, "cannot cut a failed WAL write at shutdown; recovery will replay its whole records");
        }
        if self.capacity > 0 {
            self.leave();
        }
        if let Some(f) = self.file.take() {
            let _ = f.sync_all();
        }
        self.spares.close();
    }
}

/// The file system's block: a write that covers part of a block the page cache does not hold
/// makes the kernel read that block from the disk first, on the writer's thread.
const BLOCK: u64 = 4096;

static ZEROS: [u8; BLOCK as usize] = [0; BLOCK as usize];

/// Writes `buf` at `at`, in one call with the zeros that follow it up to the next [`BLOCK`]
/// boundary (at most to `end`, the pre-allocated size: 0 for none). A pre-allocated segment
/// holds zeros there already, so the file's bytes are the same either way; what changes is that
/// the write covers its last block whole. Spares are zeroed around the page cache (`O_DIRECT`,
/// [`super::spare`]), so every group commit that ended inside a block not yet written made
/// ext4 read that block from the disk before writing it — 4 % of a single-event load's samples
/// and a disk read in every commit's wait (BENCHMARKS.md, twenty-sixth session). The next write
/// starts inside a block this one left in the page cache. The padding is only ever a saving: a
/// short write finishes `buf` alone.
fn write_padded_at(f: &File, buf: &[u8], at: u64, end: u64) -> std::io::Result<()> {
    let stop = at + buf.len() as u64;
    let pad = stop.next_multiple_of(BLOCK).min(end).saturating_sub(stop) as usize;
    #[cfg(target_os = "linux")]
    // An offset the C type cannot hold (32-bit targets past 2 GiB) takes the plain write.
    if let Ok(offset) = libc::off_t::try_from(at)
        && pad > 0
        && !buf.is_empty()
    {
        use std::os::fd::AsRawFd;
        let iov = [
            libc::iovec {
                iov_base: buf.as_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            },
            libc::iovec {
                iov_base: ZEROS.as_ptr() as *mut libc::c_void,
                iov_len: pad,
            },
        ];
        // SAFETY: both vectors point at memory readable for their lengths (`buf`, borrowed for
        // the call, and a static), which pwritev only reads; the descriptor is `f`'s, open.
        let n = unsafe { libc::pwritev(f.as_raw_fd(), iov.as_ptr(), 2, offset) };
        if n >= 0 {
            let n = (n as usize).min(buf.len());
            return f.write_all_at(&buf[n..], at + n as u64);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (pad, &ZEROS);
    f.write_all_at(buf, at)
}

/// Opens the segment whose first record is `first_seq`: the `spare` renamed (written from its
/// start), or a new file written by appending.
fn open_segment(
    dir: &std::path::Path,
    first_seq: u64,
    spare: Option<&std::path::Path>,
) -> std::io::Result<(File, SegmentMeta)> {
    let path = dir.join(file_name(first_seq));
    // Never append to an existing file with records: its name says where its numbering starts.
    // An empty one is left by an open whose directory sync failed; it is taken over.
    let taken_over = |e: &std::io::Error| {
        e.kind() == std::io::ErrorKind::AlreadyExists
            && std::fs::metadata(&path).is_ok_and(|m| m.len() == 0)
    };
    if let Some(spare) = spare {
        match std::fs::hard_link(spare, &path) {
            Ok(()) => {}
            Err(e) if taken_over(&e) => std::fs::rename(spare, &path)?,
            Err(e) => {
                let _ = std::fs::remove_file(spare);
                return Err(e);
            }
        }
        let _ = std::fs::remove_file(spare);
        let opened = OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|file| sync_dir(dir).map(|_| file));
        return match opened {
            Ok(file) => Ok((file, new_meta(path, first_seq))),
            Err(e) => {
                // Gone again, so a retry under the same name (a carried write keeps its first
                // number) does not meet a full-size file it may not take over.
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        };
    }
    let file = match OpenOptions::new().create_new(true).append(true).open(&path) {
        Err(e) if taken_over(&e) => OpenOptions::new().append(true).open(&path)?,
        r => r?,
    };
    sync_dir(dir)?;
    Ok((file, new_meta(path, first_seq)))
}

fn new_meta(path: PathBuf, first_seq: u64) -> SegmentMeta {
    SegmentMeta {
        path,
        first_seq,
        last_seq: None,
        // Opened by this process: its ids are collected as they are written.
        ids: Some(SegmentIds {
            newest: i64::MIN,
            ..SegmentIds::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A padded write leaves a pre-allocated file's bytes as a plain write would: the records
    /// where they were written, zeros after them, the size unchanged; the padding stops at the
    /// pre-allocated end, and a file without one grows by the record alone.
    #[test]
    fn padded_writes_change_no_byte_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let size = 3 * BLOCK + 100;
        std::fs::write(&path, vec![0u8; size as usize]).unwrap();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        let mut want = vec![0u8; size as usize];
        let mut at = 0u64;
        for (n, byte) in [
            (3usize, b'a'),
            (5000, b'b'),
            (1, b'c'),
            (BLOCK as usize, b'd'),
        ] {
            write_padded_at(&f, &vec![byte; n], at, size).unwrap();
            want[at as usize..at as usize + n].fill(byte);
            at += n as u64;
        }
        // A record that ends in the last, partial block: padded only to the file's end.
        write_padded_at(&f, b"end", size - 10, size).unwrap();
        want[(size - 10) as usize..(size - 7) as usize].copy_from_slice(b"end");
        assert_eq!(std::fs::read(&path).unwrap(), want);

        let appended = dir.path().join("appended");
        let f = File::create(&appended).unwrap();
        write_padded_at(&f, b"abc", 0, 0).unwrap();
        write_padded_at(&f, b"de", 3, 0).unwrap();
        assert_eq!(std::fs::read(&appended).unwrap(), b"abcde");
    }
}
