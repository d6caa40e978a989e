//! Decoding requests into validated domain values (every bad field reported with a stable
//! reason; `decode`) and encoding answers (`encode`). No business rule lives here. The enum
//! mappings and field checks both halves share are here.

mod decode;
mod encode;

pub use decode::*;
pub use encode::*;

use std::collections::BTreeSet;

use lychd_proto::dispatcher::v1 as pb;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::demand::Demand;
use crate::domain::key::{Family, check_label, check_slug, parse_v1};
use crate::domain::lease::{LeaseState, TtlPolicy, check_priority};
use crate::domain::observation::{Observed, Phase};
use crate::domain::registry::{Animator, Capability, Dialect, Modality, Registry, SourceKind};
use lychd_runtime::paging;
use lychd_runtime::refusal::{Reason, Violations};

use crate::error::DispatcherError;
use crate::error::reasons::*;
use crate::service::LeaseCommand;
use crate::service::{AdmissionRow, Cached, Cursor, EventRow, LeaseRow, Lookup};

type Decoded<T> = Result<T, DispatcherError>;

/// Most animators one request may name (`ObserveAnimators`, `CloseAdmission`, `AwaitDrain`,
/// the `ListLeases` filter): a longer list is refused whole before any name is looked at, so
/// neither the answer nor the work (Ward is asked per distinct name at worst) grows with it.
pub const ANIMATORS_MAX: usize = 256;

fn finish<T>(v: Violations, value: impl FnOnce() -> T) -> Decoded<T> {
    Ok(v.finish(value)?)
}

pub fn ts(t: OffsetDateTime) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: i32::try_from(t.nanosecond()).unwrap_or(0),
    }
}

fn family_from_pb(v: i32) -> Result<Option<Family>, ()> {
    Ok(Some(match pb::Family::try_from(v).map_err(|_| ())? {
        pb::Family::Unspecified => return Ok(None),
        pb::Family::Chat => Family::Chat,
        pb::Family::Vision => Family::Vision,
        pb::Family::Embedding => Family::Embedding,
        pb::Family::Stt => Family::Stt,
        pb::Family::Tts => Family::Tts,
        pb::Family::ToolExecution => Family::ToolExecution,
        pb::Family::Rerank => Family::Rerank,
    }))
}

pub fn family_to_pb(f: Family) -> pb::Family {
    match f {
        Family::Chat => pb::Family::Chat,
        Family::Vision => pb::Family::Vision,
        Family::Embedding => pb::Family::Embedding,
        Family::Stt => pb::Family::Stt,
        Family::Tts => pb::Family::Tts,
        Family::ToolExecution => pb::Family::ToolExecution,
        Family::Rerank => pb::Family::Rerank,
    }
}

fn modality_from_pb(v: i32) -> Option<Modality> {
    match pb::InputModality::try_from(v).ok()? {
        pb::InputModality::Unspecified => None,
        pb::InputModality::Text => Some(Modality::Text),
        pb::InputModality::Image => Some(Modality::Image),
        pb::InputModality::Audio => Some(Modality::Audio),
        pb::InputModality::Video => Some(Modality::Video),
    }
}

fn modality_to_pb(m: Modality) -> pb::InputModality {
    match m {
        Modality::Text => pb::InputModality::Text,
        Modality::Image => pb::InputModality::Image,
        Modality::Audio => pb::InputModality::Audio,
        Modality::Video => pb::InputModality::Video,
    }
}

pub fn phase_to_pb(p: Phase) -> pb::Phase {
    match p {
        Phase::Cold => pb::Phase::Cold,
        Phase::Activatable => pb::Phase::Activatable,
        Phase::Warming => pb::Phase::Warming,
        Phase::Warm => pb::Phase::Warm,
        Phase::Error => pb::Phase::Error,
        Phase::Unknown => pb::Phase::Unknown,
    }
}

fn dialect_to_pb(d: Dialect) -> pb::Dialect {
    match d {
        Dialect::LlamaCpp => pb::Dialect::LlamaCpp,
        Dialect::OpenaiModelsV1 => pb::Dialect::OpenaiModelsV1,
    }
}

fn label(v: &mut Violations, field: &str, reason: Reason, s: &str, max: usize, optional: bool) {
    if let Err(e) = check_label(s, max, optional) {
        v.push(field, reason, e);
    }
}

/// Model ids or aliases in a demand: printable ASCII without whitespace, at most 256.
fn check_model(s: &str) -> Result<(), &'static str> {
    check_label(s, 256, false)?;
    if s.chars().all(|c| c.is_ascii_graphic()) {
        Ok(())
    } else {
        Err("must be printable ASCII without whitespace")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: TtlPolicy = TtlPolicy {
        default: 300,
        min: 1,
        max: 3600,
    };

    fn good() -> pb::LeaseRequest {
        pb::LeaseRequest {
            demand: Some(pb::Demand {
                family: pb::Family::Chat as i32,
                ..Default::default()
            }),
            holder: "worker-1".into(),
            priority: 50,
            ..Default::default()
        }
    }

    /// The (field, reason) of each violation of a decode that must have been refused.
    fn violations<T: std::fmt::Debug>(decoded: Decoded<T>) -> Vec<(String, &'static str)> {
        match decoded {
            Err(DispatcherError::InvalidArgument(v)) => {
                v.iter().map(|v| (v.field.clone(), v.reason.name)).collect()
            }
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    fn reasons(r: pb::LeaseRequest) -> Vec<(String, &'static str)> {
        violations(lease_request(r, &TTL))
    }

    #[test]
    fn a_good_request_decodes() {
        let c = lease_request(good(), &TTL).expect("valid");
        assert_eq!(c.demand.family, Some(Family::Chat));
        assert_eq!(c.ttl_seconds, 300);
    }

    #[test]
    fn every_bad_field_is_reported_with_its_reason() {
        let mut r = good();
        r.demand = Some(pb::Demand {
            family: 99,
            capability_key: "a:chat:b/c".into(),
            model_id: "has space".into(),
            input_modalities: vec![0, 42],
            tools_required: false,
        });
        r.holder = String::new();
        r.run_id = "x\n".into();
        r.priority = 101;
        r.ttl_seconds = 4000;
        let got = reasons(r);
        assert_eq!(
            got,
            vec![
                ("demand.family".into(), "FAMILY_UNKNOWN"),
                ("demand.capability_key".into(), "CAPABILITY_KEY_MALFORMED"),
                ("demand.model_id".into(), "MODEL_ID_INVALID"),
                ("demand.input_modalities[0]".into(), "MODALITY_UNKNOWN"),
                ("demand.input_modalities[1]".into(), "MODALITY_UNKNOWN"),
                ("holder".into(), "HOLDER_INVALID"),
                ("run_id".into(), "RUN_ID_INVALID"),
                ("priority".into(), "PRIORITY_OUT_OF_RANGE"),
                ("ttl_seconds".into(), "TTL_OUT_OF_BOUNDS"),
            ]
        );
        let mut r = good();
        r.demand = None;
        assert_eq!(reasons(r), vec![("demand".into(), "DEMAND_MISSING")]);
        let mut r = good();
        r.demand = Some(pb::Demand::default());
        assert_eq!(
            reasons(r),
            vec![("demand.family".into(), "DEMAND_UNDERSPECIFIED")]
        );
    }

    #[test]
    fn animator_lists_are_bounded_before_any_name_is_looked_at() {
        let reg = Registry::default();
        let names: Vec<String> = (0..10_000).map(|i| format!("Bad Name {i}")).collect();
        assert_eq!(
            violations(animators(&reg, &names, true)),
            [("animators".to_owned(), "ANIMATORS_TOO_MANY")]
        );
        let filter = pb::ListLeasesRequest {
            animators: names,
            ..Default::default()
        };
        match list_request(&filter) {
            Err(DispatcherError::InvalidArgument(v)) => assert_eq!(v.len(), 1),
            other => panic!("expected invalid, got {other:?}"),
        }
        // At the bound, each name is looked at: a bad one is named with its index.
        let mut names: Vec<String> = (0..ANIMATORS_MAX).map(|i| format!("a{i}")).collect();
        names[7] = "Bad Name".into();
        let filter = pb::ListLeasesRequest {
            animators: names,
            ..Default::default()
        };
        assert_eq!(
            violations(list_request(&filter)),
            [("animators[7]".to_owned(), "ANIMATOR_INVALID")]
        );
    }

    #[test]
    fn page_tokens_round_trip_and_refuse_garbage() {
        let l = LeaseRow {
            id: Uuid::new_v4(),
            capability_key: "a:chat:m".into(),
            animator: "a".into(),
            holder: "h".into(),
            principal_id: "p".into(),
            run_id: String::new(),
            attempt_id: String::new(),
            priority: 1,
            issued_at: OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_456_000)
                .expect("time"),
            expires_at: OffsetDateTime::UNIX_EPOCH,
            released_at: None,
            state: LeaseState::Active,
            request_id: None,
        };
        let t = next_page_token(&l);
        assert_eq!(
            page_token(&t).expect("ok"),
            Some(Cursor {
                issued_at: l.issued_at,
                id: l.id
            })
        );
        assert_eq!(page_token("").expect("ok"), None);
        for bad in [
            "x",
            "1.",
            "1.not-a-uuid",
            "abc.00000000-0000-0000-0000-000000000000",
        ] {
            assert!(page_token(bad).is_err(), "{bad}");
        }
    }
}
