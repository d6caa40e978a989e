//! Decisions: resolve a session token and, for authorization, answer one question — by the
//! resolving statement (`sql/resolve.sql`), shared with the questions asked at the same time
//! ([`Resolver`], ADR 0006), then record the decision in the audit.
//!
//! The resolving statement is a READ COMMITTED snapshot taken after the question was asked: a
//! revocation whose commit returned before it was asked is seen. Every decision's audit record
//! is queued on a [`DecisionLog`] before the answer (written in batches behind it, ADR 0004):
//! the office's log for the `Authorize` RPC, the verifier's own for Ward's own checks.
//! Successful authentications are not audited (the authorization that follows records the
//! principal and generations). A token that authenticates nobody is not audited here either:
//! its refusal is returned and the caller counts it ([`super::strangers`]), so strangers
//! cannot grow the audit one row per call. A question asked by another principal
//! (the `Authorize` and `Authenticate` RPCs, which need `ward:decide`) is resolved in the same
//! statement as the asker's own question.

use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::PrincipalRecord;
use super::decision_log::{DecisionLog, Entry};
use crate::domain::decision::{self, Reason, SessionFacts};
use crate::domain::secret;
use crate::error::Result;
use lychd_auth::grammar::Object;

mod batch;
pub use batch::{Batching, Resolver};

const RESOLVE_SQL: &str = include_str!("sql/resolve.sql");

/// One authorization question about a session token.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    /// The session token (never logged, never stored: only its digest is looked up).
    pub token: &'a str,
    pub action: &'a str,
    pub object: &'a str,
    pub audience: &'a str,
    pub purpose: &'a str,
    /// Deny unless the principal's policy generation is still this one.
    pub expected_policy_generation: Option<i64>,
    /// The principal asking about the token (the `Authorize` caller); `None` when Ward decides
    /// for its own API.
    pub asked_by: Option<Uuid>,
}

/// The answer to a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRecord {
    pub reason: Reason,
    /// The principal, when the token authenticated it.
    pub principal: Option<PrincipalRecord>,
    pub policy_generation: i64,
    pub revocation_generation: i64,
}

impl DecisionRecord {
    pub fn allowed(&self) -> bool {
        self.reason.allowed()
    }
}

/// A session token that authenticates its principal now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub principal: PrincipalRecord,
    pub session_id: Uuid,
    pub session_expires_at: OffsetDateTime,
}

/// The answer to "who holds this token?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authentication {
    Authenticated(Resolved),
    /// An authentication failure reason (see [`Reason::is_authentication_failure`]).
    Refused(Reason),
}

#[derive(sqlx::FromRow, Clone)]
struct Row {
    n: i64,
    session_id: Uuid,
    session_expires_at: OffsetDateTime,
    session_revoked: bool,
    session_expired: bool,
    credential_revoked: bool,
    credential_expired: bool,
    principal_id: Uuid,
    principal_kind: String,
    principal_name: String,
    policy_generation: i64,
    revocation_generation: i64,
    principal_revoked_at: Option<OffsetDateTime>,
    principal_created_at: OffsetDateTime,
    audience_bound: bool,
    assigned: bool,
}

impl Row {
    fn facts(&self) -> SessionFacts {
        SessionFacts {
            session_revoked: self.session_revoked,
            session_expired: self.session_expired,
            credential_revoked: self.credential_revoked,
            credential_expired: self.credential_expired,
            principal_revoked: self.principal_revoked_at.is_some(),
            audience_bound: self.audience_bound,
            policy_generation: self.policy_generation,
        }
    }

    fn principal(&self) -> Result<PrincipalRecord> {
        PrincipalRecord::from_row((
            self.principal_id,
            self.principal_kind.clone(),
            self.principal_name.clone(),
            self.policy_generation,
            self.revocation_generation,
            self.principal_revoked_at,
            self.principal_created_at,
        ))
    }
}

/// One question in a resolving statement: the token, the office it was presented to, and what
/// it is asked about (`None`: authentication only).
#[derive(Clone, Copy)]
struct Ask<'a> {
    token: &'a str,
    audience: &'a str,
    about: Option<&'a Question<'a>>,
}

/// A well-formed ask as the resolving statement binds it: owned, so it may travel to the
/// [`Resolver`]'s batch. The token itself never leaves the caller — only its digest. Two equal
/// asks in one statement have one answer (one snapshot, one clock): each is sent once.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Sent {
    digest: Vec<u8>,
    action: Option<String>,
    object: Option<String>,
    /// `<type>:*` of the object (`None` when the object has no valid type: objects outside the
    /// grammar match no assignment, which are checked on the way in).
    wildcard: Option<String>,
    audience: String,
    purpose: Option<String>,
}

impl Sent {
    /// `None` for a malformed token: it is unknown without asking the database.
    fn of(a: &Ask<'_>) -> Option<Sent> {
        if !secret::well_formed(secret::SESSION_PREFIX, a.token) {
            return None;
        }
        let q = a.about;
        Some(Sent {
            digest: secret::digest(a.token).to_vec(),
            action: q.map(|q| q.action.to_owned()),
            object: q.map(|q| q.object.to_owned()),
            wildcard: q
                .and_then(|q| Object::parse(q.object).ok())
                .map(|o| o.type_wildcard()),
            audience: a.audience.to_owned(),
            purpose: q.map(|q| q.purpose.to_owned()),
        })
    }
}

/// Answer every sent ask in ONE statement on `conn` (one snapshot): a row per ask, in order,
/// `None` where no session has the token; and how many distinct asks the statement bound.
///
/// Equal asks are bound once and their answer given to each: within one statement they read
/// the same snapshot at the same `statement_timestamp()`, so they could not be answered apart.
/// Under load most asks of a batch are equal — every question an office asks comes with its own
/// `ward:decide` question, the same for all of them, and one caller's token is often asked
/// about by several of its calls at once.
async fn run(conn: &mut sqlx::PgConnection, sent: &[Sent]) -> Result<(Vec<Option<Row>>, usize)> {
    if sent.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let (firsts, of) = distinct(sent);
    let bound: Vec<&Sent> = firsts.iter().map(|&i| &sent[i]).collect();
    let column = |f: fn(&Sent) -> Option<&String>| -> Vec<Option<&String>> {
        bound.iter().map(|s| f(s)).collect()
    };
    let rows: Vec<Row> = sqlx::query_as(RESOLVE_SQL)
        .bind(
            bound
                .iter()
                .map(|s| s.digest.as_slice())
                .collect::<Vec<_>>(),
        )
        .bind(column(|s| s.action.as_ref()))
        .bind(column(|s| s.object.as_ref()))
        .bind(column(|s| s.wildcard.as_ref()))
        .bind(
            bound
                .iter()
                .map(|s| s.audience.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(column(|s| s.purpose.as_ref()))
        .fetch_all(&mut *conn)
        .await?;
    let mut answers: Vec<Option<Row>> = bound.iter().map(|_| None).collect();
    for row in rows {
        // `n` is the 1-based ordinal among the asks bound.
        let at = usize::try_from(row.n - 1)
            .ok()
            .and_then(|i| answers.get_mut(i));
        if let Some(answer) = at {
            *answer = Some(row);
        }
    }
    Ok((
        of.iter().map(|&d| answers[d].clone()).collect(),
        firsts.len(),
    ))
}

/// The index of the first of each distinct item of `items`, and for every item which of those
/// it equals (an index into the first list).
fn distinct<T: std::hash::Hash + Eq>(items: &[T]) -> (Vec<usize>, Vec<usize>) {
    let mut seen: std::collections::HashMap<&T, usize> =
        std::collections::HashMap::with_capacity(items.len());
    let mut firsts = Vec::new();
    let of = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            *seen.entry(item).or_insert_with(|| {
                firsts.push(i);
                firsts.len() - 1
            })
        })
        .collect();
    (firsts, of)
}

/// Resolve every ask through `resolver` (batched with the questions of concurrent callers, one
/// statement per batch); the answers in order, `None` where no session has the token.
async fn resolve(resolver: &Resolver, asks: &[Ask<'_>]) -> Result<Vec<Option<Row>>> {
    let mut at = Vec::with_capacity(asks.len());
    let mut sent = Vec::with_capacity(asks.len());
    for (i, a) in asks.iter().enumerate() {
        if let Some(s) = Sent::of(a) {
            at.push(i);
            sent.push(s);
        }
    }
    let mut answers: Vec<Option<Row>> = asks.iter().map(|_| None).collect();
    if sent.is_empty() {
        return Ok(answers);
    }
    for (i, row) in at.into_iter().zip(resolver.resolve(sent).await?) {
        answers[i] = row;
    }
    Ok(answers)
}

/// Who holds `token`, presented to `audience`, now? A refusal is audited before it is returned.
pub async fn authenticate(
    resolver: &Resolver,
    token: &str,
    audience: &str,
) -> Result<Authentication> {
    let ask = Ask {
        token,
        audience,
        about: None,
    };
    let [row] = resolved::<1>(resolve(resolver, &[ask]).await?);
    authenticated(row)
}

/// May the holder of `q.token` do `q.action` on `q.object` for `q.audience` and `q.purpose`,
/// now? Every decision, allow or deny, is queued on the decision `log` before it is returned.
pub async fn authorize(
    resolver: &Resolver,
    log: &DecisionLog,
    q: &Question<'_>,
) -> Result<DecisionRecord> {
    let [row] = resolved::<1>(resolve(resolver, &[ask(q)]).await?);
    decided(log, q, row)
}

/// The answer to a question another principal (the asker) put to Ward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked<T> {
    /// The asker may not ask: its own decision (audited), and nothing about the question.
    Refused(DecisionRecord),
    /// The answer, and the asker's principal (which its handler holds against what the
    /// request's connection says of the caller: its TLS client certificate).
    Answered(T, PrincipalRecord),
}

/// [`authorize`] on behalf of an asker whose own question (`asker`, e.g. `ward:decide`) must
/// be allowed first. Both are resolved in ONE statement (one snapshot, one round trip); the
/// records go to the decision `log` (queued before the answer is returned). The asker's
/// allowance is not recorded separately — the decision's record names it as the actor — but
/// its refusal is.
pub async fn authorize_asked(
    resolver: &Resolver,
    log: &DecisionLog,
    asker: &Question<'_>,
    q: &Question<'_>,
) -> Result<Asked<DecisionRecord>> {
    let [asker_row, row] = resolve_asked(resolver, asker, ask(q)).await?;
    match allowed_asker(log, asker, asker_row)? {
        Err(refused) => Ok(Asked::Refused(refused)),
        Ok(asker) => {
            let q = Question {
                asked_by: Some(asker.id),
                ..*q
            };
            Ok(Asked::Answered(decided(log, &q, row)?, asker))
        }
    }
}

/// [`authorize_asked`] of many questions by one asker: the asker's question and every one of
/// `qs` resolved in ONE statement; each decision recorded as [`authorize_asked`] records it.
pub async fn authorize_batch(
    resolver: &Resolver,
    log: &DecisionLog,
    asker: &Question<'_>,
    qs: &[Question<'_>],
) -> Result<Asked<Vec<DecisionRecord>>> {
    let asks: Vec<Ask<'_>> = std::iter::once(ask(asker))
        .chain(qs.iter().map(ask))
        .collect();
    let mut rows = resolve(resolver, &asks).await?.into_iter();
    let asker_row = rows.next().flatten();
    match allowed_asker(log, asker, asker_row)? {
        Err(refused) => Ok(Asked::Refused(refused)),
        Ok(by) => {
            let decided = qs.iter().zip(rows).map(|(q, row)| {
                let q = Question {
                    asked_by: Some(by.id),
                    ..*q
                };
                decided(log, &q, row)
            });
            Ok(Asked::Answered(decided.collect::<Result<_>>()?, by))
        }
    }
}

/// [`authenticate`] on behalf of an asker, as [`authorize_asked`].
pub async fn authenticate_asked(
    resolver: &Resolver,
    log: &DecisionLog,
    asker: &Question<'_>,
    token: &str,
    audience: &str,
) -> Result<Asked<Authentication>> {
    let asked = Ask {
        token,
        audience,
        about: None,
    };
    let [asker_row, row] = resolve_asked(resolver, asker, asked).await?;
    match allowed_asker(log, asker, asker_row)? {
        Err(refused) => Ok(Asked::Refused(refused)),
        Ok(asker) => Ok(Asked::Answered(authenticated(row)?, asker)),
    }
}

fn ask<'a>(q: &'a Question<'a>) -> Ask<'a> {
    Ask {
        token: q.token,
        audience: q.audience,
        about: Some(q),
    }
}

/// The asker's own question and the one it asks, resolved in one statement.
async fn resolve_asked(
    resolver: &Resolver,
    asker: &Question<'_>,
    asked: Ask<'_>,
) -> Result<[Option<Row>; 2]> {
    Ok(resolved::<2>(
        resolve(resolver, &[ask(asker), asked]).await?,
    ))
}

fn resolved<const N: usize>(rows: Vec<Option<Row>>) -> [Option<Row>; N] {
    rows.try_into()
        .unwrap_or_else(|_| unreachable!("invariant: resolve answers every ask"))
}

/// The asker's principal id when its question is allowed; its audited refusal otherwise.
fn allowed_asker(
    log: &DecisionLog,
    asker: &Question<'_>,
    row: Option<Row>,
) -> Result<std::result::Result<PrincipalRecord, DecisionRecord>> {
    match row {
        Some(r) if decision_of(asker, Some(&r))?.allowed() => Ok(Ok(r.principal()?)),
        row => Ok(Err(decided(log, asker, row)?)),
    }
}

/// The authentication answer for `row` (a refusal is counted by the caller).
fn authenticated(row: Option<Row>) -> Result<Authentication> {
    let reason = decision::authenticate(row.as_ref().map(Row::facts).as_ref());
    match row {
        Some(row) if reason.allowed() => Ok(Authentication::Authenticated(Resolved {
            principal: row.principal()?,
            session_id: row.session_id,
            session_expires_at: row.session_expires_at,
        })),
        // Counted by the caller, not audited (see the module).
        _ => Ok(Authentication::Refused(reason)),
    }
}

/// The decision of `q` from its facts.
fn decision_of(q: &Question<'_>, row: Option<&Row>) -> Result<DecisionRecord> {
    let reason = decision::authorize(
        row.map(Row::facts).as_ref(),
        row.is_some_and(|r| r.assigned),
        q.expected_policy_generation,
    );
    let (principal, policy_generation, revocation_generation) = match row {
        Some(row) if !reason.is_authentication_failure() => (
            Some(row.principal()?),
            row.policy_generation,
            row.revocation_generation,
        ),
        _ => (None, 0, 0),
    };
    Ok(DecisionRecord {
        reason,
        principal,
        policy_generation,
        revocation_generation,
    })
}

/// The decision of `q`, audited before it is returned — unless the token authenticates nobody
/// (counted by the caller, see the module).
fn decided(log: &DecisionLog, q: &Question<'_>, row: Option<Row>) -> Result<DecisionRecord> {
    let d = decision_of(q, row.as_ref())?;
    if d.reason.is_authentication_failure() {
        return Ok(d);
    }
    log.record(Entry {
        event: if d.allowed() {
            "authorize.allow"
        } else {
            "authorize.deny"
        },
        actor_id: q.asked_by,
        subject_id: row.as_ref().map(|r| r.principal_id),
        detail: json!({
            "reason": d.reason.as_str(),
            "action": q.action,
            "object": q.object,
            "audience": q.audience,
            "purpose": q.purpose,
            "session_id": row.as_ref().map(|r| r.session_id),
            "expected_policy_generation": q.expected_policy_generation,
            "policy_generation": row.as_ref().map(|r| r.policy_generation),
            "revocation_generation": row.as_ref().map(|r| r.revocation_generation),
        }),
    })?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::distinct;

    #[test]
    fn equal_asks_are_bound_once_and_each_gets_its_answer() {
        let (firsts, of) = distinct(&["a", "b", "a", "c", "b", "a"]);
        assert_eq!(firsts, vec![0, 1, 3]);
        assert_eq!(of, vec![0, 1, 0, 2, 1, 0]);
        let (firsts, of) = distinct::<u8>(&[]);
        assert!(firsts.is_empty() && of.is_empty());
        let (firsts, of) = distinct(&[7, 8, 9]);
        assert_eq!((firsts, of), (vec![0, 1, 2], vec![0, 1, 2]));
    }
}
