//! Ward's link to the HelmLoop office (`peers.helmloop`), called with Ward's own session:
//! reading a promotion's contract, looking up whether a proposed owner record's identity is
//! taken, and delivering the issued owner records (promotions' and proposed ones) from the
//! outbox.
//!
//! Delivery is at-least-once and idempotent: each attempt is counted before the records are
//! sent; a record whose earlier attempt may have arrived (a lost acknowledgement) is first
//! looked up with `GetRecord` and, when its exact digest is stored, marked delivered without
//! being sent again. Nothing is ever re-issued: the outbox holds the only bodies. The loop
//! wakes on every approval and retries every `promotion_retry_interval` until the office
//! acknowledges; it ends once the Ward service that woke it is gone.

use std::sync::{Arc, Weak};
use std::time::Duration;

use lychd_proto::helmloop::v1 as hl;
use lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient;
use lychd_runtime::client::PeerChannel;
use lychd_runtime::server::ServeContext;
use tokio::sync::Notify;
use tonic::Code;

use crate::domain::promotion::{self, Contract, ContractDefect, PromotionRefusal, Ref};
use crate::error::{Result, WardError};
use crate::store::promotions::{self, OutboxRecord};

/// Records read and sent per round.
const BATCH: i64 = 64;

/// The HelmLoop office as Ward calls it.
#[derive(Clone)]
pub struct Link {
    client: HelmLoopClient<PeerChannel>,
    wake: Arc<Notify>,
}

impl Link {
    /// The link when `peers.helmloop` is configured and Ward has a session of its own (an
    /// `auth.credential_file`) to present; `None` otherwise.
    pub fn from_context(ctx: &ServeContext) -> anyhow::Result<Option<Link>> {
        let Some(peer) = ctx.config.peers.get("helmloop") else {
            return Ok(None);
        };
        if ctx.outgoing.session().is_none() {
            tracing::warn!(
                "peers.helmloop is configured but ward has no credential of its own: promotions are refused"
            );
            return Ok(None);
        }
        let channel = lychd_runtime::client::peer_channel(&peer.endpoint, ctx.outgoing.clone())
            .map_err(|e| anyhow::anyhow!("peers.helmloop.endpoint: {e}"))?;
        Ok(Some(Link {
            client: HelmLoopClient::new(channel),
            wake: Arc::new(Notify::new()),
        }))
    }

    /// Wake the delivery loop (after an approval committed records).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// The contract stored under `r`'s id with exactly `r`'s digest.
    pub async fn contract(&self, r: &Ref) -> Result<Contract> {
        let mut client = self.client.clone();
        let found = client
            .get_record(hl::GetRecordRequest {
                record_type: "OutcomeContractV1".into(),
                id: r.id.clone(),
            })
            .await;
        let records = match found {
            Ok(answer) => answer.into_inner().records,
            Err(status) if status.code() == Code::NotFound => {
                return Err(WardError::Promotion(PromotionRefusal::ContractNotFound));
            }
            Err(status) => return Err(unreachable_office(&status)),
        };
        let Some(stored) = records.iter().find(|s| s.digest == r.digest) else {
            return Err(WardError::Promotion(PromotionRefusal::ContractNotFound));
        };
        if stored.equivocation || records.len() > 1 {
            return Err(WardError::Promotion(PromotionRefusal::ContractUnusable));
        }
        let body = lychd_helmloop::parse(&stored.body)
            .map_err(|_| WardError::Promotion(PromotionRefusal::ContractUnusable))?;
        promotion::read_contract(&body).map_err(|e| match e {
            ContractDefect::Malformed | ContractDefect::NotActive => {
                WardError::Promotion(PromotionRefusal::ContractUnusable)
            }
        })
    }

    /// Does the office hold any body under (`record_type`, `id`)?
    pub async fn holds(&self, record_type: &str, id: &str) -> Result<bool> {
        let found = self
            .client
            .clone()
            .get_record(hl::GetRecordRequest {
                record_type: record_type.to_owned(),
                id: id.to_owned(),
            })
            .await;
        match found {
            Ok(answer) => Ok(!answer.into_inner().records.is_empty()),
            Err(status) if status.code() == Code::NotFound => Ok(false),
            Err(status) => Err(unreachable_office(&status)),
        }
    }

    /// Start the delivery loop; it ends within `every` once the returned waker's last holder
    /// (the Ward service) is dropped.
    pub fn start(&self, pool: sqlx::PgPool, every: Duration) -> tokio::task::JoinHandle<()> {
        let wake = Arc::downgrade(&self.wake);
        let client = self.client.clone();
        tokio::spawn(deliver_until_gone(pool, client, wake, every))
    }
}

/// The office's refusal of Ward itself is a configuration fault; anything else is an outage.
fn unreachable_office(status: &tonic::Status) -> WardError {
    match status.code() {
        Code::PermissionDenied | Code::Unauthenticated => {
            tracing::error!(
                code = ?status.code(),
                "the helmloop office refused ward's own session: check ward's helmloop assignments"
            );
            WardError::Promotion(PromotionRefusal::NotConfigured)
        }
        _ => WardError::Promotion(PromotionRefusal::Unavailable),
    }
}

async fn deliver_until_gone(
    pool: sqlx::PgPool,
    client: HelmLoopClient<PeerChannel>,
    wake: Weak<Notify>,
    every: Duration,
) {
    loop {
        match deliver_once(&pool, client.clone()).await {
            // A full batch: go on at once.
            Ok(n) if n == BATCH as usize => continue,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "promotion records not delivered yet; will retry"),
        }
        let Some(waker) = wake.upgrade() else {
            return;
        };
        tokio::select! {
            () = waker.notified() => {}
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// One round: look up what may have arrived, send the rest, record every acknowledgement.
/// Returns how many undelivered records the round began with.
pub async fn deliver_once(
    pool: &sqlx::PgPool,
    mut client: HelmLoopClient<PeerChannel>,
) -> Result<usize> {
    let pending = promotions::undelivered(pool, BATCH).await?;
    let n = pending.len();
    if n == 0 {
        return Ok(0);
    }
    // Counted before anything is sent: a record with an earlier attempt may have arrived.
    let seqs: Vec<i64> = pending.iter().map(|r| r.seq).collect();
    promotions::attempted(pool, &seqs).await?;
    let mut send: Vec<OutboxRecord> = Vec::with_capacity(n);
    for r in pending {
        if r.attempts > 0 && stored_already(&mut client, &r).await? {
            promotions::delivered(pool, r.seq, "found").await?;
            tracing::info!(record = %r.record_id, "promotion record found at helmloop (acknowledgement lost)");
            continue;
        }
        send.push(r);
    }
    if send.is_empty() {
        return Ok(n);
    }
    let answer = client
        .append_records(hl::AppendRecordsRequest {
            records: send.iter().map(|r| r.body.clone().into_bytes()).collect(),
        })
        .await
        .map_err(|s| unreachable_office(&s))?
        .into_inner();
    for result in answer.results {
        let Some(r) = usize::try_from(result.index).ok().and_then(|i| send.get(i)) else {
            continue;
        };
        if result.digest != r.digest {
            tracing::error!(record = %r.record_id, "helmloop acknowledged another digest; left undelivered");
            continue;
        }
        let delivery = match hl::AppendOutcome::try_from(result.outcome) {
            Ok(hl::AppendOutcome::Stored) => "stored",
            Ok(hl::AppendOutcome::Replayed) => "replayed",
            Ok(hl::AppendOutcome::Equivocation) => {
                tracing::error!(record = %r.record_id, "helmloop holds another body under an issued record's identity");
                "equivocation"
            }
            _ => continue,
        };
        promotions::delivered(pool, r.seq, delivery).await?;
    }
    Ok(n)
}

/// Is `r`'s exact body stored at the office already?
async fn stored_already(
    client: &mut HelmLoopClient<PeerChannel>,
    r: &OutboxRecord,
) -> Result<bool> {
    match client
        .get_record(hl::GetRecordRequest {
            record_type: r.record_type.clone(),
            id: r.record_id.clone(),
        })
        .await
    {
        Ok(answer) => Ok(answer
            .into_inner()
            .records
            .iter()
            .any(|s| s.digest == r.digest)),
        Err(status) if status.code() == Code::NotFound => Ok(false),
        Err(status) => Err(unreachable_office(&status)),
    }
}
