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
    spawn_body(compressor, move |out| {
        produce(store, plan, batch_rows, encoder, out)
    })
}

/// Where a producer sends the response: each buffer goes through the compressor into the
/// bounded channel that feeds the body, so a slow client slows the producer.
pub struct Output {
    compressor: Compressor,
    tx: mpsc::Sender<Chunk>,
}

impl Output {
    /// Compresses and sends `buf`; `Ok(false)` once the client has gone away.
    pub async fn send(&mut self, buf: Vec<u8>) -> Result<bool, String> {
        let out = self.compressor.push(buf).map_err(|e| e.to_string())?;
        Ok(out.is_empty() || self.tx.send(Ok(Bytes::from(out))).await.is_ok())
    }

    /// Sends the last bytes and ends the compressed stream; `Ok(false)` if the client has gone
    /// away.
    pub async fn finish(mut self, buf: Vec<u8>) -> Result<bool, String> {
        let mut last = self.compressor.push(buf).map_err(|e| e.to_string())?;
        last.extend(self.compressor.finish().map_err(|e| e.to_string())?);
        Ok(last.is_empty() || self.tx.send(Ok(Bytes::from(last))).await.is_ok())
    }
}

/// A response body fed by `produce`, which runs as a task in the request's span and returns the
/// rows it sent (`Ok(None)` if the client went away). An error after the first byte aborts the
/// body.
pub fn spawn_body<F, Fut>(compressor: Compressor, produce: F) -> Body
where
    F: FnOnce(Output) -> Fut,
    Fut: Future<Output = Result<Option<u64>, String>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Chunk>(CHANNEL_DEPTH);
    let errors = tx.clone();
    let run = produce(Output { compressor, tx });
    // In the request's span, so its log lines carry the request id.
    let producer = async move {
        let started = std::time::Instant::now();
        match run.await {
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
                let _ = errors.send(Err(std::io::Error::other(e))).await;
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
    mut out: Output,
) -> Result<Option<u64>, String> {
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
        if !out.send(std::mem::take(&mut buf)).await? {
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
    Ok(out.finish(buf).await?.then_some(rows))
}
