//! One proposed call: its identifiers, optional bound fields and arguments, checked.
//!
//! Invariant: pure; a refusal is a fixed description that never echoes the refused value.

use lychd_helmloop::{C14nError, ParseOptions, Value};

use lychd_auth::grammar::Object;

use super::settle::EffectClass;

/// Largest `arguments_json` accepted.
pub const ARGUMENTS_MAX_BYTES: usize = 64 * 1024;
/// Longest identifier (run, effect owner, effect id, tool, deferred call id).
pub const IDENT_MAX: usize = 128;
/// Longest free-text binding field (rationale).
pub const TEXT_MAX: usize = 2048;

/// The optional bound fields (loop-contract v1 `approval.binding_fields`); `None`/empty = not
/// bound. `expiry` is Unix seconds (an absolute instant).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    pub workflow_version: Option<String>,
    pub action_hash: Option<String>,
    pub artifact_hash: Option<String>,
    pub destination_hash: Option<String>,
    pub visibility: Option<String>,
    pub scope: Option<String>,
    pub actor: Option<String>,
    pub expiry: Option<i64>,
    pub nonce: Option<String>,
    pub rationale: Option<String>,
}

/// One proposed call, decoded and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub run_id: String,
    pub effect_owner: String,
    pub effect_id: String,
    pub effect_revision: i64,
    pub tool_name: String,
    pub deferred_call_id: String,
    pub class: EffectClass,
    pub binding: Binding,
    /// The arguments as parsed (never stored).
    pub arguments: Value,
}

/// Whether `s` is an identifier: 1..=128 characters of `[A-Za-z0-9._:-]`, and an object id of
/// Ward's grammar (so `effect:<owner>` and `run:<id>` can be authorized and assigned).
pub fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= IDENT_MAX
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
        && Object::parse(&format!("effect:{s}")).is_ok()
}

/// Parse `arguments_json`: one JSON object under HL-C14N-1, at most [`ARGUMENTS_MAX_BYTES`].
pub fn parse_arguments(bytes: &[u8]) -> Result<Value, ArgumentsError> {
    let value = lychd_helmloop::parse_with(
        bytes,
        ParseOptions {
            max_bytes: ARGUMENTS_MAX_BYTES,
        },
    )
    .map_err(ArgumentsError::C14n)?;
    match value {
        Value::Object(_) => Ok(value),
        _ => Err(ArgumentsError::NotAnObject),
    }
}

/// Why `arguments_json` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentsError {
    /// Not canonicalizable JSON (the HL-C14N-1 code says which rule).
    C14n(C14nError),
    NotAnObject,
}

impl ArgumentsError {
    /// What an operator reads (no argument text).
    pub fn describe(&self) -> String {
        match self {
            ArgumentsError::C14n(e) => format!("not HL-C14N-1 JSON: {}", e.code().as_str()),
            ArgumentsError::NotAnObject => "must be one JSON object".to_owned(),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_one_canonicalizable_object_under_the_cap() {
        assert_eq!(
            parse_arguments(b"[1]"),
            Err(ArgumentsError::NotAnObject),
            "an array is not an object"
        );
        let dup = parse_arguments(br#"{"a":1,"a":2}"#).expect_err("duplicate member");
        assert!(
            dup.describe().starts_with("not HL-C14N-1 JSON: C14N_"),
            "{}",
            dup.describe()
        );
        let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(ARGUMENTS_MAX_BYTES));
        assert!(matches!(
            parse_arguments(big.as_bytes()),
            Err(ArgumentsError::C14n(_))
        ));
    }
}
