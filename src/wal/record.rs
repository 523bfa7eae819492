//! WAL record framing: `[len u32][crc32 u32][payload]`, the CRC over the payload, and a payload
//! of `seq u64 | flags u8 | received_at i64 | team | id | body` (strings and the body length-
//! prefixed). Little-endian throughout.

use bytes::Bytes;

use crate::model::TeamId;

/// Bytes before the payload.
pub const HEADER: usize = 8;
/// Flag: the id came from the client's `messageId` (so it takes part in dedup).
pub const FLAG_CLIENT_ID: u8 = 1;
/// Flag: the body is a Segment message or its envelope (`ingest::logged`), not a `/v1/event`
/// body.
pub const FLAG_SEGMENT: u8 = 2;
/// Flag, with [`FLAG_SEGMENT`]: the body is the message as sent, with nothing a batch shared,
/// and the call is in bits 3–5 of the flags (`ingest::logged` owns their meaning).
pub const FLAG_SEGMENT_RAW: u8 = 4;
/// Flag on an append request (never written): an ordering marker passed to the consumer after
/// every entry queued before it, without a record or a sequence number.
pub const FLAG_MARKER: u8 = 0x80;
/// Largest payload accepted when reading; anything larger is corruption.
const MAX_PAYLOAD: usize = 64 << 20;

/// One acknowledged event as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Monotonically increasing across the whole WAL.
    pub seq: u64,
    /// [`FLAG_CLIENT_ID`], [`FLAG_SEGMENT`], [`FLAG_SEGMENT_RAW`] (with a Segment call in bits
    /// 3–5).
    pub flags: u8,
    /// Server receive time, µs since the epoch (replay must not change it).
    pub received_at: i64,
    /// The team.
    pub team: TeamId,
    /// The event id (replay must not change it).
    pub id: String,
    /// The decompressed request body.
    pub body: Bytes,
}

/// Appends the framed record to `out`.
pub fn encode(
    seq: u64,
    flags: u8,
    received_at: i64,
    team: &str,
    id: &str,
    body: &[u8],
    out: &mut Vec<u8>,
) {
    let payload_len = 8 + 1 + 8 + 2 + team.len() + 2 + id.len() + 4 + body.len();
    out.reserve(HEADER + payload_len);
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    let start = out.len();
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(flags);
    out.extend_from_slice(&received_at.to_le_bytes());
    out.extend_from_slice(&(team.len() as u16).to_le_bytes());
    out.extend_from_slice(team.as_bytes());
    out.extend_from_slice(&(id.len() as u16).to_le_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc32fast::hash(&out[start..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// What is at the start of a buffer.
#[derive(Debug, PartialEq)]
pub enum Decoded {
    /// A whole, valid record and how many bytes it took.
    Record(Record, usize),
    /// The buffer ends before the record does.
    Incomplete,
    /// The bytes are not a valid record; `len` is the declared frame size when plausible.
    Corrupt {
        /// Why.
        reason: String,
        /// Declared frame length (header + payload), if the length field was plausible.
        frame_len: Option<usize>,
    },
}

/// Decodes one record from the start of `buf`.
pub fn decode(buf: &[u8]) -> Decoded {
    if buf.len() < HEADER {
        return Decoded::Incomplete;
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
    if len == 0 || len > MAX_PAYLOAD {
        return Decoded::Corrupt {
            reason: format!("implausible record length {len}"),
            frame_len: None,
        };
    }
    if buf.len() < HEADER + len {
        return Decoded::Incomplete;
    }
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    let payload = &buf[HEADER..HEADER + len];
    let corrupt = |reason: &str| Decoded::Corrupt {
        reason: reason.into(),
        frame_len: Some(HEADER + len),
    };
    if crc32fast::hash(payload) != crc {
        return corrupt("checksum mismatch");
    }
    match parse_payload(payload) {
        Some(r) => Decoded::Record(r, HEADER + len),
        None => corrupt("malformed payload"),
    }
}

fn parse_payload(p: &[u8]) -> Option<Record> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = p.get(at..at + n)?;
        at += n;
        Some(s)
    };
    let seq = u64::from_le_bytes(take(8)?.try_into().ok()?);
    let flags = take(1)?[0];
    let received_at = i64::from_le_bytes(take(8)?.try_into().ok()?);
    let tlen = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
    let team = std::str::from_utf8(take(tlen)?).ok()?.to_string();
    let ilen = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
    let id = std::str::from_utf8(take(ilen)?).ok()?.to_string();
    let blen = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
    let body = Bytes::copy_from_slice(take(blen)?);
    if at != p.len() {
        return None;
    }
    Some(Record {
        seq,
        flags,
        received_at,
        team: TeamId(team.into()),
        id,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut buf = Vec::new();
        encode(
            7,
            FLAG_CLIENT_ID,
            123,
            "tm_a",
            "m-1",
            b"{\"event\":\"e\"}",
            &mut buf,
        );
        let Decoded::Record(r, n) = decode(&buf) else {
            panic!()
        };
        assert_eq!(n, buf.len());
        assert_eq!(
            (
                r.seq,
                r.flags,
                r.received_at,
                r.team.as_str(),
                r.id.as_str()
            ),
            (7, 1, 123, "tm_a", "m-1")
        );
        assert_eq!(&r.body[..], b"{\"event\":\"e\"}");
        assert_eq!(decode(&buf[..buf.len() - 1]), Decoded::Incomplete);
        assert_eq!(decode(&buf[..5]), Decoded::Incomplete);
        let mut bad = buf.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            decode(&bad),
            Decoded::Corrupt {
                frame_len: Some(_),
                ..
            }
        ));
        assert!(matches!(
            decode(&[0u8; 16]),
            Decoded::Corrupt {
                frame_len: None,
                ..
            }
        ));
    }
}
