//! Streams a planned download as the response body: a producer task reads batches, encodes and
//! compresses them into a bounded channel, so a slow client slows the reader instead of growing
//! memory. A failure after the first byte aborts the body, so the client sees a broken transfer
//! rather than a short table that looks complete.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use object_store::ObjectStore;
use tokio::sync::mpsc;
use tracing::{Instrument, error, info};

use super::compress::Compressor;
use super::cursor::{self, Cursor};
use super::encode::Encoder;
use super::plan::Plan;
use crate::warehouse::reader::{ReadSpec, TableReader};

/// Chunks in flight between the reader and the socket.
const CHANNEL_DEPTH: usize = 4;

type Chunk = Result<Bytes, std::io::Error>;

/// The response body for `plan`, encoded by `encoder` and compressed by `compressor`.
pub fn body(
    store: Arc<dyn ObjectStore>,
    plan: Plan,
    batch_rows: usize,
    encoder: Box<dyn Encoder>,
    compressor: Compressor,
) -> Body {
    let (tx, rx) = mpsc::channel::<Chunk>(CHANNEL_DEPTH);
    // In the request's span, so its log lines carry the request id.
    let producer = async move {
        let started = std::time::Instant::now();
        match produce(store, plan, batch_rows, encoder, compressor, &tx).await {
            Ok(Some(rows)) => {
                info!(
                    rows,
                    ms = started.elapsed().as_millis() as u64,
                    "download finished"
                );
            }
            Ok(None) => {} // client went away
            Err(e) => {
                error!(error = %e, "download aborted mid-stream");
                let _ = tx.send(Err(std::io::Error::other(e))).await;
            }
        }
    };
    tokio::spawn(producer.in_current_span());
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Body::from_stream(stream)
}

/// Runs the download; `Ok(None)` if the client disconnected.
async fn produce(
    store: Arc<dyn ObjectStore>,
    plan: Plan,
    batch_rows: usize,
    mut encoder: Box<dyn Encoder>,
    mut compressor: Compressor,
    tx: &mpsc::Sender<Chunk>,
) -> Result<Option<u64>, String> {
    let send = |buf: Vec<u8>, compressor: &mut Compressor| -> Result<Option<Bytes>, String> {
        let out = compressor.push(buf).map_err(|e| e.to_string())?;
        Ok((!out.is_empty()).then(|| Bytes::from(out)))
    };
    let mut buf = Vec::new();
    encoder.header(&mut buf).map_err(|e| e.to_string())?;
    let mut rows = 0u64;
    let spec = ReadSpec {
        output: plan.columns.to_arrow(),
        read: plan.read.to_arrow(),
        filters: plan.filters,
        limit: plan.limit,
        batch_rows,
        start: plan.start,
    };
    let mut reader = TableReader::new(store, plan.files, spec);
    loop {
        if let Some(chunk) = send(std::mem::take(&mut buf), &mut compressor)?
            && tx.send(Ok(chunk)).await.is_err()
        {
            return Ok(None);
        }
        match reader.next_batch().await.map_err(|e| e.to_string())? {
            Some(batch) => {
                rows += batch.num_rows() as u64;
                buf.reserve(batch.num_rows() * 128);
                encoder.batch(&batch, &mut buf).map_err(|e| e.to_string())?;
            }
            None => break,
        }
    }
    // A full page may have more after it: hand out a cursor (the next page may be empty).
    if let (Some(limit), Some(snap), Some(pos)) = (plan.limit, plan.snapshot, reader.position())
        && rows == limit as u64
    {
        encoder.set_next_cursor(Some(cursor::encode(&Cursor {
            v: 1,
            snap,
            pos,
            q: plan.fingerprint,
        })));
    }
    encoder.footer(&mut buf).map_err(|e| e.to_string())?;
    let mut last = compressor.push(buf).map_err(|e| e.to_string())?;
    last.extend(compressor.finish().map_err(|e| e.to_string())?);
    if !last.is_empty() && tx.send(Ok(Bytes::from(last))).await.is_err() {
        return Ok(None);
    }
    Ok(Some(rows))
}
