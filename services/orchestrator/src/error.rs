//! The office's refusals: its own reasons and the one builder of its statuses. Listed in
//! `docs/refusals.md`. Messages are lowercase and never echo request payloads or secrets.

use lychd_runtime::refusal::{Refusals, Violations};
use tonic::Status;

/// The office's own refusal reasons.
pub mod reasons {
    lychd_runtime::refusal::reasons! {
        /// `capability_key` is not a capability key
        CAPABILITY_KEY_MALFORMED = InvalidArgument;
        /// `priority` is outside 0..=100
        PRIORITY_OUT_OF_RANGE = InvalidArgument;
        /// `admission_timeout_s` is negative, not finite or too large
        ADMISSION_TIMEOUT_INVALID = InvalidArgument;
        /// `transition_id` is not 32 lowercase hex digits
        TRANSITION_ID_MALFORMED = InvalidArgument;
        /// no declared capability has this key
        CAPABILITY_UNKNOWN = NotFound;
        /// no transition with this id is in flight (it settled, or never existed)
        TRANSITION_NOT_RUNNING = NotFound;
        /// the transition is owned by another caller's request (joining its cohort gives no say over it); nothing changed
        TRANSITION_NOT_OWNED = PermissionDenied;
        /// the Dispatcher could not be asked for fresh observations (unreachable, or it refused the office's own call)
        OBSERVATION_UNAVAILABLE = Unavailable;
        /// the transition was not admitted before its admission cutoff (the cohort owner's, or an already-expired request): `transition_admission_expired`
        TRANSITION_ADMISSION_EXPIRED = FailedPrecondition;
        /// this caller's own admission cutoff passed while it waited on another request's transition: `transition_admission_wait_expired`
        TRANSITION_ADMISSION_WAIT_EXPIRED = FailedPrecondition;
        /// a containment record fences every transition until an operator recovers it
        TRANSITION_CONTAINED = FailedPrecondition;
        /// no containment has this id
        CONTAINMENT_NOT_FOUND = NotFound;
        /// a fresh observation does not prove the containment's recorded world; nothing changed
        WORLD_NOT_PROVEN = FailedPrecondition;
        /// the office serves as many transition streams as it may; retry later
        STREAM_LIMIT_REACHED = ResourceExhausted;
    }
}

/// The office's refusals.
pub const REFUSALS: Refusals = Refusals::new(crate::OFFICE.domain(), reasons::OWN);

#[derive(Debug, thiserror::Error)]
pub enum OrchestratorError {
    /// Bad input; nothing changed. The status reason is the first violation's.
    #[error("invalid request")]
    InvalidArgument(Violations),
    #[error("capability not declared")]
    CapabilityUnknown,
    /// Fresh observations could not be obtained from the Dispatcher.
    #[error("observations unavailable")]
    ObservationUnavailable,
    #[error("transition admission expired")]
    AdmissionExpired,
    #[error("transition admission wait expired")]
    AdmissionWaitExpired,
    #[error("transitions are contained")]
    Contained,
    #[error("containment not found")]
    ContainmentNotFound,
    #[error("transition not running")]
    TransitionNotRunning,
    #[error("transition not owned")]
    TransitionNotOwned,
    #[error("world not proven")]
    WorldNotProven,
    #[error("too many transition streams")]
    StreamLimit,
    /// Ward's refusal at an effect or while a stream is open, relayed as it was.
    #[error("refused by ward")]
    Refused(Box<Status>),
    /// The database failed before anything was closed (no effect).
    #[error("database unavailable")]
    DatabaseUnavailable,
    /// The work ended without a known outcome.
    #[error("interrupted before it answered")]
    Interrupted,
    #[error("database error")]
    Database(#[from] sqlx::Error),
}

pub type Result<T, E = OrchestratorError> = std::result::Result<T, E>;

impl From<Violations> for OrchestratorError {
    fn from(v: Violations) -> Self {
        OrchestratorError::InvalidArgument(v)
    }
}

impl OrchestratorError {
    pub fn invalid(
        field: impl Into<String>,
        reason: lychd_runtime::refusal::Reason,
        description: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Self {
        let mut v = Violations::new();
        v.push(field, reason, description);
        OrchestratorError::InvalidArgument(v)
    }
}

impl From<OrchestratorError> for Status {
    fn from(e: OrchestratorError) -> Status {
        use lychd_runtime::refusal::common;
        use reasons::*;
        match e {
            OrchestratorError::InvalidArgument(v) => REFUSALS.invalid(v),
            OrchestratorError::CapabilityUnknown => REFUSALS.refuse(CAPABILITY_UNKNOWN),
            OrchestratorError::ObservationUnavailable => {
                REFUSALS.refuse(OBSERVATION_UNAVAILABLE)
            }
            OrchestratorError::AdmissionExpired => REFUSALS.refuse_with(
                TRANSITION_ADMISSION_EXPIRED,
                "transition_admission_expired: not admitted before the admission cutoff",
            ),
            OrchestratorError::AdmissionWaitExpired => REFUSALS.refuse_with(
                TRANSITION_ADMISSION_WAIT_EXPIRED,
                "transition_admission_wait_expired: the admission cutoff passed while waiting on an in-flight transition",
            ),
            OrchestratorError::Contained => REFUSALS.refuse(TRANSITION_CONTAINED),
            OrchestratorError::ContainmentNotFound => REFUSALS.refuse(CONTAINMENT_NOT_FOUND),
            OrchestratorError::TransitionNotRunning => REFUSALS.refuse(TRANSITION_NOT_RUNNING),
            OrchestratorError::TransitionNotOwned => REFUSALS.refuse(TRANSITION_NOT_OWNED),
            OrchestratorError::WorldNotProven => REFUSALS.refuse(WORLD_NOT_PROVEN),
            OrchestratorError::StreamLimit => REFUSALS.refuse(STREAM_LIMIT_REACHED),
            OrchestratorError::Refused(status) => *status,
            OrchestratorError::DatabaseUnavailable => {
                REFUSALS.refuse(common::DATABASE_UNAVAILABLE)
            }
            OrchestratorError::Interrupted => REFUSALS.refuse(common::OUTCOME_UNKNOWN),
            OrchestratorError::Database(db) => REFUSALS.database(&db),
        }
    }
}
