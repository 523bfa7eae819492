//! Files that hold secrets (SPEC §5.2): the process-wide umask that makes everything the server
//! creates private to its user (files 0600, directories 0700: the SQLite catalog and its
//! journal, the WAL, `demo.json`, the local warehouse), and the explicit modes for the files
//! that hold secrets, so a file left 0644 by an older version is tightened too. Imports nothing
//! of the crate: any layer may use it.

use std::io::Write;
use std::path::Path;

/// Mode of a file holding secrets.
pub const PRIVATE_FILE: u32 = 0o600;

/// From now on, files and directories this process creates are private to its user. Called
/// once at start-up, before any thread that creates files.
pub fn private_umask() {
    #[cfg(target_os = "linux")]
    // SAFETY: umask only swaps the process's file-creation mask; it cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Tightens `path` to [`PRIVATE_FILE`] if it exists.
pub fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(PRIVATE_FILE)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Mode of a directory holding secrets.
pub const PRIVATE_DIR: u32 = 0o700;

/// Creates `dir` (and its parents) if missing and makes it private ([`PRIVATE_DIR`]).
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(PRIVATE_DIR))
}

/// Writes `bytes` to `path` as a private file (created 0600, an existing one tightened first).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    make_private(path)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PRIVATE_FILE)
        .open(path)?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn secrets_files_are_private_even_when_they_were_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("demo.json");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"{}").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, PRIVATE_FILE);
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    }
}
