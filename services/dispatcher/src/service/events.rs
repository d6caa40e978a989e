//! The dispatch-event stream: places among the open streams, and the events in sequence order
//! with Ward asked again while a stream is open.

use lychd_runtime::feed::Cursor as EventCursor;
use lychd_runtime::streams::StreamPlace;

use super::{Recheck, Service};
use crate::error::Result;
use crate::store::leases;

impl Service {
    /// A place among the open event streams of this office (at most `stream_limit`, at most
    /// `stream_share` of them `principal`'s), held until the stream ends.
    pub fn stream_place(&self, principal: &str) -> Result<StreamPlace> {
        Ok(self.streams.open(principal)?)
    }

    /// Send the dispatch events after `after` in sequence order (the gap rule of
    /// [`lychd_runtime::feed`], judged on every event); with `follow`, keep polling until the
    /// receiver goes away. With `only` (a principal id), only events of leases that principal
    /// owns are sent: a reader without `dispatcher:read_all` sees no one else's leases.
    /// Ward is asked again ([`Recheck`]) every `stream_recheck_interval` while the stream is
    /// open; when the caller's authority is gone the stream ends with the refusal. `place` is
    /// held until the stream ends, whatever ends it.
    pub async fn watch_events(
        &self,
        after: i64,
        follow: bool,
        only: Option<String>,
        tx: tokio::sync::mpsc::Sender<Result<leases::EventRow>>,
        recheck: Recheck,
        place: StreamPlace,
    ) {
        const BATCH: i64 = 256;
        let _place = place;
        let every = self.settings.stream_recheck_interval;
        let mut next_check = tokio::time::Instant::now() + every;
        // Ward asked again; `false` when the stream must end (the refusal was sent, or the
        // receiver is gone).
        let still_allowed = |next_check: &mut tokio::time::Instant| {
            *next_check = tokio::time::Instant::now() + every;
            let recheck = recheck.clone();
            let tx = tx.clone();
            async move {
                match recheck().await {
                    Ok(()) => true,
                    Err(refused) => {
                        // Delivered after what the stream holds already; bounded, so a caller
                        // that reads nothing does not keep the place.
                        let _ = tokio::time::timeout(every, tx.send(Err(refused))).await;
                        false
                    }
                }
            }
        };
        let mut cursor = EventCursor::after(after);
        loop {
            if tokio::time::Instant::now() >= next_check && !still_allowed(&mut next_check).await {
                return;
            }
            let rows = match leases::events_after(&self.pool, cursor.delivered, BATCH).await {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            let full = rows.len() as i64 == BATCH;
            let mut held = false;
            for r in rows {
                if !cursor.admit(r.sequence, &r.seen) {
                    held = true;
                    break;
                }
                if only.as_ref().is_some_and(|owner| *owner != r.owner) {
                    continue;
                }
                // A caller that does not read holds the stream at a full buffer: authority
                // is still asked for on time meanwhile.
                let slot = loop {
                    tokio::select! {
                        slot = tx.reserve() => break slot,
                        () = tokio::time::sleep_until(next_check) => {
                            if !still_allowed(&mut next_check).await {
                                return;
                            }
                        }
                    }
                };
                match slot {
                    Ok(slot) => slot.send(Ok(r)),
                    Err(_) => return,
                }
            }
            if !follow && !held && !full {
                return;
            }
            if full && !held {
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(self.settings.poll_interval.min(every)) => {}
                () = tx.closed() => return,
            }
        }
    }
}
