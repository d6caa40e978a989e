//! The office's refusals: its own reasons and the one builder of its statuses. Listed in
//! `docs/refusals.md`. Messages are lowercase and never echo request payloads or secrets.

use lychd_runtime::refusal::{Refusals, Violations};
use tonic::Status;

/// The office's own refusal reasons.
pub mod reasons {
    lychd_runtime::refusal::reasons! {
        /// `capability_key` is not a capability key
        CAPABILITY_KEY_MALFORMED = InvalidArgument;
        /// no declared capability has this key
        CAPABILITY_UNKNOWN = NotFound;
        /// the Dispatcher could not be asked for fresh observations (unreachable, or it refused the office's own call)
        OBSERVATION_UNAVAILABLE = Unavailable;
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
}

pub type Result<T, E = OrchestratorError> = std::result::Result<T, E>;

impl From<Violations> for OrchestratorError {
    fn from(v: Violations) -> Self {
        OrchestratorError::InvalidArgument(v)
    }
}

impl From<OrchestratorError> for Status {
    fn from(e: OrchestratorError) -> Status {
        use reasons::*;
        match e {
            OrchestratorError::InvalidArgument(v) => REFUSALS.invalid(v),
            OrchestratorError::CapabilityUnknown => REFUSALS.refuse(CAPABILITY_UNKNOWN),
            OrchestratorError::ObservationUnavailable => REFUSALS.refuse(OBSERVATION_UNAVAILABLE),
        }
    }
}
