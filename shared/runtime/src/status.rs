//! Building refusals: a gRPC status with a stable reason (`ErrorInfo`) and, for bad input,
//! field violations. Messages are lowercase and never carry secrets or payloads.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// A refusal with a stable machine-readable `reason` in the office's `domain`.
pub fn refusal(code: Code, domain: &str, reason: &str, message: &str) -> Status {
    let details = ErrorDetails::with_error_info(reason, domain, std::collections::HashMap::new());
    Status::with_error_details(code, message, details)
}

/// `INVALID_ARGUMENT` naming each bad field.
pub fn invalid_argument(domain: &str, reason: &str, violations: &[(&str, &str)]) -> Status {
    let mut details =
        ErrorDetails::with_error_info(reason, domain, std::collections::HashMap::new());
    for (field, description) in violations {
        details.add_bad_request_violation(*field, *description);
    }
    let message = violations
        .iter()
        .map(|(f, d)| format!("{f}: {d}"))
        .collect::<Vec<_>>()
        .join("; ");
    Status::with_error_details(Code::InvalidArgument, message, details)
}
