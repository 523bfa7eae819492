//! The WAL's identity: a random id kept in its directory (`wal.id`), created with the WAL.
//! The catalog keys each WAL's watermarks by it, so the watermark travels with the WAL
//! directory (a node restarted on its own WAL resumes where it committed), not with a host name
//! or `node.id`, which may change.

use std::io::Write;
use std::path::Path;

const FILE: &str = "wal.id";

/// The id of the WAL in `dir`, created (and made durable) on first use.
pub fn identity(dir: &Path) -> std::io::Result<String> {
    let path = dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(dir)?;
    let id = format!("wal_{}", uuid::Uuid::now_v7().simple());
    let tmp = dir.join(format!("{FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(id.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("wal");
        let id = identity(&wal).unwrap();
        assert!(id.starts_with("wal_"));
        assert_eq!(identity(&wal).unwrap(), id);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(identity(other.path()).unwrap(), id);
    }
}
