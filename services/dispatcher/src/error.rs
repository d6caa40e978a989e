//! The office's one error type, its mapping to `tonic::Status` (stable `ErrorInfo` reasons in
//! domain `lychd.dispatcher`), and SQLSTATE translation. Messages are lowercase and never echo
//! request payloads or secrets.

use lychd_runtime::refusal::{Refusals, Violations};
use tonic::Status;

/// The Dispatcher's refusal reasons (the common ones belong to every office); listed in
/// `docs/refusals.md`.
pub mod reasons {
    lychd_runtime::refusal::reasons! {
        /// no lease the caller may reach has this id (another principal's is not found either)
        LEASE_NOT_FOUND = NotFound;
        /// the lease was released
        LEASE_RELEASED = FailedPrecondition;
        /// the lease has expired
        LEASE_EXPIRED = FailedPrecondition;
        /// the holder does not match the lease
        LEASE_HOLDER_MISMATCH = FailedPrecondition;
        /// admission is closed on the lease's animator
        ADMISSION_CLOSED = FailedPrecondition;
        /// admission is open on an animator to drain; close it first
        ADMISSION_OPEN = FailedPrecondition;
        /// no closure the caller may reopen has this token (another principal's is not found either)
        CLOSURE_NOT_FOUND = NotFound;
        /// the request id already closed a different set of animators
        CLOSURE_REQUEST_CONFLICT = AlreadyExists;
        /// the request id already asked for a different lease
        LEASE_REQUEST_CONFLICT = AlreadyExists;
        /// the office serves as many event streams as it may; retry later
        STREAM_LIMIT_REACHED = ResourceExhausted;
        /// `demand` is required
        DEMAND_MISSING = InvalidArgument;
        /// a demand names a family or a capability key
        DEMAND_UNDERSPECIFIED = InvalidArgument;
        /// `demand.family` is not a known family value
        FAMILY_UNKNOWN = InvalidArgument;
        /// `demand.capability_key` is not a capability key
        CAPABILITY_KEY_MALFORMED = InvalidArgument;
        /// `demand.model_id` is not a model id
        MODEL_ID_INVALID = InvalidArgument;
        /// an input modality is unknown or unspecified
        MODALITY_UNKNOWN = InvalidArgument;
        /// `holder` is empty, too long or not printable
        HOLDER_INVALID = InvalidArgument;
        /// `run_id` is too long or not printable
        RUN_ID_INVALID = InvalidArgument;
        /// `attempt_id` is too long or not printable
        ATTEMPT_ID_INVALID = InvalidArgument;
        /// `priority` is outside 0..=100
        PRIORITY_OUT_OF_RANGE = InvalidArgument;
        /// `ttl_seconds` is outside the configured bounds
        TTL_OUT_OF_BOUNDS = InvalidArgument;
        /// `lease_id` is not a UUID
        LEASE_ID_MALFORMED = InvalidArgument;
        /// name at least one animator
        ANIMATORS_EMPTY = InvalidArgument;
        /// an animator named is not declared
        ANIMATOR_UNKNOWN = InvalidArgument;
        /// an animator is named twice
        ANIMATOR_DUPLICATE = InvalidArgument;
        /// an animator filter is not an animator name
        ANIMATOR_INVALID = InvalidArgument;
        /// more animators are named than a request may hold (256)
        ANIMATORS_TOO_MANY = InvalidArgument;
        /// give a `lease_id` or a `request_id`
        LEASE_LOOKUP_MISSING = InvalidArgument;
        /// `request_id` is empty, too long or not printable
        REQUEST_ID_INVALID = InvalidArgument;
        /// `reason` is empty, too long or not printable
        REASON_INVALID = InvalidArgument;
        /// `wait_ms` is beyond the configured maximum
        WAIT_OUT_OF_BOUNDS = InvalidArgument;
        /// `closure_token` is not a UUID
        CLOSURE_TOKEN_MALFORMED = InvalidArgument;
        /// `page.page_token` is not a token this office issued
        PAGE_TOKEN_INVALID = InvalidArgument;
        /// `after_sequence` is beyond any sequence
        SEQUENCE_OUT_OF_RANGE = InvalidArgument;
    }
}

/// The Dispatcher's refusals.
pub const REFUSALS: Refusals = Refusals::new(crate::OFFICE.domain(), reasons::OWN);

#[derive(Debug, thiserror::Error)]
pub enum DispatcherError {
    /// Bad input; nothing changed. The status reason is the first violation's.
    #[error("invalid request")]
    InvalidArgument(Violations),
    #[error("lease not found")]
    LeaseNotFound,
    /// The lease exists but belongs to another principal. Answered as [`Self::LeaseNotFound`]
    /// (no existence leak); the handler may ask whether the caller administers leases first.
    #[error("lease not found")]
    LeaseNotOwned,
    #[error("lease is released")]
    LeaseReleased,
    #[error("lease has expired")]
    LeaseExpired,
    #[error("holder does not match the lease")]
    HolderMismatch,
    #[error("admission is closed on the lease's animator")]
    AdmissionClosed,
    #[error("admission is open on an animator to drain; close it first")]
    AdmissionOpen,
    #[error("closure not found")]
    ClosureNotFound,
    /// The closure exists but another principal closed it; answered as
    /// [`Self::ClosureNotFound`].
    #[error("closure not found")]
    ClosureNotOwned,
    #[error("request id already closed a different set of animators")]
    ClosureRequestConflict,
    #[error("request id already asked for a different lease")]
    LeaseRequestConflict,
    #[error("too many event streams")]
    StreamLimit,
    /// Ward's refusal, asked again immediately before an effect or while a stream is open
    /// (`UNAUTHENTICATED`, `PERMISSION_DENIED` or `AUTHORIZATION_UNAVAILABLE`, domain
    /// `lychd.auth`): answered as Ward's decision was relayed.
    #[error("refused by ward")]
    Refused(Box<Status>),
    /// State changed under the call; the caller may retry.
    #[error("concurrent change; retry")]
    Conflict,
    /// The task doing the work ended without an answer (the office is stopping, or a bug):
    /// whether it recorded anything is unknown — never reported as done.
    #[error("interrupted before it answered; its outcome is unknown")]
    Interrupted,
    #[error("database error")]
    Database(#[from] sqlx::Error),
}

pub type Result<T, E = DispatcherError> = std::result::Result<T, E>;

impl From<Violations> for DispatcherError {
    fn from(v: Violations) -> Self {
        DispatcherError::InvalidArgument(v)
    }
}

impl DispatcherError {
    pub fn invalid(
        field: impl Into<String>,
        reason: lychd_runtime::refusal::Reason,
        description: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Self {
        let mut v = Violations::new();
        v.push(field, reason, description);
        DispatcherError::InvalidArgument(v)
    }
}

impl From<DispatcherError> for Status {
    fn from(e: DispatcherError) -> Status {
        use lychd_runtime::refusal::common;
        use reasons::*;
        match e {
            DispatcherError::InvalidArgument(v) => REFUSALS.invalid(v),
            DispatcherError::LeaseNotFound | DispatcherError::LeaseNotOwned => {
                REFUSALS.refuse(LEASE_NOT_FOUND)
            }
            DispatcherError::LeaseReleased => REFUSALS.refuse(LEASE_RELEASED),
            DispatcherError::LeaseExpired => REFUSALS.refuse(LEASE_EXPIRED),
            DispatcherError::HolderMismatch => REFUSALS.refuse(LEASE_HOLDER_MISMATCH),
            DispatcherError::AdmissionClosed => REFUSALS.refuse(ADMISSION_CLOSED),
            DispatcherError::AdmissionOpen => REFUSALS.refuse(ADMISSION_OPEN),
            DispatcherError::ClosureNotFound | DispatcherError::ClosureNotOwned => {
                REFUSALS.refuse(CLOSURE_NOT_FOUND)
            }
            DispatcherError::ClosureRequestConflict => REFUSALS.refuse(CLOSURE_REQUEST_CONFLICT),
            DispatcherError::LeaseRequestConflict => REFUSALS.refuse(LEASE_REQUEST_CONFLICT),
            DispatcherError::StreamLimit => REFUSALS.refuse(STREAM_LIMIT_REACHED),
            DispatcherError::Refused(status) => *status,
            DispatcherError::Conflict => REFUSALS.refuse(common::CONCURRENT_CHANGE),
            DispatcherError::Interrupted => {
                tracing::error!("a dispatcher task ended without an answer");
                REFUSALS.refuse(common::OUTCOME_UNKNOWN)
            }
            DispatcherError::Database(db) => REFUSALS.database(&db),
        }
    }
}

#[cfg(test)]
mod tests {
    use tonic::Code;
    use tonic_types::StatusExt;

    use super::*;

    #[test]
    fn another_principals_lease_or_closure_is_answered_as_missing() {
        for (e, reason) in [
            (DispatcherError::LeaseNotOwned, "LEASE_NOT_FOUND"),
            (DispatcherError::ClosureNotOwned, "CLOSURE_NOT_FOUND"),
        ] {
            let status = Status::from(e);
            assert_eq!(status.code(), Code::NotFound);
            assert_eq!(
                status
                    .get_error_details()
                    .error_info()
                    .map(|i| i.reason.as_str()),
                Some(reason)
            );
        }
    }

    #[test]
    fn an_interrupted_task_is_an_unknown_outcome_not_a_retryable_conflict() {
        let status = Status::from(DispatcherError::Interrupted);
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(
            status
                .get_error_details()
                .error_info()
                .map(|i| i.reason.as_str()),
            Some("OUTCOME_UNKNOWN")
        );
    }
}
