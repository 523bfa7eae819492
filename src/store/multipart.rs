//! Large objects go to S3 in parts: [`LargePuts`] wraps a store and turns every
//! [`PutMode::Create`] put of at least `threshold` bytes into a multipart upload of
//! `part_size` parts (a few in flight at once), so no single request carries a whole big file
//! and a failed part is retried alone. Smaller puts, and everything else, pass through.
//!
//! A multipart upload cannot be made conditional through `object_store` 0.14: its
//! `put_multipart_opts` takes no mode, and `complete` always sends a plain
//! `CompleteMultipartUpload` (the `If-None-Match: *` variant exists in the crate only for
//! copy-if-not-exists). So a large create is guarded by a `HEAD` first — an object already at
//! the path answers [`object_store::Error::AlreadyExists`] as a conditional put would — and
//! the gap between that check and the completion is safe for the same reason every create is:
//! a data file's path is a fresh random id reserved in the catalog before the upload starts,
//! so no other writer targets it (SPEC §2.3, `catalog::pending`). A retry of the same upload
//! after a lost answer finds the object and [`super::create()`] compares the bytes.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
    WriteMultipart,
};

/// Parts of one upload in flight at once.
const PARTS_IN_FLIGHT: usize = 4;

/// Wraps a store so that large creates use multipart upload.
#[derive(Debug)]
pub struct LargePuts {
    inner: Arc<dyn ObjectStore>,
    threshold: usize,
    part_size: usize,
}

impl LargePuts {
    /// Creates of `threshold` bytes or more go up in `part_size` parts.
    pub fn new(inner: Arc<dyn ObjectStore>, threshold: usize, part_size: usize) -> Self {
        Self {
            inner,
            threshold,
            part_size: part_size.max(1),
        }
    }

    async fn create_in_parts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        match self.inner.head(location).await {
            Ok(_) => {
                return Err(object_store::Error::AlreadyExists {
                    path: location.to_string(),
                    source: "an object is already at this path (checked before the multipart \
                             upload)"
                        .into(),
                });
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let upload_opts = PutMultipartOptions {
            tags: opts.tags,
            attributes: opts.attributes,
            extensions: opts.extensions,
        };
        let upload = self.inner.put_multipart_opts(location, upload_opts).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, self.part_size);
        for chunk in payload {
            if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                let _ = writer.abort().await;
                return Err(e);
            }
            writer.put(chunk);
        }
        writer.finish().await
    }
}

impl fmt::Display for LargePuts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.inner)
    }
}

#[async_trait]
impl ObjectStore for LargePuts {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if matches!(opts.mode, PutMode::Create) && payload.content_length() >= self.threshold {
            return self.create_in_parts(location, payload, opts).await;
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
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
        self.inner.copy_opts(from, to, options).await
    }
}
