//! The office's refusals, each declared once (`refusals!`): its reasons (listed in
//! `docs/refusals.md`), its one error type and their `tonic::Status` (stable `ErrorInfo` reasons
//! in domain `lychd.dispatcher`; the common ones belong to every office, the shared ones are
//! declared in `lychd_refusal::shared`). Messages are lowercase and never echo request payloads
//! or secrets.

lychd_runtime::refusal::refusals! {
    /// The Dispatcher's one error type: every refusal it answers, each declared once below.
    #[derive(Debug, thiserror::Error)]
    pub enum DispatcherError in crate::OFFICE.domain();
    common [InvalidArgument, invalid, Refused, Conflict, Interrupted, Database];
    shared [
        STREAM_LIMIT_REACHED,
        STREAM_SHARE_REACHED,
        CAPABILITY_KEY_MALFORMED,
        PRIORITY_OUT_OF_RANGE,
        REQUEST_ID_INVALID,
        PAGE_TOKEN_INVALID,
    ];
    streams [StreamLimit, StreamShare];
    reasons {
        /// no lease the caller may reach has this id (another principal's is not found either)
        LEASE_NOT_FOUND = NotFound => LeaseNotFound;
        /// the lease was released
        LEASE_RELEASED = FailedPrecondition => LeaseReleased;
        /// the lease has expired
        LEASE_EXPIRED = FailedPrecondition => LeaseExpired;
        /// the holder does not match the lease
        LEASE_HOLDER_MISMATCH = FailedPrecondition => HolderMismatch;
        /// admission is closed on the lease's animator
        ADMISSION_CLOSED = FailedPrecondition => AdmissionClosed;
        /// admission is open on an animator to drain; close it first
        ADMISSION_OPEN = FailedPrecondition => AdmissionOpen;
        /// no closure the caller may reopen has this token (another principal's is not found either)
        CLOSURE_NOT_FOUND = NotFound => ClosureNotFound;
        /// the request id already closed a different set of animators
        CLOSURE_REQUEST_CONFLICT = AlreadyExists => ClosureRequestConflict;
        /// the request id already asked for a different lease
        LEASE_REQUEST_CONFLICT = AlreadyExists => LeaseRequestConflict;
        /// `demand` is required
        DEMAND_MISSING = InvalidArgument;
        /// a demand names a family or a capability key
        DEMAND_UNDERSPECIFIED = InvalidArgument;
        /// `demand.family` is not a known family value
        FAMILY_UNKNOWN = InvalidArgument;
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
        /// `reason` is empty, too long or not printable
        REASON_INVALID = InvalidArgument;
        /// `wait_ms` is beyond the configured maximum
        WAIT_OUT_OF_BOUNDS = InvalidArgument;
        /// `closure_token` is not a UUID
        CLOSURE_TOKEN_MALFORMED = InvalidArgument;
        /// `after_sequence` is beyond any sequence
        SEQUENCE_OUT_OF_RANGE = InvalidArgument;
    }
    answers {
        /// The lease exists but belongs to another principal. Answered as [`Self::LeaseNotFound`]
        /// (no existence leak); the handler may ask whether the caller administers leases first.
        LeaseNotOwned => LEASE_NOT_FOUND;
        /// The closure exists but another principal closed it; answered as
        /// [`Self::ClosureNotFound`].
        ClosureNotOwned => CLOSURE_NOT_FOUND;
        /// As many event streams are open as the office serves.
        StreamLimit => STREAM_LIMIT_REACHED
            with "the office serves as many event streams as it may; retry later";
        /// The caller holds its whole share of the event streams.
        StreamShare => STREAM_SHARE_REACHED
            with "the caller holds its whole share of the office's event streams (`stream_share`): close one of its own; others may still open theirs";
    }
}

#[cfg(test)]
mod tests {
    use tonic::{Code, Status};
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
