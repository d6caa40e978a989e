//! Decoding requests into typed commands (every bad field collected as a violation before
//! anything acts) and encoding answers.

use lychd_proto::archive::v1 as pb;
use lychd_runtime::paging::{PageSize, Tokens};
use lychd_runtime::refusal::Violations;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::config::Settings;
use crate::domain::lifecycle::{Change, State};
use crate::domain::names;
use crate::error::reasons::*;
use crate::error::{ArchiveError, Result};
use crate::service::{IntakeCommand, LifecycleCommand, RecallCommand, Recalled};
use crate::service::{NoteRow, ReceiptRow};

/// Page sizes of `ListNotes`: at most 500, a larger size refused.
pub const PAGES: PageSize = PageSize::refused(500);

fn namespace(v: &mut Violations, s: &str) -> Option<String> {
    v.check("namespace", NAMESPACE_INVALID, names::slug(s))
        .map(str::to_owned)
}

fn request_id(v: &mut Violations, s: &str) -> Option<String> {
    v.check("request_id", REQUEST_ID_INVALID, names::request_id(s))
        .map(str::to_owned)
}

fn revision_id(v: &mut Violations, s: &str) -> Option<Uuid> {
    v.check(
        "revision_id",
        REVISION_ID_MALFORMED,
        Uuid::parse_str(s).map_err(|_| "must be a UUID"),
    )
}

pub fn intake(r: pb::IntakeRequest, s: &Settings) -> Result<IntakeCommand> {
    let mut v = Violations::new();
    let namespace = namespace(&mut v, &r.namespace);
    let request_id = request_id(&mut v, &r.request_id);
    let source_key = v
        .check(
            "source_key",
            SOURCE_KEY_INVALID,
            names::label(&r.source_key, names::MAX_SOURCE_KEY),
        )
        .is_some();
    let source_revision = v
        .check(
            "source_revision",
            SOURCE_REVISION_INVALID,
            names::label(&r.source_revision, names::MAX_SOURCE_REVISION),
        )
        .is_some();
    let chars = v
        .check("text", TEXT_INVALID, names::text(&r.text, s.max_note_chars))
        .map(|(_, n)| n);
    let producer = v
        .check(
            "producer",
            PRODUCER_INVALID,
            names::label(&r.producer, names::MAX_PRODUCER),
        )
        .is_some();
    let classification = v
        .check(
            "classification",
            CLASSIFICATION_INVALID,
            names::slug(&r.classification),
        )
        .is_some();
    let observed_at = v.check(
        "observed_at",
        OBSERVED_AT_INVALID,
        r.observed_at
            .as_ref()
            .ok_or("is required")
            .and_then(|t| time_of(t).ok_or("is not a time")),
    );
    let ok = source_key && source_revision && producer && classification;
    v.finish(|| ()).map_err(ArchiveError::from)?;
    match (namespace, request_id, chars, observed_at, ok) {
        (Some(namespace), Some(request_id), Some(chars), Some(observed_at), true) => {
            Ok(IntakeCommand {
                namespace,
                request_id,
                source_key: r.source_key,
                source_revision: r.source_revision,
                text: r.text,
                chars,
                producer: r.producer,
                classification: r.classification,
                observed_at,
            })
        }
        _ => unreachable!("invariant: every field decoded when no violation was recorded"),
    }
}

pub fn lifecycle(r: &pb::LifecycleRequest, change: Change) -> Result<LifecycleCommand> {
    let mut v = Violations::new();
    let namespace = namespace(&mut v, &r.namespace);
    let revision = revision_id(&mut v, &r.revision_id);
    let expected = v.check(
        "expected_version",
        EXPECTED_VERSION_INVALID,
        i64::try_from(r.expected_version)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or("must be at least 1"),
    );
    let (namespace, revision, expected_version) = v
        .finish(|| (namespace, revision, expected))
        .map_err(ArchiveError::from)?;
    Ok(LifecycleCommand {
        namespace: namespace.expect("invariant: decoded"),
        revision: revision.expect("invariant: decoded"),
        expected_version: expected_version.expect("invariant: decoded"),
        change,
    })
}

pub fn recall(r: pb::RecallRequest, s: &Settings) -> Result<RecallCommand> {
    let mut v = Violations::new();
    let namespace = namespace(&mut v, &r.namespace);
    let request_id = request_id(&mut v, &r.request_id);
    let query = v
        .check(
            "query",
            QUERY_INVALID,
            names::query(&r.query, s.max_query_chars),
        )
        .is_some();
    let purpose = v
        .check("purpose", PURPOSE_INVALID, names::slug(&r.purpose))
        .is_some();
    let max_results = v.check(
        "max_results",
        MAX_RESULTS_OUT_OF_RANGE,
        names::bounded(r.max_results, s.max_results),
    );
    let max_chars = v.check(
        "max_chars",
        MAX_CHARS_OUT_OF_RANGE,
        names::bounded(r.max_chars, s.max_chars),
    );
    v.finish(|| ()).map_err(ArchiveError::from)?;
    match (
        namespace,
        request_id,
        max_results,
        max_chars,
        query && purpose,
    ) {
        (Some(namespace), Some(request_id), Some(max_results), Some(max_chars), true) => {
            Ok(RecallCommand {
                namespace,
                request_id,
                query: r.query,
                purpose: r.purpose,
                max_results,
                max_chars,
            })
        }
        _ => unreachable!("invariant: every field decoded when no violation was recorded"),
    }
}

/// (namespace, request id) of `ResolveReceipt` and `InspectReceipt`.
pub fn receipt_ref(ns: &str, id: &str) -> Result<(String, String)> {
    let mut v = Violations::new();
    let namespace = namespace(&mut v, ns);
    let request_id = request_id(&mut v, id);
    let (n, r) = v
        .finish(|| (namespace, request_id))
        .map_err(ArchiveError::from)?;
    Ok((n.expect("invariant"), r.expect("invariant")))
}

pub fn get_note(r: &pb::GetNoteRequest) -> Result<(String, Uuid)> {
    let mut v = Violations::new();
    let namespace = namespace(&mut v, &r.namespace);
    let revision = revision_id(&mut v, &r.revision_id);
    let (n, id) = v
        .finish(|| (namespace, revision))
        .map_err(ArchiveError::from)?;
    Ok((n.expect("invariant"), id.expect("invariant")))
}

/// A decoded `ListNotes`.
pub struct ListCommand {
    pub namespace: String,
    pub state: Option<State>,
    pub after: Option<Uuid>,
    pub size: u32,
}

pub fn list(r: &pb::ListNotesRequest) -> Result<ListCommand> {
    let mut v = Violations::new();
    let namespace = namespace(&mut v, &r.namespace);
    let state = match pb::LifecycleState::try_from(r.state) {
        Ok(pb::LifecycleState::Unspecified) => Some(None),
        Ok(s) => Some(Some(state_of(s))),
        Err(_) => {
            v.push("state", STATE_UNKNOWN, "is not a lifecycle state");
            None
        }
    };
    let page = r.page.clone().unwrap_or_default();
    let size = v.check(
        "page.page_size",
        PAGE_SIZE_OUT_OF_RANGE,
        PAGES.of(page.page_size),
    );
    let after = v.check(
        "page.page_token",
        PAGE_TOKEN_INVALID,
        Tokens::Plain.after::<Uuid>(&page.page_token),
    );
    let (namespace, state, after, size) = v
        .finish(|| (namespace, state, after, size))
        .map_err(ArchiveError::from)?;
    Ok(ListCommand {
        namespace: namespace.expect("invariant"),
        state: state.expect("invariant"),
        after: after.expect("invariant"),
        size: size.expect("invariant"),
    })
}

fn state_of(s: pb::LifecycleState) -> State {
    match s {
        pb::LifecycleState::Candidate | pb::LifecycleState::Unspecified => State::Candidate,
        pb::LifecycleState::Promoted => State::Promoted,
        pb::LifecycleState::Archived => State::Archived,
        pb::LifecycleState::Revoked => State::Revoked,
    }
}

fn state_to_pb(s: &str) -> i32 {
    (match State::parse(s) {
        Some(State::Candidate) => pb::LifecycleState::Candidate,
        Some(State::Promoted) => pb::LifecycleState::Promoted,
        Some(State::Archived) => pb::LifecycleState::Archived,
        Some(State::Revoked) => pb::LifecycleState::Revoked,
        None => pb::LifecycleState::Unspecified,
    }) as i32
}

fn time_of(t: &prost_types::Timestamp) -> Option<OffsetDateTime> {
    if !(0..1_000_000_000).contains(&t.nanos) {
        return None;
    }
    let ns = i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos);
    let at = OffsetDateTime::from_unix_timestamp_nanos(ns).ok()?;
    // PostgreSQL keeps microseconds and years 4713 BC..294276 AD: bound it to what it keeps
    // exactly, so a replay compares equal to what was stored.
    (at.year() >= 1 && at.year() <= 9999 && t.nanos % 1_000 == 0).then_some(at)
}

pub fn ts(t: OffsetDateTime) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.unix_timestamp(),
        nanos: i32::try_from(t.nanosecond()).unwrap_or(0),
    }
}

pub fn note(n: &NoteRow) -> pb::NoteInfo {
    pb::NoteInfo {
        revision_id: n.id.to_string(),
        namespace: n.namespace.clone(),
        source_key: n.source_key.clone(),
        source_revision: n.source_revision.clone(),
        content_digest: hex::encode(&n.content_digest),
        chars: if n.text_held {
            u32::try_from(n.chars).unwrap_or(0)
        } else {
            0
        },
        producer: n.producer.clone(),
        classification: n.classification.clone(),
        observed_at: Some(ts(n.observed_at)),
        created_at: Some(ts(n.created_at)),
        state: state_to_pb(&n.state),
        version: u64::try_from(n.version).unwrap_or(0),
        changed_at: Some(ts(n.changed_at)),
        superseded_by: n.superseded_by.map(|u| u.to_string()).unwrap_or_default(),
        text_held: n.text_held,
    }
}

pub fn receipt(r: &ReceiptRow) -> pb::ReceiptInfo {
    pb::ReceiptInfo {
        receipt_id: r.id.to_string(),
        namespace: r.namespace.clone(),
        request_id: r.request_id.clone(),
        subject: r.subject.clone(),
        purpose: r.purpose.clone(),
        policy_revision: u64::try_from(r.policy_revision).unwrap_or(0),
        query_digest: hex::encode(&r.query_digest),
        max_results: u32::try_from(r.max_results).unwrap_or(0),
        max_chars: u32::try_from(r.max_chars).unwrap_or(0),
        selected: r
            .selected_ids
            .iter()
            .enumerate()
            .map(|(i, id)| pb::ReceiptSelection {
                revision_id: id.to_string(),
                lifecycle_version: r
                    .selected_versions
                    .get(i)
                    .and_then(|v| u64::try_from(*v).ok())
                    .unwrap_or(0),
                projection_digest: r
                    .projection_digests
                    .get(i)
                    .map(hex::encode)
                    .unwrap_or_default(),
                score: r.scores.get(i).copied().unwrap_or_default(),
            })
            .collect(),
        omitted_revision_ids: r.omitted_ids.iter().map(Uuid::to_string).collect(),
        created_at: Some(ts(r.created_at)),
    }
}

pub fn recalled(n: &Recalled) -> pb::RecalledNote {
    pb::RecalledNote {
        note: Some(note(&n.note)),
        text: n.text.clone(),
        score: n.score,
        projection_digest: hex::encode(n.projection),
    }
}
