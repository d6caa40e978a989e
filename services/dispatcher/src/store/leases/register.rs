//! Registration: a lease with its observation and dispatch event in one statement, and the
//! answers kept under a request id (the first written wins; a retry reads it back).

use super::*;

/// A lease to register.
#[derive(Debug, Clone)]
pub struct NewLease<'a> {
    pub id: Uuid,
    pub key: &'a CapabilityKey,
    pub key_text: &'a str,
    pub holder: &'a str,
    pub principal_id: &'a str,
    pub run_id: &'a str,
    pub attempt_id: &'a str,
    pub priority: i16,
    pub ttl_seconds: i32,
    /// The animator's admission generation captured before the probe.
    pub generation: i64,
    /// The fresh observation the grant was decided on (recorded whether or not the lease is).
    pub observed: &'a Observed,
    /// The caller's request id, with the request in canonical form ([`Answer::demand`]).
    pub request: Option<(&'a str, &'a str)>,
}

/// Outcome of a registration.
#[derive(Debug, Clone)]
pub enum Registered {
    Granted {
        issued_at: OffsetDateTime,
        expires_at: OffsetDateTime,
        generation: i64,
        sequence: i64,
    },
    /// Admission closed, or closed and reopened, since the generation was captured: nothing
    /// was written (no lease, no event).
    Raced,
    /// The request id was answered already (by an earlier or a concurrent call): nothing was
    /// written; this is the answer kept.
    Answered(Box<Kept>),
}

/// The registration statement without ([0]) and with ([1]) a request id. With one, `$1` is the
/// request id and `$2` the request in canonical form, and every other parameter is shifted by
/// two; without one, the kept-answer step is not in the statement at all (PostgreSQL prepares
/// every step of a statement at each execution, read or not).
static REGISTER: std::sync::LazyLock<[String; 2]> =
    std::sync::LazyLock::new(|| [registration(false), registration(true)]);

fn registration(with_request: bool) -> String {
    // Parameters after the request's two.
    let p = |n: usize| format!("${}", if with_request { n + 2 } else { n });
    let (claim, guard, request_id) = if with_request {
        (
            format!(
                "claim AS (
             INSERT INTO lease_requests (principal_id, request_id, demand, outcome, lease_id,
                                         capability_key, animator)
             SELECT {principal}, $1, $2, 'GRANTED', {id}, {key}, adm.animator FROM adm
             ON CONFLICT (principal_id, request_id) DO NOTHING
             RETURNING lease_id
         ), ",
                principal = p(8),
                id = p(3),
                key = p(4),
            ),
            "WHERE EXISTS (SELECT 1 FROM claim)",
            "$1",
        )
    } else {
        (String::new(), "", "NULL")
    };
    format!(
        "WITH observed AS (
             INSERT INTO observations (capability_key, animator, phase, reason, observed_at)
             SELECT {key}, {animator}, {phase}, {reason}, now()
              WHERE NOT EXISTS (
                    SELECT 1 FROM observations o
                     WHERE o.capability_key = {key} AND o.phase = {phase} AND o.reason = {reason}
                       AND o.observed_at > now() - {UNCHANGED_WITHIN})
             {REPLACE}
         ), adm AS (
             SELECT animator, generation FROM admission
              WHERE animator = {animator} AND generation = {generation} AND open_closures = 0
                FOR SHARE
         ), {claim}lease AS (
             INSERT INTO leases (id, capability_key, key_version, family, model_id, animator,
                                 holder, principal_id, run_id, attempt_id, priority,
                                 admission_generation, issued_at, expires_at, request_id)
             SELECT {id}, {key}, 1, {family}, {model}, adm.animator, {holder}, {principal},
                    {run}, {attempt}, {priority}, adm.generation,
                    now(), now() + {ttl}::int * interval '1 second', {request_id}
               FROM adm {guard}
             RETURNING id, capability_key, animator, holder, run_id, attempt_id, priority,
                       issued_at, expires_at, admission_generation
         ), event AS (
             INSERT INTO dispatch_events (lease_id, capability_key, animator, holder, run_id,
                                          attempt_id, priority, admitted_at)
             SELECT id, capability_key, animator, holder, run_id, attempt_id, priority, issued_at
               FROM lease
              WHERE pg_current_xact_id() IS NOT NULL
             RETURNING sequence
         )
         SELECT lease.issued_at, lease.expires_at, lease.admission_generation, event.sequence
           FROM lease, event",
        animator = p(1),
        generation = p(2),
        id = p(3),
        key = p(4),
        family = p(5),
        model = p(6),
        holder = p(7),
        principal = p(8),
        run = p(9),
        attempt = p(10),
        priority = p(11),
        ttl = p(12),
        phase = p(13),
        reason = p(14),
    )
}

/// Record the fresh observation of the leased key, and register the lease and its dispatch
/// event only if the animator's admission is still open at the captured generation.
pub async fn register(pool: &PgPool, l: &NewLease<'_>) -> Result<Registered> {
    // Under a request id, the answer row is the guard: inserted with the lease, ON CONFLICT
    // DO NOTHING — a second call with the same id waits for the first one's row to commit,
    // then inserts neither answer, lease nor event, and reads the first answer back.
    // One statement (READ COMMITTED, autocommit), [`REGISTER`]. The observation is written
    // whatever the guard decides (a data-modifying CTE runs whether or not it is read) unless
    // the cached row already says the same and is younger than `UNCHANGED_WITHIN`: then
    // nothing is written and nothing locked. It locks only its own observations row, which no
    // statement locks together with admission. Lock order for
    // the lease: the animator's admission row FOR SHARE first — CloseAdmission and
    // ReopenAdmission take it FOR UPDATE, so a close either waits for this lease to commit
    // (and its drain then counts it) or commits first, in which case the row is re-checked at
    // its new version, fails the guard, and no lease or event is written. Issue and expiry
    // times come from the database clock. The event's sequence number is taken after the
    // transaction holds an id (the lease row is written first, and `pg_current_xact_id()` is
    // asked before the event row): the event feed's gap rule relies on it
    // (`lychd_runtime::feed`).
    // The connection is taken first: failing to get one is DATABASE_UNAVAILABLE (nothing was
    // sent); losing it once the statement was sent is OUTCOME_UNKNOWN (it may have committed —
    // under a request id a retry reads the kept answer; without one, ListLeases by holder shows
    // whether it was leased, and an unwanted lease ends with its TTL).
    let mut conn = pool.acquire().await?;
    let query = match l.request {
        None => sqlx::query(&REGISTER[0]),
        Some((request_id, demand)) => sqlx::query(&REGISTER[1]).bind(request_id).bind(demand),
    };
    let row = query
        .bind(&l.key.animator)
        .bind(l.generation)
        .bind(l.id)
        .bind(l.key_text)
        .bind(l.key.family.as_str())
        .bind(&l.key.model_id)
        .bind(l.holder)
        .bind(l.principal_id)
        .bind(l.run_id)
        .bind(l.attempt_id)
        .bind(l.priority)
        .bind(l.ttl_seconds)
        .bind(l.observed.phase.as_str())
        .bind(l.observed.reason.as_str())
        .fetch_optional(&mut *conn)
        .await
        .map_err(ambiguous)?;
    drop(conn);
    match row {
        None => match l.request {
            // Nothing written: either the request id was answered already, or admission
            // moved (read after the statement, so a concurrent answer is committed by now).
            Some((request_id, _)) => Ok(match kept(pool, l.principal_id, request_id).await? {
                Some(k) => Registered::Answered(Box::new(k)),
                None => Registered::Raced,
            }),
            None => Ok(Registered::Raced),
        },
        Some(r) => Ok(Registered::Granted {
            issued_at: r.try_get("issued_at")?,
            expires_at: r.try_get("expires_at")?,
            generation: r.try_get("admission_generation")?,
            sequence: r.try_get("sequence")?,
        }),
    }
}

/// The outcome kinds an answer is kept as (`lease_requests.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeKind {
    Granted,
    TransitionRequired,
    Unavailable,
}

impl OutcomeKind {
    fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Granted => "GRANTED",
            OutcomeKind::TransitionRequired => "HARDWARE_TRANSITION_REQUIRED",
            OutcomeKind::Unavailable => "UNAVAILABLE",
        }
    }

    fn parse(s: &str) -> Option<OutcomeKind> {
        [
            OutcomeKind::Granted,
            OutcomeKind::TransitionRequired,
            OutcomeKind::Unavailable,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// An answer that is not a grant, to keep under a request id (a grant is kept by
/// [`register`]).
#[derive(Debug, Clone)]
pub struct Answer<'a> {
    pub principal_id: &'a str,
    pub request_id: &'a str,
    /// The decoded request in canonical form: a retry must ask for exactly the same.
    pub demand: &'a str,
    pub outcome: OutcomeKind,
    pub capability_key: &'a str,
    pub animator: &'a str,
    pub ready_estimate_seconds: Option<u32>,
    /// The `Unavailable` code.
    pub reason: &'a str,
    pub observed: Option<&'a Observed>,
}

/// An answer kept under a request id.
#[derive(Debug, Clone)]
pub struct Kept {
    pub demand: String,
    pub outcome: OutcomeKind,
    pub capability_key: String,
    pub animator: String,
    pub ready_estimate_seconds: Option<u32>,
    pub reason: String,
    pub observed: Option<Observed>,
    /// The lease, for a grant.
    pub lease: Option<LeaseRow>,
    /// The admission generation the lease was admitted under, for a grant.
    pub generation: i64,
}

/// Keep `answer` under its request id unless one is kept already: `None` when this one was
/// kept, else the answer kept before (by an earlier or concurrent call).
pub async fn keep(pool: &PgPool, answer: &Answer<'_>) -> Result<Option<Kept>> {
    // One guarded insert (READ COMMITTED): a concurrent insert of the same id waits for the
    // first to commit, then does nothing.
    let inserted = sqlx::query(
        "INSERT INTO lease_requests (principal_id, request_id, demand, outcome, capability_key,
                                     animator, ready_estimate_seconds, reason, observed_phase,
                                     observed_reason)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (principal_id, request_id) DO NOTHING",
    )
    .bind(answer.principal_id)
    .bind(answer.request_id)
    .bind(answer.demand)
    .bind(answer.outcome.as_str())
    .bind(answer.capability_key)
    .bind(answer.animator)
    .bind(
        answer
            .ready_estimate_seconds
            .map(|s| i32::try_from(s).unwrap_or(i32::MAX)),
    )
    .bind(answer.reason)
    .bind(answer.observed.map(|o| o.phase.as_str()))
    .bind(answer.observed.map(|o| o.reason.as_str()).unwrap_or(""))
    .execute(&mut *pool.acquire().await?)
    .await
    .map_err(ambiguous)?
    .rows_affected();
    if inserted == 1 {
        return Ok(None);
    }
    kept(pool, answer.principal_id, answer.request_id)
        .await?
        .map(Some)
        .ok_or(DispatcherError::Conflict)
}

/// The answer kept under `principal`'s `request_id`, with its lease for a grant.
pub async fn kept(pool: &PgPool, principal: &str, request_id: &str) -> Result<Option<Kept>> {
    let r = sqlx::query(&format!(
        "SELECT r.demand, r.outcome, r.capability_key AS kept_key, r.animator AS kept_animator,
                r.ready_estimate_seconds, r.reason, r.observed_phase, r.observed_reason,
                l.admission_generation, {COLUMNS}
           FROM lease_requests r LEFT JOIN leases l ON l.id = r.lease_id
          WHERE r.principal_id = $1 AND r.request_id = $2"
    ))
    .bind(principal)
    .bind(request_id)
    .fetch_optional(pool)
    .await?;
    let Some(r) = r else {
        return Ok(None);
    };
    let outcome: String = r.try_get("outcome")?;
    let outcome = OutcomeKind::parse(&outcome)
        .ok_or_else(|| sqlx::Error::Decode(format!("unknown kept outcome {outcome:?}").into()))?;
    let lease = match r.try_get::<Option<Uuid>, _>("id")? {
        Some(_) => Some(lease_row(&r)?),
        None => None,
    };
    let phase: Option<String> = r.try_get("observed_phase")?;
    Ok(Some(Kept {
        demand: r.try_get("demand")?,
        outcome,
        capability_key: r.try_get("kept_key")?,
        animator: r.try_get("kept_animator")?,
        ready_estimate_seconds: r
            .try_get::<Option<i32>, _>("ready_estimate_seconds")?
            .and_then(|s| u32::try_from(s).ok()),
        reason: r.try_get("reason")?,
        observed: phase.map(|p| {
            Observed::with_reason(
                crate::domain::observation::Phase::parse(&p)
                    .unwrap_or(crate::domain::observation::Phase::Unknown),
                r.try_get::<String, _>("observed_reason")
                    .unwrap_or_default(),
            )
        }),
        generation: r
            .try_get::<Option<i64>, _>("admission_generation")?
            .unwrap_or(0),
        lease,
    }))
}
