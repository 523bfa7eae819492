//! Streams a planned download as the response body: a producer task reads batches and encodes
//! them into a bounded channel, so a slow client slows the reader instead of growing memory.
//! A failure after the first byte aborts the body, so the client sees a broken transfer rather
//! than a short table that looks complete.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use object_store::ObjectStore;
use tokio::sync::mpsc;
use tracing::{error, info};

use super::encode::JsonEncoder;
use super::plan::Plan;
use crate::warehouse::reader::TableReader;

/// Chunks in flight between the reader and the socket.
const CHANNEL_DEPTH: usize = 4;

/// The JSON body for `plan`.
pub fn json_body(store: Arc<dyn ObjectStore>, plan: Plan, batch_rows: usize) -> Body {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(CHANNEL_DEPTH);
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        let output = plan.columns.to_arrow();
        let mut encoder = JsonEncoder::new(&plan.columns);
        if tx
            .send(Ok(JsonEncoder::header(&plan.columns).into()))
            .await
            .is_err()
        {
            return;
        }
        let mut reader = TableReader::new(store, plan.files, output, plan.limit, batch_rows);
        loop {
            match reader.next_batch().await {
                Ok(Some(batch)) => {
                    let mut buf = Vec::with_capacity(batch.num_rows() * 128);
                    encoder.batch(&batch, &mut buf);
                    if tx.send(Ok(buf.into())).await.is_err() {
                        return; // client went away
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    error!(error = %e, "download aborted mid-stream");
                    let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                    return;
                }
            }
        }
        let _ = tx.send(Ok(encoder.footer().into())).await;
        info!(
            rows = encoder.rows(),
            ms = started.elapsed().as_millis() as u64,
            "download finished"
        );
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Body::from_stream(stream)
}
