//! The append-only record store. One row per distinct canonical body (`body_digest` unique):
//! an exact replay inserts nothing; another body under a stored identity is inserted and marked
//! `equivocates`. No statement updates or deletes a row.

use std::collections::BTreeMap;

use lychd_helmloop::schema::RecordType;
use sqlx::PgPool;

use crate::domain::record::{Authority, Verified};

/// What an append did with one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    Stored,
    Replayed,
    Equivocation,
}

/// A stored record as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub seq: i64,
    pub record_type: String,
    pub record_id: String,
    pub digest: String,
    pub body_digest: String,
    pub body: Vec<u8>,
    pub subject_id: String,
    pub revision_id: String,
    pub issued_at_ms: i64,
    pub submitted_by: String,
    pub stored_at_us: i64,
    /// Another body is stored under the same identity.
    pub equivocation: bool,
}

type RowTuple = (
    i64,
    String,
    String,
    String,
    String,
    Vec<u8>,
    String,
    String,
    i64,
    String,
    i64,
    bool,
);

fn row(t: RowTuple) -> Row {
    Row {
        seq: t.0,
        record_type: t.1,
        record_id: t.2,
        digest: t.3,
        body_digest: t.4,
        body: t.5,
        subject_id: t.6,
        revision_id: t.7,
        issued_at_ms: t.8,
        submitted_by: t.9,
        stored_at_us: t.10,
        equivocation: t.11,
    }
}

/// The columns of [`Row`] for a `records r` in the `FROM` list (`$BODY` is the body or empty).
const COLUMNS: &str = "r.seq, r.record_type, r.record_id, r.digest, r.body_digest, $BODY, \
     r.subject_id, r.revision_id, (extract(epoch FROM r.issued_at) * 1000)::bigint, \
     r.submitted_by, (extract(epoch FROM r.stored_at) * 1000000)::bigint, \
     EXISTS (SELECT 1 FROM records o WHERE o.record_type = r.record_type \
             AND o.record_id = r.record_id AND o.seq <> r.seq)";

fn columns(with_body: bool) -> String {
    COLUMNS.replace("$BODY", if with_body { "r.body" } else { "''::bytea" })
}

/// A record identity: (record type, id).
pub type Identity = (String, String);

/// What the first body stored under an identity binds: its subject id and the authority its
/// type (and, for a learning signal, its disposition) needs. An append under that identity is
/// authorized against it as well as against the new body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstBody {
    pub subject_id: String,
    pub authority: Authority,
}

/// The first stored body of each of `identities` that has one.
pub async fn first_bodies<'e, E>(
    executor: E,
    identities: &[Identity],
) -> sqlx::Result<BTreeMap<Identity, FirstBody>>
where
    E: sqlx::PgExecutor<'e>,
{
    let (types, ids): (Vec<&str>, Vec<&str>) = identities
        .iter()
        .map(|(t, i)| (t.as_str(), i.as_str()))
        .unzip();
    // The disposition matters only for a learning signal (proposal or acceptance).
    let rows: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT DISTINCT ON (r.record_type, r.record_id) r.record_type, r.record_id, \
                r.subject_id, \
                CASE WHEN r.record_type = 'LearningSignalV1' \
                     THEN convert_from(r.body, 'UTF8')::jsonb ->> 'disposition' END \
         FROM unnest($1::text[], $2::text[]) AS i(record_type, record_id) \
         JOIN records r ON r.record_type = i.record_type AND r.record_id = i.record_id \
         ORDER BY r.record_type, r.record_id, r.seq",
    )
    .bind(&types)
    .bind(&ids)
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(t, id, subject_id, disposition)| {
            let authority = Authority::of(RecordType::from_name(&t)?, disposition.as_deref());
            Some((
                (t, id),
                FirstBody {
                    subject_id,
                    authority,
                },
            ))
        })
        .collect())
}

/// Why an append stored nothing without a database fault.
#[derive(Debug)]
pub enum AppendError {
    /// A first body was stored under one of the identities after the caller was authorized
    /// against what `known` said: authorize again against the new first bodies.
    FirstBodiesChanged,
    Database(sqlx::Error),
}

impl From<sqlx::Error> for AppendError {
    fn from(e: sqlx::Error) -> Self {
        AppendError::Database(e)
    }
}

/// The identities of `records`, sorted and distinct.
pub fn identities(records: &[Verified]) -> Vec<Identity> {
    let mut identities: Vec<Identity> = records
        .iter()
        .map(|r| (r.record_type.as_str().to_owned(), r.id.clone()))
        .collect();
    identities.sort();
    identities.dedup();
    identities
}

/// Store `records` (already verified) in one transaction, submitted by `principal`, who was
/// authorized against `known`: the first bodies stored under the records' identities when
/// they were looked up. First bodies never change, so the only news can be a first body under
/// an identity that had none; then nothing is stored ([`AppendError::FirstBodiesChanged`]).
///
/// Read committed. Lock order: one transaction-scoped advisory lock per distinct identity
/// (record type, id), taken in sorted order before any insert, so two appends of bodies under
/// one identity are serialized and the second sees the first (it is marked `equivocates`),
/// and two batches never deadlock.
pub async fn append(
    pool: &PgPool,
    records: &[Verified],
    principal: &str,
    known: &BTreeMap<Identity, FirstBody>,
) -> Result<Vec<Appended>, AppendError> {
    let identities = identities(records);
    let keys: Vec<String> = identities
        .iter()
        .map(|(t, id)| format!("{t}/{id}"))
        .collect();
    let mut tx = pool.begin().await?;
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtextextended(i, 1212)) FROM unnest($1::text[]) AS t(i)",
    )
    .bind(&keys)
    .execute(&mut *tx)
    .await?;
    let unknown: Vec<Identity> = identities
        .into_iter()
        .filter(|i| !known.contains_key(i))
        .collect();
    if !unknown.is_empty() && !first_bodies(&mut *tx, &unknown).await?.is_empty() {
        tx.rollback().await?;
        return Err(AppendError::FirstBodiesChanged);
    }
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let inserted: Option<(bool,)> = sqlx::query_as(
            "INSERT INTO records (record_type, record_id, digest, body_digest, body, subject_id, \
                                  revision_id, issued_at, submitted_by, equivocates) \
             SELECT $1, $2, $3, $4, $5, $6, $7, \
                    'epoch'::timestamptz + $8 * interval '1 millisecond', $9, \
                    EXISTS (SELECT 1 FROM records WHERE record_type = $1 AND record_id = $2) \
             ON CONFLICT (body_digest) DO NOTHING \
             RETURNING equivocates",
        )
        .bind(r.record_type.as_str())
        .bind(&r.id)
        .bind(&r.digest)
        .bind(&r.body_digest)
        .bind(&r.body)
        .bind(&r.subject_id)
        .bind(&r.revision_id)
        .bind(r.issued_at_ms)
        .bind(principal)
        .fetch_optional(&mut *tx)
        .await?;
        out.push(match inserted {
            None => Appended::Replayed,
            Some((true,)) => Appended::Equivocation,
            Some((false,)) => Appended::Stored,
        });
    }
    lychd_runtime::refusal::commit(tx).await?;
    Ok(out)
}

/// Every body stored under one identity, oldest first.
pub async fn by_identity(
    pool: &PgPool,
    record_type: &str,
    record_id: &str,
) -> sqlx::Result<Vec<Row>> {
    let sql = format!(
        "SELECT {} FROM records r WHERE r.record_type = $1 AND r.record_id = $2 ORDER BY r.seq",
        columns(true)
    );
    let rows: Vec<RowTuple> = sqlx::query_as(&sql)
        .bind(record_type)
        .bind(record_id)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(row).collect())
}

/// What `ListRecords` filters on (empty: any).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub subject_id: String,
    pub revision_id: String,
    pub record_type: String,
}

/// Records after `after` (a `seq`), oldest first, at most `limit`.
pub async fn list(
    pool: &PgPool,
    filter: &Filter,
    after: i64,
    limit: i64,
    with_body: bool,
) -> sqlx::Result<Vec<Row>> {
    let sql = format!(
        "SELECT {} FROM records r \
         WHERE ($1 = '' OR r.subject_id = $1) AND ($2 = '' OR r.revision_id = $2) \
           AND ($3 = '' OR r.record_type = $3) AND r.seq > $4 \
         ORDER BY r.seq LIMIT $5",
        columns(with_body)
    );
    let rows: Vec<RowTuple> = sqlx::query_as(&sql)
        .bind(&filter.subject_id)
        .bind(&filter.revision_id)
        .bind(&filter.record_type)
        .bind(after)
        .bind(limit)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(row).collect())
}

/// The canonical bodies bound to a subject id and revision id, and every other body stored
/// under one of their identities (whatever subject or revision it names, so an equivocation
/// is seen by every reduction that reads the identity), oldest first: at most `limit` rows,
/// and no row once the bodies before it hold more than `max_bytes` (so the caller sees that a
/// cap is exceeded without reading the whole set).
pub async fn bodies_bound_to(
    pool: &PgPool,
    subject_id: &str,
    revision_id: &str,
    limit: i64,
    max_bytes: i64,
) -> sqlx::Result<Vec<Vec<u8>>> {
    let rows: Vec<(Vec<u8>,)> = sqlx::query_as(
        "SELECT body FROM ( \
             SELECT body, seq, octet_length(body) AS len, \
                    sum(octet_length(body)) OVER (ORDER BY seq) AS running \
             FROM records r \
             WHERE (r.record_type, r.record_id) IN ( \
                 SELECT record_type, record_id FROM records \
                 WHERE subject_id = $1 AND revision_id = $2)) t \
         WHERE running - len <= $4 ORDER BY seq LIMIT $3",
    )
    .bind(subject_id)
    .bind(revision_id)
    .bind(limit)
    .bind(max_bytes)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(b,)| b).collect())
}
