//! Streams a planned download as the response body: a producer task reads batches, encodes and
//! compresses them into a bounded channel, so a slow client slows the reader instead of growing
//! memory. Formats whose batches encode independently (JSON, NDJSON, CSV) are a pipeline: a
//! reading task decodes batches (a large file's column groups in tasks of their own) and starts
//! an encoding task for each as soon as it is decoded, up to [`encode_depth`] at once (sized from
//! the first batch's output), while the producer sends the encoded outputs in order — so
//! decoding and encoding go on while the producer waits for the socket. The tasks run on the
//! runtime's workers, not on blocking threads: output buffers are freed by the socket writer on
//! a worker, and frees into the heaps of blocking threads that come and go were kept (RSS crept
//! over repeated downloads; see [`crate::warehouse::split`]). A failure after the first byte
//! aborts the body, so the client sees a broken transfer rather than a short table that looks
//! complete.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use object_store::ObjectStore;
use tokio::sync::mpsc;
use tracing::{Instrument, error, info};

use super::compress::Compressor;
use super::cursor::{self, Cursor};
use super::encode::{BatchEncoder, Encoder};
use super::plan::Plan;
use crate::allocator::placement::Unplaced;
use crate::warehouse::reader::{Position, ReadSpec, TableReader};

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
    // Decoding and encoding make and drop large blocks at a high rate: mimalloc's own placement.
    tokio::spawn(Unplaced::new(producer.in_current_span()));
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
    let spec = ReadSpec {
        output: plan.columns.to_arrow(),
        read: plan.read.to_arrow(),
        filters: plan.filters,
        limit: plan.limit,
        batch_rows,
        start: plan.start,
        // The text encoders take strings as views: no copy of each value while decoding.
        string_views: encoder.parallel().is_some(),
    };
    let reader = TableReader::new(store, plan.files, spec).with_buffered(plan.buffered);
    let sent = match encoder.parallel() {
        Some(rows_of) => pipelined(reader, rows_of, &mut *encoder, &mut out, buf).await?,
        None => in_turn(reader, &mut *encoder, &mut out, buf).await?,
    };
    let Some((rows, end)) = sent else {
        return Ok(None);
    };
    let mut buf = Vec::new();
    // A full page may have more after it: hand out a cursor (the next page may be empty).
    if let (Some(limit), Some(snap), Some(pos)) = (plan.limit, plan.snapshot, end)
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

/// Rows sent and the reader's position after the last one; `None` if the client went away.
type Sent = Option<(u64, Option<Position>)>;

/// Batches encoded one after the other on the producer task.
async fn in_turn(
    mut reader: TableReader,
    encoder: &mut dyn Encoder,
    out: &mut Output,
    mut buf: Vec<u8>,
) -> Result<Sent, String> {
    let mut rows = 0u64;
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
            None => return Ok(Some((rows, reader.position()))),
        }
    }
}

/// Encoded bytes the pipeline aims to hold ahead of the socket. The client drains the socket in
/// bursts (on a loaded box it is often not running); while every slot holds a finished batch the
/// workers idle, so narrow tables, whose batches are small, need more slots. 8 MiB took the
/// 5M-row numeric table's JSON download from 0.57 s (4 slots) to 0.50 s (16) on 2 cores.
const AHEAD_BYTES: usize = 8 << 20;

/// How many batches are in flight (decoded and being encoded, or encoded and waiting their
/// turn), for batches that encode to `batch_bytes`: enough for [`AHEAD_BYTES`], at least two
/// per core (the reader decodes the next batch only while a slot is free, so with one per core
/// it would sit idle whenever every core was encoding) and at most eight per core. Env
/// `STOWAGE_ENCODE_DEPTH` overrides (for measuring).
fn encode_depth(batch_bytes: usize) -> usize {
    let fixed = std::env::var("STOWAGE_ENCODE_DEPTH")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&d| d > 0);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    fixed.unwrap_or((AHEAD_BYTES / batch_bytes.max(1)).clamp(2 * cores, 8 * cores))
}

/// What the reading task hands the sender: a batch being encoded, the end, or a failure.
enum Step {
    /// A batch's encoding task: its rows and bytes.
    Batch(tokio::task::JoinHandle<Result<(usize, Vec<u8>), String>>),
    /// The reader's position after its last row.
    End(Option<Position>),
    /// The read failed.
    Failed(String),
}

/// Batches decoded by a reading task, each encoded in a task of its own as soon as it is
/// decoded, [`encode_depth`] at a time, and sent here in order. Decoding and encoding go on
/// while this task waits for the socket.
async fn pipelined(
    mut reader: TableReader,
    rows_of: Arc<dyn BatchEncoder>,
    encoder: &mut dyn Encoder,
    out: &mut Output,
    header: Vec<u8>,
) -> Result<Sent, String> {
    if !out.send(header).await? {
        return Ok(None);
    }
    // The first batch is encoded here: its size sets how many batches may be in flight.
    let Some(first) = reader.next_batch().await.map_err(|e| e.to_string())? else {
        return Ok(Some((0, reader.position())));
    };
    let mut buf = Vec::new();
    rows_of
        .encode(&first, &mut buf)
        .map_err(|e| e.to_string())?;
    let depth = encode_depth(buf.len());
    let mut rows = first.num_rows() as u64;
    encoder.accept(first.num_rows(), &mut buf);
    drop(first);
    if !out.send(buf).await? {
        return Ok(None);
    }
    // One encoding task is awaited here and one waits in `send`: the rest are in the channel.
    let (tx, mut rx) = mpsc::channel(depth.saturating_sub(2).max(1));
    tokio::spawn(Unplaced::new(
        read_ahead(reader, rows_of, tx).in_current_span(),
    ));
    while let Some(step) = rx.recv().await {
        let (n, mut buf) = match step {
            Step::Batch(task) => task
                .await
                .map_err(|e| format!("encoding task failed: {e}"))??,
            Step::End(end) => return Ok(Some((rows, end))),
            Step::Failed(e) => return Err(e),
        };
        encoder.accept(n, &mut buf);
        rows += n as u64;
        if !out.send(buf).await? {
            return Ok(None);
        }
    }
    Err("the table reader stopped without an end".into())
}

/// Decodes `reader`'s batches and starts an encoding task for each, until the end, a failure
/// or the sender going away (the client left).
async fn read_ahead(
    mut reader: TableReader,
    rows_of: Arc<dyn BatchEncoder>,
    tx: mpsc::Sender<Step>,
) {
    loop {
        let step = match reader.next_batch().await {
            Ok(Some(batch)) => {
                let rows_of = rows_of.clone();
                Step::Batch(tokio::spawn(Unplaced::new(async move {
                    // The encoders size the buffer once from the rows seen so far.
                    let mut buf = Vec::new();
                    rows_of
                        .encode(&batch, &mut buf)
                        .map_err(|e| e.to_string())?;
                    Ok((batch.num_rows(), buf))
                })))
            }
            Ok(None) => Step::End(reader.position()),
            Err(e) => Step::Failed(e.to_string()),
        };
        let last = !matches!(step, Step::Batch(_));
        if tx.send(step).await.is_err() || last {
            return;
        }
    }
}
