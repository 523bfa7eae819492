//! A local-filesystem store whose puts are durable when they return: the object's data and every
//! directory entry leading to it (up to the store's root) are fsync'd before the put answers.
//! object_store 0.14 does this itself (`LocalFileSystem::with_fsync`); 0.13, the version
//! DataFusion 55 links, does not, so this wrapper brings it back until the project moves up
//! again. Reads, listings and deletes go straight to the inner store.

use std::fmt;
use std::ops::Range;
use std::path::{Path as FsPath, PathBuf};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, UploadPart,
};

/// A [`LocalFileSystem`] rooted at `root` that syncs what it writes.
#[derive(Debug)]
pub struct SyncedLocal {
    inner: LocalFileSystem,
    /// The directory the store's paths are relative to; syncing stops there.
    root: PathBuf,
}

impl SyncedLocal {
    /// Wraps `inner`, whose prefix is `root`.
    pub fn new(inner: LocalFileSystem, root: PathBuf) -> Self {
        Self { inner, root }
    }

    /// Syncs the object at `location`, then its directory and each one above it up to the root.
    async fn sync(&self, location: &Path) -> Result<()> {
        let file = self.root.join(location.as_ref());
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || sync_file_and_dirs(&file, &root))
            .await
            .map_err(|e| generic(format!("sync task failed: {e}")))?
            .map_err(|e| generic(format!("fsync failed: {e}")))
    }
}

fn generic(message: String) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: message.into(),
    }
}

/// fsync of `file`'s data, then of each directory from its parent up to `root` (inclusive):
/// a directory created by the put is only durable once its own parent names it durably.
fn sync_file_and_dirs(file: &FsPath, root: &FsPath) -> std::io::Result<()> {
    std::fs::File::open(file)?.sync_all()?;
    let mut dir = file.parent();
    while let Some(d) = dir {
        std::fs::File::open(d)?.sync_all()?;
        if d == root || !d.starts_with(root) {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

impl fmt::Display for SyncedLocal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Synced({})", self.inner)
    }
}

/// A multipart upload that syncs the object once it is complete.
#[derive(Debug)]
struct SyncedUpload {
    inner: Box<dyn MultipartUpload>,
    file: PathBuf,
    root: PathBuf,
}

#[async_trait]
impl MultipartUpload for SyncedUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let done = self.inner.complete().await?;
        let (file, root) = (self.file.clone(), self.root.clone());
        tokio::task::spawn_blocking(move || sync_file_and_dirs(&file, &root))
            .await
            .map_err(|e| generic(format!("sync task failed: {e}")))?
            .map_err(|e| generic(format!("fsync failed: {e}")))?;
        Ok(done)
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

#[async_trait]
impl ObjectStore for SyncedLocal {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let done = self.inner.put_opts(location, payload, opts).await?;
        self.sync(location).await?;
        Ok(done)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(SyncedUpload {
            inner,
            file: self.root.join(location.as_ref()),
            root: self.root.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await?;
        self.sync(to).await
    }
}
