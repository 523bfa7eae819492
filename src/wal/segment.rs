//! WAL segment files (`<first seq, 20 digits>.wal`) and reading them back: zeros to the end of a
//! file are unused pre-allocated space; a torn record at the end of the newest segment is a crash
//! mid-write and is cut off; damage anywhere else is corruption and stops recovery with the file
//! and offset. (A power loss can keep any subset of a pre-allocated segment's pages of the last,
//! unacknowledged batch; a hole *inside* that batch reads as corruption and stops a strict
//! start-up — nothing acknowledged is lost, and `wal.recovery = "truncate"` goes on.)

use std::path::{Path, PathBuf};

use super::record::{Decoded, Record, decode};

/// A segment on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentMeta {
    /// File path.
    pub path: PathBuf,
    /// Sequence number of its first record (from the file name).
    pub first_seq: u64,
    /// Sequence number of its last record, once known.
    pub last_seq: Option<u64>,
    /// The client-id records written to it by this process (framed like records, with empty
    /// bodies), kept so that archiving its ids need not read the segment back; `None` for a
    /// segment found at start-up.
    pub ids: Option<SegmentIds>,
}

/// The client ids a segment holds, as the id archive stores them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentIds {
    /// Framed records with empty bodies, in the order written: one chunk a group commit, moved
    /// in whole (a segment's ids grown in one buffer were copied again at every doubling).
    pub chunks: Vec<Vec<u8>>,
    /// How many.
    pub count: usize,
    /// The newest receive time among them.
    pub newest: i64,
}

/// The file name of a segment starting at `first_seq`.
pub fn file_name(first_seq: u64) -> String {
    format!("{first_seq:020}.wal")
}

/// The segments in `dir`, oldest first.
pub fn list(dir: &Path) -> std::io::Result<Vec<SegmentMeta>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".wal"))
        else {
            continue;
        };
        if let Ok(first_seq) = stem.parse::<u64>() {
            out.push(SegmentMeta {
                ids: None,
                path,
                first_seq,
                last_seq: None,
            });
        }
    }
    out.sort_by_key(|s| s.first_seq);
    Ok(out)
}

/// How reading a segment ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// Every byte was a valid record.
    Clean,
    /// A partial record starts at this offset and runs to the end of the file.
    Torn {
        /// Where the partial record starts.
        offset: u64,
        /// How many bytes it has.
        bytes: u64,
    },
    /// Bytes at this offset are not a valid record and valid data may follow.
    Corrupt {
        /// Where.
        offset: u64,
        /// Why.
        reason: String,
    },
}

/// Reads every valid record of one segment, stopping at the first problem.
pub fn read(path: &Path) -> std::io::Result<(Vec<Record>, End)> {
    let data = std::fs::read(path)?;
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        match decode(&data[at..]) {
            Decoded::Record(r, n) => {
                records.push(r);
                at += n;
            }
            Decoded::Incomplete => {
                let bytes = (data.len() - at) as u64;
                return Ok((
                    records,
                    End::Torn {
                        offset: at as u64,
                        bytes,
                    },
                ));
            }
            Decoded::Corrupt { reason, frame_len } => {
                let rest = &data[at..];
                // Zeros to the end: a pre-allocated segment's unused space, or blocks a crash
                // left unwritten (never synced, so never acknowledged) — the segment ends here.
                if rest.iter().all(|b| *b == 0) {
                    return Ok((records, End::Clean));
                }
                // A crash can leave a half-written last record: a torn tail — its frame runs
                // to the end of the file, or (in a pre-allocated segment) only zeros follow it.
                // Anything with more data after it is real corruption.
                let is_last = frame_len.is_some_and(|n| {
                    rest.get(n..)
                        .is_none_or(|after| after.iter().all(|b| *b == 0))
                });
                if is_last {
                    let used = rest.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
                    return Ok((
                        records,
                        End::Torn {
                            offset: at as u64,
                            bytes: used as u64,
                        },
                    ));
                }
                return Ok((
                    records,
                    End::Corrupt {
                        offset: at as u64,
                        reason,
                    },
                ));
            }
        }
    }
    Ok((records, End::Clean))
}

/// Cuts a segment at `offset` and makes that durable.
pub fn truncate(path: &Path, offset: u64) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.set_len(offset)?;
    f.sync_all()
}

/// Makes a directory entry change (create, delete) durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::super::record::encode;
    use super::*;

    fn write(path: &Path, seqs: std::ops::Range<u64>) -> Vec<u8> {
        let mut buf = Vec::new();
        for s in seqs {
            encode(s, 0, 1, "tm", &format!("id{s}"), b"{}", &mut buf);
        }
        std::fs::write(path, &buf).unwrap();
        buf
    }

    #[test]
    fn torn_tail_and_corruption_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(file_name(1));
        let full = write(&p, 1..6);
        let (recs, end) = read(&p).unwrap();
        assert_eq!((recs.len(), end), (5, End::Clean));

        std::fs::write(&p, &full[..full.len() - 3]).unwrap();
        let (recs, end) = read(&p).unwrap();
        assert_eq!(recs.len(), 4);
        assert!(matches!(end, End::Torn { .. }));

        let mut zeros = full.clone();
        zeros.extend_from_slice(&[0; 4096]);
        std::fs::write(&p, &zeros).unwrap();
        let (recs, end) = read(&p).unwrap();
        assert_eq!(
            (recs.len(), end),
            (5, End::Clean),
            "a zero tail ends a segment"
        );

        zeros[full.len() + 100] = 1; // not zeros to the end: damage
        std::fs::write(&p, &zeros).unwrap();
        assert!(matches!(read(&p).unwrap().1, End::Corrupt { .. }));

        // A pre-allocated segment whose last record was half written: zeros where its end
        // should be, and zeros after it.
        let mut torn = full.clone();
        let last = torn.len();
        torn[last - 5..].fill(0);
        torn.extend_from_slice(&[0; 4096]);
        std::fs::write(&p, &torn).unwrap();
        let (recs, end) = read(&p).unwrap();
        assert_eq!(recs.len(), 4);
        assert!(matches!(end, End::Torn { .. }), "{end:?}");

        let mut bad = full.clone();
        bad[20] ^= 0x55; // inside the first record, four good ones follow
        std::fs::write(&p, &bad).unwrap();
        let (recs, end) = read(&p).unwrap();
        assert_eq!(recs.len(), 0);
        assert!(matches!(end, End::Corrupt { offset: 0, .. }), "{end:?}");

        assert_eq!(list(dir.path()).unwrap()[0].first_seq, 1);
    }
}
