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
        match f.write_all_at(buf, self.len).and_then(|_| f.sync_data()) {
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
