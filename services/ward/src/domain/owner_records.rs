//! Owner authority for every owner-issued HelmLoop record type (issue 22 point 8): exact owner
//! records proposed whole, checked here, issued as they are on the accountable owner's approval
//! through the same consent, outbox and delivery as a promotion. Pure; digests and schemas come
//! from the HelmLoop core crate (HelmLoop Protocol v0.1 §4, §8; HelmLoop resolutions §B, §C,
//! §E: "owner records are checked by issuer = accountable owner").

use std::collections::BTreeSet;

use lychd_helmloop::schema::{self, RecordType, Shape};
use lychd_helmloop::{Map, ParseOptions, Value, record_digest};

use super::promotion::Issued;

/// Most records one proposal carries.
pub const RECORDS_MAX: usize = 64;
/// Longest record, in bytes (the HelmLoop office's default per-record cap).
pub const RECORD_BYTES_MAX: usize = 1 << 20;
/// The tool name of every owner-records consent.
pub const TOOL: &str = "helmloop.issue";

/// The member of the terms that marks an issuance of proposed owner records (a promotion's
/// terms have none).
const KIND: &str = "kind";
const KIND_RECORDS: &str = "ownerRecords";

/// Proposed owner records, checked whole: one subject, one accountable owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drafts {
    /// `subject.ownerId`: the accountable owner, who alone may approve.
    pub owner: String,
    /// The records, in issue order, with their canonical bodies.
    pub records: Vec<Issued>,
}

/// The record type name of an owner record, or `None` when `v` is not one: the types an
/// observation adapter may never create (spec §8), the accepting learning signal included.
fn owner_type(v: &Value) -> Option<&'static str> {
    let t = RecordType::from_name(v.get("recordType")?.as_str()?)?;
    t.is_owner_issued(v.get("disposition").and_then(Value::as_str))
        .then_some(t.as_str())
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_str()
}

/// The member naming who issued an owner record of `record_type`, which must be the owner.
fn issuer_member(record_type: &str) -> Option<&'static str> {
    match record_type {
        "OutcomeContractV1" => Some("accountableOwnerId"),
        "AuthorityGrantV1" => Some("issuerId"),
        "PromotionDecisionV1" => Some("ownerId"),
        "LearningSignalV1" => Some("approverId"),
        // An assurance decision names its reviewer; the owner admits it by approving.
        _ => None,
    }
}

/// Check proposed owner records: each a strict-parsed, schema-valid, digest-valid owner record;
/// distinct identities; one subject; its `ownerId` issuing every record that names an issuer.
/// `Err` carries one `(field, description)` per bad record (`records[i]`) or for the set
/// (`records`); no value is echoed.
pub fn check(bodies: &[Vec<u8>]) -> Result<Drafts, Vec<(String, &'static str)>> {
    let mut bad = Vec::new();
    if bodies.is_empty() || bodies.len() > RECORDS_MAX {
        bad.push(("records".to_owned(), "must hold 1..64 records"));
        return Err(bad);
    }
    let mut records = Vec::with_capacity(bodies.len());
    let mut subject: Option<Value> = None;
    let mut identities = BTreeSet::new();
    for (i, body) in bodies.iter().enumerate() {
        let field = format!("records[{i}]");
        let parsed = lychd_helmloop::parse_with(
            body,
            ParseOptions {
                max_bytes: RECORD_BYTES_MAX,
            },
        );
        let Ok(value) = parsed else {
            bad.push((field, "must be HL-C14N-1 JSON of at most 1 MiB"));
            continue;
        };
        let Some(record_type) = owner_type(&value) else {
            bad.push((field, "must be an owner record (contract, grant, assurance decision, promotion decision, accepted learning signal)"));
            continue;
        };
        let shape = RecordType::from_name(record_type).map(Shape::Record);
        if text(&value, &["schemaVersion"]) != Some(lychd_helmloop::PROTOCOL_VERSION)
            || !shape.is_some_and(|s| schema::is_valid_value(s, &value))
        {
            bad.push((field, "must be a v0.1 record valid under its entry schema"));
            continue;
        }
        let declared = text(&value, &["digest"]).unwrap_or_default().to_owned();
        match record_digest(&value) {
            Ok(d) if d.to_string() == declared => {}
            _ => {
                bad.push((field, "digest must be the record's record digest"));
                continue;
            }
        }
        let owner = text(&value, &["subject", "ownerId"]).unwrap_or_default();
        if let Some(member) = issuer_member(record_type)
            && text(&value, &[member]) != Some(owner)
        {
            bad.push((field, "must be issued by its subject's owner"));
            continue;
        }
        let this_subject = value.get("subject").cloned();
        match &subject {
            None => subject = this_subject,
            Some(s) if Some(s) != this_subject.as_ref() => {
                bad.push((field, "must name the same subject as every other record"));
                continue;
            }
            Some(_) => {}
        }
        let id = text(&value, &["id"]).unwrap_or_default().to_owned();
        if !identities.insert((record_type, id.clone())) {
            bad.push((field, "must not repeat another record's type and id"));
            continue;
        }
        let Ok(body) = lychd_helmloop::to_canonical_string(&value) else {
            bad.push((field, "must be HL-C14N-1 JSON of at most 1 MiB"));
            continue;
        };
        records.push(Issued {
            record_type,
            id,
            digest: declared,
            body,
        });
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    let owner = subject
        .as_ref()
        .and_then(|s| s.get("ownerId"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(Drafts { owner, records })
}

impl Drafts {
    /// The terms of the consent: the records (parsed bodies, in order) and the owner.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert(KIND, Value::from(KIND_RECORDS));
        m.insert("owner", Value::from(self.owner.as_str()));
        m.insert(
            "records",
            Value::Array(
                self.records
                    .iter()
                    .filter_map(|r| lychd_helmloop::parse(r.body.as_bytes()).ok())
                    .collect(),
            ),
        );
        Value::Object(m)
    }

    /// The drafts back from [`Drafts::to_value`]'s object; `None` for a promotion's terms.
    pub fn from_value(v: &Value) -> Option<Drafts> {
        if v.get(KIND).and_then(Value::as_str) != Some(KIND_RECORDS) {
            return None;
        }
        let bodies: Vec<Vec<u8>> = v
            .get("records")?
            .as_array()?
            .iter()
            .map(|r| lychd_helmloop::to_canonical_vec(r).ok())
            .collect::<Option<_>>()?;
        let drafts = check(&bodies).ok()?;
        (v.get("owner").and_then(Value::as_str) == Some(drafts.owner.as_str())).then_some(drafts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/helmloop/records")
                .join(name),
        )
        .expect("record fixture")
    }

    #[test]
    fn owner_records_are_checked_whole_and_read_back_from_their_terms() {
        let contract = fixture("outcome-contract-v1.json");
        let grant = fixture("authority-grant-v1.json");
        let drafts = check(&[contract.clone(), grant]).expect("owner records");
        assert_eq!(drafts.records.len(), 2);
        assert_eq!(drafts.records[0].record_type, "OutcomeContractV1");
        assert_eq!(Drafts::from_value(&drafts.to_value()), Some(drafts.clone()));
        // Bodies are kept canonical and exact: the digest is the proposer's, verified.
        let v = lychd_helmloop::parse(&contract).expect("json");
        assert_eq!(
            record_digest(&v).expect("digest").to_string(),
            drafts.records[0].digest
        );
    }

    #[test]
    fn observations_tampered_records_other_issuers_and_repeats_are_refused() {
        let evidence = fixture("evidence-record-v1.json");
        let contract = fixture("outcome-contract-v1.json");
        let fields = |r: Result<Drafts, Vec<(String, &'static str)>>| {
            r.expect_err("refused")
                .into_iter()
                .map(|(f, _)| f)
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(check(&[evidence])), ["records[0]"]);
        let text = String::from_utf8(contract.clone()).expect("utf-8");
        let tampered = text.replacen("\"desiredOutcome\": \"", "\"desiredOutcome\": \"x", 1);
        assert_ne!(tampered, text);
        assert_eq!(fields(check(&[tampered.into_bytes()])), ["records[0]"]);
        assert_eq!(
            fields(check(&[contract.clone(), contract.clone()])),
            ["records[1]"]
        );
        let mut v = lychd_helmloop::parse(&contract).expect("json");
        if let Value::Object(m) = &mut v {
            m.insert("accountableOwnerId", Value::from("mallory"));
            let d = record_digest(&Value::Object(m.clone())).expect("digest");
            m.insert("digest", Value::from(d.to_string()));
        }
        let other = lychd_helmloop::to_canonical_vec(&v).expect("canonical");
        assert_eq!(fields(check(&[other])), ["records[0]"]);
        assert_eq!(fields(check(&[])), ["records"]);
    }
}
