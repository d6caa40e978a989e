//! The office's one error type, the one place SQL errors are translated (by SQLSTATE), and the
//! one function that turns an error into a gRPC status. Messages are lowercase and never carry
//! a secret, a token or a refused value.

use lychd_runtime::refusal::{DbFailure, Refusals, Violations};
use tonic::Status;

use crate::domain::consent::ConsentRefusal;
use crate::domain::decision::ExchangeRefusal;
use crate::domain::promotion::PromotionRefusal;
use crate::domain::secret::NoRandomness;

/// Ward's refusal reasons (the common ones belong to every office); listed in
/// `docs/refusals.md`.
pub mod reasons {
    lychd_runtime::refusal::reasons! {
        /// no principal has this id
        PRINCIPAL_NOT_FOUND = NotFound;
        /// no credential has this id
        CREDENTIAL_NOT_FOUND = NotFound;
        /// no session has this id
        SESSION_NOT_FOUND = NotFound;
        /// no assignment has this id
        ASSIGNMENT_NOT_FOUND = NotFound;
        /// a principal has this name already
        PRINCIPAL_EXISTS = AlreadyExists;
        /// the credential exists already
        CREDENTIAL_EXISTS = AlreadyExists;
        /// the session exists already
        SESSION_EXISTS = AlreadyExists;
        /// a live assignment grants exactly this already
        ASSIGNMENT_EXISTS = AlreadyExists;
        /// the credential is not recognised
        CREDENTIAL_UNKNOWN = Unauthenticated;
        /// the credential has expired
        CREDENTIAL_EXPIRED = Unauthenticated;
        /// the credential was revoked
        CREDENTIAL_REVOKED = Unauthenticated;
        /// the enrollment credential was exchanged already (it is good for one exchange)
        CREDENTIAL_EXCHANGED = Unauthenticated;
        /// the credential's principal was revoked
        PRINCIPAL_REVOKED = Unauthenticated;
        /// the principal is revoked: nothing more may be issued or assigned to it
        PRINCIPAL_REVOKED_ADMIN("PRINCIPAL_REVOKED") = FailedPrecondition;
        /// the credential is revoked: it cannot be rotated
        CREDENTIAL_REVOKED_ADMIN("CREDENTIAL_REVOKED") = FailedPrecondition;
        /// a principal exists already: bootstrap happens once
        ALREADY_BOOTSTRAPPED = FailedPrecondition;
        /// the decision log cannot take another record now: no decision is answered that would not be recorded
        DECISION_LOG_UNAVAILABLE = Unavailable;
        /// this Ward has as many open watch streams as it allows: close one, or try again later
        STREAM_LIMIT_REACHED = ResourceExhausted;
        /// no consent has this id
        CONSENT_NOT_FOUND = NotFound;
        /// the digest the approver reviewed is not the consent's binding digest: nothing was settled
        REVIEW_DIGEST_MISMATCH = FailedPrecondition;
        /// the consent is not granted (pending, denied, cancelled or expired): it cannot be consumed or revoked
        CONSENT_NOT_GRANTED = FailedPrecondition;
        /// the approval was consumed already (an approval is good for one effect)
        CONSENT_CONSUMED = FailedPrecondition;
        /// the approval was revoked before it was consumed
        CONSENT_REVOKED = FailedPrecondition;
        /// the approval's bound expiry has passed
        CONSENT_BINDING_EXPIRED = FailedPrecondition;
        /// the principal that requested or approved the call has been revoked since
        CONSENT_PRINCIPAL_REVOKED = FailedPrecondition;
        /// the call presented is not the call approved (its binding digest differs): a changed call needs a new consent
        CONSENT_BINDING_MISMATCH = FailedPrecondition;
        /// the standing rule that granted the consent is disabled, expired or changed since: the grant is void
        CONSENT_RULE_INVALID = FailedPrecondition;
        /// no standing preauthorization rule has this slug
        PREAUTH_RULE_NOT_FOUND = NotFound;
        /// no proposal has this id
        PROPOSAL_NOT_FOUND = NotFound;
        /// the consent is bound by a proposal already (a proposal binds exactly one consent, and a consent one proposal)
        PROPOSAL_EXISTS = AlreadyExists;
        /// only the principal that proposed the call may make, close or annotate its proposal
        NOT_THE_PROPOSER = PermissionDenied;
        /// the proposal was withdrawn or superseded already: it cannot be closed again or succeed another
        PROPOSAL_CLOSED = FailedPrecondition;
        /// the consent judges no promotion
        PROMOTION_NOT_FOUND = NotFound;
        /// only the contract's accountable owner may settle a promotion
        NOT_THE_OWNER = PermissionDenied;
        /// this Ward has no HelmLoop office configured (`peers.helmloop`) or no session of its own: promotions are refused
        HELMLOOP_NOT_CONFIGURED = FailedPrecondition;
        /// the HelmLoop office did not answer: try again
        HELMLOOP_UNAVAILABLE = Unavailable;
        /// the HelmLoop office holds no `OutcomeContractV1` with this id and digest
        CONTRACT_NOT_FOUND = FailedPrecondition;
        /// the contract cannot carry a promotion: it is not active, its identity equivocates, or its owner is not its subject's owner
        CONTRACT_UNUSABLE = FailedPrecondition;
        /// no live human Ward principal is named as the contract's accountable owner
        OWNER_NOT_ENROLLED = FailedPrecondition;
        /// the promotion's grant validity ended before the approval: nothing was settled or issued
        PROMOTION_VALIDITY_ENDED = FailedPrecondition;
    }
}

/// Ward's refusals.
pub const REFUSALS: Refusals = Refusals::new(crate::OFFICE.domain(), reasons::OWN);
/// `ErrorInfo.domain` of Ward's refusals.
pub const DOMAIN: &str = REFUSALS.domain;

pub type Result<T, E = WardError> = std::result::Result<T, E>;

/// Records an error can be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    Principal,
    Credential,
    Session,
    Assignment,
    Consent,
    PreauthRule,
    Proposal,
    Promotion,
}

impl Entity {
    const fn name(self) -> &'static str {
        match self {
            Entity::Principal => "principal",
            Entity::Credential => "credential",
            Entity::Session => "session",
            Entity::Assignment => "assignment",
            Entity::Consent => "consent",
            Entity::PreauthRule => "preauthorization rule",
            Entity::Proposal => "proposal",
            Entity::Promotion => "promotion",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WardError {
    /// Bad input, every bad field named; nothing was changed.
    #[error("invalid argument")]
    InvalidArgument(Violations),
    #[error("{} not found", .0.name())]
    NotFound(Entity),
    #[error("{} already exists", .0.name())]
    AlreadyExists(Entity),
    /// A credential could not be exchanged.
    #[error("{}", .0.message())]
    Refused(ExchangeRefusal),
    /// The principal is revoked: nothing more may be issued or assigned to it.
    #[error("principal revoked")]
    PrincipalRevoked,
    /// The credential is revoked (it cannot be rotated).
    #[error("credential revoked")]
    CredentialRevoked,
    /// A principal exists already: bootstrap happens once.
    #[error("ward is already bootstrapped")]
    AlreadyBootstrapped,
    #[error("no randomness available")]
    NoRandomness(#[from] NoRandomness),
    /// The decision log cannot take another record now (its writer is behind or stopped): no
    /// decision is answered that would not be recorded.
    #[error("decision log unavailable")]
    DecisionLogUnavailable,
    /// A consent cannot be settled, consumed or revoked as asked (nothing was changed).
    #[error("consent refused: {}", .0.as_str())]
    Consent(ConsentRefusal),
    /// Only the principal that proposed the call may make, close or annotate its proposal.
    #[error("not the proposer")]
    NotProposer,
    /// The proposal was withdrawn or superseded already.
    #[error("proposal closed")]
    ProposalClosed,
    /// Only the contract's accountable owner may settle a promotion.
    #[error("not the owner")]
    NotOwner,
    /// A promotion cannot be proposed or approved as asked (nothing was changed).
    #[error("promotion refused: {}", .0.as_str())]
    Promotion(PromotionRefusal),
    /// As many watch streams are open as the office allows.
    #[error("stream limit reached")]
    StreamLimitReached,
    /// A database failure, answered as the runtime classifies it.
    #[error("database failure")]
    Database(#[source] sqlx::Error),
}

impl From<Violations> for WardError {
    fn from(v: Violations) -> Self {
        WardError::InvalidArgument(v)
    }
}

impl WardError {
    pub fn invalid(field: &str, description: &'static str) -> Self {
        let mut v = Violations::new();
        v.require::<(), _>(field, Err(description));
        WardError::InvalidArgument(v)
    }
}

/// A unique violation on a constraint Ward expects is "already exists"; every other database
/// failure is classified by the runtime.
impl From<sqlx::Error> for WardError {
    fn from(e: sqlx::Error) -> Self {
        match DbFailure::classify(&e) {
            DbFailure::UniqueViolation(Some(c)) => WardError::AlreadyExists(match c.as_str() {
                "principals_name_key" => Entity::Principal,
                "assignments_live" => Entity::Assignment,
                "proposals_consent_id_key" => Entity::Proposal,
                c if c.starts_with("credentials") => Entity::Credential,
                c if c.starts_with("sessions") => Entity::Session,
                _ => return WardError::Database(e),
            }),
            _ => WardError::Database(e),
        }
    }
}

/// The one mapping to a gRPC status.
pub fn into_status(e: WardError) -> Status {
    use reasons::*;
    match e {
        WardError::InvalidArgument(violations) => REFUSALS.invalid(violations),
        WardError::NotFound(entity) => REFUSALS.refuse(match entity {
            Entity::Principal => PRINCIPAL_NOT_FOUND,
            Entity::Credential => CREDENTIAL_NOT_FOUND,
            Entity::Session => SESSION_NOT_FOUND,
            Entity::Assignment => ASSIGNMENT_NOT_FOUND,
            Entity::Consent => CONSENT_NOT_FOUND,
            Entity::PreauthRule => PREAUTH_RULE_NOT_FOUND,
            Entity::Proposal => PROPOSAL_NOT_FOUND,
            Entity::Promotion => PROMOTION_NOT_FOUND,
        }),
        WardError::AlreadyExists(entity) => REFUSALS.refuse(match entity {
            Entity::Principal => PRINCIPAL_EXISTS,
            Entity::Credential => CREDENTIAL_EXISTS,
            Entity::Session => SESSION_EXISTS,
            Entity::Assignment => ASSIGNMENT_EXISTS,
            Entity::Proposal => PROPOSAL_EXISTS,
            // Never raised: a replayed proposal returns its consent and a sync updates its rule.
            Entity::Consent | Entity::PreauthRule | Entity::Promotion => {
                lychd_runtime::refusal::common::INTERNAL
            }
        }),
        WardError::Refused(r) => REFUSALS.refuse_with(
            match r {
                ExchangeRefusal::CredentialUnknown => CREDENTIAL_UNKNOWN,
                ExchangeRefusal::CredentialExpired => CREDENTIAL_EXPIRED,
                ExchangeRefusal::CredentialRevoked => CREDENTIAL_REVOKED,
                ExchangeRefusal::CredentialExchanged => CREDENTIAL_EXCHANGED,
                ExchangeRefusal::PrincipalRevoked => PRINCIPAL_REVOKED,
            },
            r.message(),
        ),
        WardError::PrincipalRevoked => REFUSALS.refuse(PRINCIPAL_REVOKED_ADMIN),
        WardError::CredentialRevoked => REFUSALS.refuse(CREDENTIAL_REVOKED_ADMIN),
        WardError::AlreadyBootstrapped => REFUSALS.refuse(ALREADY_BOOTSTRAPPED),
        WardError::DecisionLogUnavailable => REFUSALS.refuse(DECISION_LOG_UNAVAILABLE),
        WardError::StreamLimitReached => REFUSALS.refuse(STREAM_LIMIT_REACHED),
        WardError::NotProposer => REFUSALS.refuse(NOT_THE_PROPOSER),
        WardError::ProposalClosed => REFUSALS.refuse(PROPOSAL_CLOSED),
        WardError::NotOwner => REFUSALS.refuse(NOT_THE_OWNER),
        WardError::Promotion(r) => REFUSALS.refuse(match r {
            PromotionRefusal::NotConfigured => HELMLOOP_NOT_CONFIGURED,
            PromotionRefusal::Unavailable => HELMLOOP_UNAVAILABLE,
            PromotionRefusal::ContractNotFound => CONTRACT_NOT_FOUND,
            PromotionRefusal::ContractUnusable => CONTRACT_UNUSABLE,
            PromotionRefusal::OwnerNotEnrolled => OWNER_NOT_ENROLLED,
            PromotionRefusal::ValidityEnded => PROMOTION_VALIDITY_ENDED,
        }),
        WardError::Consent(r) => REFUSALS.refuse(match r {
            ConsentRefusal::ReviewDigestMismatch => REVIEW_DIGEST_MISMATCH,
            ConsentRefusal::NotGranted => CONSENT_NOT_GRANTED,
            ConsentRefusal::Consumed => CONSENT_CONSUMED,
            ConsentRefusal::Revoked => CONSENT_REVOKED,
            ConsentRefusal::BindingExpired => CONSENT_BINDING_EXPIRED,
            ConsentRefusal::PrincipalRevoked => CONSENT_PRINCIPAL_REVOKED,
            ConsentRefusal::BindingMismatch => CONSENT_BINDING_MISMATCH,
            ConsentRefusal::RuleInvalid => CONSENT_RULE_INVALID,
        }),
        WardError::NoRandomness(_) => {
            tracing::error!("operating system gave no randomness");
            REFUSALS.refuse(lychd_runtime::refusal::common::INTERNAL)
        }
        WardError::Database(source) => REFUSALS.database(&source),
    }
}

impl From<WardError> for Status {
    fn from(e: WardError) -> Self {
        into_status(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;
    use tonic_types::StatusExt;

    #[test]
    fn bad_input_names_fields_without_values() {
        let mut v = Violations::new();
        v.require::<(), _>("action", Err("is required"));
        v.require::<(), _>("page.page_token", Err("is not a page token of this list"));
        let status = into_status(WardError::InvalidArgument(v));
        assert_eq!(status.code(), Code::InvalidArgument);
        let details = status.get_error_details();
        assert_eq!(details.error_info().unwrap().reason, "INVALID_ARGUMENT");
        assert_eq!(details.error_info().unwrap().domain, DOMAIN);
        let fields: Vec<_> = details
            .bad_request()
            .unwrap()
            .field_violations
            .iter()
            .map(|v| v.field.clone())
            .collect();
        assert_eq!(fields, ["action", "page.page_token"]);
    }

    #[test]
    fn codes_and_reasons() {
        let cases = [
            (
                WardError::NotFound(Entity::Credential),
                Code::NotFound,
                "CREDENTIAL_NOT_FOUND",
            ),
            (
                WardError::AlreadyExists(Entity::Principal),
                Code::AlreadyExists,
                "PRINCIPAL_EXISTS",
            ),
            (
                WardError::Refused(ExchangeRefusal::CredentialExchanged),
                Code::Unauthenticated,
                "CREDENTIAL_EXCHANGED",
            ),
            (
                WardError::PrincipalRevoked,
                Code::FailedPrecondition,
                "PRINCIPAL_REVOKED",
            ),
            (
                WardError::AlreadyBootstrapped,
                Code::FailedPrecondition,
                "ALREADY_BOOTSTRAPPED",
            ),
            (
                WardError::DecisionLogUnavailable,
                Code::Unavailable,
                "DECISION_LOG_UNAVAILABLE",
            ),
            (
                WardError::Database(sqlx::Error::PoolTimedOut),
                Code::Unavailable,
                "DATABASE_UNAVAILABLE",
            ),
            (
                WardError::Database(sqlx::Error::RowNotFound),
                Code::Internal,
                "INTERNAL",
            ),
        ];
        for (e, code, reason) in cases {
            let s = into_status(e);
            assert_eq!(s.code(), code);
            assert_eq!(s.get_error_details().error_info().unwrap().reason, reason);
            assert_eq!(s.message(), s.message().to_lowercase());
        }
    }
}
