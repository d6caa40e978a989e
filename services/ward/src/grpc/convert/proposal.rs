//! Decoding proposal-history requests (every bad field named, no value echoed — explanation
//! text least of all) and encoding proposals and their records.

use lychd_proto::ward::v1 as pb;
use lychd_runtime::refusal::Violations;
use uuid::Uuid;

use super::consent::state;
use super::{Decoded, Field};
use crate::domain::consent;
use crate::domain::paging::{self, List};
use crate::domain::proposal::{NewRecord, RecordKind, Source, TEXT_MAX, record_shape};
use crate::service::proposals::{HistoryRecord, NewProposal, ProposalRecord};

const IDENT: &str = "must be 1..128 characters of [A-Za-z0-9._:-]";

fn ident(v: &mut Violations, field: &str, s: &str) -> Option<String> {
    v.field(
        field,
        if consent::is_ident(s) {
            Ok(s.to_owned())
        } else {
            Err(IDENT)
        },
    )
}

/// An optional UUID field (empty: none).
fn optional_uuid(v: &mut Violations, field: &str, s: &str) -> Option<Option<Uuid>> {
    if s.is_empty() {
        Some(None)
    } else {
        super::uuid(v, field, s).map(Some)
    }
}

/// A proposal to record (the consent's id, group, revised proposal and occurrence).
pub struct Create {
    pub consent_id: Uuid,
    pub group_id: Option<Uuid>,
    pub revises: Option<Uuid>,
    pub occurrence: String,
}

impl Create {
    pub fn as_new(&self) -> NewProposal<'_> {
        NewProposal {
            consent_id: self.consent_id,
            group_id: self.group_id,
            revises: self.revises,
            occurrence: &self.occurrence,
        }
    }
}

pub fn create(r: &pb::CreateProposalRequest) -> Decoded<Create> {
    let mut v = Violations::new();
    let consent_id = super::uuid(&mut v, "consent_id", &r.consent_id);
    let group_id = optional_uuid(&mut v, "group_id", &r.group_id);
    let revises = optional_uuid(&mut v, "revises", &r.revises);
    let occurrence = ident(&mut v, "occurrence", &r.occurrence);
    match (consent_id, group_id, revises, occurrence) {
        (Some(consent_id), Some(group_id), Some(revises), Some(occurrence)) if v.is_empty() => {
            Ok(Create {
                consent_id,
                group_id,
                revises,
                occurrence,
            })
        }
        _ => Err(v.into()),
    }
}

fn kind(raw: i32) -> Result<RecordKind, &'static str> {
    use pb::ProposalRecordKind as K;
    match K::try_from(raw) {
        Ok(K::Preparation) => Ok(RecordKind::Preparation),
        Ok(K::Correction) => Ok(RecordKind::Correction),
        Ok(K::Explanation) => Ok(RecordKind::Explanation),
        Ok(K::AttemptReference) => Ok(RecordKind::AttemptReference),
        Ok(K::ReceiptReference) => Ok(RecordKind::ReceiptReference),
        Ok(K::Judgment | K::Withdrawal | K::Supersession) => {
            Err("is appended by Ward (judgment) or by Withdraw/Supersede, not directly")
        }
        Ok(K::Unspecified) | Err(_) => Err("must be one of the PROPOSAL_RECORD_KIND_ values"),
    }
}

fn kind_pb(k: RecordKind) -> pb::ProposalRecordKind {
    use pb::ProposalRecordKind as K;
    match k {
        RecordKind::Preparation => K::Preparation,
        RecordKind::Judgment => K::Judgment,
        RecordKind::Withdrawal => K::Withdrawal,
        RecordKind::Supersession => K::Supersession,
        RecordKind::AttemptReference => K::AttemptReference,
        RecordKind::ReceiptReference => K::ReceiptReference,
        RecordKind::Correction => K::Correction,
        RecordKind::Explanation => K::Explanation,
    }
}

fn source_pb(s: Source) -> pb::RecordSource {
    match s {
        Source::Human => pb::RecordSource::Human,
        Source::StandingPolicy => pb::RecordSource::StandingPolicy,
        Source::Service => pb::RecordSource::Service,
    }
}

/// Untrusted text: at most [`TEXT_MAX`] bytes, no control characters other than newline and
/// tab (checked without echoing it).
fn text(v: &mut Violations, s: &str) -> Option<Option<String>> {
    if s.is_empty() {
        return Some(None);
    }
    let ok = if s.len() > TEXT_MAX {
        Err("is longer than 2048 bytes")
    } else if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        Err("must not hold control characters other than newline and tab")
    } else {
        Ok(Some(s.to_owned()))
    };
    v.field("text", ok)
}

fn optional_ident(v: &mut Violations, field: &str, s: &str) -> Option<Option<String>> {
    if s.is_empty() {
        Some(None)
    } else {
        ident(v, field, s).map(Some)
    }
}

/// A record to append, checked whole.
pub fn append(r: &pb::AppendProposalRecordRequest) -> Decoded<(Uuid, NewRecord)> {
    let mut v = Violations::new();
    let id = super::uuid(&mut v, "proposal_id", &r.proposal_id);
    let kind = v.field("kind", kind(r.kind));
    let text = text(&mut v, &r.text);
    let attempt_id = optional_ident(&mut v, "attempt_id", &r.attempt_id);
    let receipt_id = optional_ident(&mut v, "receipt_id", &r.receipt_id);
    if let (Some(kind), Some(text), Some(attempt_id), Some(receipt_id)) =
        (kind, text, attempt_id, receipt_id)
    {
        let record = NewRecord {
            kind,
            text,
            attempt_id,
            receipt_id,
        };
        if let Err((field, why)) = record_shape(&record) {
            v.field::<(), _>(field, Err(why));
        }
        if let Some(id) = id
            && v.is_empty()
        {
            return Ok((id, record));
        }
    }
    Err(v.into())
}

/// A supersession: predecessor and successor, distinct.
pub fn supersede(r: &pb::SupersedeRequest) -> Decoded<(Uuid, Uuid)> {
    let mut v = Violations::new();
    let predecessor = super::uuid(&mut v, "predecessor_id", &r.predecessor_id);
    let successor = super::uuid(&mut v, "successor_id", &r.successor_id);
    if predecessor.is_some() && predecessor == successor {
        v.field::<(), _>("successor_id", Err("must not be the predecessor"));
    }
    match (predecessor, successor) {
        (Some(p), Some(s)) if v.is_empty() => Ok((p, s)),
        _ => Err(v.into()),
    }
}

/// A proposal and the page of its records.
pub fn get(r: &pb::GetProposalRequest) -> Decoded<(Uuid, u32, Option<i64>)> {
    let mut v = Violations::new();
    let id = super::uuid(&mut v, "proposal_id", &r.proposal_id);
    let (size, token) = super::page(r.page.as_ref());
    let after = v.field(
        "page.page_token",
        paging::seq_before(List::ProposalRecords, token),
    );
    match (id, after) {
        (Some(id), Some(after)) if v.is_empty() => Ok((id, size, after)),
        _ => Err(v.into()),
    }
}

/// A group and a page of its proposals.
pub fn list(r: &pb::ListProposalsRequest) -> Decoded<(Uuid, u32, Option<i64>)> {
    let mut v = Violations::new();
    let group = super::uuid(&mut v, "group_id", &r.group_id);
    let (size, token) = super::page(r.page.as_ref());
    let after = v.field(
        "page.page_token",
        paging::seq_before(List::Proposals, token),
    );
    match (group, after) {
        (Some(group), Some(after)) if v.is_empty() => Ok((group, size, after)),
        _ => Err(v.into()),
    }
}

fn id_text(id: Option<Uuid>) -> String {
    id.map(|i| i.to_string()).unwrap_or_default()
}

pub fn proposal(p: &ProposalRecord) -> pb::Proposal {
    pb::Proposal {
        proposal_id: p.id.to_string(),
        group_id: p.group_id.to_string(),
        consent_id: p.consent_id.to_string(),
        revises: id_text(p.revises),
        run_id: p.run_id.clone(),
        occurrence: p.occurrence.clone(),
        initiated_by: p.initiated_by.to_string(),
        created_at: Some(super::timestamp(p.created_at)),
        records: u64::try_from(p.records).unwrap_or(0),
        withdrawn: p.withdrawn,
        superseded_by: id_text(p.superseded_by),
    }
}

pub fn record(r: &HistoryRecord) -> pb::ProposalRecord {
    pb::ProposalRecord {
        record_id: r.id.to_string(),
        proposal_id: r.proposal_id.to_string(),
        seq: u64::try_from(r.seq).unwrap_or(0),
        kind: kind_pb(r.kind) as i32,
        actor: id_text(r.actor),
        source: source_pb(r.source) as i32,
        recorded_at: Some(super::timestamp(r.recorded_at)),
        text: r.text.clone().unwrap_or_default(),
        attempt_id: r.attempt_id.clone().unwrap_or_default(),
        receipt_id: r.receipt_id.clone().unwrap_or_default(),
        successor: id_text(r.successor),
        judged: r.judged.map(|s| state(s) as i32).unwrap_or(0),
        rule: r.rule.clone().unwrap_or_default(),
    }
}
