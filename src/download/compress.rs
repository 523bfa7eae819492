//! Streaming response compression: each encoded chunk goes through one gzip or zstd stream
//! and whatever compressed bytes are ready are sent; the stream is finished after the last chunk.

use std::io::Write;

use super::format::Compression;

/// One response's compressor.
pub enum Compressor {
    /// Pass-through.
    Identity,
    /// gzip stream.
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    /// zstd stream.
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Compressor {
    /// A compressor for the negotiated encoding.
    pub fn new(c: Compression) -> std::io::Result<Self> {
        Ok(match c {
            Compression::Identity => Compressor::Identity,
            Compression::Gzip => Compressor::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::fast(),
            )),
            Compression::Zstd => {
                Compressor::Zstd(zstd::stream::write::Encoder::new(Vec::new(), 1)?)
            }
        })
    }

    /// Compresses a chunk; returns the bytes ready to send (possibly none).
    pub fn push(&mut self, chunk: Vec<u8>) -> std::io::Result<Vec<u8>> {
        match self {
            Compressor::Identity => Ok(chunk),
            Compressor::Gzip(e) => {
                e.write_all(&chunk)?;
                Ok(std::mem::take(e.get_mut()))
            }
            Compressor::Zstd(e) => {
                e.write_all(&chunk)?;
                Ok(std::mem::take(e.get_mut()))
            }
        }
    }

    /// Ends the stream; returns the last bytes.
    pub fn finish(self) -> std::io::Result<Vec<u8>> {
        match self {
            Compressor::Identity => Ok(Vec::new()),
            Compressor::Gzip(e) => e.finish(),
            Compressor::Zstd(e) => e.finish(),
        }
    }
}
