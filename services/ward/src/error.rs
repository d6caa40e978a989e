//! The office's refusals, each declared once (`refusals!`: its reasons, listed in
//! `docs/refusals.md`, its one error type and their gRPC statuses), and the one place SQL errors
//! are translated (by SQLSTATE). Messages are lowercase and never carry a secret, a token or a
//! refused value.

use lychd_runtime::refusal::{DbFailure, Violations};
use tonic::Status;

use crate::domain::consent::ConsentRefusal;
use crate::domain::decision::ExchangeRefusal;
use crate::domain::promotion::PromotionRefusal;
use crate::domain::secret::NoRandomness;

lychd_runtime::refusal::refusals! {
    /// Ward's one error type: every refusal it answers, each declared once below.
    #[derive(Debug, thiserror::Error)]
    pub enum WardError in crate::OFFICE.domain();
    common [InvalidArgument];
    shared [STREAM_LIMIT_REACHED, STREAM_SHARE_REACHED, REQUEST_ID_INVALID, PAGE_TOKEN_INVALID];
    streams [StreamLimitReached, StreamShareReached];
    reasons {
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
        PRINCIPAL_REVOKED_ADMIN("PRINCIPAL_REVOKED") = FailedPrecondition => PrincipalRevoked;
        /// the credential is revoked: it cannot be rotated
        CREDENTIAL_REVOKED_ADMIN("CREDENTIAL_REVOKED") = FailedPrecondition => CredentialRevoked;
        /// ward is already bootstrapped (a principal exists): bootstrap happens once
        ALREADY_BOOTSTRAPPED = FailedPrecondition => AlreadyBootstrapped;
        /// the decision log cannot take another record now: no decision is answered that would not be recorded
        DECISION_LOG_UNAVAILABLE = Unavailable => DecisionLogUnavailable;
        /// no consent has this id
        CONSENT_NOT_FOUND = NotFound;
        /// the digest the approver reviewed is not the consent's binding digest: nothing was settled
        REVIEW_DIGEST_MISMATCH = FailedPrecondition;
        /// the decider is the principal that requested the call: no principal gives the verdict on its own effect
        SELF_APPROVAL = PermissionDenied;
        /// the consent's class is live-only: only a human principal may settle it
        LIVE_VERDICT_REQUIRED = PermissionDenied;
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
        NOT_THE_PROPOSER = PermissionDenied => NotProposer;
        /// the proposal was withdrawn or superseded already: it cannot be closed again or succeed another
        PROPOSAL_CLOSED = FailedPrecondition => ProposalClosed;
        /// the consent judges no promotion
        PROMOTION_NOT_FOUND = NotFound;
        /// only the contract's accountable owner may settle a promotion
        NOT_THE_OWNER = PermissionDenied => NotOwner;
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
        /// a proposed owner record's identity (record type and id) is taken at the HelmLoop office or by a record Ward issued: nothing was settled or issued
        RECORD_IDENTITY_TAKEN = FailedPrecondition;
        /// the token asked about is missing
        TOKEN_MISSING = InvalidArgument;
        /// `action` is not `<office>:<verb>` of Ward's grammar
        ACTION_INVALID = InvalidArgument;
        /// `object` is not `<type>:<id>` or `<type>:*` of Ward's grammar
        OBJECT_INVALID = InvalidArgument;
        /// an audience is not an office name, or the audiences are not 1..16 distinct names
        AUDIENCE_INVALID = InvalidArgument;
        /// `questions` of an `AuthorizeBatch` is empty or holds more than 256 questions
        QUESTIONS_INVALID = InvalidArgument;
        /// `purpose` is not a slug of Ward's grammar
        PURPOSE_INVALID = InvalidArgument;
        /// `expected_policy_generation` is negative
        POLICY_GENERATION_INVALID = InvalidArgument;
        /// `kind` is not one of its enum's values (principal, credential or proposal record kind)
        KIND_INVALID = InvalidArgument;
        /// `name` is not a principal name (a slug of 1..64 characters)
        PRINCIPAL_NAME_INVALID = InvalidArgument;
        /// `display_name` is not 1..128 characters without control characters or surrounding spaces
        DISPLAY_NAME_INVALID = InvalidArgument;
        /// `ttl_seconds` is outside the credential kind's bounds
        TTL_INVALID = InvalidArgument;
        /// `expires_at` is not a valid instant, or not in the future
        EXPIRES_AT_INVALID = InvalidArgument;
        /// the target (of a revocation, or a promotion's HelmLoop reference) is missing or malformed
        TARGET_INVALID = InvalidArgument;
        /// a principal id is missing or not a UUID
        PRINCIPAL_ID_MALFORMED = InvalidArgument;
        /// `credential_id` is missing or not a UUID
        CREDENTIAL_ID_MALFORMED = InvalidArgument;
        /// `session_id` is missing or not a UUID
        SESSION_ID_MALFORMED = InvalidArgument;
        /// `assignment_id` is missing or not a UUID
        ASSIGNMENT_ID_MALFORMED = InvalidArgument;
        /// `consent_id` is missing or not a UUID
        CONSENT_ID_MALFORMED = InvalidArgument;
        /// a proposal or group id is missing, not a UUID, or names no usable proposal
        PROPOSAL_ID_MALFORMED = InvalidArgument;
        /// `run_id` is not 1..128 characters of `[A-Za-z0-9._:-]`
        RUN_ID_INVALID = InvalidArgument;
        /// `effect_owner` is not 1..128 characters of `[A-Za-z0-9._:-]`
        EFFECT_OWNER_INVALID = InvalidArgument;
        /// `effect_id` is not 1..128 characters of `[A-Za-z0-9._:-]`
        EFFECT_ID_INVALID = InvalidArgument;
        /// `effect_revision` is not positive
        EFFECT_REVISION_INVALID = InvalidArgument;
        /// `tool_name` is not 1..128 characters of `[A-Za-z0-9._:-]`
        TOOL_NAME_INVALID = InvalidArgument;
        /// `deferred_call_id` is not 1..128 characters of `[A-Za-z0-9._:-]`
        DEFERRED_CALL_ID_INVALID = InvalidArgument;
        /// `arguments_json` is not one HL-C14N-1 JSON object under the size cap
        ARGUMENTS_INVALID = InvalidArgument;
        /// `effect_class` is not one of the `EFFECT_CLASS_` values
        EFFECT_CLASS_INVALID = InvalidArgument;
        /// a bound field is too long, holds control characters, is not NFC, or its expiry is not a whole second
        BINDING_INVALID = InvalidArgument;
        /// `verdict` is not `VERDICT_APPROVE` or `VERDICT_DENY`
        VERDICT_INVALID = InvalidArgument;
        /// `review_digest` is not `sha256:` and 64 lowercase hex digits
        REVIEW_DIGEST_MALFORMED = InvalidArgument;
        /// `binding_digest` is not `sha256:` and 64 lowercase hex digits
        BINDING_DIGEST_MALFORMED = InvalidArgument;
        /// `state` is not a `CONSENT_STATE_` value
        CONSENT_STATE_INVALID = InvalidArgument;
        /// `slug` is not 1..64 characters of `[a-z0-9-]`
        SLUG_INVALID = InvalidArgument;
        /// `after_change` is above 2^63-1
        AFTER_CHANGE_INVALID = InvalidArgument;
        /// `occurrence` is not 1..128 characters of `[A-Za-z0-9._:-]`
        OCCURRENCE_INVALID = InvalidArgument;
        /// a record's `text` is missing where its kind needs it, present where it allows none, too long or not printable
        TEXT_INVALID = InvalidArgument;
        /// `attempt_id` is missing where the record kind needs it, present where it allows none, or malformed
        ATTEMPT_ID_INVALID = InvalidArgument;
        /// `receipt_id` is missing where the record kind needs it, present where it allows none, or malformed
        RECEIPT_ID_INVALID = InvalidArgument;
        /// `contract` is not a HelmLoop reference (identifier and digest)
        CONTRACT_INVALID = InvalidArgument;
        /// `assurance` is not a HelmLoop reference (identifier and digest)
        ASSURANCE_INVALID = InvalidArgument;
        /// `evidence` is not 1..64 distinct HelmLoop references
        EVIDENCE_INVALID = InvalidArgument;
        /// `grantee_id` is not a HelmLoop identifier
        GRANTEE_INVALID = InvalidArgument;
        /// `scope` is not 1..32 distinct elements of at most 256 bytes
        SCOPE_INVALID = InvalidArgument;
        /// `not_after` is missing or not a whole millisecond instant
        NOT_AFTER_INVALID = InvalidArgument;
        /// `records` are not 1..64 exact owner records of one owner
        RECORDS_INVALID = InvalidArgument;
    }
    answers {
        /// As many watch streams are open as the office allows.
        StreamLimitReached => STREAM_LIMIT_REACHED
            with "this Ward has as many open watch streams as it allows: close one, or try again later";
        /// The caller holds its whole share of the watch streams.
        StreamShareReached => STREAM_SHARE_REACHED
            with "the caller holds its whole share of this Ward's watch streams (`stream_share`): close one of its own; others may still open theirs";
    }
    custom {
        #[error("{} not found", .0.name())]
        NotFound(Entity) => not_found;
        #[error("{} already exists", .0.name())]
        AlreadyExists(Entity) => already_exists;
        /// A credential could not be exchanged.
        #[error("{}", .0.message())]
        Refused(ExchangeRefusal) => exchange_refused;
        #[error("no randomness available")]
        NoRandomness(#[from] NoRandomness) => |_| {
            tracing::error!("operating system gave no randomness");
            REFUSALS.refuse(lychd_runtime::refusal::common::INTERNAL)
        };
        /// A consent cannot be settled, consumed or revoked as asked (nothing was changed).
        #[error("consent refused: {}", .0.as_str())]
        Consent(ConsentRefusal) => consent_refused;
        /// A promotion cannot be proposed or approved as asked (nothing was changed).
        #[error("promotion refused: {}", .0.as_str())]
        Promotion(PromotionRefusal) => promotion_refused;
        /// A database failure, answered as the runtime classifies it.
        #[error("database failure")]
        Database(#[source] sqlx::Error) => |e| REFUSALS.database(&e);
    }
}

/// `ErrorInfo.domain` of Ward's refusals.
pub const DOMAIN: &str = REFUSALS.domain;

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
    Status::from(e)
}

fn not_found(entity: Entity) -> Status {
    use reasons::*;
    REFUSALS.refuse(match entity {
        Entity::Principal => PRINCIPAL_NOT_FOUND,
        Entity::Credential => CREDENTIAL_NOT_FOUND,
        Entity::Session => SESSION_NOT_FOUND,
        Entity::Assignment => ASSIGNMENT_NOT_FOUND,
        Entity::Consent => CONSENT_NOT_FOUND,
        Entity::PreauthRule => PREAUTH_RULE_NOT_FOUND,
        Entity::Proposal => PROPOSAL_NOT_FOUND,
        Entity::Promotion => PROMOTION_NOT_FOUND,
    })
}

fn already_exists(entity: Entity) -> Status {
    use reasons::*;
    REFUSALS.refuse(match entity {
        Entity::Principal => PRINCIPAL_EXISTS,
        Entity::Credential => CREDENTIAL_EXISTS,
        Entity::Session => SESSION_EXISTS,
        Entity::Assignment => ASSIGNMENT_EXISTS,
        Entity::Proposal => PROPOSAL_EXISTS,
        // Never raised: a replayed proposal returns its consent and a sync updates its rule.
        Entity::Consent | Entity::PreauthRule | Entity::Promotion => {
            lychd_runtime::refusal::common::INTERNAL
        }
    })
}

fn exchange_refused(r: ExchangeRefusal) -> Status {
    use reasons::*;
    REFUSALS.refuse_with(
        match r {
            ExchangeRefusal::CredentialUnknown => CREDENTIAL_UNKNOWN,
            ExchangeRefusal::CredentialExpired => CREDENTIAL_EXPIRED,
            ExchangeRefusal::CredentialRevoked => CREDENTIAL_REVOKED,
            ExchangeRefusal::CredentialExchanged => CREDENTIAL_EXCHANGED,
            ExchangeRefusal::PrincipalRevoked => PRINCIPAL_REVOKED,
        },
        r.message(),
    )
}

fn promotion_refused(r: PromotionRefusal) -> Status {
    use reasons::*;
    REFUSALS.refuse(match r {
        PromotionRefusal::NotConfigured => HELMLOOP_NOT_CONFIGURED,
        PromotionRefusal::Unavailable => HELMLOOP_UNAVAILABLE,
        PromotionRefusal::ContractNotFound => CONTRACT_NOT_FOUND,
        PromotionRefusal::ContractUnusable => CONTRACT_UNUSABLE,
        PromotionRefusal::OwnerNotEnrolled => OWNER_NOT_ENROLLED,
        PromotionRefusal::ValidityEnded => PROMOTION_VALIDITY_ENDED,
        PromotionRefusal::IdentityTaken => RECORD_IDENTITY_TAKEN,
    })
}

fn consent_refused(r: ConsentRefusal) -> Status {
    use reasons::*;
    REFUSALS.refuse(match r {
        ConsentRefusal::SelfApproval => SELF_APPROVAL,
        ConsentRefusal::LiveVerdictRequired => LIVE_VERDICT_REQUIRED,
        ConsentRefusal::ReviewDigestMismatch => REVIEW_DIGEST_MISMATCH,
        ConsentRefusal::NotGranted => CONSENT_NOT_GRANTED,
        ConsentRefusal::Consumed => CONSENT_CONSUMED,
        ConsentRefusal::Revoked => CONSENT_REVOKED,
        ConsentRefusal::BindingExpired => CONSENT_BINDING_EXPIRED,
        ConsentRefusal::PrincipalRevoked => CONSENT_PRINCIPAL_REVOKED,
        ConsentRefusal::BindingMismatch => CONSENT_BINDING_MISMATCH,
        ConsentRefusal::RuleInvalid => CONSENT_RULE_INVALID,
    })
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
