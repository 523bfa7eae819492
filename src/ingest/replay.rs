//! Reading accepted events back out of the WAL: at start-up for every team above its committed
//! watermark, and for one team when its actor restarts after a crash.

use std::sync::Arc;

use super::ctx::TeamCtx;
use super::event::{EventRows, replay_event};
use crate::model::TeamId;
use crate::wal::{Record, segment};

/// Rebuilds an event from its record, or explains why it cannot be (logged by the caller).
pub fn rows_of(record: &Record) -> Result<EventRows, String> {
    if record.flags & crate::wal::record::FLAG_SEGMENT != 0 {
        super::logged::replay_message(&record.body, record.flags, record.received_at, &record.id)
    } else {
        replay_event(&record.body, record.received_at, &record.id)
    }
    .map_err(|e| e.message)
}

/// After a crash of `team`'s actor: waits for any flush of the dead actor to finish, then
/// returns the team's records above its committed watermark, up to `through`, in order.
pub async fn team_records_after_flushes(
    ctx: &Arc<TeamCtx>,
    team: &TeamId,
    through: u64,
) -> Result<Vec<(u64, EventRows)>, Box<dyn std::error::Error + Send + Sync>> {
    drop(ctx.progress.flush_lock(team).lock().await);
    let (catalog, dir, t) = (ctx.flush.catalog.clone(), ctx.wal_dir.clone(), team.clone());
    let records = tokio::task::spawn_blocking(move || -> Result<Vec<(u64, EventRows)>, Box<dyn std::error::Error + Send + Sync>> {
        let watermark = catalog.watermark(&t)?;
        let mut out = Vec::new();
        for seg in segment::list(&dir)? {
            // Only records up to `through` are needed and those were fsync'd before they were
            // handed to the actor, so a torn end of the open segment is irrelevant here.
            let (records, _) = segment::read(&seg.path)?;
            for r in records {
                if r.team == t && r.seq > watermark && r.seq <= through {
                    match rows_of(&r) {
                        Ok(rows) => out.push((r.seq, rows)),
                        Err(e) => tracing::error!(seq = r.seq, error = %e, "WAL record no longer parses; skipped"),
                    }
                }
            }
        }
        out.sort_by_key(|(seq, _)| *seq);
        Ok(out)
    })
    .await??;
    Ok(records)
}
