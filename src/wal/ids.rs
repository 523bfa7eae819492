//! The id archive: what the dedup window needs once WAL segments are gone. Before a committed
//! segment is deleted, the client ids it holds (team, id, received time) are written to
//! `<wal dir>/ids/<first seq>-<newest µs>-<count>.ids` in the WAL's record format with empty
//! bodies, and synced (file and directory) — only then is the segment deleted. At start-up the
//! archive is read back into the dedup window before the WAL itself. Bounded: a file whose newest
//! id is older than the window is deleted, and the oldest files go once the rest still hold
//! `capacity` ids (the in-memory bound).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::record::{FLAG_CLIENT_ID, Record, encode};
use super::segment::{self, SegmentMeta, sync_dir};

/// Where and how much to archive.
#[derive(Debug, Clone)]
pub struct IdArchive {
    /// `<wal dir>/ids`.
    pub dir: PathBuf,
    /// The dedup window: older ids are dropped.
    pub window: Duration,
    /// Keep at least this many ids (and not many more).
    pub capacity: usize,
}

/// One archive file, as its name describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ArchiveFile {
    path: PathBuf,
    first_seq: u64,
    newest_us: i64,
    count: usize,
}

fn parse_name(path: &Path) -> Option<ArchiveFile> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".ids")?;
    let mut parts = stem.split('-');
    let first_seq = parts.next()?.parse().ok()?;
    let newest_us = parts.next()?.parse().ok()?;
    let count = parts.next()?.parse().ok()?;
    Some(ArchiveFile {
        path: path.to_path_buf(),
        first_seq,
        newest_us,
        count,
    })
}

impl IdArchive {
    /// The archive beside the segments in `wal_dir`.
    pub fn new(wal_dir: &Path, window: Duration, capacity: usize) -> IdArchive {
        IdArchive {
            dir: wal_dir.join("ids"),
            window,
            capacity,
        }
    }

    fn files(&self) -> std::io::Result<Vec<ArchiveFile>> {
        let mut out = Vec::new();
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                for e in entries {
                    if let Some(f) = parse_name(&e?.path()) {
                        out.push(f);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        out.sort_by_key(|f| f.first_seq);
        Ok(out)
    }

    /// Writes the client ids of `seg` durably; call before deleting the segment. Returns how
    /// many ids were archived.
    pub fn archive(&self, seg: &SegmentMeta, now_us: i64) -> std::io::Result<usize> {
        // A segment written by this process brings its ids; one found at start-up is read.
        let mut read = Vec::new();
        let (buf, count, newest) = match &seg.ids {
            Some(ids) => (&ids.chunks[..], ids.count, ids.newest),
            None => {
                let (records, _) = segment::read(&seg.path)?;
                let (mut count, mut newest) = (0usize, i64::MIN);
                for r in records.iter().filter(|r| r.flags & FLAG_CLIENT_ID != 0) {
                    encode(
                        r.seq,
                        r.flags,
                        r.received_at,
                        r.team.as_str(),
                        &r.id,
                        &[],
                        &mut read,
                    );
                    count += 1;
                    newest = newest.max(r.received_at);
                }
                (std::slice::from_ref(&read), count, newest)
            }
        };
        if count > 0 {
            std::fs::create_dir_all(&self.dir)?;
            let name = format!("{:020}-{newest}-{count}.ids", seg.first_seq);
            let tmp = self.dir.join(format!("{name}.tmp"));
            let written = (|| {
                use std::io::Write;
                let mut f = std::fs::File::create(&tmp)?;
                for chunk in buf {
                    f.write_all(chunk)?;
                }
                f.sync_all()
            })();
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp); // a failed write leaves nothing behind
                return Err(e);
            }
            if let Err(e) = std::fs::rename(&tmp, self.dir.join(name)) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            sync_dir(&self.dir)?;
        }
        self.prune(now_us)?;
        Ok(count)
    }

    /// Deletes files past the window or beyond the capacity (oldest first).
    pub fn prune(&self, now_us: i64) -> std::io::Result<()> {
        let files = self.files()?;
        let cutoff = now_us - self.window.as_micros() as i64;
        let mut total: usize = files.iter().map(|f| f.count).sum();
        for f in &files {
            let expired = f.newest_us < cutoff;
            let surplus = total - f.count >= self.capacity;
            if !(expired || surplus) {
                break;
            }
            std::fs::remove_file(&f.path)?;
            total -= f.count;
        }
        Ok(())
    }

    /// Calls `f` with every archived id still inside the window, oldest file first (a torn or
    /// damaged tail of a file is ignored: ids are a memory aid, not data).
    pub fn load(&self, now_us: i64, mut f: impl FnMut(Record)) -> std::io::Result<usize> {
        self.prune(now_us)?;
        let cutoff = now_us - self.window.as_micros() as i64;
        let mut n = 0;
        for file in self.files()? {
            let (records, _) = segment::read(&file.path)?;
            for r in records.into_iter().filter(|r| r.received_at >= cutoff) {
                f(r);
                n += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment_with(dir: &Path, first: u64, ids: &[(&str, i64, bool)]) -> SegmentMeta {
        let mut buf = Vec::new();
        for (i, (id, at, client)) in ids.iter().enumerate() {
            let flags = if *client { FLAG_CLIENT_ID } else { 0 };
            encode(first + i as u64, flags, *at, "tm", id, b"{}", &mut buf);
        }
        let path = dir.join(segment::file_name(first));
        std::fs::write(&path, buf).unwrap();
        SegmentMeta {
            ids: None,
            path,
            first_seq: first,
            last_seq: Some(first + ids.len() as u64 - 1),
        }
    }

    #[test]
    fn archives_client_ids_and_bounds_them_by_window_and_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let a = IdArchive::new(dir.path(), Duration::from_secs(10), 3);
        let s1 = segment_with(
            dir.path(),
            1,
            &[("a", 1_000_000, true), ("gen", 1_000_000, false)],
        );
        assert_eq!(a.archive(&s1, 2_000_000).unwrap(), 1);
        let s2 = segment_with(
            dir.path(),
            3,
            &[("b", 5_000_000, true), ("c", 6_000_000, true)],
        );
        assert_eq!(a.archive(&s2, 6_000_000).unwrap(), 2);
        let mut seen = Vec::new();
        a.load(7_000_000, |r| seen.push(r.id)).unwrap();
        assert_eq!(seen, ["a", "b", "c"]);

        // Past the window of the first file: it is deleted, the newer one kept.
        let mut seen = Vec::new();
        a.load(12_000_000, |r| seen.push(r.id)).unwrap();
        assert_eq!(seen, ["b", "c"]);
        assert_eq!(a.files().unwrap().len(), 1);

        // Capacity: the oldest file goes once the newer ones hold `capacity` ids.
        let s3 = segment_with(
            dir.path(),
            5,
            &[
                ("d", 7_000_000, true),
                ("e", 7_000_000, true),
                ("f", 7_000_000, true),
            ],
        );
        a.archive(&s3, 7_000_000).unwrap();
        let mut seen = Vec::new();
        a.load(7_000_000, |r| seen.push(r.id)).unwrap();
        assert_eq!(seen, ["d", "e", "f"]);
    }
}
