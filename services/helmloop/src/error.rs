//! The office's refusals, each declared once (`refusals!`): its reasons (listed in
//! `docs/refusals.md`), its one error type and their `tonic::Status` (stable `ErrorInfo` reasons
//! in domain `lychd.helmloop`). Messages are lowercase and never echo a record, a context or any
//! other payload.

use lychd_helmloop::ErrorCode;
use lychd_runtime::refusal::Reason;

lychd_runtime::refusal::refusals! {
    /// The HelmLoop office's one error type: every refusal it answers, each declared once below.
    #[derive(Debug, thiserror::Error)]
    pub enum HelmLoopError in crate::OFFICE.domain();
    common [InvalidArgument, invalid, Refused, Interrupted, Internal, Database];
    shared [PAGE_TOKEN_INVALID];
    reasons {
        /// the JSON is longer than the office's cap for that field
        C14N_TOO_LARGE = InvalidArgument;
        /// the JSON starts with a byte-order mark
        C14N_BOM = InvalidArgument;
        /// the JSON is not valid UTF-8
        C14N_INVALID_UTF8 = InvalidArgument;
        /// the JSON breaks the grammar (HL-C14N-1)
        C14N_SYNTAX = InvalidArgument;
        /// something other than whitespace follows the JSON value
        C14N_TRAILING_INPUT = InvalidArgument;
        /// a string holds an escape JSON does not define
        C14N_INVALID_ESCAPE = InvalidArgument;
        /// a string holds a raw control character
        C14N_CONTROL_CHARACTER = InvalidArgument;
        /// a `\u` escape is a lone UTF-16 surrogate
        C14N_LONE_SURROGATE = InvalidArgument;
        /// a string or member name is not in Unicode NFC
        C14N_NOT_NFC = InvalidArgument;
        /// an object names a member twice
        C14N_DUPLICATE_KEY = InvalidArgument;
        /// a number has a fraction or an exponent
        C14N_NON_INTEGER_NUMBER = InvalidArgument;
        /// a number is `-0`
        C14N_NEGATIVE_ZERO = InvalidArgument;
        /// an integer is beyond ±9007199254740991
        C14N_UNSAFE_INTEGER = InvalidArgument;
        /// arrays and objects nest deeper than 128
        C14N_DEPTH_EXCEEDED = InvalidArgument;
        /// a record does not satisfy its entry schema (HelmLoop v0.1 bundle)
        RECORD_SCHEMA_INVALID = InvalidArgument;
        /// a record's `digest` differs from its recomputed record digest
        RECORD_DIGEST_MISMATCH = InvalidArgument;
        /// a record's `schemaVersion` is not `0.1`; the store keeps v0.1 records only
        RECORD_VERSION_UNSUPPORTED = InvalidArgument;
        /// name at least one record
        RECORDS_EMPTY = InvalidArgument;
        /// more records than a request may carry
        RECORDS_TOO_MANY = InvalidArgument;
        /// the records together are longer than a request may carry
        RECORDS_TOO_LARGE = InvalidArgument;
        /// `record_type` is not one of the eight record types
        RECORD_TYPE_UNKNOWN = InvalidArgument;
        /// an identifier (`id`, `subject_id`, `revision_id`) is not a HelmLoop identifier
        IDENTIFIER_INVALID = InvalidArgument;
        /// the context is not an object with `subject.id` and `revision.id` identifiers
        CONTEXT_UNBOUND = InvalidArgument;
        /// `input_digest` is not `sha256:<64 hex>`
        DIGEST_MALFORMED = InvalidArgument;
        /// `adapter` names no conformance suite of this office (`core`, `standalone`, `better-workflows`)
        ADAPTER_UNKNOWN = InvalidArgument;
        /// no record is stored under this record type and id
        RECORD_NOT_FOUND = NotFound => RecordNotFound;
        /// no evaluation is stored under this input digest
        EVALUATION_NOT_FOUND = NotFound => EvaluationNotFound;
        /// more records, or more bytes of records, are stored for this subject and revision than one reduction takes
        STORED_SET_TOO_LARGE = ResourceExhausted => StoredSetTooLarge;
        /// every reduction worker is busy and the queue is full; retry later
        REDUCER_BUSY = ResourceExhausted => ReducerBusy;
    }
    answers {
        /// First bodies kept appearing under an append's identities while it was authorized.
        FirstBodiesChanged => CONCURRENT_CHANGE;
    }
}

/// The reason of a strict-parse failure: the parser's own code.
pub fn c14n_reason(code: ErrorCode) -> Reason {
    use reasons::*;
    match code {
        ErrorCode::TooLarge => C14N_TOO_LARGE,
        ErrorCode::Bom => C14N_BOM,
        ErrorCode::InvalidUtf8 => C14N_INVALID_UTF8,
        ErrorCode::Syntax => C14N_SYNTAX,
        ErrorCode::TrailingInput => C14N_TRAILING_INPUT,
        ErrorCode::InvalidEscape => C14N_INVALID_ESCAPE,
        ErrorCode::ControlCharacter => C14N_CONTROL_CHARACTER,
        ErrorCode::LoneSurrogate => C14N_LONE_SURROGATE,
        ErrorCode::NotNfc => C14N_NOT_NFC,
        ErrorCode::DuplicateKey => C14N_DUPLICATE_KEY,
        ErrorCode::NonIntegerNumber => C14N_NON_INTEGER_NUMBER,
        ErrorCode::NegativeZero => C14N_NEGATIVE_ZERO,
        ErrorCode::UnsafeInteger => C14N_UNSAFE_INTEGER,
        ErrorCode::DepthExceeded => C14N_DEPTH_EXCEEDED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parser_code_is_a_reason_of_the_same_name() {
        for code in ErrorCode::ALL {
            assert_eq!(c14n_reason(code).name, code.as_str());
            assert!(REFUSALS.knows(&c14n_reason(code)));
        }
    }
}
