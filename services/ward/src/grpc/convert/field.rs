//! The reason of each field Ward checks: a bad field is recorded with its own reason in the
//! request's violations; the refusal's `ErrorInfo.reason` is its first violation's (as in every
//! office).
//!
//! Invariant: one table, by field name; every field a decoder names has its own reason.

use std::borrow::Cow;

use lychd_runtime::refusal::{Reason, Violations};

use crate::error::WardError;

/// The reason of a bad field, by the field's name (its first path segment): one per field Ward
/// checks. A name without its own reason is the generic `INVALID_ARGUMENT`.
pub fn reason(field: &str) -> Reason {
    use crate::error::reasons::*;
    let top = field.split(['.', '[']).next().unwrap_or(field);
    match top {
        "token" => TOKEN_MISSING,
        "action" => ACTION_INVALID,
        "object" => OBJECT_INVALID,
        "audience" | "audiences" => AUDIENCE_INVALID,
        "questions" => QUESTIONS_INVALID,
        "purpose" => PURPOSE_INVALID,
        "expected_policy_generation" => POLICY_GENERATION_INVALID,
        "kind" => KIND_INVALID,
        "name" => PRINCIPAL_NAME_INVALID,
        "display_name" => DISPLAY_NAME_INVALID,
        "ttl_seconds" => TTL_INVALID,
        "expires_at" => EXPIRES_AT_INVALID,
        "request_id" => REQUEST_ID_INVALID,
        "target" | "target_revision" => TARGET_INVALID,
        "page" => PAGE_TOKEN_INVALID,
        "principal_id" => PRINCIPAL_ID_MALFORMED,
        "credential_id" => CREDENTIAL_ID_MALFORMED,
        "session_id" => SESSION_ID_MALFORMED,
        "assignment_id" => ASSIGNMENT_ID_MALFORMED,
        "consent_id" => CONSENT_ID_MALFORMED,
        "proposal_id" | "predecessor_id" | "successor_id" | "revises" | "group_id" => {
            PROPOSAL_ID_MALFORMED
        }
        "run_id" => RUN_ID_INVALID,
        "effect_owner" => EFFECT_OWNER_INVALID,
        "effect_id" => EFFECT_ID_INVALID,
        "effect_revision" => EFFECT_REVISION_INVALID,
        "tool_name" => TOOL_NAME_INVALID,
        "deferred_call_id" => DEFERRED_CALL_ID_INVALID,
        "arguments_json" => ARGUMENTS_INVALID,
        "effect_class" => EFFECT_CLASS_INVALID,
        "binding" => BINDING_INVALID,
        "verdict" => VERDICT_INVALID,
        "review_digest" => REVIEW_DIGEST_MALFORMED,
        "binding_digest" => BINDING_DIGEST_MALFORMED,
        "state" => CONSENT_STATE_INVALID,
        "slug" => SLUG_INVALID,
        "after_change" => AFTER_CHANGE_INVALID,
        "occurrence" => OCCURRENCE_INVALID,
        "text" => TEXT_INVALID,
        "attempt_id" => ATTEMPT_ID_INVALID,
        "receipt_id" => RECEIPT_ID_INVALID,
        "contract" => CONTRACT_INVALID,
        "assurance" => ASSURANCE_INVALID,
        "evidence" => EVIDENCE_INVALID,
        "grantee_id" => GRANTEE_INVALID,
        "scope" => SCOPE_INVALID,
        "not_after" => NOT_AFTER_INVALID,
        "records" => RECORDS_INVALID,
        _ => lychd_runtime::refusal::common::INVALID_ARGUMENT,
    }
}

/// Recording a bad field with its own reason ([`reason`]).
pub trait Field {
    /// Keep `result`'s value, or record its error against `field` with the field's reason.
    fn field<T, E: Into<Cow<'static, str>>>(
        &mut self,
        field: &str,
        result: Result<T, E>,
    ) -> Option<T>;
}

impl Field for Violations {
    fn field<T, E: Into<Cow<'static, str>>>(
        &mut self,
        field: &str,
        result: Result<T, E>,
    ) -> Option<T> {
        self.check(field, reason(field), result)
    }
}

/// Bad input naming one field, with the field's reason.
pub fn invalid(field: &str, description: &'static str) -> WardError {
    let mut v = Violations::new();
    v.field::<(), _>(field, Err(description));
    WardError::InvalidArgument(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_ward_checks_has_its_own_reason_and_the_status_answers_the_first() {
        use crate::error::REFUSALS;
        use lychd_runtime::refusal::common::INVALID_ARGUMENT;
        for field in [
            "token",
            "action",
            "object",
            "audience",
            "audiences",
            "purpose",
            "expected_policy_generation",
            "kind",
            "name",
            "display_name",
            "ttl_seconds",
            "expires_at",
            "request_id",
            "target",
            "page.page_token",
            "principal_id",
            "credential_id",
            "session_id",
            "assignment_id",
            "consent_id",
            "proposal_id",
            "predecessor_id",
            "successor_id",
            "revises",
            "group_id",
            "run_id",
            "effect_owner",
            "effect_id",
            "effect_revision",
            "tool_name",
            "deferred_call_id",
            "arguments_json",
            "effect_class",
            "binding.expiry",
            "verdict",
            "review_digest",
            "binding_digest",
            "state",
            "slug",
            "after_change",
            "occurrence",
            "text",
            "attempt_id",
            "receipt_id",
            "contract",
            "assurance",
            "evidence",
            "grantee_id",
            "scope[3]",
            "not_after",
            "records[0]",
        ] {
            let r = reason(field);
            assert_ne!(r, INVALID_ARGUMENT, "{field}");
            assert!(REFUSALS.knows(&r), "{field}: {}", r.name);
        }
        assert_eq!(reason("consent_id").name, "CONSENT_ID_MALFORMED");
        assert_eq!(reason("page.page_token").name, "PAGE_TOKEN_INVALID");
        let WardError::InvalidArgument(v) = invalid("review_digest", "is bad") else {
            panic!("bad input");
        };
        assert_eq!(
            v.iter().next().map(|v| v.reason.name),
            Some("REVIEW_DIGEST_MALFORMED")
        );
        let status = crate::error::into_status(WardError::InvalidArgument(v));
        assert_eq!(
            tonic_types::StatusExt::get_error_details(&status)
                .error_info()
                .map(|i| i.reason.clone()),
            Some("REVIEW_DIGEST_MALFORMED".to_owned())
        );
    }
}
