//! Decoding promotion requests (every bad field named, no value echoed) and encoding promotions.

use lychd_proto::ward::v1 as pb;
use lychd_runtime::refusal::Violations;

use super::{Decoded, Field};
use crate::domain::consent;
use crate::domain::owner_records::{self, Drafts};
use crate::domain::promotion::{
    self, EVIDENCE_MAX, Ref, Request, SCOPE_ELEMENT_MAX, SCOPE_MAX, is_digest, is_identifier,
};
use crate::service::promotion::{OutboxRecord, PromotionRecord};

const IDENTIFIER: &str = "must be a HelmLoop identifier: [A-Za-z0-9][A-Za-z0-9._:-]{0,127}";
const DIGEST: &str = "must be sha256: and 64 lowercase hex digits";

fn reference(v: &mut Violations, field: &str, r: Option<&pb::HelmLoopRef>) -> Option<Ref> {
    let Some(r) = r else {
        return v.field(field, Err("is required"));
    };
    let id = v.field(
        &format!("{field}.id"),
        if is_identifier(&r.id) {
            Ok(r.id.clone())
        } else {
            Err(IDENTIFIER)
        },
    );
    let digest = v.field(
        &format!("{field}.digest"),
        if is_digest(&r.digest) {
            Ok(r.digest.clone())
        } else {
            Err(DIGEST)
        },
    );
    Some(Ref {
        id: id?,
        digest: digest?,
    })
}

fn scope_element(s: &str) -> Result<String, &'static str> {
    if s.is_empty() || s.len() > SCOPE_ELEMENT_MAX {
        Err("must be 1..256 bytes")
    } else if s.contains('*') {
        Err("must not be a wildcard (`*`)")
    } else if s.chars().any(char::is_control) {
        Err("must not hold control characters")
    } else if !lychd_helmloop::is_nfc(s) {
        Err("must be in Unicode NFC")
    } else {
        Ok(s.to_owned())
    }
}

/// A proposal of a promotion, checked whole.
pub fn request(r: &pb::ProposePromotionRequest) -> Decoded<Request> {
    let mut v = Violations::new();
    let run_id = v.field(
        "run_id",
        if consent::is_ident(&r.run_id) {
            Ok(r.run_id.clone())
        } else {
            Err("must be 1..128 characters of [A-Za-z0-9._:-]")
        },
    );
    let contract = reference(&mut v, "contract", r.contract.as_ref());
    let target = reference(&mut v, "target_revision", r.target_revision.as_ref());
    let assurance = reference(&mut v, "assurance", r.assurance.as_ref());
    let evidence = if r.evidence.is_empty() || r.evidence.len() > EVIDENCE_MAX {
        v.field("evidence", Err("must hold 1..64 references"))
    } else {
        let refs: Vec<Option<Ref>> = r
            .evidence
            .iter()
            .enumerate()
            .map(|(i, e)| reference(&mut v, &format!("evidence[{i}]"), Some(e)))
            .collect();
        let refs: Option<Vec<Ref>> = refs.into_iter().collect();
        refs.and_then(|refs| {
            let mut ids: Vec<&str> = refs.iter().map(|e| e.id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            if ids.len() == refs.len() {
                Some(refs)
            } else {
                v.field("evidence", Err("must name distinct records"))
            }
        })
    };
    let grantee = v.field(
        "grantee_id",
        if is_identifier(&r.grantee_id) {
            Ok(r.grantee_id.clone())
        } else {
            Err(IDENTIFIER)
        },
    );
    let scope = if r.scope.is_empty() || r.scope.len() > SCOPE_MAX {
        v.field("scope", Err("must hold 1..32 elements"))
    } else {
        let elements: Vec<Option<String>> = r
            .scope
            .iter()
            .enumerate()
            .map(|(i, s)| v.field(&format!("scope[{i}]"), scope_element(s)))
            .collect();
        let elements: Option<Vec<String>> = elements.into_iter().collect();
        elements.and_then(|elements| {
            let n = elements.len();
            let set = promotion::scope_set(elements);
            if set.len() == n {
                Some(set)
            } else {
                v.field("scope", Err("must hold distinct elements"))
            }
        })
    };
    let not_after = match &r.not_after {
        None => v.field("not_after", Err("is required")),
        Some(t) => v.field(
            "not_after",
            if t.seconds > 0 && t.nanos % 1_000_000 == 0 && (0..1_000_000_000).contains(&t.nanos) {
                t.seconds
                    .checked_mul(1000)
                    .and_then(|ms| ms.checked_add(i64::from(t.nanos / 1_000_000)))
                    .filter(|ms| promotion::timestamp(*ms).is_some())
                    .ok_or("must be an instant of years 1970..9999")
            } else {
                Err("must be a positive instant in whole milliseconds")
            },
        ),
    };
    match (
        run_id, contract, target, assurance, evidence, grantee, scope, not_after,
    ) {
        (
            Some(run_id),
            Some(contract),
            Some(target),
            Some(assurance),
            Some(evidence),
            Some(grantee),
            Some(scope),
            Some(not_after_ms),
        ) if v.is_empty() => Ok(Request {
            run_id,
            contract,
            target,
            assurance,
            evidence,
            grantee,
            scope,
            not_after_ms,
        }),
        _ => Err(v.into()),
    }
}

/// A proposal of owner records, checked whole: `(run_id, drafts)`.
pub fn owner_records(r: &pb::ProposeOwnerRecordsRequest) -> Decoded<(String, Drafts)> {
    let mut v = Violations::new();
    let run_id = v.field(
        "run_id",
        if consent::is_ident(&r.run_id) {
            Ok(r.run_id.clone())
        } else {
            Err("must be 1..128 characters of [A-Za-z0-9._:-]")
        },
    );
    let drafts = match owner_records::check(&r.records) {
        Ok(d) => Some(d),
        Err(bad) => {
            for (field, why) in bad {
                let _: Option<()> = v.field(&field, Err(why));
            }
            None
        }
    };
    match (run_id, drafts) {
        (Some(run_id), Some(drafts)) if v.is_empty() => Ok((run_id, drafts)),
        _ => Err(v.into()),
    }
}

fn issued(r: &OutboxRecord) -> pb::IssuedRecord {
    pb::IssuedRecord {
        record_type: r.record_type.clone(),
        id: r.record_id.clone(),
        digest: r.digest.clone(),
        body: r.body.clone().into_bytes(),
        attempts: u32::try_from(r.attempts).unwrap_or(0),
        delivered_at: r.delivered_at.map(super::timestamp),
        delivery: r.delivery.clone().unwrap_or_default(),
    }
}

pub fn promotion(p: &PromotionRecord) -> pb::Promotion {
    pb::Promotion {
        consent_id: p.consent_id.to_string(),
        owner_id: p.owner_id.to_string(),
        owner_name: p.owner_name.clone(),
        terms_json: p.terms.clone().into_bytes(),
        records: p.records.iter().map(issued).collect(),
    }
}
