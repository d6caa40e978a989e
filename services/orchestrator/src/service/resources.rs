//! Transitions as resources (issue 25): what `GetTransition`, `ListTransitions` and
//! `WatchTransitions` read — the callers' requests and the feed of recorded phases — and the
//! feed's reader, which follows it in sequence order with the shared gap rule
//! ([`lychd_runtime::feed`]) so that a reader resuming from a cursor misses nothing.
//!
//! Owner-scoped: a reader sees the transitions its own requests made or joined, unless it
//! reads all (`orchestrator:read_all`).

use lychd_runtime::feed::Cursor;
use sqlx::PgPool;

use crate::domain::memory::{Arithmetic, Cause, Freed, Source};
use crate::domain::plan::{Action, Plan};
use crate::error::OrchestratorError;
use crate::store::resources;
pub use crate::store::resources::{EventRow, Listed, RequestRow};

/// Whose transitions a reader sees.
#[derive(Debug, Clone, Copy)]
pub enum Reader<'a> {
    /// Every principal's.
    All,
    /// Those this principal's requests made or joined.
    Own(&'a str),
}

impl<'a> Reader<'a> {
    fn by(self) -> Option<&'a str> {
        match self {
            Reader::All => None,
            Reader::Own(p) => Some(p),
        }
    }
}

/// The plan as the feed keeps it (JSON).
pub fn plan_json(p: &Plan) -> String {
    serde_json::json!({
        "action": p.action.as_str(),
        "capability_key": p.capability_key,
        "target": p.target,
        "evict": p.evict,
        "launch": p.launch,
        "cost": p.cost,
        "expected_active": p.expected_active,
        "config_digest": p.config_digest,
        "memory": p.memory.as_ref().map(arithmetic_json),
    })
    .to_string()
}

fn arithmetic_json(a: &Arithmetic) -> serde_json::Value {
    serde_json::json!({
        "device": a.device,
        "capacity_mib": a.capacity_mib,
        "used_mib": a.used_mib,
        "needed_mib": a.needed_mib,
        "needed_source": a.needed_source.as_str(),
        "freed": a.freed.iter().map(|f| serde_json::json!({
            "animator": f.animator, "mib": f.mib, "cause": f.cause.as_str(),
        })).collect::<Vec<_>>(),
    })
}

/// The arithmetic a plan kept (`None`: absent, or unreadable).
fn arithmetic_from_json(v: &serde_json::Value) -> Option<Arithmetic> {
    let n = |k: &str| v.get(k)?.as_u64();
    let freed = v
        .get("freed")?
        .as_array()?
        .iter()
        .map(|f| {
            Some(Freed {
                animator: f.get("animator")?.as_str()?.to_owned(),
                mib: f.get("mib")?.as_u64()?,
                cause: match f.get("cause")?.as_str()? {
                    "CONFLICT" => Cause::Conflict,
                    "MEMORY" => Cause::Memory,
                    _ => return None,
                },
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Arithmetic {
        device: v.get("device")?.as_str()?.to_owned(),
        capacity_mib: n("capacity_mib")?,
        used_mib: n("used_mib")?,
        needed_mib: n("needed_mib")?,
        needed_source: match v.get("needed_source")?.as_str()? {
            "MEASURED" => Source::Measured,
            "DECLARED" => Source::Declared,
            _ => return None,
        },
        freed,
    })
}

/// A plan the feed kept (`None`: unreadable — never written by this office).
pub fn plan_from_json(s: &str) -> Option<Plan> {
    let v: serde_json::Value = serde_json::from_str(s).ok()?;
    let text = |k: &str| v.get(k)?.as_str().map(str::to_owned);
    let list = |k: &str| -> Option<Vec<String>> {
        v.get(k)?
            .as_array()?
            .iter()
            .map(|x| x.as_str().map(str::to_owned))
            .collect()
    };
    Some(Plan {
        action: match v.get("action")?.as_str()? {
            "NO_OP" => Action::NoOp,
            "SOFT_SWAP" => Action::SoftSwap,
            "HARD_SWAP" => Action::HardSwap,
            _ => return None,
        },
        capability_key: text("capability_key")?,
        target: text("target")?,
        evict: list("evict")?,
        launch: list("launch")?,
        cost: u32::try_from(v.get("cost")?.as_u64()?).ok()?,
        expected_active: list("expected_active")?,
        config_digest: text("config_digest")?,
        // Absent in rows written before placement by memory.
        memory: v.get("memory").and_then(arithmetic_from_json),
    })
}

/// A transition as recorded: every phase, in order, and whether the reader's request joined
/// it.
pub struct View {
    pub events: Vec<EventRow>,
    pub joined: bool,
}

/// Transition `id` as `reader` may see it (`None`: unknown, or not the reader's).
pub async fn get(
    pool: &PgPool,
    id: &str,
    reader: Reader<'_>,
) -> Result<Option<View>, OrchestratorError> {
    let joined = match reader {
        Reader::All => resources::requested_by(pool, id, "")
            .await?
            .unwrap_or(false),
        Reader::Own(p) => match resources::requested_by(pool, id, p).await? {
            Some(j) => j,
            None => return Ok(None),
        },
    };
    let events = resources::events_of(pool, id).await?;
    if events.is_empty() {
        return Ok(None);
    }
    Ok(Some(View { events, joined }))
}

/// Transitions `reader` sees, newest first, requested before feed sequence `before` (`None`:
/// from the newest).
pub async fn list(
    pool: &PgPool,
    reader: Reader<'_>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Listed>, OrchestratorError> {
    Ok(resources::list(pool, reader.by(), before.unwrap_or(i64::MAX), limit).await?)
}

/// Where a reader "from now on" starts: after the last committed sequence.
pub async fn now(pool: &PgPool) -> Result<i64, OrchestratorError> {
    Ok(resources::last_sequence(pool).await?)
}

/// Events read per query.
const BATCH: i64 = 256;

/// The next events `reader` may see after `cursor`, in order, advancing it (the gap rule
/// holds back a number whose writer may still commit); also whether a full batch was read
/// (read again at once).
pub async fn follow(
    pool: &PgPool,
    reader: Reader<'_>,
    cursor: &mut Cursor,
) -> Result<(Vec<EventRow>, bool), OrchestratorError> {
    let rows = resources::events_after(pool, reader.by(), cursor.delivered, BATCH).await?;
    let full = rows.len() as i64 == BATCH;
    let mut out = Vec::new();
    for r in rows {
        if !cursor.admit(r.event.sequence, &r.seen) {
            return Ok((out, false));
        }
        if r.visible {
            out.push(r.event);
        }
    }
    Ok((out, full))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_survives_the_feed() {
        let p = Plan {
            action: Action::HardSwap,
            capability_key: "a:chat:m".into(),
            target: "a".into(),
            evict: vec!["b".into()],
            launch: vec!["a".into()],
            cost: 1,
            expected_active: vec!["b".into()],
            config_digest: "d".into(),
            memory: None,
        };
        assert_eq!(plan_from_json(&plan_json(&p)), Some(p.clone()));
        assert_eq!(plan_from_json("{}"), None);
        let placed = Plan {
            memory: Some(Arithmetic {
                device: "gpu0".into(),
                capacity_mib: 10,
                used_mib: 8,
                needed_mib: 3,
                needed_source: Source::Measured,
                freed: vec![
                    Freed {
                        animator: "b".into(),
                        mib: 4,
                        cause: Cause::Memory,
                    },
                    Freed {
                        animator: "c".into(),
                        mib: 1,
                        cause: Cause::Conflict,
                    },
                ],
            }),
            ..p
        };
        assert_eq!(plan_from_json(&plan_json(&placed)), Some(placed));
    }
}
