//! Reason codes of the reducer (resolutions §F) and their fixed channels.
//!
//! A code never moves between channels: [`ReasonCode::channel`] is a constant
//! table, so no terminal-reject cause can ever be reported in the hold
//! channel. Codes marked *added* below are this project's additions
//! (`design-inference`), allowed by resolutions §F ("a code may be added when a
//! rule needs it").

use crate::validate::Channel;

macro_rules! reason_codes {
    ($( $(#[$doc:meta])* $name:ident = $text:literal : $channel:ident ),* $(,)?) => {
        /// One reason a requested transition cannot pass.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ReasonCode {
            $( $(#[$doc])* $name, )*
        }

        impl ReasonCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ReasonCode] = &[$(ReasonCode::$name),*];

            /// The stable code text, e.g. `RECORD_DIGEST_MISMATCH`.
            pub const fn as_str(self) -> &'static str {
                match self { $(ReasonCode::$name => $text,)* }
            }

            /// The channel this code always belongs to.
            pub const fn channel(self) -> Channel {
                match self { $(ReasonCode::$name => Channel::$channel,)* }
            }
        }
    };
}

reason_codes! {
    // ---- reject channel (resolutions §F) ----
    /// A record fails its entry schema (or a timestamp is not a real instant).
    RecordSchemaInvalid = "RECORD_SCHEMA_INVALID": Reject,
    /// A record's declared digest differs from its recomputed record digest.
    RecordDigestMismatch = "RECORD_DIGEST_MISMATCH": Reject,
    /// One identity with two different canonical bodies.
    RecordEquivocation = "RECORD_EQUIVOCATION": Reject,
    /// A reference that carries an `id` but not its type and digest.
    RefIdOnly = "REF_ID_ONLY": Reject,
    /// A reference names, or resolves to, the wrong record type.
    RefTypeMismatch = "REF_TYPE_MISMATCH": Reject,
    /// A reference's digest differs from the resolved record's digest.
    RefDigestMismatch = "REF_DIGEST_MISMATCH": Reject,
    /// A record bound to another subject than the evaluation.
    RefSubjectMismatch = "REF_SUBJECT_MISMATCH": Reject,
    /// A `supersedes` entry with the wrong type, digest or subject.
    SupersessionInvalid = "SUPERSESSION_INVALID": Reject,
    /// A successor issued before its exact predecessor.
    SupersessionTimeRegression = "SUPERSESSION_TIME_REGRESSION": Reject,
    /// A supplied evaluation control is malformed, mistyped or unknown.
    ContextControlInvalid = "CONTEXT_CONTROL_INVALID": Reject,
    /// `context.policy.digest` differs from the binding digest of the controls.
    PolicyDigestDrift = "POLICY_DIGEST_DRIFT": Reject,
    /// Authority used with a wrong subject/action/parameters/scope/grantee/issuer/digest.
    AuthorityWrongBinding = "AUTHORITY_WRONG_BINDING": Reject,
    /// Authority used after (or voided by) a revocation.
    AuthorityRevokedUse = "AUTHORITY_REVOKED_USE": Reject,
    /// Authority used at or after its `validity.notAfter`.
    AuthorityExpiredUse = "AUTHORITY_EXPIRED_USE": Reject,
    /// Two consumers for one single-use grant.
    AuthorityDoubleConsumed = "AUTHORITY_DOUBLE_CONSUMED": Reject,
    /// Dispatch or decision from a step that is not the reserved head.
    AuthorityUnreservedUse = "AUTHORITY_UNRESERVED_USE": Reject,
    /// The reserved step was issued after dispatch/decision.
    AuthorityReservedAfterDispatch = "AUTHORITY_RESERVED_AFTER_DISPATCH": Reject,
    /// The consumed step precedes the consumer's terminal fact.
    AuthorityConsumedBeforeTerminal = "AUTHORITY_CONSUMED_BEFORE_TERMINAL": Reject,
    /// A grant lineage breaks sequence, transition, binding or time rules.
    AuthorityLineageInvalid = "AUTHORITY_LINEAGE_INVALID": Reject,
    /// More than one execution receipt in one v0.1 evaluation.
    ExecutionMultipleReceipts = "EXECUTION_MULTIPLE_RECEIPTS": Reject,
    /// The attempt terminally failed.
    ExecutionFailed = "EXECUTION_FAILED": Reject,
    /// The receipt's action/parameters/scope differ from the policy's expected ones.
    ExecutionActionMismatch = "EXECUTION_ACTION_MISMATCH": Reject,
    /// Evidence status and criterion conclusion disagree.
    EvidenceStatusConclusionMismatch = "EVIDENCE_STATUS_CONCLUSION_MISMATCH": Reject,
    /// Evidence criterion ID/digest matches no criterion of the contract.
    EvidenceCriterionMismatch = "EVIDENCE_CRITERION_MISMATCH": Reject,
    /// Assurance level mismatched with policy, declared above the recomputed level, or self-contradictory.
    AssuranceLevelMismatch = "ASSURANCE_LEVEL_MISMATCH": Reject,
    /// Evidence observed or issued after the assurance decision that cites it.
    AssuranceEvidenceAfterDecision = "ASSURANCE_EVIDENCE_AFTER_DECISION": Reject,
    /// Promotion parameters are not exactly its target revision ID/digest.
    PromotionParametersMismatch = "PROMOTION_PARAMETERS_MISMATCH": Reject,
    /// Assurance or evidence cited by a promotion is later than its decision.
    PromotionInputAfterDecision = "PROMOTION_INPUT_AFTER_DECISION": Reject,
    /// The accountable owner rejected the promotion.
    PromotionRejected = "PROMOTION_REJECTED": Reject,
    /// A promotion successor issued before its predecessor.
    PromotionLineageTimeRegression = "PROMOTION_LINEAGE_TIME_REGRESSION": Reject,
    /// Reconciliation correlation tuple or provider binding differs from the receipt's.
    ReconciliationCorrelationMismatch = "RECONCILIATION_CORRELATION_MISMATCH": Reject,
    /// Provider query observed before the receipt's terminal (or start) boundary.
    ReconciliationPremature = "RECONCILIATION_PREMATURE": Reject,
    /// Provider/observed state diverged from the requested state.
    ReconciliationDiverged = "RECONCILIATION_DIVERGED": Reject,
    /// Independent outcome evidence contradicts the contract.
    OutcomeNotMet = "OUTCOME_NOT_MET": Reject,
    /// Learning accepted without the exact owner approval and writeback grant.
    LearningUnauthorized = "LEARNING_UNAUTHORIZED": Reject,
    // ---- reject channel, added ----
    /// *Added.* The evaluation input's own shape (outside context and records) is invalid.
    InputSchemaInvalid = "INPUT_SCHEMA_INVALID": Reject,
    /// *Added.* Contract owner, criterion digests, criterion IDs or horizon are inconsistent.
    ContractInvalid = "CONTRACT_INVALID": Reject,
    /// *Added.* Same revision ID or policy ID/revision as the context, different digest.
    BindingDigestMismatch = "BINDING_DIGEST_MISMATCH": Reject,
    /// *Added.* A promotion decided by someone other than the accountable owner.
    OwnerMismatch = "OWNER_MISMATCH": Reject,
    /// *Added (resolutions §H.5).* A receipt whose `finishedAt` precedes its `startedAt`.
    ExecutionFinishedBeforeStarted = "EXECUTION_FINISHED_BEFORE_STARTED": Reject,
    /// *Added.* A reconciliation claims `success` while its own states disagree.
    ReconciliationInconsistent = "RECONCILIATION_INCONSISTENT": Reject,
    // ---- hold channel (resolutions §F) ----
    /// A record or input with a version other than `0.1`.
    ProtocolVersionUnsupported = "PROTOCOL_VERSION_UNSUPPORTED": Hold,
    /// A target transition other than `CONFORMANCE`.
    TransitionUnsupported = "TRANSITION_UNSUPPORTED": Hold,
    /// A required evaluation control is missing.
    ContextControlMissing = "CONTEXT_CONTROL_MISSING": Hold,
    /// No outcome contract, or a reference to one that is absent.
    ContractMissing = "CONTRACT_MISSING": Hold,
    /// A `supersedes` predecessor that is absent.
    SupersessionUnresolved = "SUPERSESSION_UNRESOLVED": Hold,
    /// A record bound to another revision ID or policy ID/revision, or to a superseded contract.
    BindingStale = "BINDING_STALE": Hold,
    /// An observation record from a producer outside `trustedProducers`.
    TrustUntrustedProducer = "TRUST_UNTRUSTED_PRODUCER": Hold,
    /// A record this evaluation depends on exists only after `evaluatedAt`.
    RecordAfterEvaluatedAt = "RECORD_AFTER_EVALUATED_AT": Hold,
    /// A required claim has no fresh supporting evidence.
    EvidenceMissing = "EVIDENCE_MISSING": Hold,
    /// A required claim's evidence is stale or future-dated.
    EvidenceStale = "EVIDENCE_STALE": Hold,
    /// A required claim has fresh contradicting evidence.
    EvidenceConflicting = "EVIDENCE_CONFLICTING": Hold,
    /// No usable authority for the action.
    AuthorityMissing = "AUTHORITY_MISSING": Hold,
    /// Orphaned or competing grant lineage.
    AuthorityLineageAmbiguous = "AUTHORITY_LINEAGE_AMBIGUOUS": Hold,
    /// The consuming step exists only after `evaluatedAt`.
    AuthorityConsumedAfterEvaluatedAt = "AUTHORITY_CONSUMED_AFTER_EVALUATED_AT": Hold,
    /// No execution receipt.
    ExecutionMissing = "EXECUTION_MISSING": Hold,
    /// Unknown attempt, or a reservation without a terminal receipt.
    ExecutionUnknown = "EXECUTION_UNKNOWN": Hold,
    /// Reconciliation required but absent.
    ReconciliationMissing = "RECONCILIATION_MISSING": Hold,
    /// Provider state unknown, ambiguous, or reservation without receipt.
    ReconciliationUnknown = "RECONCILIATION_UNKNOWN": Hold,
    /// Provider query older than the reconciliation age cap.
    ReconciliationStale = "RECONCILIATION_STALE": Hold,
    /// The promotion's assurance decision is outside the recomputed sufficient set.
    AssuranceInsufficient = "ASSURANCE_INSUFFICIENT": Hold,
    /// No promote grant and no promotion decision.
    PromotionNotRequested = "PROMOTION_NOT_REQUESTED": Hold,
    /// A promote grant exists but no owner decision.
    PromotionPending = "PROMOTION_PENDING": Hold,
    /// The owner decided `hold`.
    PromotionHold = "PROMOTION_HOLD": Hold,
    /// Competing owner heads or broken decision lineage.
    PromotionAmbiguous = "PROMOTION_AMBIGUOUS": Hold,
    /// Evaluation before the contract horizon, or outcome evidence observed before it.
    OutcomeNotDue = "OUTCOME_NOT_DUE": Hold,
    /// No eligible outcome evidence inside the horizon.
    OutcomeNotObserved = "OUTCOME_NOT_OBSERVED": Hold,
    /// Outcome evidence is `unknown`.
    OutcomeUnknown = "OUTCOME_UNKNOWN": Hold,
    /// A writeback requested without owner approval.
    LearningWritebackUnapproved = "LEARNING_WRITEBACK_UNAPPROVED": Hold,
    // ---- hold channel, added ----
    /// *Added.* More than one usable outcome contract head for the subject.
    ContractAmbiguous = "CONTRACT_AMBIGUOUS": Hold,
    /// *Added.* The contract is `draft` or `retired`.
    ContractNotActive = "CONTRACT_NOT_ACTIVE": Hold,
    /// *Added.* Authority reserved but not (yet) consumed by a terminal consumer.
    AuthorityNotConsumed = "AUTHORITY_NOT_CONSUMED": Hold,
    /// *Added.* The only authority is revoked or expired and nothing used it.
    AuthorityUnusable = "AUTHORITY_UNUSABLE": Hold,
    /// *Added.* Outcome evidence both supports and contradicts the claim.
    OutcomeMixed = "OUTCOME_MIXED": Hold,
}

impl ReasonCode {
    /// The code named by `s`.
    pub fn from_code(s: &str) -> Option<ReasonCode> {
        ReasonCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }

    /// Whether this code is in the reject channel.
    pub const fn is_reject(self) -> bool {
        matches!(self.channel(), Channel::Reject)
    }
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_upper_snake_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for c in ReasonCode::ALL {
            assert!(seen.insert(c.as_str()), "duplicate {c}");
            assert!(
                c.as_str()
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b == b'_')
            );
            assert_eq!(ReasonCode::from_code(c.as_str()), Some(*c));
        }
        assert_eq!(ReasonCode::from_code("NOPE"), None);
    }

    #[test]
    fn terminal_causes_are_reject_and_unresolved_causes_hold() {
        for c in [
            ReasonCode::RecordDigestMismatch,
            ReasonCode::AuthorityRevokedUse,
            ReasonCode::AuthorityDoubleConsumed,
            ReasonCode::ExecutionFailed,
            ReasonCode::OutcomeNotMet,
            ReasonCode::PolicyDigestDrift,
        ] {
            assert!(c.is_reject(), "{c}");
        }
        for c in [
            ReasonCode::ProtocolVersionUnsupported,
            ReasonCode::EvidenceStale,
            ReasonCode::ExecutionUnknown,
            ReasonCode::PromotionPending,
            ReasonCode::ContextControlMissing,
        ] {
            assert!(!c.is_reject(), "{c}");
        }
    }
}
