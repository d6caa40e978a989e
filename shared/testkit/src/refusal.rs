//! Reading refusals in tests: the `ErrorInfo` reason (and domain) and the `BadRequest` field
//! violations every office's refusals carry (`docs/refusals.md`), and an assertion of code and
//! reason together.

use tonic_types::StatusExt;

/// The `ErrorInfo.reason` of a refusal (empty when it has none).
pub fn reason(status: &tonic::Status) -> String {
    status
        .get_error_details()
        .error_info()
        .map(|i| i.reason.clone())
        .unwrap_or_default()
}

/// The `ErrorInfo` `(reason, domain)` of a refusal (empty strings when it has none).
pub fn reason_and_domain(status: &tonic::Status) -> (String, String) {
    status
        .get_error_details()
        .error_info()
        .map(|i| (i.reason.clone(), i.domain.clone()))
        .unwrap_or_default()
}

/// The fields named by a refusal's `BadRequest` violations, in order.
pub fn field_violations(status: &tonic::Status) -> Vec<String> {
    status
        .get_error_details()
        .bad_request()
        .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
        .unwrap_or_default()
}

/// Assert `result` is refused with `code` and `reason`; the refusal.
#[track_caller]
pub fn assert_refused<T: std::fmt::Debug>(
    result: Result<T, tonic::Status>,
    code: tonic::Code,
    want: &str,
) -> tonic::Status {
    let s = result.expect_err(want);
    assert_eq!((s.code(), reason(&s).as_str()), (code, want), "{s:?}");
    s
}
