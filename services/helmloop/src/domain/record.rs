//! A submitted record, verified before anything is stored (HelmLoop Protocol v0.1 §6 steps
//! 1–2): strict HL-C14N-1 parse, version, entry schema, record digest; then its identity, its
//! canonical body and the Ward action that appending it needs.

use lychd_helmloop::reduce::time::parse_timestamp;
use lychd_helmloop::schema::{self, RecordType, Shape};
use lychd_helmloop::{
    C14nError, Digest, Domain, PROTOCOL_VERSION, ParseOptions, Value, digest_canonical, parse_with,
    record_digest, to_canonical_vec,
};

/// Who may submit a record: the store decides it by record type (and, for a learning signal,
/// by its disposition), because the reducer trusts owner records by `issuerId` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Authority {
    /// `ExecutionReceiptV1`, `EvidenceRecordV1`, `ReconciliationRecordV1`: what an observation
    /// adapter may emit (spec §8).
    Observation,
    /// A `LearningSignalV1` that is proposed or asks for writeback.
    LearningProposal,
    /// `OutcomeContractV1` (owner).
    Contract,
    /// `AuthorityGrantV1` (owner).
    Grant,
    /// `AssuranceDecisionV1` (owner-controlled; spec §8 forbids adapters to create it).
    Assurance,
    /// `PromotionDecisionV1` (owner).
    Promotion,
    /// A `LearningSignalV1` with disposition `accepted` (owner).
    LearningAcceptance,
}

impl Authority {
    /// Every authority, in order.
    pub const ALL: [Authority; 7] = [
        Authority::Observation,
        Authority::LearningProposal,
        Authority::Contract,
        Authority::Grant,
        Authority::Assurance,
        Authority::Promotion,
        Authority::LearningAcceptance,
    ];

    /// What appending a record of `record_type` (with learning `disposition`) needs.
    pub fn of(record_type: RecordType, disposition: Option<&str>) -> Authority {
        match record_type {
            RecordType::OutcomeContract => Authority::Contract,
            RecordType::AuthorityGrant => Authority::Grant,
            RecordType::AssuranceDecision => Authority::Assurance,
            RecordType::PromotionDecision => Authority::Promotion,
            RecordType::ExecutionReceipt
            | RecordType::EvidenceRecord
            | RecordType::ReconciliationRecord => Authority::Observation,
            RecordType::LearningSignal if disposition == Some("accepted") => {
                Authority::LearningAcceptance
            }
            RecordType::LearningSignal => Authority::LearningProposal,
        }
    }

    /// Whether it is an owner record: appended only by the holder of its action on every
    /// subject (the issuer: Ward's service principal), never on one subject's authority.
    /// Equal to the core's `RecordType::is_owner_issued`, which Ward issues by (a test keeps
    /// the two equal).
    pub fn is_owner(self) -> bool {
        !matches!(self, Authority::Observation | Authority::LearningProposal)
    }
}

/// A record that passed every check, ready to be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub record_type: RecordType,
    pub id: String,
    /// The declared `digest`, equal to the recomputed record digest.
    pub digest: String,
    /// Binding digest of the complete canonical body.
    pub body_digest: String,
    /// HL-C14N-1 canonical bytes of the complete body.
    pub body: Vec<u8>,
    pub subject_id: String,
    pub revision_id: String,
    /// `issuedAt`, in milliseconds since the Unix epoch.
    pub issued_at_ms: i64,
    pub authority: Authority,
}

/// Why a record is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Defect {
    /// The strict parse failed (its `C14N_*` code).
    Parse(C14nError),
    /// `schemaVersion` is a string other than `0.1`.
    Version,
    /// Not a record of one of the eight types under its entry schema.
    Schema,
    /// `digest` differs from the recomputed record digest.
    Digest,
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_str()
}

/// Verify one submitted record (at most `max_bytes` long).
pub fn verify(bytes: &[u8], max_bytes: usize) -> Result<Verified, Defect> {
    let value = parse_with(bytes, ParseOptions { max_bytes }).map_err(Defect::Parse)?;
    if let Some(version) = value.get("schemaVersion").and_then(Value::as_str)
        && version != PROTOCOL_VERSION
    {
        return Err(Defect::Version);
    }
    let record_type = text(&value, &["recordType"])
        .and_then(RecordType::from_name)
        .ok_or(Defect::Schema)?;
    if !schema::is_valid_value(Shape::Record(record_type), &value) {
        return Err(Defect::Schema);
    }
    let field = |path: &[&str]| text(&value, path).map(str::to_owned).ok_or(Defect::Schema);
    let digest = field(&["digest"])?;
    let recomputed = record_digest(&value).map_err(|_| Defect::Schema)?;
    if Digest::parse(&digest) != Some(recomputed) {
        return Err(Defect::Digest);
    }
    let issued_at_ms = text(&value, &["issuedAt"])
        .and_then(parse_timestamp)
        .ok_or(Defect::Schema)?;
    let body = to_canonical_vec(&value).map_err(|_| Defect::Schema)?;
    let body_digest = digest_canonical(Domain::Binding, &body).render();
    Ok(Verified {
        record_type,
        id: field(&["id"])?,
        digest,
        body_digest,
        body,
        subject_id: field(&["subject", "id"])?,
        revision_id: field(&["revision", "id"])?,
        issued_at_ms,
        authority: Authority::of(record_type, text(&value, &["disposition"])),
    })
}

/// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$` (HelmLoop resolutions §B).
pub fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._:-".contains(c))
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
    fn a_fixture_record_verifies_with_its_identity_and_canonical_body() {
        let v = verify(&fixture("evidence-record-v1.json"), 1 << 20).expect("valid");
        assert_eq!(v.record_type, RecordType::EvidenceRecord);
        assert_eq!(v.authority, Authority::Observation);
        assert_eq!(lychd_helmloop::canonicalize(&v.body).expect("c14n"), v.body);
        assert!(v.issued_at_ms > 0);
    }

    #[test]
    fn owner_records_need_their_own_authority() {
        let contract = verify(&fixture("outcome-contract-v1.json"), 1 << 20).expect("valid");
        assert_eq!(contract.authority, Authority::Contract);
        let grant = verify(&fixture("authority-grant-v1.json"), 1 << 20).expect("valid");
        assert_eq!(grant.authority, Authority::Grant);
        assert!(Authority::Grant.is_owner() && !Authority::Observation.is_owner());
        assert_eq!(
            Authority::of(RecordType::LearningSignal, Some("accepted")),
            Authority::LearningAcceptance
        );
        assert_eq!(
            Authority::of(RecordType::LearningSignal, Some("proposed")),
            Authority::LearningProposal
        );
    }

    #[test]
    fn the_owner_authorities_are_the_cores_owner_issued_records() {
        for t in RecordType::ALL {
            for disposition in [None, Some("accepted"), Some("proposed"), Some("rejected")] {
                assert_eq!(
                    Authority::of(t, disposition).is_owner(),
                    t.is_owner_issued(disposition),
                    "{t:?} {disposition:?}"
                );
            }
        }
    }

    #[test]
    fn a_tampered_record_is_a_digest_defect_and_junk_a_parse_defect() {
        let text = String::from_utf8(fixture("evidence-record-v1.json")).expect("utf8");
        let tampered = text.replacen("\"claim\": \"", "\"claim\": \"x", 1);
        assert_ne!(tampered, text, "fixture has a claim");
        assert_eq!(verify(tampered.as_bytes(), 1 << 20), Err(Defect::Digest));
        match verify(b"{\"a\":1,\"a\":2}", 1 << 20) {
            Err(Defect::Parse(e)) => assert_eq!(e.code().as_str(), "C14N_DUPLICATE_KEY"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            verify(b"{\"schemaVersion\":\"0.2\"}", 1 << 20),
            Err(Defect::Version)
        );
        assert_eq!(verify(b"[]", 1 << 20), Err(Defect::Schema));
    }

    #[test]
    fn identifiers_follow_the_helmloop_grammar() {
        assert!(is_identifier("svc-payments"));
        assert!(is_identifier("a:b.c_d-1"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("-x"));
        assert!(!is_identifier("a b"));
        assert!(!is_identifier(&"a".repeat(129)));
    }
}
