//! An object store wrapper whose writes fail while switched on: simulates a storage outage
//! without mocks (reads and everything else go to the real store underneath).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Wraps a store; `fail_writes(true)` makes every put fail until switched off.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    failing: AtomicBool,
    failed_puts: AtomicU64,
}

impl FaultyStore {
    /// A healthy wrapper around `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            failing: AtomicBool::new(false),
            failed_puts: AtomicU64::new(0),
        }
    }

    /// Switches the outage on or off.
    pub fn fail_writes(&self, on: bool) {
        self.failing.store(on, Ordering::SeqCst);
    }

    /// Puts refused so far.
    pub fn failed_puts(&self) -> u64 {
        self.failed_puts.load(Ordering::SeqCst)
    }

    fn check(&self) -> Result<()> {
        if self.failing.load(Ordering::SeqCst) {
            self.failed_puts.fetch_add(1, Ordering::SeqCst);
            return Err(object_store::Error::Generic {
                store: "faulty",
                source: "simulated outage".into(),
            });
        }
        Ok(())
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.check()?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.check()?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
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
        self.check()?;
        self.inner.copy_opts(from, to, options).await
    }
}
