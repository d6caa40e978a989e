//! The office's one error type, its mapping to `tonic::Status` (stable `ErrorInfo` reasons in
//! domain `lychd.archive`), listed in `docs/refusals.md`. Messages are lowercase and never
//! carry a note text, a query or a refused value.

use lychd_runtime::refusal::{DbFailure, Refusals, Violations};
use tonic::Status;

use crate::domain::recall::Stale;

/// The Archive's refusal reasons (the common ones belong to every office).
pub mod reasons {
    lychd_runtime::refusal::reasons! {
        /// no namespace has this name
        NAMESPACE_NOT_FOUND = NotFound;
        /// the namespace is bound to another policy revision than the office's configured one; nothing is read or changed until it is migrated
        NAMESPACE_POLICY_MISMATCH = FailedPrecondition;
        /// another operation held the namespace past the 2 s lock timeout; nothing changed and nothing was recalled (not a miss); retry
        NAMESPACE_BUSY = DeadlineExceeded;
        /// the request id already admitted a different note
        INTAKE_REQUEST_CONFLICT = AlreadyExists;
        /// this source key and source revision hold different bytes
        SOURCE_REVISION_CONFLICT = AlreadyExists;
        /// this source revision was revoked; its tombstone refuses re-intake
        SOURCE_REVISION_REVOKED = FailedPrecondition;
        /// no note in the namespace has this revision id
        NOTE_NOT_FOUND = NotFound;
        /// the note's lifecycle version is not the expected one; read it again and decide anew
        LIFECYCLE_VERSION_MISMATCH = FailedPrecondition;
        /// the change does not apply to the note's lifecycle state
        LIFECYCLE_TRANSITION_INVALID = FailedPrecondition;
        /// the request id already recalled with a different query, purpose or budgets
        RECALL_REQUEST_CONFLICT = AlreadyExists;
        /// no receipt in the namespace has this request id
        RECEIPT_NOT_FOUND = NotFound;
        /// a selected note was revoked since the recall; the receipt no longer resolves
        RECEIPT_NOTE_REVOKED = FailedPrecondition;
        /// a selected note was archived since the recall; the receipt no longer resolves
        RECEIPT_NOTE_ARCHIVED = FailedPrecondition;
        /// a selected note was superseded by a later promotion of its source; the receipt no longer resolves
        RECEIPT_NOTE_SUPERSEDED = FailedPrecondition;
        /// a selected note is not exactly as selected (version or projection); the receipt no longer resolves
        RECEIPT_NOTE_CHANGED = FailedPrecondition;
        /// `namespace` is not a namespace name
        NAMESPACE_INVALID = InvalidArgument;
        /// `request_id` is empty, too long or not printable
        REQUEST_ID_INVALID = InvalidArgument;
        /// `source_key` is empty, too long or not printable
        SOURCE_KEY_INVALID = InvalidArgument;
        /// `source_revision` is empty, too long or not printable
        SOURCE_REVISION_INVALID = InvalidArgument;
        /// `text` is empty, longer than the note bound or holds NUL
        TEXT_INVALID = InvalidArgument;
        /// `producer` is empty, too long or not printable
        PRODUCER_INVALID = InvalidArgument;
        /// `classification` is not a slug
        CLASSIFICATION_INVALID = InvalidArgument;
        /// `observed_at` is missing or not a time
        OBSERVED_AT_INVALID = InvalidArgument;
        /// `revision_id` is not a UUID
        REVISION_ID_MALFORMED = InvalidArgument;
        /// `expected_version` must be at least 1
        EXPECTED_VERSION_INVALID = InvalidArgument;
        /// `query` is empty, longer than the query bound or holds NUL
        QUERY_INVALID = InvalidArgument;
        /// `purpose` is not a slug
        PURPOSE_INVALID = InvalidArgument;
        /// `max_results` is outside 1 and the office's bound
        MAX_RESULTS_OUT_OF_RANGE = InvalidArgument;
        /// `max_chars` is outside 1 and the office's bound
        MAX_CHARS_OUT_OF_RANGE = InvalidArgument;
        /// `page.page_size` is beyond the page bound (500)
        PAGE_SIZE_OUT_OF_RANGE = InvalidArgument;
        /// `page.page_token` is not a token this office issued
        PAGE_TOKEN_INVALID = InvalidArgument;
        /// `state` is not a lifecycle state
        STATE_UNKNOWN = InvalidArgument;
    }
}

/// The Archive's refusals.
pub const REFUSALS: Refusals = Refusals::new(crate::OFFICE.domain(), reasons::OWN);

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Bad input; nothing changed. The status reason is the first violation's.
    #[error("invalid request")]
    InvalidArgument(Violations),
    #[error("namespace not found")]
    NamespaceNotFound,
    #[error("namespace policy revision mismatch")]
    PolicyMismatch,
    #[error("request id admitted a different note")]
    IntakeConflict,
    #[error("source revision holds different bytes")]
    SourceConflict,
    #[error("source revision revoked")]
    SourceRevoked,
    #[error("note not found")]
    NoteNotFound,
    #[error("lifecycle version mismatch")]
    VersionMismatch,
    #[error("lifecycle transition invalid")]
    TransitionInvalid,
    #[error("request id recalled a different request")]
    RecallConflict,
    #[error("receipt not found")]
    ReceiptNotFound,
    #[error("receipt no longer resolves")]
    Stale(Stale),
    /// State changed under the call; the caller may retry.
    #[error("concurrent change; retry")]
    Conflict,
    /// Ward's refusal, asked again after awaited preparation or before the answer (relayed).
    #[error("refused by ward")]
    Refused(Box<Status>),
    #[error("database error")]
    Database(#[from] sqlx::Error),
}

pub type Result<T, E = ArchiveError> = std::result::Result<T, E>;

impl From<Violations> for ArchiveError {
    fn from(v: Violations) -> Self {
        ArchiveError::InvalidArgument(v)
    }
}

impl From<ArchiveError> for Status {
    fn from(e: ArchiveError) -> Status {
        use reasons::*;
        match e {
            ArchiveError::InvalidArgument(v) => REFUSALS.invalid(v),
            ArchiveError::NamespaceNotFound => REFUSALS.refuse(NAMESPACE_NOT_FOUND),
            ArchiveError::PolicyMismatch => REFUSALS.refuse(NAMESPACE_POLICY_MISMATCH),
            ArchiveError::IntakeConflict => REFUSALS.refuse(INTAKE_REQUEST_CONFLICT),
            ArchiveError::SourceConflict => REFUSALS.refuse(SOURCE_REVISION_CONFLICT),
            ArchiveError::SourceRevoked => REFUSALS.refuse(SOURCE_REVISION_REVOKED),
            ArchiveError::NoteNotFound => REFUSALS.refuse(NOTE_NOT_FOUND),
            ArchiveError::VersionMismatch => REFUSALS.refuse(LIFECYCLE_VERSION_MISMATCH),
            ArchiveError::TransitionInvalid => REFUSALS.refuse(LIFECYCLE_TRANSITION_INVALID),
            ArchiveError::RecallConflict => REFUSALS.refuse(RECALL_REQUEST_CONFLICT),
            ArchiveError::ReceiptNotFound => REFUSALS.refuse(RECEIPT_NOT_FOUND),
            ArchiveError::Stale(Stale::Revoked) => REFUSALS.refuse(RECEIPT_NOTE_REVOKED),
            ArchiveError::Stale(Stale::Archived) => REFUSALS.refuse(RECEIPT_NOTE_ARCHIVED),
            ArchiveError::Stale(Stale::Superseded) => REFUSALS.refuse(RECEIPT_NOTE_SUPERSEDED),
            ArchiveError::Stale(Stale::Changed) => REFUSALS.refuse(RECEIPT_NOTE_CHANGED),
            ArchiveError::Conflict => {
                REFUSALS.refuse(lychd_runtime::refusal::common::CONCURRENT_CHANGE)
            }
            ArchiveError::Refused(status) => *status,
            // The namespace lock not granted within `lock_timeout`: an error, never a miss.
            ArchiveError::Database(db) if DbFailure::classify(&db) == DbFailure::LockTimeout => {
                tracing::warn!("namespace lock timeout");
                REFUSALS.refuse(NAMESPACE_BUSY)
            }
            ArchiveError::Database(db) => REFUSALS.database(&db),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_answered_through_the_catalogue() {
        assert!(REFUSALS.knows(&reasons::NAMESPACE_BUSY));
        assert_eq!(
            reasons::NAMESPACE_BUSY.code,
            tonic::Code::DeadlineExceeded,
            "a lock timeout is a deadline, never a miss"
        );
    }
}
