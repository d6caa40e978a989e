//! One `WatchConsents` stream: reads consent changes in order (the gap rule of
//! `lychd_runtime::feed`), sends those of its run, and asks for the caller's authority again
//! every `every` — also while the caller does not read — ending the stream with the refusal
//! when it is gone.
//!
//! Invariant: a stream never outlives its caller's `ward:review` on `consent:*` by more than
//! `every`; a caller that reads nothing does not keep its place.

use std::time::Duration;

use futures::Stream;
use lychd_proto::ward::v1 as pb;
use tonic::{Request, Status};

use super::convert::consent as codec;
use crate::actions;
use crate::service::consent::{CONSENTS, Consents};

/// The stream a `WatchConsents` call answers with.
pub type WatchStream =
    std::pin::Pin<Box<dyn Stream<Item = Result<pb::WatchConsentsResponse, Status>> + Send>>;

/// How often a watch stream reads new changes when it has caught up.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// Changes read per query.
const FOLLOW_BATCH: i64 = 256;

pub struct Follower {
    pub consents: Consents,
    pub authorizer: lychd_runtime::auth::Authorizer,
    pub metadata: tonic::metadata::MetadataMap,
    pub every: Duration,
    pub run: Option<String>,
}

type Sent = tokio::sync::mpsc::Sender<Result<pb::WatchConsentsResponse, Status>>;

impl Follower {
    /// Still allowed? Otherwise the refusal is sent (bounded: a caller that reads nothing does
    /// not keep its place) and the stream ends.
    async fn still_allowed(&self, tx: &Sent) -> bool {
        let asking = Request::from_parts(self.metadata.clone(), tonic::Extensions::default(), ());
        match self
            .authorizer
            .authorize(&asking, actions::REVIEW, CONSENTS)
            .await
        {
            Ok(_) => true,
            Err(refused) => {
                let _ = tokio::time::timeout(self.every, tx.send(Err(refused))).await;
                false
            }
        }
    }

    pub async fn follow(self, after: i64, tx: Sent) {
        let mut cursor = lychd_runtime::feed::Cursor::after(after);
        let mut next_check = tokio::time::Instant::now() + self.every;
        loop {
            if tokio::time::Instant::now() >= next_check {
                if !self.still_allowed(&tx).await {
                    return;
                }
                next_check = tokio::time::Instant::now() + self.every;
            }
            let changes = match self
                .consents
                .changes_after(cursor.delivered, FOLLOW_BATCH)
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
            };
            let full = changes.len() as i64 == FOLLOW_BATCH;
            for change in changes {
                if !cursor.admit(change.seq, &change.seen) {
                    break;
                }
                if self
                    .run
                    .as_ref()
                    .is_some_and(|r| *r != change.consent.run_id)
                {
                    continue;
                }
                let slot = loop {
                    tokio::select! {
                        slot = tx.reserve() => break slot,
                        () = tokio::time::sleep_until(next_check) => {
                            if !self.still_allowed(&tx).await {
                                return;
                            }
                            next_check = tokio::time::Instant::now() + self.every;
                        }
                    }
                };
                let Ok(slot) = slot else {
                    return;
                };
                slot.send(Ok(pb::WatchConsentsResponse {
                    change: u64::try_from(change.seq).unwrap_or(0),
                    changed_to: codec::state(change.changed_to) as i32,
                    consent: Some(codec::consent(&change.consent)),
                }));
            }
            if !full {
                tokio::select! {
                    () = tokio::time::sleep(FOLLOW_POLL) => {}
                    () = tx.closed() => return,
                }
            }
        }
    }
}
