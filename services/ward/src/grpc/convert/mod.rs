//! Proto <-> typed conversions: decoding requests into typed commands (every bad field named,
//! nothing echoed) and encoding records. Identity's and the shared helpers here; one module
//! per other capability.
//!
//! Invariant: no business rule and no store path: decoders check shape and grammar only.

pub mod consent;
mod field;
pub mod promotion;
pub mod proposal;

pub use field::{Field, invalid};

use lychd_proto::common::v1::{FieldViolation, PageRequest, Refusal};
use lychd_proto::ward::v1 as pb;
use prost_types::Timestamp;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use lychd_runtime::refusal::{Violations, bounds};

use crate::domain::kinds::{CredentialKind, PrincipalKind};
use crate::domain::lifetime;
use crate::domain::paging::{self, List};
use crate::error::WardError;
use crate::service::decisions::AuditRecord;
use crate::service::identity::{AssignmentRecord, Enrollment, PrincipalRecord, RevokeTarget};
use lychd_auth::grammar::{
    Action, Audience, Audiences, DisplayName, Object, PrincipalName, Purpose, Question,
};

pub fn uuid(v: &mut Violations, field: &str, s: &str) -> Option<Uuid> {
    if s.is_empty() {
        return v.field(field, Err("is required"));
    }
    v.field(field, Uuid::try_parse(s).map_err(|_| "must be a UUID"))
}

pub fn principal_kind(v: &mut Violations, field: &str, raw: i32) -> Option<PrincipalKind> {
    let kind = match pb::PrincipalKind::try_from(raw) {
        Ok(pb::PrincipalKind::Human) => Ok(PrincipalKind::Human),
        Ok(pb::PrincipalKind::Service) => Ok(PrincipalKind::Service),
        Ok(pb::PrincipalKind::Peer) => Ok(PrincipalKind::Peer),
        Ok(pb::PrincipalKind::Node) => Ok(PrincipalKind::Node),
        Ok(pb::PrincipalKind::Unspecified) | Err(_) => {
            Err("must be PRINCIPAL_KIND_HUMAN, _SERVICE, _PEER or _NODE")
        }
    };
    v.field(field, kind)
}

pub fn credential_kind(v: &mut Violations, field: &str, raw: i32) -> Option<CredentialKind> {
    let kind = match pb::CredentialKind::try_from(raw) {
        Ok(pb::CredentialKind::Enrollment) => Ok(CredentialKind::Enrollment),
        Ok(pb::CredentialKind::Standing) => Ok(CredentialKind::Standing),
        Ok(pb::CredentialKind::Unspecified) | Err(_) => {
            Err("must be CREDENTIAL_KIND_ENROLLMENT or CREDENTIAL_KIND_STANDING")
        }
    };
    v.field(field, kind)
}

pub fn time(v: &mut Violations, field: &str, t: &Timestamp) -> Option<OffsetDateTime> {
    v.field(field, bounds::instant(t.seconds, t.nanos))
}

pub type Decoded<T> = Result<T, WardError>;

/// The audiences a session is bound to at exchange.
pub fn audiences(names: &[String]) -> Decoded<Audiences> {
    Audiences::parse(names).map_err(|d| invalid("audiences", d))
}

/// `Authenticate` about someone else's token: the token and the audience it was presented to.
pub fn authenticate_request(r: &pb::AuthenticateRequest) -> Decoded<String> {
    let mut v = Violations::new();
    if r.token.is_empty() {
        v.field::<(), _>("token", Err("is required"));
    }
    let audience = v.field("audience", Audience::parse(&r.audience));
    match audience {
        Some(a) if v.is_empty() => Ok(a.as_str().to_owned()),
        _ => Err(v.into()),
    }
}

/// `Authorize`'s question, checked (the asker's own question is separate).
pub fn authorize_request(r: &pb::AuthorizeRequest) -> Decoded<()> {
    let mut v = Violations::new();
    question(
        &mut v,
        (&r.token, &r.action, &r.object),
        Some(&r.audience),
        (&r.purpose, r.expected_policy_generation),
    );
    Ok(v.finish(|| ())?)
}

/// Questions one `AuthorizeBatch` may hold (one resolving statement's worth): the bound the
/// offices' verifiers batch to, one constant, so no office ever sends a batch Ward refuses.
pub use lychd_auth::ward::MAX_BATCH;
// The refusal below names the bound in words.
const _: () = assert!(MAX_BATCH == 256);

/// `AuthorizeBatch`'s audience and question count (each question is checked on its own, by
/// [`authorize_question`]): the audience.
pub fn authorize_batch(r: &pb::AuthorizeBatchRequest) -> Decoded<String> {
    let mut v = Violations::new();
    let audience = v.field("audience", Audience::parse(&r.audience));
    if r.questions.is_empty() || r.questions.len() > MAX_BATCH {
        v.field::<(), _>("questions", Err("must hold 1 to 256 questions"));
    }
    match audience {
        Some(a) if v.is_empty() => Ok(a.as_str().to_owned()),
        _ => Err(v.into()),
    }
}

/// One question of an `AuthorizeBatch`, checked as `Authorize` checks its own.
pub fn authorize_question(q: &pb::AuthorizeQuestion) -> Decoded<()> {
    let mut v = Violations::new();
    question(
        &mut v,
        (&q.token, &q.action, &q.object),
        None,
        (&q.purpose, q.expected_policy_generation),
    );
    Ok(v.finish(|| ())?)
}

/// The refusal a malformed batch question is answered with: what `Authorize` refuses it with.
pub fn refusal(invalid: WardError) -> Refusal {
    use tonic_types::StatusExt;
    let status = tonic::Status::from(invalid);
    let details = status.get_error_details();
    Refusal {
        reason: details
            .error_info()
            .map(|i| i.reason.clone())
            .unwrap_or_default(),
        domain: crate::error::DOMAIN.to_owned(),
        message: status.message().to_owned(),
        field_violations: details
            .bad_request()
            .map(|b| {
                b.field_violations
                    .iter()
                    .map(|f| FieldViolation {
                        field: f.field.clone(),
                        description: f.description.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The fields of an authorization question, in the order their violations are listed.
fn question(
    v: &mut Violations,
    (token, action, object): (&str, &str, &str),
    audience: Option<&str>,
    (purpose, expected_policy_generation): (&str, Option<i64>),
) {
    if token.is_empty() {
        v.field::<(), _>("token", Err("is required"));
    }
    v.field("action", Action::parse(action));
    v.field("object", Object::parse(object));
    if let Some(audience) = audience {
        v.field("audience", Audience::parse(audience));
    }
    v.field("purpose", Purpose::parse(purpose));
    if expected_policy_generation.is_some_and(|g| g < 0) {
        v.field::<(), _>("expected_policy_generation", Err("must not be negative"));
    }
}

pub fn enrollment(r: &pb::EnrollPrincipalRequest) -> Decoded<Enrollment> {
    let mut v = Violations::new();
    let kind = principal_kind(&mut v, "kind", r.kind);
    let name = v.field("name", PrincipalName::parse(&r.name));
    // Empty: the principal's name. Non-human principals have no user account; a display name
    // given for one is checked, then not stored.
    let display_name = match r.display_name.as_str() {
        "" => Some(None),
        d => v.field("display_name", DisplayName::parse(d)).map(Some),
    };
    match (kind, name, display_name) {
        (Some(kind), Some(name), Some(display_name)) if v.is_empty() => Ok(Enrollment {
            kind,
            name,
            display_name,
        }),
        _ => Err(v.into()),
    }
}

pub struct Issue {
    pub principal_id: Uuid,
    pub kind: CredentialKind,
    /// Seconds.
    pub ttl: u32,
}

pub fn issue(r: &pb::IssueCredentialRequest) -> Decoded<Issue> {
    let mut v = Violations::new();
    let principal_id = uuid(&mut v, "principal_id", &r.principal_id);
    let kind = credential_kind(&mut v, "kind", r.kind);
    let ttl = kind.and_then(|k| v.field("ttl_seconds", lifetime::credential_ttl(k, r.ttl_seconds)));
    match (principal_id, kind, ttl) {
        (Some(principal_id), Some(kind), Some(ttl)) if v.is_empty() => Ok(Issue {
            principal_id,
            kind,
            ttl,
        }),
        _ => Err(v.into()),
    }
}

/// A required id.
pub fn id(field: &str, s: &str) -> Decoded<Uuid> {
    let mut v = Violations::new();
    uuid(&mut v, field, s).ok_or_else(|| v.into())
}

/// A rotation: the credential and its optional request id.
pub struct Rotate {
    pub credential_id: Uuid,
    pub request_id: Option<String>,
}

pub fn rotate(r: &pb::RotateCredentialRequest) -> Decoded<Rotate> {
    let mut v = Violations::new();
    let credential_id = uuid(&mut v, "credential_id", &r.credential_id);
    let request_id = if r.request_id.is_empty() {
        None
    } else if r.request_id.len() <= 128 && r.request_id.bytes().all(|b| b.is_ascii_graphic()) {
        Some(r.request_id.clone())
    } else {
        v.field::<(), _>(
            "request_id",
            Err("must be 1 to 128 printable ascii characters without spaces"),
        );
        None
    };
    match credential_id {
        Some(credential_id) if v.is_empty() => Ok(Rotate {
            credential_id,
            request_id,
        }),
        _ => Err(v.into()),
    }
}

pub fn revoke_target(r: &pb::RevokeRequest) -> Decoded<RevokeTarget> {
    use pb::revoke_request::Target;
    match &r.target {
        Some(Target::CredentialId(s)) => id("credential_id", s).map(RevokeTarget::Credential),
        Some(Target::SessionId(s)) => id("session_id", s).map(RevokeTarget::Session),
        Some(Target::PrincipalId(s)) => id("principal_id", s).map(RevokeTarget::Principal),
        None => {
            let mut v = Violations::new();
            v.field::<(), _>(
                "target",
                Err("one of credential_id, session_id or principal_id is required"),
            );
            Err(v.into())
        }
    }
}

pub struct Assign {
    pub principal_id: Uuid,
    pub grant: Question,
    pub expires_at: Option<OffsetDateTime>,
}

pub fn assign(r: &pb::AssignRequest) -> Decoded<Assign> {
    let mut v = Violations::new();
    let principal_id = uuid(&mut v, "principal_id", &r.principal_id);
    let action = v.field("action", Action::parse(&r.action));
    let object = v.field("object", Object::parse(&r.object));
    let audience = v.field("audience", Audience::parse(&r.audience));
    let purpose = v.field("purpose", Purpose::parse(&r.purpose));
    let expires_at = match &r.expires_at {
        None => Some(None),
        Some(t) => time(&mut v, "expires_at", t).map(Some),
    };
    match (principal_id, action, object, audience, purpose, expires_at) {
        (
            Some(principal_id),
            Some(action),
            Some(object),
            Some(audience),
            Some(purpose),
            Some(expires_at),
        ) if v.is_empty() => Ok(Assign {
            principal_id,
            grant: Question {
                action,
                object,
                audience,
                purpose,
            },
            expires_at,
        }),
        _ => Err(v.into()),
    }
}

/// A page of a list keyed by UUID: size and the id to continue after.
pub struct UuidPage {
    pub size: u32,
    pub after: Option<Uuid>,
}

fn uuid_page(v: &mut Violations, list: List, p: Option<&PageRequest>) -> Option<UuidPage> {
    let (size, token) = page(p);
    let after = v.field("page.page_token", paging::uuid_after(list, token))?;
    Some(UuidPage { size, after })
}

pub fn principals_page(r: &pb::ListPrincipalsRequest) -> Decoded<UuidPage> {
    let mut v = Violations::new();
    uuid_page(&mut v, List::Principals, r.page.as_ref()).ok_or_else(|| v.into())
}

/// `ListAssignments`: the optional principal filter and the page.
pub fn assignments_page(r: &pb::ListAssignmentsRequest) -> Decoded<(Option<Uuid>, UuidPage)> {
    let mut v = Violations::new();
    let principal_id = match r.principal_id.as_str() {
        "" => Some(None),
        id => uuid(&mut v, "principal_id", id).map(Some),
    };
    let page = uuid_page(&mut v, List::Assignments, r.page.as_ref());
    match (principal_id, page) {
        (Some(principal_id), Some(page)) if v.is_empty() => Ok((principal_id, page)),
        _ => Err(v.into()),
    }
}

/// Page size and the raw token of an optional page request.
pub fn page(p: Option<&PageRequest>) -> (u32, &str) {
    match p {
        Some(p) => (paging::page_size(p.page_size), p.page_token.as_str()),
        None => (paging::page_size(0), ""),
    }
}

pub fn timestamp(t: OffsetDateTime) -> Timestamp {
    Timestamp {
        seconds: t.unix_timestamp(),
        // Always in 0..1e9.
        nanos: t.nanosecond() as i32,
    }
}

pub fn principal_kind_pb(k: PrincipalKind) -> pb::PrincipalKind {
    match k {
        PrincipalKind::Human => pb::PrincipalKind::Human,
        PrincipalKind::Service => pb::PrincipalKind::Service,
        PrincipalKind::Peer => pb::PrincipalKind::Peer,
        PrincipalKind::Node => pb::PrincipalKind::Node,
    }
}

pub fn principal(p: &PrincipalRecord) -> pb::Principal {
    pb::Principal {
        id: p.id.to_string(),
        kind: principal_kind_pb(p.kind) as i32,
        name: p.name.clone(),
        policy_generation: p.policy_generation,
        revocation_generation: p.revocation_generation,
        revoked_at: p.revoked_at.map(timestamp),
        created_at: Some(timestamp(p.created_at)),
    }
}

pub fn assignment(a: &AssignmentRecord) -> pb::Assignment {
    pb::Assignment {
        id: a.id.to_string(),
        principal_id: a.principal_id.to_string(),
        action: a.action.clone(),
        object: a.object.clone(),
        audience: a.audience.clone(),
        purpose: a.purpose.clone(),
        expires_at: a.expires_at.map(timestamp),
        created_at: Some(timestamp(a.created_at)),
    }
}

pub fn audit_event(r: &AuditRecord) -> pb::AuditEvent {
    let detail = r
        .detail
        .iter()
        .filter_map(|(k, v)| {
            let v = match v {
                Value::Null => return None,
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Some((k.clone(), v))
        })
        .collect();
    pb::AuditEvent {
        seq: r.seq,
        at: Some(timestamp(r.at)),
        event: r.event.clone(),
        actor_id: r.actor_id.map(|id| id.to_string()).unwrap_or_default(),
        subject_id: r.subject_id.map(|id| id.to_string()).unwrap_or_default(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_refuse_unknown_and_unspecified_values() {
        let mut v = Violations::new();
        assert_eq!(
            principal_kind(&mut v, "kind", 1),
            Some(PrincipalKind::Human)
        );
        assert_eq!(principal_kind(&mut v, "kind", 4), Some(PrincipalKind::Node));
        assert_eq!(
            credential_kind(&mut v, "kind", 2),
            Some(CredentialKind::Standing)
        );
        assert!(v.is_empty());
        assert_eq!(principal_kind(&mut v, "kind", 0), None);
        assert_eq!(principal_kind(&mut v, "kind", 7), None);
        assert_eq!(credential_kind(&mut v, "kind", -1), None);
        assert_eq!(credential_kind(&mut v, "kind", 0), None);
        assert_eq!(v.len(), 4);
        for k in PrincipalKind::ALL {
            let mut v = Violations::new();
            assert_eq!(
                principal_kind(&mut v, "k", principal_kind_pb(k) as i32),
                Some(k)
            );
        }
    }

    #[test]
    fn uuids_and_times() {
        let mut v = Violations::new();
        let id = Uuid::new_v4();
        assert_eq!(uuid(&mut v, "id", &id.to_string()), Some(id));
        assert!(v.is_empty());
        assert_eq!(uuid(&mut v, "id", ""), None);
        assert_eq!(uuid(&mut v, "id", "nope"), None);
        let t = time(
            &mut v,
            "t",
            &Timestamp {
                seconds: 1_700_000_000,
                nanos: 5,
            },
        )
        .unwrap();
        assert_eq!(
            timestamp(t),
            Timestamp {
                seconds: 1_700_000_000,
                nanos: 5
            }
        );
        assert_eq!(
            time(
                &mut v,
                "t",
                &Timestamp {
                    seconds: 0,
                    nanos: -1
                }
            ),
            None
        );
        assert_eq!(
            time(
                &mut v,
                "t",
                &Timestamp {
                    seconds: i64::MAX,
                    nanos: 0
                }
            ),
            None
        );
        assert_eq!(v.len(), 4);
    }
}
