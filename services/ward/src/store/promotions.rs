//! Promotions (`ward.promotions`) and the outbox of the HelmLoop records issued on an owner's
//! approval (`ward.promotion_outbox`).
//!
//! A promotion is proposed in one transaction (its consent and its terms together), and
//! approved in one transaction: the guarded settlement of the consent, its consumption by the
//! issuance, and the issued records — so an approval without its records, or records without
//! an approval, never commits. Delivery only ever marks attempts and acknowledgements.

use sqlx::postgres::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::consents::{self, ConsentRecord, Derived};
use crate::domain::consent::{Proposal, Verdict};
use crate::domain::owner_records::Drafts;
use crate::domain::promotion::{self, IssueError, PromotionRefusal, Terms};
use crate::error::{Entity, Result, WardError};

/// A promotion as stored, with its issued records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionRecord {
    pub consent_id: Uuid,
    pub owner_id: Uuid,
    pub owner_name: String,
    /// Canonical JSON of the terms.
    pub terms: String,
    pub records: Vec<OutboxRecord>,
}

/// One issued record and its delivery state.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OutboxRecord {
    pub seq: i64,
    pub consent_id: Uuid,
    pub record_type: String,
    pub record_id: String,
    pub digest: String,
    pub body: String,
    pub attempts: i32,
    pub delivered_at: Option<OffsetDateTime>,
    pub delivery: Option<String>,
}

const OUTBOX_COLUMNS: &str =
    "seq, consent_id, record_type, record_id, digest, body, attempts, delivered_at, delivery";

/// The live human principal named `name`: the accountable owner a contract names.
pub async fn owner(pool: &PgPool, name: &str) -> Result<Option<Uuid>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM ward.principals
         WHERE name = $1 AND kind = 'human' AND revoked_at IS NULL",
    )
    .bind(name)
    .fetch_optional(pool)
    .await?)
}

/// Record the promotion `p` (its consent, live-only and pending) with its owner and terms in one
/// transaction. An identical earlier proposal is returned as it stands (`false`).
pub async fn propose(
    pool: &PgPool,
    p: &Proposal,
    requested_by: Uuid,
    d: &Derived<'_>,
    owner: (Uuid, &str),
    terms: &str,
) -> Result<(ConsentRecord, PromotionRecord, bool)> {
    for _ in 0..3 {
        let mut tx = pool.begin().await?;
        if let Some(existing) = consents::find_identical(&mut tx, p, d.binding_digest).await? {
            lychd_runtime::refusal::commit(tx).await?;
            let consent = consents::get(pool, existing.id).await?.unwrap_or(existing);
            let promotion = get(pool, consent.id)
                .await?
                .ok_or(WardError::NotFound(Entity::Promotion))?;
            return Ok((consent, promotion, false));
        }
        let Some(consent) = consents::insert_pending(&mut tx, p, requested_by, d).await? else {
            // A concurrent identical proposal committed first: read it.
            continue;
        };
        sqlx::query(
            "INSERT INTO ward.promotions (consent_id, owner_id, owner_name, terms)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(consent.id)
        .bind(owner.0)
        .bind(owner.1)
        .bind(terms)
        .execute(&mut *tx)
        .await?;
        lychd_runtime::refusal::commit(tx).await?;
        let promotion = PromotionRecord {
            consent_id: consent.id,
            owner_id: owner.0,
            owner_name: owner.1.to_owned(),
            terms: terms.to_owned(),
            records: Vec::new(),
        };
        return Ok((consent, promotion, true));
    }
    Err(WardError::Database(sqlx::Error::Protocol(
        "an identical promotion neither inserted nor found".into(),
    )))
}

#[derive(sqlx::FromRow)]
struct PromotionRow {
    consent_id: Uuid,
    owner_id: Uuid,
    owner_name: String,
    terms: String,
}

/// The promotion judged by consent `id`, `None` when that consent is no promotion.
pub async fn get(pool: &PgPool, id: Uuid) -> Result<Option<PromotionRecord>> {
    let Some(row) = sqlx::query_as::<_, PromotionRow>(
        "SELECT consent_id, owner_id, owner_name, terms FROM ward.promotions WHERE consent_id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let records = sqlx::query_as::<_, OutboxRecord>(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM ward.promotion_outbox WHERE consent_id = $1 ORDER BY position"
    ))
    .bind(id)
    .fetch_all(pool)
    .await?;
    Ok(Some(PromotionRecord {
        consent_id: row.consent_id,
        owner_id: row.owner_id,
        owner_name: row.owner_name,
        terms: row.terms,
        records,
    }))
}

/// The owner of the promotion judged by consent `id`, `None` when it is no promotion.
pub async fn owner_of(pool: &PgPool, id: Uuid) -> Result<Option<Uuid>> {
    Ok(
        sqlx::query_scalar("SELECT owner_id FROM ward.promotions WHERE consent_id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Settle promotion `id` with `verdict` by its owner `by` (the caller checked ownership). An
/// approval, in the same transaction: consumes the consent and appends the issued records to
/// the outbox. Answers the consent, whether this call settled it, and whether records were
/// issued.
pub async fn decide(
    pool: &PgPool,
    id: Uuid,
    verdict: Verdict,
    review_digest: &str,
    by: Uuid,
) -> Result<(ConsentRecord, bool, bool)> {
    // The expiry sweep runs on its own, before this transaction (never inside it: its row
    // locks would be held for this request's whole transaction).
    consents::expire_due(&mut *pool.acquire().await?).await?;
    let mut tx = super::begin(pool).await?;
    let terms: String = sqlx::query_scalar(
        "SELECT terms FROM ward.promotions WHERE consent_id = $1 AND owner_id = $2",
    )
    .bind(id)
    .bind(by)
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(WardError::NotOwner)?;
    let Some(settled) = consents::settle(&mut tx, id, verdict, review_digest, by).await? else {
        let answer = consents::unsettled(&mut tx, id, by).await;
        lychd_runtime::refusal::commit(tx).await?;
        let (record, changed) = answer?;
        return Ok((record, changed, false));
    };
    if verdict != Verdict::Approve {
        lychd_runtime::refusal::commit(tx).await?;
        return Ok((settled, true, false));
    }
    let terms = lychd_helmloop::parse(terms.as_bytes()).map_err(|_| unreadable(id))?;
    let decided_at = settled
        .decided_at
        .ok_or_else(|| WardError::Database(sqlx::Error::Protocol("settled without time".into())))?;
    let at_ms =
        i64::try_from(decided_at.unix_timestamp_nanos().div_euclid(1_000_000)).unwrap_or(i64::MAX);
    // Proposed owner records are issued exactly as approved; a promotion's are derived from
    // its terms.
    let records = if let Some(drafts) = Drafts::from_value(&terms) {
        drafts.records
    } else {
        let terms = Terms::from_value(&terms).ok_or_else(|| unreadable(id))?;
        // The issued identities carry an unpredictable component (122 random bits) beside the
        // consent: nobody can know them, hence claim them at the HelmLoop office, before they
        // are issued.
        let key = format!("{}-{}", id.simple(), Uuid::new_v4().simple());
        match promotion::issue(&terms, &key, at_ms) {
            Ok(records) => records,
            Err(IssueError::ValidityEnded) => {
                // Nothing settles: the owner's approval could not be honoured as bound.
                tx.rollback().await?;
                return Err(WardError::Promotion(PromotionRefusal::ValidityEnded));
            }
            Err(IssueError::Time | IssueError::Canonical(_)) => {
                tracing::error!(consent = %id, "promotion records could not be issued");
                return Err(WardError::Database(sqlx::Error::Protocol(
                    "promotion records could not be issued".into(),
                )));
            }
        }
    };
    // Ward never issues two bodies under one identity: one issued already settles nothing.
    let pairs: (Vec<&str>, Vec<&str>) = records
        .iter()
        .map(|r| (r.record_type, r.id.as_str()))
        .unzip();
    let taken: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM ward.promotion_outbox o
                        JOIN unnest($1::text[], $2::text[]) AS i(t, id)
                          ON o.record_type = i.t AND o.record_id = i.id)",
    )
    .bind(&pairs.0)
    .bind(&pairs.1)
    .fetch_one(&mut *tx)
    .await?;
    if taken {
        tx.rollback().await?;
        return Err(WardError::Promotion(PromotionRefusal::IdentityTaken));
    }
    let consumed = consents::consume_at_decision(&mut tx, id, by).await?;
    for (i, r) in records.iter().enumerate() {
        sqlx::query(
            "INSERT INTO ward.promotion_outbox
                 (consent_id, position, record_type, record_id, digest, body)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id)
        .bind(i16::try_from(i + 1).unwrap_or(i16::MAX))
        .bind(r.record_type)
        .bind(&r.id)
        .bind(&r.digest)
        .bind(&r.body)
        .execute(&mut *tx)
        .await?;
    }
    lychd_runtime::refusal::commit(tx).await?;
    Ok((consumed, true, true))
}

fn unreadable(id: Uuid) -> WardError {
    WardError::Database(sqlx::Error::Decode(
        format!("unreadable terms in ward.promotions {id}").into(),
    ))
}

/// Up to `limit` undelivered records, oldest first.
pub async fn undelivered(pool: &PgPool, limit: i64) -> Result<Vec<OutboxRecord>> {
    Ok(sqlx::query_as::<_, OutboxRecord>(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM ward.promotion_outbox
         WHERE delivered_at IS NULL ORDER BY seq LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// Count one more delivery attempt of each of `seqs` (before the records are sent).
pub async fn attempted(pool: &PgPool, seqs: &[i64]) -> Result<()> {
    sqlx::query(
        "UPDATE ward.promotion_outbox SET attempts = attempts + 1
         WHERE seq = ANY($1) AND delivered_at IS NULL",
    )
    .bind(seqs)
    .execute(pool)
    .await?;
    Ok(())
}

/// Record the acknowledgement of `seq` (`stored`, `replayed`, `equivocation` or `found`).
pub async fn delivered(pool: &PgPool, seq: i64, delivery: &str) -> Result<()> {
    sqlx::query(
        "UPDATE ward.promotion_outbox SET delivered_at = statement_timestamp(), delivery = $2
         WHERE seq = $1 AND delivered_at IS NULL",
    )
    .bind(seq)
    .bind(delivery)
    .execute(pool)
    .await?;
    Ok(())
}
