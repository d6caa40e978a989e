//! Owner authority for HelmLoop (issue 13, part 4): the terms of a promotion and the HelmLoop
//! records Ward issues under the contract's accountable owner when that owner approves. Pure:
//! the instant of the approval is given, never read; digests come from the HelmLoop core crate
//! (HelmLoop Protocol v0.1 §2, §4.2, §4.6; HelmLoop resolutions §B, §C).

use lychd_helmloop::{C14nError, Map, Value, binding_digest, cmp_utf16, record_digest};
use time::OffsetDateTime;
use time::macros::format_description;

/// The effect owner of every promotion consent (`ward:propose`/`ward:approve` on
/// `effect:helmloop`).
pub const EFFECT_OWNER: &str = "helmloop";
/// The tool name of every promotion consent.
pub const TOOL: &str = "helmloop.promote";
/// Most evidence references one promotion cites.
pub const EVIDENCE_MAX: usize = 64;
/// Most scope elements of the `promote` grant.
pub const SCOPE_MAX: usize = 32;
/// Longest scope element, in bytes.
pub const SCOPE_ELEMENT_MAX: usize = 256;
/// `source.system` of every record Ward issues.
pub const SOURCE_SYSTEM: &str = "lychd-ward";
/// HelmLoop's protocol version.
const VERSION: &str = "0.1";

/// Why a promotion cannot be proposed or approved as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromotionRefusal {
    /// No HelmLoop office is configured, or Ward has no session of its own to present to it.
    NotConfigured,
    /// The HelmLoop office did not answer.
    Unavailable,
    /// No contract with this id and digest is stored at the HelmLoop office.
    ContractNotFound,
    /// The contract is not active, equivocates, or is malformed for a promotion.
    ContractUnusable,
    /// No live human principal carries the accountable owner's name.
    OwnerNotEnrolled,
    /// The grant's validity ended before the approval.
    ValidityEnded,
    /// A record under a proposed identity is stored at the HelmLoop office or issued by Ward.
    IdentityTaken,
}

impl PromotionRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            PromotionRefusal::NotConfigured => "helmloop not configured",
            PromotionRefusal::Unavailable => "helmloop unavailable",
            PromotionRefusal::ContractNotFound => "contract not found",
            PromotionRefusal::ContractUnusable => "contract unusable",
            PromotionRefusal::OwnerNotEnrolled => "owner not enrolled",
            PromotionRefusal::ValidityEnded => "validity ended",
            PromotionRefusal::IdentityTaken => "record identity taken",
        }
    }
}

/// Whether `s` is a HelmLoop identifier: `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
pub fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-'))
}

/// Whether `s` is `sha256:` and 64 lowercase hex digits.
pub fn is_digest(s: &str) -> bool {
    s.len() == 71
        && s.starts_with("sha256:")
        && s[7..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A HelmLoop id and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub id: String,
    pub digest: String,
}

impl Ref {
    fn exact(&self, record_type: &str) -> Value {
        let mut m = Map::new();
        m.insert("recordType", Value::from(record_type));
        m.insert("id", Value::from(self.id.as_str()));
        m.insert("digest", Value::from(self.digest.as_str()));
        Value::Object(m)
    }

    fn revision(&self) -> Value {
        let mut m = Map::new();
        m.insert("id", Value::from(self.id.as_str()));
        m.insert("digest", Value::from(self.digest.as_str()));
        Value::Object(m)
    }

    fn from_value(v: &Value) -> Option<Ref> {
        Some(Ref {
            id: v.get("id")?.as_str()?.to_owned(),
            digest: v.get("digest")?.as_str()?.to_owned(),
        })
    }
}

/// A proposal of a promotion, decoded and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub run_id: String,
    pub contract: Ref,
    pub target: Ref,
    pub assurance: Ref,
    pub evidence: Vec<Ref>,
    pub grantee: String,
    /// Distinct, sorted by UTF-16 code units (a semantic set, spec §6).
    pub scope: Vec<String>,
    /// Unix milliseconds.
    pub not_after_ms: i64,
}

/// What a promotion copies from its `OutcomeContractV1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contract {
    /// `subject` (`{id, kind, ownerId}`).
    pub subject: Value,
    /// `policy` (`{id, revision, digest}`).
    pub policy: Value,
    /// `accountableOwnerId` (= `subject.ownerId`, spec §4.1).
    pub owner: String,
    /// `status` is `active`.
    pub active: bool,
}

/// Why a stored contract body cannot carry a promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContractDefect {
    /// Not an `OutcomeContractV1` with subject, policy and an owner equal to `subject.ownerId`.
    Malformed,
    /// Its `status` is not `active`.
    NotActive,
}

/// Read the fields a promotion needs from a contract body (as the HelmLoop office stored it).
pub fn read_contract(body: &Value) -> Result<Contract, ContractDefect> {
    let malformed = ContractDefect::Malformed;
    if body.get("recordType").and_then(Value::as_str) != Some("OutcomeContractV1") {
        return Err(malformed);
    }
    let subject = body.get("subject").cloned().ok_or(malformed)?;
    let policy = body.get("policy").cloned().ok_or(malformed)?;
    let owner = body
        .get("accountableOwnerId")
        .and_then(Value::as_str)
        .ok_or(malformed)?;
    if subject.get("ownerId").and_then(Value::as_str) != Some(owner) {
        return Err(malformed);
    }
    let contract = Contract {
        subject,
        policy,
        owner: owner.to_owned(),
        active: body.get("status").and_then(Value::as_str) == Some("active"),
    };
    if !contract.active {
        return Err(ContractDefect::NotActive);
    }
    Ok(contract)
}

/// Everything a promotion binds: the request and what it copies from the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    pub contract: Ref,
    pub subject: Value,
    pub policy: Value,
    pub owner: String,
    pub target: Ref,
    pub assurance: Ref,
    pub evidence: Vec<Ref>,
    pub grantee: String,
    pub scope: Vec<String>,
    pub not_after_ms: i64,
}

impl Terms {
    pub fn new(r: &Request, c: &Contract) -> Terms {
        Terms {
            contract: r.contract.clone(),
            subject: c.subject.clone(),
            policy: c.policy.clone(),
            owner: c.owner.clone(),
            target: r.target.clone(),
            assurance: r.assurance.clone(),
            evidence: r.evidence.clone(),
            grantee: r.grantee.clone(),
            scope: r.scope.clone(),
            not_after_ms: r.not_after_ms,
        }
    }

    /// The terms as one object (stored as canonical JSON; the consent's arguments).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("contract", self.contract.revision());
        m.insert("subject", self.subject.clone());
        m.insert("policy", self.policy.clone());
        m.insert("owner", Value::from(self.owner.as_str()));
        m.insert("targetRevision", self.target.revision());
        m.insert("assurance", self.assurance.revision());
        m.insert(
            "evidence",
            Value::Array(self.evidence.iter().map(Ref::revision).collect()),
        );
        m.insert("granteeId", Value::from(self.grantee.as_str()));
        m.insert(
            "scope",
            Value::Array(self.scope.iter().map(|s| Value::from(s.as_str())).collect()),
        );
        m.insert("notAfter", Value::Int(self.not_after_ms));
        Value::Object(m)
    }

    /// The terms back from [`Terms::to_value`]'s object.
    pub fn from_value(v: &Value) -> Option<Terms> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Some(Terms {
            contract: Ref::from_value(v.get("contract")?)?,
            subject: v.get("subject")?.clone(),
            policy: v.get("policy")?.clone(),
            owner: text("owner")?,
            target: Ref::from_value(v.get("targetRevision")?)?,
            assurance: Ref::from_value(v.get("assurance")?)?,
            evidence: v
                .get("evidence")?
                .as_array()?
                .iter()
                .map(Ref::from_value)
                .collect::<Option<_>>()?,
            grantee: text("granteeId")?,
            scope: v
                .get("scope")?
                .as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
            not_after_ms: v.get("notAfter")?.as_i64()?,
        })
    }
}

/// Sort a scope as a semantic set: UTF-16 code-unit order, duplicates removed.
pub fn scope_set(mut scope: Vec<String>) -> Vec<String> {
    scope.sort_by(|a, b| cmp_utf16(a, b));
    scope.dedup();
    scope
}

/// One record Ward issues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub record_type: &'static str,
    pub id: String,
    pub digest: String,
    /// Canonical JSON (HL-C14N-1) of the complete record, `digest` included.
    pub body: String,
}

/// `YYYY-MM-DDTHH:MM:SS.sssZ` of Unix milliseconds (resolutions §B); `None` out of range.
pub fn timestamp(ms: i64) -> Option<String> {
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    let text = at.format(&format).ok()?;
    (text.len() == 24).then_some(text)
}

/// Why the records cannot be issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssueError {
    /// The approval instant or the validity end is not a four-digit-year instant.
    Time,
    /// The validity window would be empty: `not_after` is not after the approval.
    ValidityEnded,
    /// A value would not canonicalize (never for checked terms).
    Canonical(C14nError),
}

impl From<C14nError> for IssueError {
    fn from(e: C14nError) -> Self {
        IssueError::Canonical(e)
    }
}

/// The records of an approved promotion, issued under `terms.owner` at `at_ms` (Unix
/// milliseconds, the approval's instant) under `key`: the consent's id (simple hex) and an
/// unpredictable component, so no one can claim an issued identity before it exists:
/// the `promote` grant lineage available → reserved, the `PromotionDecisionV1` (approved,
/// citing the reserved step), then the consumed step bound to that decision. All four carry
/// the same instant, so no `issuedAt` regresses, the reserved step exists no later than the
/// decision and the consumed step no earlier (spec §4.2).
pub fn issue(terms: &Terms, key: &str, at_ms: i64) -> Result<Vec<Issued>, IssueError> {
    if terms.not_after_ms <= at_ms {
        return Err(IssueError::ValidityEnded);
    }
    let at = timestamp(at_ms).ok_or(IssueError::Time)?;
    let not_after = timestamp(terms.not_after_ms).ok_or(IssueError::Time)?;
    let grant_id = format!("ward-promote-{key}");
    let decision_id = format!("ward-promotion-{key}");
    let idempotency_key = format!("promote-{key}");
    let revision = terms.target.revision();
    let mut parameters = Map::new();
    parameters.insert("targetRevision", Value::from(terms.target.id.as_str()));
    parameters.insert("targetDigest", Value::from(terms.target.digest.as_str()));
    let parameters = Value::Object(parameters);
    let scope = Value::Array(
        terms
            .scope
            .iter()
            .map(|s| Value::from(s.as_str()))
            .collect(),
    );
    let mut bound = Map::new();
    bound.insert("action", Value::from("promote"));
    bound.insert("actionParameters", parameters.clone());
    bound.insert("granteeId", Value::from(terms.grantee.as_str()));
    bound.insert("idempotencyKey", Value::from(idempotency_key.as_str()));
    bound.insert("revision", revision.clone());
    bound.insert("scope", scope.clone());
    bound.insert("subject", terms.subject.clone());
    let action_digest = binding_digest(&Value::Object(bound))?.to_string();

    let envelope = |record_type: &str, id: &str| {
        let mut m = Map::new();
        m.insert("schemaVersion", Value::from(VERSION));
        m.insert("recordType", Value::from(record_type));
        m.insert("id", Value::from(id));
        m.insert("subject", terms.subject.clone());
        let mut source = Map::new();
        source.insert("system", Value::from(SOURCE_SYSTEM));
        source.insert("producer", Value::from(terms.owner.as_str()));
        source.insert(
            "locator",
            Value::from(format!("{SOURCE_SYSTEM}:promotion:{key}")),
        );
        m.insert("source", Value::Object(source));
        m.insert("revision", revision.clone());
        m.insert("policy", terms.policy.clone());
        m.insert("issuedAt", Value::from(at.as_str()));
        m.insert("contractRef", terms.contract.exact("OutcomeContractV1"));
        m
    };
    let grant = |sequence: i64, state: &str, previous: Option<(&Issued, &str)>| {
        let id = format!("{grant_id}.{sequence}");
        let mut m = envelope("AuthorityGrantV1", &id);
        m.insert("issuerId", Value::from(terms.owner.as_str()));
        m.insert("granteeId", Value::from(terms.grantee.as_str()));
        m.insert("action", Value::from("promote"));
        m.insert("actionParameters", parameters.clone());
        m.insert("scope", scope.clone());
        let mut validity = Map::new();
        validity.insert("notBefore", Value::from(at.as_str()));
        validity.insert("notAfter", Value::from(not_after.as_str()));
        m.insert("validity", Value::Object(validity));
        m.insert("idempotencyKey", Value::from(idempotency_key.as_str()));
        m.insert("consequential", Value::Bool(true));
        m.insert("actionDigest", Value::from(action_digest.as_str()));
        let mut lineage = Map::new();
        lineage.insert("grantId", Value::from(grant_id.as_str()));
        lineage.insert("sequence", Value::Int(sequence));
        lineage.insert("state", Value::from(state));
        m.insert("lineage", Value::Object(lineage));
        if let Some((prev, reason)) = previous {
            let mut entry = Map::new();
            entry.insert("recordType", Value::from(prev.record_type));
            entry.insert("id", Value::from(prev.id.as_str()));
            entry.insert("digest", Value::from(prev.digest.as_str()));
            entry.insert("reason", Value::from(reason));
            m.insert("supersedes", Value::Array(vec![Value::Object(entry)]));
        }
        m
    };

    let available = seal("AuthorityGrantV1", grant(1, "available", None))?;
    let reserved = seal(
        "AuthorityGrantV1",
        grant(2, "reserved", Some((&available, "reserve"))),
    )?;
    let decision = {
        let id = format!("{decision_id}.1");
        let mut m = envelope("PromotionDecisionV1", &id);
        m.insert("ownerId", Value::from(terms.owner.as_str()));
        m.insert("targetRevision", revision.clone());
        m.insert("actionParameters", parameters.clone());
        m.insert("decision", Value::from("approved"));
        m.insert("grantRef", exact(&reserved));
        m.insert("assuranceRef", terms.assurance.exact("AssuranceDecisionV1"));
        m.insert(
            "evidenceRefs",
            Value::Array(
                terms
                    .evidence
                    .iter()
                    .map(|e| e.exact("EvidenceRecordV1"))
                    .collect(),
            ),
        );
        m.insert("idempotencyKey", Value::from(idempotency_key.as_str()));
        m.insert("decidedAt", Value::from(at.as_str()));
        let mut lineage = Map::new();
        lineage.insert("decisionId", Value::from(decision_id.as_str()));
        lineage.insert("sequence", Value::Int(1));
        m.insert("lineage", Value::Object(lineage));
        seal("PromotionDecisionV1", m)?
    };
    let consumed = {
        let mut m = grant(3, "consumed", Some((&reserved, "consume")));
        m.insert("consumedBy", exact(&decision));
        seal("AuthorityGrantV1", m)?
    };
    Ok(vec![available, reserved, decision, consumed])
}

fn exact(r: &Issued) -> Value {
    Ref {
        id: r.id.clone(),
        digest: r.digest.clone(),
    }
    .exact(r.record_type)
}

/// Add the record digest and render the canonical body.
fn seal(record_type: &'static str, mut m: Map) -> Result<Issued, C14nError> {
    let id = m
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let digest = record_digest(&Value::Object(m.clone()))?.to_string();
    m.insert("digest", Value::from(digest.as_str()));
    let body = lychd_helmloop::to_canonical_string(&Value::Object(m))?;
    Ok(Issued {
        record_type,
        id,
        digest,
        body,
    })
}

#[cfg(test)]
mod tests;
