//! The office's refusals, each declared once (`refusals!`): its reasons (listed in
//! `docs/refusals.md`), its one error type and their `tonic::Status` (stable `ErrorInfo` reasons
//! in domain `lychd.archive`). Messages are lowercase and never carry a note text, a query or a
//! refused value.

use lychd_runtime::refusal::DbFailure;
use tonic::Status;

use crate::domain::recall::Stale;

lychd_runtime::refusal::refusals! {
    /// The Archive's one error type: every refusal it answers, each declared once below.
    #[derive(Debug, thiserror::Error)]
    pub enum ArchiveError in crate::OFFICE.domain();
    common [InvalidArgument, Conflict, Refused];
    shared [REQUEST_ID_INVALID, PAGE_SIZE_OUT_OF_RANGE, PAGE_TOKEN_INVALID];
    reasons {
        /// no namespace has this name
        NAMESPACE_NOT_FOUND = NotFound => NamespaceNotFound;
        /// the namespace is bound to another policy revision than the office's configured one; nothing is read or changed until it is migrated
        NAMESPACE_POLICY_MISMATCH = FailedPrecondition => PolicyMismatch;
        /// another operation held the namespace past the 2 s lock timeout; nothing changed and nothing was recalled (not a miss); retry
        NAMESPACE_BUSY = DeadlineExceeded;
        /// the request id already admitted a different note
        INTAKE_REQUEST_CONFLICT = AlreadyExists => IntakeConflict;
        /// this source key and source revision hold different bytes
        SOURCE_REVISION_CONFLICT = AlreadyExists => SourceConflict;
        /// this source revision was revoked; its tombstone refuses re-intake
        SOURCE_REVISION_REVOKED = FailedPrecondition => SourceRevoked;
        /// no note in the namespace has this revision id
        NOTE_NOT_FOUND = NotFound => NoteNotFound;
        /// the note's lifecycle version is not the expected one; read it again and decide anew
        LIFECYCLE_VERSION_MISMATCH = FailedPrecondition => VersionMismatch;
        /// the change does not apply to the note's lifecycle state
        LIFECYCLE_TRANSITION_INVALID = FailedPrecondition => TransitionInvalid;
        /// the request id already recalled with a different query, purpose or budgets
        RECALL_REQUEST_CONFLICT = AlreadyExists => RecallConflict;
        /// no receipt in the namespace has this request id
        RECEIPT_NOT_FOUND = NotFound => ReceiptNotFound;
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
        /// `state` is not a lifecycle state
        STATE_UNKNOWN = InvalidArgument;
    }
    custom {
        #[error("receipt no longer resolves")]
        Stale(Stale) => |stale| REFUSALS.refuse(match stale {
            Stale::Revoked => reasons::RECEIPT_NOTE_REVOKED,
            Stale::Archived => reasons::RECEIPT_NOTE_ARCHIVED,
            Stale::Superseded => reasons::RECEIPT_NOTE_SUPERSEDED,
            Stale::Changed => reasons::RECEIPT_NOTE_CHANGED,
        });
        /// A database failure; the namespace lock not granted within `lock_timeout` is the
        /// Archive's own `NAMESPACE_BUSY` (an error, never a miss).
        #[error("database error")]
        Database(#[from] sqlx::Error) => database;
    }
}

fn database(db: sqlx::Error) -> Status {
    if DbFailure::classify(&db) == DbFailure::LockTimeout {
        tracing::warn!("namespace lock timeout");
        REFUSALS.refuse(reasons::NAMESPACE_BUSY)
    } else {
        REFUSALS.database(&db)
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
