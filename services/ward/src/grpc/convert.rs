//! Decoding requests (every bad field named, nothing echoed) and encoding records.

use lychd_proto::common::v1::PageRequest;
use lychd_proto::ward::v1 as pb;
use prost_types::Timestamp;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::Violations;
use crate::domain::kinds::{CredentialKind, PrincipalKind};
use crate::domain::paging;
use crate::error::WardError;
use crate::store::PrincipalRecord;
use crate::store::assignments::AssignmentRecord;
use crate::store::audit::AuditRecord;

/// Finish decoding: all violations at once, or nothing.
pub fn finish(v: Violations) -> Result<(), WardError> {
    if v.is_empty() {
        Ok(())
    } else {
        Err(WardError::InvalidArgument(v.into_vec()))
    }
}

/// A field that decoded without a violation is present; this is only the type system's due.
pub fn missing() -> tonic::Status {
    tonic::Status::internal("invariant: decoded fields are present when no violation was recorded")
}

pub fn uuid(v: &mut Violations, field: &str, s: &str) -> Option<Uuid> {
    if s.is_empty() {
        v.push(field, "is required");
        return None;
    }
    v.check(field, Uuid::try_parse(s).map_err(|_| "must be a UUID"))
}

/// An optional UUID filter: empty means none.
pub fn optional_uuid(v: &mut Violations, field: &str, s: &str) -> Option<Option<Uuid>> {
    if s.is_empty() {
        Some(None)
    } else {
        uuid(v, field, s).map(Some)
    }
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
    v.check(field, kind)
}

pub fn credential_kind(v: &mut Violations, field: &str, raw: i32) -> Option<CredentialKind> {
    let kind = match pb::CredentialKind::try_from(raw) {
        Ok(pb::CredentialKind::Enrollment) => Ok(CredentialKind::Enrollment),
        Ok(pb::CredentialKind::Standing) => Ok(CredentialKind::Standing),
        Ok(pb::CredentialKind::Unspecified) | Err(_) => {
            Err("must be CREDENTIAL_KIND_ENROLLMENT or CREDENTIAL_KIND_STANDING")
        }
    };
    v.check(field, kind)
}

pub fn time(v: &mut Violations, field: &str, t: &Timestamp) -> Option<OffsetDateTime> {
    let valid = (0..1_000_000_000).contains(&t.nanos)
        && OffsetDateTime::from_unix_timestamp_nanos(
            i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos),
        )
        .is_ok();
    if !valid {
        v.push(field, "is not a valid timestamp");
        return None;
    }
    OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos),
    )
    .ok()
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
        assert_eq!(v.into_vec().len(), 4);
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
        assert_eq!(optional_uuid(&mut v, "id", ""), Some(None));
        assert!(v.is_empty());
        assert_eq!(uuid(&mut v, "id", ""), None);
        assert_eq!(uuid(&mut v, "id", "nope"), None);
        assert_eq!(optional_uuid(&mut v, "id", "nope"), None);
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
        assert_eq!(v.into_vec().len(), 5);
    }
}
