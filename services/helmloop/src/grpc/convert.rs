//! Decoding requests into typed commands (every bad field collected as a violation before
//! anything is built) and encoding answers.

use lychd_helmloop::Domain;
use lychd_helmloop::schema::RecordType;
use lychd_proto::helmloop::v1 as pb;
use lychd_runtime::paging::{PageSize, Seq, Tokens};
use lychd_runtime::refusal::Violations;

use crate::config::Settings;
use crate::domain::record::is_identifier;
use crate::domain::summary::Summary;
use crate::error::{HelmLoopError, Result, reasons};
use crate::service::Reduced;
use crate::service::{Appended, Row, timestamp_ms, timestamp_us};

/// Page sizes of `ListRecords`: at most 1000, a larger size lowered to it.
pub const PAGES: PageSize = PageSize::lowered(1000);

/// `AppendRecords`: the bounds of the request (count, each body, the sum), before any parse.
pub fn append_request(r: pb::AppendRecordsRequest, s: &Settings) -> Result<Vec<Vec<u8>>> {
    let mut v = Violations::new();
    if r.records.is_empty() {
        v.push(
            "records",
            reasons::RECORDS_EMPTY,
            "name at least one record",
        );
    }
    if r.records.len() > s.max_records_per_append {
        v.push(
            "records",
            reasons::RECORDS_TOO_MANY,
            format!("at most {} records per request", s.max_records_per_append),
        );
    }
    let total: usize = r.records.iter().map(Vec::len).sum();
    if total > s.max_append_bytes {
        v.push(
            "records",
            reasons::RECORDS_TOO_LARGE,
            format!(
                "at most {} bytes of records per request",
                s.max_append_bytes
            ),
        );
    }
    for (i, body) in r.records.iter().enumerate() {
        if body.len() > s.max_record_bytes {
            v.push(
                format!("records[{i}]"),
                reasons::C14N_TOO_LARGE,
                format!("a record is at most {} bytes", s.max_record_bytes),
            );
        }
    }
    v.finish(|| r.records)
        .map_err(HelmLoopError::InvalidArgument)
}

/// An evaluation input or document: at most `max` bytes (the parser's own cap, checked before
/// the work is queued).
pub fn document(field: &str, bytes: &[u8], max: usize) -> Result<()> {
    if bytes.len() > max {
        return Err(HelmLoopError::invalid(
            field,
            reasons::C14N_TOO_LARGE,
            format!("at most {max} bytes"),
        ));
    }
    Ok(())
}

fn record_type(v: &mut Violations, field: &str, s: &str, required: bool) -> Option<String> {
    if s.is_empty() && !required {
        return Some(String::new());
    }
    match RecordType::from_name(s) {
        Some(t) => Some(t.as_str().to_owned()),
        None => {
            v.push(
                field,
                reasons::RECORD_TYPE_UNKNOWN,
                "is not one of the eight record types",
            );
            None
        }
    }
}

fn identifier(v: &mut Violations, field: &str, s: &str, required: bool) -> Option<String> {
    if (s.is_empty() && !required) || is_identifier(s) {
        return Some(s.to_owned());
    }
    v.push(
        field,
        reasons::IDENTIFIER_INVALID,
        "is not a HelmLoop identifier",
    );
    None
}

/// `GetRecord`: `(record type, id)`.
pub fn get_record(r: &pb::GetRecordRequest) -> Result<(String, String)> {
    let mut v = Violations::new();
    let t = record_type(&mut v, "record_type", &r.record_type, true);
    let id = identifier(&mut v, "id", &r.id, true);
    v.finish(|| (t.unwrap_or_default(), id.unwrap_or_default()))
        .map_err(HelmLoopError::InvalidArgument)
}

/// A decoded `ListRecords`.
pub struct List {
    pub filter: crate::service::Filter,
    pub after: i64,
    pub size: u32,
}

/// `ListRecords`: filters, page size and token (the last `seq` seen, in decimal, exactly as
/// issued).
pub fn list_records(r: &pb::ListRecordsRequest) -> Result<List> {
    let mut v = Violations::new();
    let subject_id = identifier(&mut v, "subject_id", &r.subject_id, false);
    let revision_id = identifier(&mut v, "revision_id", &r.revision_id, false);
    let rt = record_type(&mut v, "record_type", &r.record_type, false);
    let page = r.page.clone().unwrap_or_default();
    let after = v.check(
        "page.page_token",
        reasons::PAGE_TOKEN_INVALID,
        Tokens::Plain.after::<Seq>(&page.page_token),
    );
    let size = PAGES.of(page.page_size).unwrap_or(PAGES.max);
    v.finish(|| List {
        filter: crate::service::Filter {
            subject_id: subject_id.unwrap_or_default(),
            revision_id: revision_id.unwrap_or_default(),
            record_type: rt.unwrap_or_default(),
        },
        after: after.flatten().map_or(0, |Seq(n)| n),
        size,
    })
    .map_err(HelmLoopError::InvalidArgument)
}

/// `GetEvaluation`: a well-formed digest.
pub fn input_digest(s: &str) -> Result<String> {
    match lychd_helmloop::Digest::parse(s) {
        Some(d) if d.render() == s => Ok(s.to_owned()),
        _ => Err(HelmLoopError::invalid(
            "input_digest",
            reasons::DIGEST_MALFORMED,
            "is not sha256:<64 lowercase hex>",
        )),
    }
}

/// `Digest`'s domain (unspecified: record).
pub fn domain(d: i32) -> Result<Domain> {
    match pb::DigestDomain::try_from(d) {
        Ok(pb::DigestDomain::Unspecified | pb::DigestDomain::Record) => Ok(Domain::Record),
        Ok(pb::DigestDomain::Binding) => Ok(Domain::Binding),
        Err(_) => Err(HelmLoopError::invalid(
            "domain",
            lychd_runtime::refusal::common::INVALID_ARGUMENT,
            "is not a digest domain",
        )),
    }
}

/// `RunConformance`: the suite (`core` is `None`; `standalone` and `better-workflows` name
/// their adapter).
pub fn adapter(s: &str) -> Result<Option<lychd_helmloop::adapter::Adapter>> {
    match s {
        "core" => Ok(None),
        _ => lychd_helmloop::adapter::Adapter::from_name(s)
            .map(Some)
            .ok_or_else(|| {
                HelmLoopError::invalid(
                    "adapter",
                    reasons::ADAPTER_UNKNOWN,
                    "is not core, standalone or better-workflows",
                )
            }),
    }
}

pub fn summary(s: &Summary) -> pb::ReductionSummary {
    let disposition = match s.disposition.as_str() {
        "PASS" => pb::Disposition::Pass,
        "HOLD" => pb::Disposition::Hold,
        "REJECT" => pb::Disposition::Reject,
        _ => pb::Disposition::Unspecified,
    };
    let [
        execution,
        evidence,
        authority,
        promotion,
        reconciliation,
        observed_outcome,
    ] = s.axes.clone();
    pb::ReductionSummary {
        disposition: disposition as i32,
        axes: Some(pb::Axes {
            execution,
            evidence,
            authority,
            promotion,
            reconciliation,
            observed_outcome,
        }),
        reject_codes: s.reject.clone(),
        hold_codes: s.hold.clone(),
        input_digest: s.input_digest.clone(),
        target_transition: s.target_transition.clone(),
    }
}

pub fn reduced(r: Reduced, stored: bool) -> pb::ReduceResponse {
    pb::ReduceResponse {
        summary: Some(summary(&r.summary)),
        result: r.result,
        stored,
        input: r.input.unwrap_or_default(),
        records: u32::try_from(r.records).unwrap_or(u32::MAX),
    }
}

pub fn appended(a: Appended) -> pb::AppendOutcome {
    match a {
        Appended::Stored => pb::AppendOutcome::Stored,
        Appended::Replayed => pb::AppendOutcome::Replayed,
        Appended::Equivocation => pb::AppendOutcome::Equivocation,
    }
}

pub fn stored_record(r: Row) -> pb::StoredRecord {
    pb::StoredRecord {
        record_type: r.record_type,
        id: r.record_id,
        digest: r.digest,
        body_digest: r.body_digest,
        body: r.body,
        subject_id: r.subject_id,
        revision_id: r.revision_id,
        issued_at: Some(timestamp_ms(r.issued_at_ms)),
        submitted_by: r.submitted_by,
        stored_at: Some(timestamp_us(r.stored_at_us)),
        equivocation: r.equivocation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_are_positive_decimals() {
        let req = |t: &str| pb::ListRecordsRequest {
            page: Some(lychd_proto::common::v1::PageRequest {
                page_size: 0,
                page_token: t.into(),
            }),
            ..Default::default()
        };
        assert_eq!(list_records(&req("")).ok().map(|l| l.after), Some(0));
        assert_eq!(list_records(&req("42")).ok().map(|l| l.after), Some(42));
        for bad in ["0", "-1", "+1", "x", "1 "] {
            assert!(list_records(&req(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn digests_must_be_rendered_exactly() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(input_digest(&d).ok(), Some(d.clone()));
        assert!(input_digest(&d.to_uppercase()).is_err());
        assert!(input_digest("sha256:12").is_err());
    }
}
