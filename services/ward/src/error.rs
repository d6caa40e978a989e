//! The office's one error type, the one place SQL errors are translated (by SQLSTATE), and the
//! one function that turns an error into a gRPC status. Messages are lowercase and never carry
//! a secret, a token or a refused value.

use tonic::{Code, Status};

use crate::domain::Violation;
use crate::domain::decision::ExchangeRefusal;
use crate::domain::secret::NoRandomness;

/// `ErrorInfo.domain` of Ward's refusals.
pub const DOMAIN: &str = "lychd.ward";

pub type Result<T, E = WardError> = std::result::Result<T, E>;

/// Records an error can be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entity {
    Principal,
    Credential,
    Session,
    Assignment,
}

impl Entity {
    const fn name(self) -> &'static str {
        match self {
            Entity::Principal => "principal",
            Entity::Credential => "credential",
            Entity::Session => "session",
            Entity::Assignment => "assignment",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WardError {
    /// Bad input, every bad field named; nothing was changed.
    #[error("invalid argument")]
    InvalidArgument(Vec<Violation>),
    #[error("{} not found", .0.name())]
    NotFound(Entity),
    #[error("{} already exists", .0.name())]
    AlreadyExists(Entity),
    /// A credential could not be exchanged.
    #[error("{}", .0.message())]
    Refused(ExchangeRefusal),
    /// The principal is revoked: nothing more may be issued or assigned to it.
    #[error("principal revoked")]
    PrincipalRevoked,
    /// The credential is revoked (it cannot be rotated).
    #[error("credential revoked")]
    CredentialRevoked,
    /// A principal exists already: bootstrap happens once.
    #[error("ward is already bootstrapped")]
    AlreadyBootstrapped,
    /// Serialization failure or deadlock: nothing was changed; the caller may retry.
    #[error("conflicting concurrent change; retry")]
    Aborted,
    /// The database cancelled the statement (statement timeout or cancellation).
    #[error("database deadline exceeded")]
    DeadlineExceeded,
    /// The database could not be reached.
    #[error("database unavailable")]
    Unavailable(#[source] sqlx::Error),
    #[error("no randomness available")]
    NoRandomness(#[from] NoRandomness),
    /// The decision log cannot take another record now (its writer is behind or stopped): no
    /// decision is answered that would not be recorded.
    #[error("decision log unavailable")]
    DecisionLogUnavailable,
    /// Anything else from the database: a bug or a broken invariant; logged, never detailed.
    #[error("internal database error")]
    Database(#[source] sqlx::Error),
}

impl WardError {
    pub fn invalid(field: &str, description: &'static str) -> Self {
        WardError::InvalidArgument(vec![Violation::new(field, description)])
    }
}

/// SQLSTATE translation, once for the office.
impl From<sqlx::Error> for WardError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Database(db) => match db.code().as_deref() {
                Some("23505") => WardError::AlreadyExists(match db.constraint() {
                    Some("principals_name_key") => Entity::Principal,
                    Some("assignments_live") => Entity::Assignment,
                    Some(c) if c.starts_with("credentials") => Entity::Credential,
                    Some(c) if c.starts_with("sessions") => Entity::Session,
                    _ => Entity::Principal,
                }),
                Some("40001" | "40P01") => WardError::Aborted,
                Some("57014") => WardError::DeadlineExceeded,
                // admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections
                Some("57P01" | "57P02" | "57P03" | "53300") => WardError::Unavailable(e),
                _ => WardError::Database(e),
            },
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => WardError::Unavailable(e),
            _ => WardError::Database(e),
        }
    }
}

/// The one mapping to a gRPC status: a stable `ErrorInfo` reason in domain `lychd.ward`, and
/// field violations for bad input.
pub fn into_status(e: WardError) -> Status {
    use lychd_runtime::status::{invalid_argument, refusal};
    match e {
        WardError::InvalidArgument(violations) => {
            let pairs: Vec<(&str, &str)> = violations
                .iter()
                .map(|v| (v.field.as_str(), v.description))
                .collect();
            invalid_argument(DOMAIN, "INVALID_ARGUMENT", &pairs)
        }
        WardError::NotFound(entity) => refusal(
            Code::NotFound,
            DOMAIN,
            match entity {
                Entity::Principal => "PRINCIPAL_NOT_FOUND",
                Entity::Credential => "CREDENTIAL_NOT_FOUND",
                Entity::Session => "SESSION_NOT_FOUND",
                Entity::Assignment => "ASSIGNMENT_NOT_FOUND",
            },
            &e.to_string(),
        ),
        WardError::AlreadyExists(entity) => refusal(
            Code::AlreadyExists,
            DOMAIN,
            match entity {
                Entity::Principal => "PRINCIPAL_EXISTS",
                Entity::Credential => "CREDENTIAL_EXISTS",
                Entity::Session => "SESSION_EXISTS",
                Entity::Assignment => "ASSIGNMENT_EXISTS",
            },
            &e.to_string(),
        ),
        WardError::Refused(r) => refusal(Code::Unauthenticated, DOMAIN, r.as_str(), r.message()),
        WardError::PrincipalRevoked => refusal(
            Code::FailedPrecondition,
            DOMAIN,
            "PRINCIPAL_REVOKED",
            "principal revoked",
        ),
        WardError::CredentialRevoked => refusal(
            Code::FailedPrecondition,
            DOMAIN,
            "CREDENTIAL_REVOKED",
            "credential revoked",
        ),
        WardError::AlreadyBootstrapped => refusal(
            Code::FailedPrecondition,
            DOMAIN,
            "ALREADY_BOOTSTRAPPED",
            "ward is already bootstrapped",
        ),
        WardError::Aborted => refusal(
            Code::Aborted,
            DOMAIN,
            "CONCURRENT_CHANGE",
            "conflicting concurrent change; retry",
        ),
        WardError::DeadlineExceeded => refusal(
            Code::DeadlineExceeded,
            DOMAIN,
            "DATABASE_DEADLINE_EXCEEDED",
            "database deadline exceeded",
        ),
        WardError::Unavailable(source) => {
            tracing::warn!(error = %source, "database unavailable");
            refusal(
                Code::Unavailable,
                DOMAIN,
                "DATABASE_UNAVAILABLE",
                "database unavailable",
            )
        }
        WardError::DecisionLogUnavailable => refusal(
            Code::Unavailable,
            DOMAIN,
            "DECISION_LOG_UNAVAILABLE",
            "decision log unavailable",
        ),
        WardError::NoRandomness(_) => {
            tracing::error!("operating system gave no randomness");
            refusal(Code::Internal, DOMAIN, "INTERNAL", "internal error")
        }
        WardError::Database(source) => {
            tracing::error!(error = %source, "database error");
            refusal(Code::Internal, DOMAIN, "INTERNAL", "internal error")
        }
    }
}

impl From<WardError> for Status {
    fn from(e: WardError) -> Self {
        into_status(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::StatusExt;

    #[test]
    fn bad_input_names_fields_without_values() {
        let status = into_status(WardError::InvalidArgument(vec![
            Violation::new("action", "is required"),
            Violation::new("page.page_token", "is not a page token of this list"),
        ]));
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
            (WardError::Aborted, Code::Aborted, "CONCURRENT_CHANGE"),
            (
                WardError::DecisionLogUnavailable,
                Code::Unavailable,
                "DECISION_LOG_UNAVAILABLE",
            ),
            (
                WardError::DeadlineExceeded,
                Code::DeadlineExceeded,
                "DATABASE_DEADLINE_EXCEEDED",
            ),
            (
                WardError::Unavailable(sqlx::Error::PoolTimedOut),
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

    #[test]
    fn pool_errors_are_unavailable() {
        assert!(matches!(
            WardError::from(sqlx::Error::PoolTimedOut),
            WardError::Unavailable(_)
        ));
        assert!(matches!(
            WardError::from(sqlx::Error::RowNotFound),
            WardError::Database(_)
        ));
    }
}
