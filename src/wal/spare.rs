//! Spare segment files: zero-filled to the segment size (with direct writes where the file
//! system takes them) and synced on a thread of their own, so the log's writes land inside a file
//! whose size and blocks are already on disk and each `fdatasync` writes data, not metadata
//! (PostgreSQL pre-allocates its WAL files for the same reason). A spare that is not ready in
//! time, or cannot be made (a full disk, a file-size limit), leaves the log appending to a fresh
//! file as before: slower, never wrong.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, TryRecvError};

use tracing::{debug, warn};

/// File names of spares (never read as segments: those end in `.wal`).
const PREFIX: &str = "spare-";
const SUFFIX: &str = ".tmp";
/// Zeros written per `write`.
const CHUNK: usize = 1 << 20;

/// One spare being prepared (or ready).
pub(super) struct Spares {
    dir: PathBuf,
    size: u64,
    made: u64,
    pending: Option<Receiver<std::io::Result<PathBuf>>>,
    /// Set after a spare failed: the log appends from then on (a full disk would fail again).
    gave_up: bool,
}

impl Spares {
    /// Spares of `size` bytes in `dir` (removing any left by an earlier run). None is made
    /// until the log opens its first segment: a server that never logs writes no zeros.
    pub fn new(dir: &Path, size: u64) -> Spares {
        remove_stale(dir);
        Spares {
            dir: dir.to_path_buf(),
            size,
            made: 0,
            pending: None,
            gave_up: size == 0,
        }
    }

    /// A ready spare's path, if one is ready now (never waits); starts the next one.
    pub fn take(&mut self) -> Option<PathBuf> {
        let Some(rx) = self.pending.as_ref() else {
            self.prepare();
            return None;
        };
        let ready = match rx.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => Err(std::io::Error::other("spare thread died")),
        };
        self.pending = None;
        match ready {
            Ok(path) => {
                self.prepare();
                Some(path)
            }
            Err(e) => {
                warn!(error = %e, "cannot pre-allocate a WAL segment; appending to new files instead");
                self.gave_up = true;
                None
            }
        }
    }

    fn prepare(&mut self) {
        if self.gave_up || self.pending.is_some() {
            return;
        }
        self.made += 1;
        let path = self.dir.join(format!("{PREFIX}{}{SUFFIX}", self.made));
        let size = self.size;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("stowage-wal-spare".into())
            .spawn(move || {
                let made = zero_fill(&path, size).map(|_| path.clone());
                if made.is_err() {
                    let _ = std::fs::remove_file(&path);
                }
                let _ = tx.send(made);
            });
        match spawned {
            Ok(_) => self.pending = Some(rx),
            Err(e) => {
                warn!(error = %e, "cannot start the WAL pre-allocation thread");
                self.gave_up = true;
            }
        }
    }

    /// Removes the spare (ready or not) at shutdown.
    pub fn close(mut self) {
        if let Some(rx) = self.pending.take()
            && let Ok(Ok(path)) = rx.recv()
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn zero_fill(path: &Path, size: u64) -> std::io::Result<()> {
    // Never an existing file: a stale spare may still be linked to a live segment.
    let mut f: File = OpenOptions::new().create_new(true).write(true).open(path)?;
    if !zero_fill_direct(path, size)? {
        let zeros = vec![0u8; CHUNK];
        write_zeros(&mut f, &zeros, size)?;
    }
    f.sync_all()?;
    debug!(spare = %path.display(), bytes = size, "WAL segment pre-allocated");
    Ok(())
}

/// Writes `size` zeros from the start of `f`, [`CHUNK`] at a time out of `zeros`.
fn write_zeros(f: &mut File, zeros: &[u8], size: u64) -> std::io::Result<()> {
    let mut left = size;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        f.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Zeros the file at `path` (just created, empty) with `O_DIRECT` writes: the device reads them
/// from one buffer, where buffered writes copied every byte into the page cache first — the copy
/// and the writeback of a spare were 4–5 % of the server's CPU under batch load (BENCHMARKS.md,
/// twenty-second session). The file's blocks end up written and allocated just the same, and the
/// caller's `sync_all` makes its size durable. `Ok(false)` when the size is not a multiple of the
/// alignment or the file system refuses direct I/O (`EINVAL`: an older tmpfs, an alignment it
/// needs larger): the caller writes through the page cache. Any other error (a full disk, a
/// file-size limit, an I/O error) is the spare's failure, not retried buffered.
fn zero_fill_direct(path: &Path, size: u64) -> std::io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        const ALIGN: usize = 4096;
        let refused = |e: &std::io::Error| e.raw_os_error() == Some(libc::EINVAL);
        if !size.is_multiple_of(ALIGN as u64) {
            return Ok(false);
        }
        let mut f = match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if refused(&e) => return Ok(false),
            Err(e) => return Err(e),
        };
        let buf = vec![0u8; CHUNK + ALIGN];
        let at = buf.as_ptr().align_offset(ALIGN);
        match write_zeros(&mut f, &buf[at..at + CHUNK], size) {
            Ok(()) => Ok(true),
            Err(e) if refused(&e) => {
                debug!(error = %e, "direct writes refused; zeroing the spare through the page cache");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (path, size);
        Ok(false)
    }
}

fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(PREFIX) && name.ends_with(SUFFIX) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spare is zeros to the segment size, written directly where the size and the file
    /// system allow and through the page cache otherwise.
    #[test]
    fn spares_are_zeros_of_the_segment_size() {
        let dir = tempfile::tempdir().unwrap();
        for (i, size) in [(3 << 20) + 4096, (1 << 20) + 100, 4096, 0]
            .into_iter()
            .enumerate()
        {
            let path = dir.path().join(format!("{PREFIX}{i}{SUFFIX}"));
            zero_fill(&path, size).unwrap();
            let data = std::fs::read(&path).unwrap();
            assert_eq!(data.len() as u64, size);
            assert!(data.iter().all(|b| *b == 0), "size {size}");
            // Never over an existing file.
            assert!(zero_fill(&path, size).is_err());
        }
        // Direct writes need the size aligned.
        assert!(!zero_fill_direct(&dir.path().join("x"), 100).unwrap());
        // Errors other than a refusal of direct I/O are the spare's, not retried buffered.
        assert!(zero_fill_direct(&dir.path().join("missing/x"), 4096).is_err());
    }
}
