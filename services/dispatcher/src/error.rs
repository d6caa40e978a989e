//! The office's one error type, its mapping to `tonic::Status` (stable `ErrorInfo` reasons in
//! domain `lychd.dispatcher`), and SQLSTATE translation. Messages are lowercase and never echo
//! request payloads or secrets.

use tonic::{Code, Status};

pub const DOMAIN: &str = "lychd.dispatcher";

/// One bad field: path, stable reason code, description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub reason: &'static str,
    pub description: String,
}

impl Violation {
    pub fn new(
        field: impl Into<String>,
        reason: &'static str,
        description: impl Into<String>,
    ) -> Self {
        Violation {
            field: field.into(),
            reason,
            description: description.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DispatcherError {
    /// Bad input; nothing changed. The status reason is the first violation's.
    #[error("invalid request")]
    InvalidArgument(Vec<Violation>),
    #[error("lease not found")]
    LeaseNotFound,
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
    #[error("request id already closed a different set of animators")]
    ClosureRequestConflict,
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

impl DispatcherError {
    pub fn invalid(
        field: impl Into<String>,
        reason: &'static str,
        description: impl Into<String>,
    ) -> Self {
        DispatcherError::InvalidArgument(vec![Violation::new(field, reason, description)])
    }
}

impl From<DispatcherError> for Status {
    fn from(e: DispatcherError) -> Status {
        use lychd_runtime::status::refusal;
        let msg = e.to_string();
        match e {
            DispatcherError::InvalidArgument(v) => {
                let reason = v.first().map(|v| v.reason).unwrap_or("INVALID_ARGUMENT");
                let pairs: Vec<(&str, &str)> = v
                    .iter()
                    .map(|v| (v.field.as_str(), v.description.as_str()))
                    .collect();
                lychd_runtime::status::invalid_argument(DOMAIN, reason, &pairs)
            }
            DispatcherError::LeaseNotFound => {
                refusal(Code::NotFound, DOMAIN, "LEASE_NOT_FOUND", &msg)
            }
            DispatcherError::LeaseReleased => {
                refusal(Code::FailedPrecondition, DOMAIN, "LEASE_RELEASED", &msg)
            }
            DispatcherError::LeaseExpired => {
                refusal(Code::FailedPrecondition, DOMAIN, "LEASE_EXPIRED", &msg)
            }
            DispatcherError::HolderMismatch => refusal(
                Code::FailedPrecondition,
                DOMAIN,
                "LEASE_HOLDER_MISMATCH",
                &msg,
            ),
            DispatcherError::AdmissionClosed => {
                refusal(Code::FailedPrecondition, DOMAIN, "ADMISSION_CLOSED", &msg)
            }
            DispatcherError::AdmissionOpen => {
                refusal(Code::FailedPrecondition, DOMAIN, "ADMISSION_OPEN", &msg)
            }
            DispatcherError::ClosureNotFound => {
                refusal(Code::NotFound, DOMAIN, "CLOSURE_NOT_FOUND", &msg)
            }
            DispatcherError::ClosureRequestConflict => refusal(
                Code::AlreadyExists,
                DOMAIN,
                "CLOSURE_REQUEST_CONFLICT",
                &msg,
            ),
            DispatcherError::Conflict => refusal(Code::Aborted, DOMAIN, "CONCURRENT_CHANGE", &msg),
            DispatcherError::Interrupted => {
                tracing::error!("a dispatcher task ended without an answer");
                refusal(Code::Unavailable, DOMAIN, "OUTCOME_UNKNOWN", &msg)
            }
            DispatcherError::Database(db) => translate_sql(&db),
        }
    }
}

/// SQLSTATE → status, in one place. The database's own message is logged, never returned.
pub fn translate_sql(e: &sqlx::Error) -> Status {
    use lychd_runtime::status::refusal;
    let code = match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
        _ => None,
    };
    let (grpc, reason, message) = match code.as_deref() {
        Some("40001") | Some("40P01") => (
            Code::Aborted,
            "CONCURRENT_CHANGE",
            "concurrent change; retry",
        ),
        Some("57014") => (
            Code::DeadlineExceeded,
            "DATABASE_TIMEOUT",
            "database statement timed out",
        ),
        Some("55P03") => (Code::Aborted, "LOCK_TIMEOUT", "lock not available; retry"),
        Some("23505") => (Code::AlreadyExists, "ALREADY_EXISTS", "already exists"),
        Some(c) if c.starts_with("08") || c.starts_with("57P") || c == "53300" => (
            Code::Unavailable,
            "DATABASE_UNAVAILABLE",
            "database unavailable",
        ),
        _ => match e {
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => (
                Code::Unavailable,
                "DATABASE_UNAVAILABLE",
                "database unavailable",
            ),
            _ => (Code::Internal, "DATABASE_ERROR", "database error"),
        },
    };
    tracing::warn!(sqlstate = code.as_deref().unwrap_or(""), error = %e, "database error");
    refusal(grpc, DOMAIN, reason, message)
}

/// Whether `e` is a unique violation of `constraint`.
pub fn is_unique_violation(e: &sqlx::Error, constraint: &str) -> bool {
    match e {
        sqlx::Error::Database(d) => {
            d.code().as_deref() == Some("23505") && d.constraint() == Some(constraint)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use tonic_types::StatusExt;

    use super::*;

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
