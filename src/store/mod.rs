//! Opens the warehouse object store named by `storage.url` (local files, [`s3`], or memory) and
//! writes data files into it with [`create()`] (a conditional create: never an overwrite;
//! [`multipart`] for large ones on S3); [`faulty`] wraps a store to fail writes on demand
//! (outage tests). A local store ([`synced`]) syncs every object it writes — file data and
//! every directory entry leading to it — before the put returns, because the catalog commit
//! that follows makes the object the only copy of its rows (SPEC §2.3: a power cut after the
//! commit must not leave an empty file).

mod create;
pub mod faulty;
pub mod multipart;
pub mod s3;
mod synced;

pub use create::create;

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;

use crate::config::{Config, ConfigError};

/// The store for `config`: local filesystem by default, `file:///…`, `s3://bucket/prefix`
/// (credentials from the process's `AWS_*` environment), or `memory://`.
pub fn open(config: &Config) -> Result<Arc<dyn ObjectStore>, ConfigError> {
    let url = config.storage.url.trim();
    let bad = |message: String| ConfigError::Value {
        key: "storage.url".into(),
        message,
    };
    let local = |dir: std::path::PathBuf| -> Result<Arc<dyn ObjectStore>, ConfigError> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| bad(format!("cannot create {}: {e}", dir.display())))?;
        let dir = dir
            .canonicalize()
            .map_err(|e| bad(format!("cannot open {}: {e}", dir.display())))?;
        let fs = LocalFileSystem::new_with_prefix(&dir)
            .map_err(|e| bad(format!("cannot open {}: {e}", dir.display())))?;
        Ok(Arc::new(synced::SyncedLocal::new(
            fs.with_automatic_cleanup(true),
            dir,
        )))
    };
    if url.is_empty() {
        local(config.storage.data_dir.join("warehouse"))
    } else if url == "memory://" || url == "memory:///" {
        Ok(Arc::new(InMemory::new()))
    } else if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(bad(format!(
                "{url:?}: a file:// URL needs an absolute path"
            )));
        }
        local(path.into())
    } else if url.starts_with("s3://") {
        s3::open(&config.storage, std::env::vars())
    } else {
        Err(bad(format!(
            "{url:?} is not supported; use \"\" (local, under data_dir), \"file:///abs/path\", \"s3://bucket/prefix\" or \"memory://\""
        )))
    }
}
