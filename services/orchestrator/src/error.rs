//! The office's refusals, each declared once (`refusals!`): its reasons (listed in
//! `docs/refusals.md`), its one error type and their `tonic::Status`. Messages are lowercase and
//! never echo request payloads or secrets.

use lychd_runtime::refusal::DbFailure;

lychd_runtime::refusal::refusals! {
    /// The Orchestrator's one error type: every refusal it answers, each declared once below.
    #[derive(Debug, thiserror::Error)]
    pub enum OrchestratorError in crate::OFFICE.domain();
    common [InvalidArgument, invalid, Refused, Interrupted, Database];
    shared [
        CAPABILITY_KEY_MALFORMED,
        PRIORITY_OUT_OF_RANGE,
        STREAM_LIMIT_REACHED,
        STREAM_SHARE_REACHED,
        REQUEST_ID_INVALID,
        PAGE_TOKEN_INVALID,
    ];
    streams [StreamLimit, StreamShare];
    reasons {
        /// `admission_timeout_s` is negative, not finite or too large
        ADMISSION_TIMEOUT_INVALID = InvalidArgument;
        /// `transition_id` is not 32 lowercase hex digits
        TRANSITION_ID_MALFORMED = InvalidArgument;
        /// no declared capability has this key
        CAPABILITY_UNKNOWN = NotFound => CapabilityUnknown;
        /// no transition with this id is in flight (it settled, or never existed)
        TRANSITION_NOT_RUNNING = NotFound => TransitionNotRunning;
        /// the transition is owned by another caller's request (joining its cohort gives no say over it); nothing changed
        TRANSITION_NOT_OWNED = PermissionDenied => TransitionNotOwned;
        /// the Dispatcher could not be asked for fresh observations (unreachable, or it refused the office's own call)
        OBSERVATION_UNAVAILABLE = Unavailable => ObservationUnavailable;
        /// the transition was not admitted before its admission cutoff (the cohort owner's, or an already-expired request): `transition_admission_expired`
        TRANSITION_ADMISSION_EXPIRED = FailedPrecondition => AdmissionExpired
            with "transition_admission_expired: not admitted before the admission cutoff";
        /// this caller's own admission cutoff passed while it waited on another request's transition: `transition_admission_wait_expired`
        TRANSITION_ADMISSION_WAIT_EXPIRED = FailedPrecondition => AdmissionWaitExpired
            with "transition_admission_wait_expired: the admission cutoff passed while waiting on an in-flight transition";
        /// a containment record fences every transition until an operator recovers it
        TRANSITION_CONTAINED = FailedPrecondition => Contained;
        /// no containment has this id
        CONTAINMENT_NOT_FOUND = NotFound => ContainmentNotFound;
        /// a fresh observation does not prove the containment's recorded world; nothing changed
        WORLD_NOT_PROVEN = FailedPrecondition => WorldNotProven;
        /// this `request_id` already named a transition to another capability or priority; nothing changed
        REQUEST_ID_CONFLICT = AlreadyExists => RequestIdConflict;
        /// `wait_ms` is beyond the configured maximum (`max_wait_ms`)
        WAIT_OUT_OF_BOUNDS = InvalidArgument;
        /// `after_sequence` is beyond any sequence
        SEQUENCE_OUT_OF_RANGE = InvalidArgument;
        /// no transition with this id that the caller may see (none of its requests made or joined it)
        TRANSITION_NOT_FOUND = NotFound => TransitionNotFound;
        /// this process does not hold its host's lease (another orchestrator process for the host does, or this one's lapsed): it serves reads and actuates nothing; a transition it was running is contained by the holder
        HOST_LEASE_NOT_HELD = FailedPrecondition => HostLeaseNotHeld;
    }
    answers {
        /// As many transition streams are open as the office serves.
        StreamLimit => STREAM_LIMIT_REACHED
            with "the office serves as many transition streams as it may; retry later";
        /// The caller holds its whole share of the transition streams.
        StreamShare => STREAM_SHARE_REACHED
            with "the caller holds its whole share of the office's transition streams (`stream_share`): close one of its own; others may still open theirs";
    }
    custom {
        /// The database failed before anything was closed (no effect), as classified then.
        #[error("database failure")]
        DatabaseFailed(DbFailure) => |failure| REFUSALS.refuse(failure.reason());
    }
}
