//! The process's resident size, read from `/proc/self/statm` every [`EVERY`] on a thread of its
//! own and kept for whoever asks ([`sampled`]): the ingest budgets charge what the process holds
//! beyond their own count to the teams buffering (`crate::ingest::admission`), and the allocator
//! decides from it how long to keep freed memory (`crate::allocator`, a hook run after each
//! reading). One `pread` a reading.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the resident size is read.
pub const EVERY: Duration = Duration::from_millis(10);

/// The last reading in bytes; 0 until the first.
static SAMPLED: AtomicU64 = AtomicU64::new(0);

/// When [`SAMPLED`] was read: milliseconds since [`origin`].
static SAMPLED_AT: AtomicU64 = AtomicU64::new(0);

/// A reading older than this is not trusted ([`sampled`] says 0): the reading thread is gone or
/// statm cannot be read any more.
pub const STALE: Duration = Duration::from_secs(1);

/// Run on the reading thread after each reading, with the resident bytes.
static HOOK: OnceLock<fn(u64)> = OnceLock::new();

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    origin().elapsed().as_millis() as u64
}

/// Starts the reading thread, once per process (later calls do nothing); false when it cannot
/// start, and [`sampled`] then stays 0.
pub fn watch() -> bool {
    static STARTED: OnceLock<bool> = OnceLock::new();
    *STARTED.get_or_init(|| {
        origin();
        let spawned = std::thread::Builder::new()
            .name("resident".into())
            .spawn(|| {
                // Opened here: the reading thread allocates, so it has a heap of its own, and
                // the allocator's hook can collect from it (mimalloc ignores a collect from a
                // thread that never allocated).
                let Some(mut statm) = Statm::open() else {
                    tracing::warn!(
                        "cannot read /proc/self/statm; the resident size is not watched"
                    );
                    return;
                };
                loop {
                    if let Some(bytes) = statm.resident() {
                        SAMPLED.store(bytes, Ordering::Relaxed);
                        SAMPLED_AT.store(now_ms(), Ordering::Release);
                        if let Some(hook) = HOOK.get() {
                            // A panicking hook must not stop the readings the budgets rely on.
                            let _ = std::panic::catch_unwind(|| hook(bytes));
                        }
                    }
                    std::thread::sleep(EVERY);
                }
            });
        if let Err(e) = &spawned {
            tracing::warn!("cannot watch the resident size ({e})");
        }
        spawned.is_ok()
    })
}

/// Runs `hook` after every reading from now on (one hook a process: the allocator's); starts
/// the reading thread if it is not running. False when the thread cannot run or a hook is set.
pub fn on_reading(hook: fn(u64)) -> bool {
    HOOK.set(hook).is_ok() && watch()
}

/// The resident bytes at the last reading (at most [`EVERY`] old); 0 while nothing watches, or
/// when the last reading is older than [`STALE`].
pub fn sampled() -> u64 {
    let at = SAMPLED_AT.load(Ordering::Acquire);
    if now_ms().saturating_sub(at) > STALE.as_millis() as u64 {
        return 0;
    }
    SAMPLED.load(Ordering::Relaxed)
}

/// `/proc/self/statm`, kept open and read from its start each time.
pub struct Statm {
    file: std::fs::File,
    page: u64,
    /// Read into, again and again.
    buf: Vec<u8>,
}

impl Statm {
    pub fn open() -> Option<Self> {
        // SAFETY: sysconf reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Some(Statm {
            file: std::fs::File::open("/proc/self/statm").ok()?,
            page: u64::try_from(page).ok().filter(|&p| p > 0)?,
            buf: vec![0; 128],
        })
    }

    /// Resident bytes: the second of statm's numbers, in pages.
    pub fn resident(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        let text = std::str::from_utf8(&self.buf[..n]).ok()?;
        let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
        Some(pages * self.page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The resident size is read from the running process.
    #[test]
    fn the_resident_size_is_the_process_s() {
        let mut statm = Statm::open().unwrap();
        let before = statm.resident().unwrap();
        // Large enough that other tests freeing memory meanwhile cannot hide it.
        // black_box: an optimised build would otherwise never make the vector.
        let held: Vec<u8> = std::hint::black_box(vec![1; 256 << 20]);
        let after = statm.resident().unwrap();
        assert!(after >= before + (128 << 20), "{before} then {after}");
        drop(held);
    }

    /// The watching thread keeps a reading that follows the process.
    #[test]
    fn the_watched_size_follows_the_process() {
        assert!(watch());
        let start = std::time::Instant::now();
        while sampled() == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "never read");
            std::thread::yield_now();
        }
        let held: Vec<u8> = std::hint::black_box(vec![1; 512 << 20]);
        let floor = Statm::open().unwrap().resident().unwrap() - (256 << 20);
        while sampled() < floor {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{} never reached {floor}",
                sampled()
            );
            std::thread::sleep(EVERY);
        }
        drop(held);
    }
}
