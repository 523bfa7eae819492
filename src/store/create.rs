//! Writing a data file: every warehouse object is created once and never overwritten. Each put
//! is a conditional create ([`PutMode::Create`]: `If-None-Match: *` on S3, a hard link on local
//! disk), so an object already at the path is never replaced.
//!
//! Object paths are unique (a fresh random file id, reserved in the catalog before the put), so
//! an existing object means one of two things. Either an earlier attempt of this same write
//! landed although its answer was lost (a timeout, a dropped connection, the store going away
//! mid-request) and the caller is retrying: the object then holds exactly these bytes, and the
//! create counts as done. Or something else wrote there — a bug: the create fails with
//! [`object_store::Error::AlreadyExists`] naming the path, and the existing object is left as
//! it was.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

/// Creates `path` holding `data`; `Ok` also when an earlier attempt already stored these bytes.
pub async fn create(store: &dyn ObjectStore, path: &Path, data: Bytes) -> object_store::Result<()> {
    let opts = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    match store
        .put_opts(path, PutPayload::from(data.clone()), opts)
        .await
    {
        Ok(_) => Ok(()),
        Err(object_store::Error::AlreadyExists { .. }) => {
            let existing = store.get(path).await?.bytes().await?;
            if existing == data {
                return Ok(());
            }
            Err(object_store::Error::AlreadyExists {
                path: path.to_string(),
                source: format!(
                    "refusing to overwrite it: it holds {} other bytes, and data file paths are \
                     unique, so another writer used this path (a bug)",
                    existing.len()
                )
                .into(),
            })
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[tokio::test]
    async fn the_local_store_creates_once_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::open(&Config::for_tests(dir.path())).unwrap();
        let path = Path::from("teams/t/tables/x/date=2024-01-01/a.parquet");
        create(store.as_ref(), &path, Bytes::from("first"))
            .await
            .unwrap();
        create(store.as_ref(), &path, Bytes::from("first"))
            .await
            .unwrap();
        let err = create(store.as_ref(), &path, Bytes::from("other"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, object_store::Error::AlreadyExists { .. })
                && err.to_string().contains("refusing to overwrite"),
            "{err}"
        );
        let on_disk = dir
            .path()
            .join("warehouse/teams/t/tables/x/date=2024-01-01/a.parquet");
        assert_eq!(std::fs::read(on_disk).unwrap(), b"first");
    }
}
