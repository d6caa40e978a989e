//! Document validation behind `helmloop validate` (spec §6 steps 1–2).
//!
//! A document is one record (an object), a bundle (an array of records) or an
//! evaluation input (an object with `records`). Every record is checked in
//! order: protocol version (a well-formed record with another `schemaVersion`
//! string is HOLD `PROTOCOL_VERSION_UNSUPPORTED` and is not schema-checked),
//! its entry schema, then its record digest. The report lists every issue,
//! sorted by UTF-16 code units of path, code, keyword and message.

use crate::ParseOptions;
use crate::digest::{Digest, record_digest};
use crate::error::C14nError;
use crate::schema::{self, RecordType, SchemaIssue, Shape};
use crate::utf16::cmp_utf16;
use crate::value::{Map, Value};
use crate::{PROTOCOL_VERSION, canon};

/// Schema violation of a record.
pub const RECORD_SCHEMA_INVALID: &str = "RECORD_SCHEMA_INVALID";
/// A record's `digest` differs from its recomputed record digest.
pub const RECORD_DIGEST_MISMATCH: &str = "RECORD_DIGEST_MISMATCH";
/// A record or input with a version other than `0.1`.
pub const PROTOCOL_VERSION_UNSUPPORTED: &str = "PROTOCOL_VERSION_UNSUPPORTED";
/// A required evaluation-context control is missing.
pub const CONTEXT_CONTROL_MISSING: &str = "CONTEXT_CONTROL_MISSING";
/// An evaluation-context control is malformed or unknown.
pub const CONTEXT_CONTROL_INVALID: &str = "CONTEXT_CONTROL_INVALID";
/// An evaluation input's own shape (outside context and records) is invalid.
pub const INPUT_SCHEMA_INVALID: &str = "INPUT_SCHEMA_INVALID";

/// Which decision channel an issue belongs to (resolutions §F).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// Terminal: the input is invalid.
    Reject,
    /// Unresolved: the input cannot be evaluated as v0.1 yet.
    Hold,
}

impl Channel {
    /// `reject` or `hold`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Channel::Reject => "reject",
            Channel::Hold => "hold",
        }
    }
}

/// What the document was taken to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocumentKind {
    /// A single record (any top-level value that is not an array or input).
    Record,
    /// An array of records.
    Bundle,
    /// `{protocolVersion, context, records}`.
    EvaluationInput,
    /// The document did not parse.
    Unparsed,
}

impl DocumentKind {
    /// `record`, `bundle`, `evaluation-input` or `unparsed`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DocumentKind::Record => "record",
            DocumentKind::Bundle => "bundle",
            DocumentKind::EvaluationInput => "evaluation-input",
            DocumentKind::Unparsed => "unparsed",
        }
    }
}

/// One problem found in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Stable code (`C14N_*`, `RECORD_SCHEMA_INVALID`, `RECORD_DIGEST_MISMATCH`...).
    pub code: String,
    /// Reject or hold.
    pub channel: Channel,
    /// JSON Pointer into the document (`""` for the whole document).
    pub path: String,
    /// Failing schema keyword, for schema issues.
    pub keyword: Option<String>,
    /// Byte offset, for parse errors.
    pub offset: Option<usize>,
    /// Fixed description; never echoes document content.
    pub message: String,
}

/// The result of validating one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// What the document was taken to be.
    pub kind: DocumentKind,
    /// Number of records checked.
    pub records: usize,
    /// Every issue, sorted (at most the limit given, when one is).
    pub issues: Vec<Issue>,
    /// Issues were left out because of a limit
    /// ([`validate_document_limited`]).
    pub truncated: bool,
}

impl Report {
    /// Whether the document has no issue.
    pub fn is_valid(&self) -> bool {
        self.issues.is_empty()
    }

    /// Code of the first issue (in report order), if any.
    pub fn first_code(&self) -> Option<&str> {
        self.issues.first().map(|i| i.code.as_str())
    }

    /// The report as a value: `{issues, kind, protocolVersion, records, valid}`.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind", self.kind.as_str().into());
        m.insert("protocolVersion", PROTOCOL_VERSION.into());
        m.insert("records", Value::Int(saturating_int(self.records)));
        m.insert("valid", self.is_valid().into());
        let issues = self
            .issues
            .iter()
            .map(|i| {
                let mut o = Map::new();
                o.insert("channel", i.channel.as_str().into());
                o.insert("code", i.code.as_str().into());
                o.insert("path", i.path.as_str().into());
                o.insert("message", i.message.as_str().into());
                if let Some(k) = &i.keyword {
                    o.insert("keyword", k.as_str().into());
                }
                if let Some(off) = i.offset {
                    o.insert("offset", Value::Int(saturating_int(off)));
                }
                Value::Object(o)
            })
            .collect();
        m.insert("issues", Value::Array(issues));
        if self.truncated {
            m.insert("truncated", true.into());
        }
        Value::Object(m)
    }

    /// The report as canonical JSON text.
    pub fn to_json(&self) -> String {
        // Paths and names come from a strictly parsed document (NFC) and counts
        // are bounded by the input size, so the report is always canonical; the
        // fallback only guards against a future change breaking that.
        canon::to_canonical_string(&self.to_value())
            .unwrap_or_else(|e| format!("{{\"error\":\"{}\"}}", e.code()))
    }
}

fn saturating_int(n: usize) -> i64 {
    i64::try_from(n)
        .unwrap_or(crate::MAX_SAFE_INTEGER)
        .min(crate::MAX_SAFE_INTEGER)
}

/// Validates a document with the default parse options.
pub fn validate_document(input: &[u8]) -> Report {
    validate_document_with(input, ParseOptions::default())
}

/// Validates a document: strict parse, then every record (version, schema,
/// digest); for an evaluation input also its own shape and context.
pub fn validate_document_with(input: &[u8], options: ParseOptions) -> Report {
    validate_document_limited(input, options, usize::MAX)
}

/// [`validate_document_with`] listing at most `max_issues` issues: the
/// interpreter's errors are taken lazily and records after the budget is
/// spent are not examined, so a hostile document with a million issues
/// costs what `max_issues` allows (resolutions §H.7). `truncated` says that
/// issues were left out; which ones are listed is deterministic (document
/// and schema order, then sorted).
pub fn validate_document_limited(input: &[u8], options: ParseOptions, max_issues: usize) -> Report {
    // The nesting limit is counted inside each record (resolutions §H.8).
    let doc = match crate::parse_records(input, options, crate::RecordRoots::InputRecords) {
        Ok(v) => v,
        Err(e) => {
            return Report {
                kind: DocumentKind::Unparsed,
                records: 0,
                issues: vec![parse_issue(e)],
                truncated: false,
            };
        }
    };
    let mut issues = Vec::new();
    let mut truncated = false;
    let mut more = |issues: &mut Vec<Issue>, (found, cut): (Vec<Issue>, bool)| {
        let room = max_issues.saturating_sub(issues.len());
        truncated |= cut || found.len() > room;
        issues.extend(found.into_iter().take(room));
    };
    let room = |issues: &Vec<Issue>| max_issues.saturating_sub(issues.len());
    let (kind, records) = match &doc {
        Value::Array(items) => {
            for (i, r) in items.iter().enumerate() {
                let budget = room(&issues);
                more(
                    &mut issues,
                    validate_record_limited(r, &format!("/{i}"), budget),
                );
            }
            (DocumentKind::Bundle, items.len())
        }
        Value::Object(m) if m.contains_key("records") && !m.contains_key("recordType") => {
            let budget = room(&issues);
            more(&mut issues, validate_input_shape(&doc, budget));
            let mut n = 0;
            if let Some(Value::Array(items)) = m.get("records") {
                for (i, r) in items.iter().enumerate() {
                    let budget = room(&issues);
                    more(
                        &mut issues,
                        validate_record_limited(r, &format!("/records/{i}"), budget),
                    );
                }
                n = items.len();
            }
            (DocumentKind::EvaluationInput, n)
        }
        _ => {
            let budget = room(&issues);
            more(&mut issues, validate_record_limited(&doc, "", budget));
            (DocumentKind::Record, 1)
        }
    };
    sort_issues(&mut issues);
    Report {
        kind,
        records,
        issues,
        truncated,
    }
}

fn parse_issue(e: C14nError) -> Issue {
    Issue {
        code: e.code().as_str().to_owned(),
        channel: Channel::Reject,
        path: String::new(),
        keyword: None,
        offset: e.offset(),
        message: e.code().rule().to_owned(),
    }
}

/// Sorts issues by UTF-16 code units of path, code, keyword, message.
pub fn sort_issues(issues: &mut [Issue]) {
    issues.sort_by(|a, b| {
        cmp_utf16(&a.path, &b.path)
            .then_with(|| cmp_utf16(&a.code, &b.code))
            .then_with(|| {
                cmp_utf16(
                    a.keyword.as_deref().unwrap_or(""),
                    b.keyword.as_deref().unwrap_or(""),
                )
            })
            .then_with(|| cmp_utf16(&a.message, &b.message))
            .then_with(|| a.offset.cmp(&b.offset))
    });
}

fn schema_issue(code: &str, channel: Channel, base: &str, s: SchemaIssue) -> Issue {
    Issue {
        code: code.to_owned(),
        channel,
        path: format!("{base}{}", s.instance_path),
        keyword: Some(s.keyword),
        offset: None,
        message: s.message,
    }
}

fn version_issue(path: String) -> Issue {
    Issue {
        code: PROTOCOL_VERSION_UNSUPPORTED.to_owned(),
        channel: Channel::Hold,
        path,
        keyword: None,
        offset: None,
        message: "version is not 0.1; not evaluated as v0.1".to_owned(),
    }
}

fn validate_input_shape(doc: &Value, limit: usize) -> (Vec<Issue>, bool) {
    if let Some(Value::String(v)) = doc.get("protocolVersion")
        && v != PROTOCOL_VERSION
    {
        return (vec![version_issue("/protocolVersion".to_owned())], false);
    }
    let (found, cut) = schema::validate_limited(Shape::EvaluationInput, &doc.to_serde(), limit);
    let issues = found
        .into_iter()
        .map(|s| {
            let (code, channel) = if s.instance_path.starts_with("/context") {
                if s.keyword == "required" && s.instance_path.matches('/').count() == 2 {
                    (CONTEXT_CONTROL_MISSING, Channel::Hold)
                } else {
                    (CONTEXT_CONTROL_INVALID, Channel::Reject)
                }
            } else {
                (INPUT_SCHEMA_INVALID, Channel::Reject)
            };
            schema_issue(code, channel, "", s)
        })
        .collect();
    (issues, cut)
}

/// Validates one record found at JSON Pointer `base`: version, schema, digest.
pub fn validate_record(record: &Value, base: &str) -> Vec<Issue> {
    validate_record_limited(record, base, usize::MAX).0
}

/// [`validate_record`] listing at most `limit` schema issues (the digest
/// issue is always listed); the flag says whether more were left out.
pub fn validate_record_limited(record: &Value, base: &str, limit: usize) -> (Vec<Issue>, bool) {
    if let Some(Value::String(v)) = record.get("schemaVersion")
        && v != PROTOCOL_VERSION
    {
        return (vec![version_issue(format!("{base}/schemaVersion"))], false);
    }
    let shape = match record.get("recordType").and_then(Value::as_str) {
        Some(name) => RecordType::from_name(name).map_or(Shape::AnyRecord, Shape::Record),
        None => Shape::AnyRecord,
    };
    let (found, cut) = schema::validate_limited(shape, &record.to_serde(), limit);
    let mut issues: Vec<Issue> = found
        .into_iter()
        .map(|s| schema_issue(RECORD_SCHEMA_INVALID, Channel::Reject, base, s))
        .collect();
    if let Some(Value::String(declared)) = record.get("digest") {
        let matches = match record_digest(record) {
            Ok(d) => Digest::parse(declared) == Some(d),
            Err(_) => false,
        };
        if !matches {
            issues.push(Issue {
                code: RECORD_DIGEST_MISMATCH.to_owned(),
                channel: Channel::Reject,
                path: format!("{base}/digest"),
                keyword: None,
                offset: None,
                message: "declared digest differs from the recomputed record digest".to_owned(),
            });
        }
    }
    (issues, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundle of one record with thousands of malformed items and unknown
    /// members: the limited report lists exactly the budget and says so;
    /// the unlimited one lists everything and has no `truncated` member.
    #[test]
    fn a_limited_report_stops_at_the_budget() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/helmloop/records/evidence-record-v1.json"
        );
        let Value::Object(mut r) =
            crate::parse(&std::fs::read(path).expect("fixture")).expect("parses")
        else {
            panic!("object")
        };
        r.insert("limitations", Value::Array(vec![Value::Int(1); 3_000]));
        for i in 0..2_000 {
            r.insert(format!("extra{i}"), Value::Null);
        }
        let doc =
            crate::to_canonical_vec(&Value::Array(vec![Value::Object(r)])).expect("canonical");
        let all = validate_document(&doc);
        assert!(!all.truncated);
        assert!(all.issues.len() > 5_000, "{}", all.issues.len());
        assert!(all.to_value().get("truncated").is_none());
        for limit in [0, 1, 7, 2_500] {
            let some = validate_document_limited(&doc, ParseOptions::default(), limit);
            assert_eq!(some.issues.len(), limit);
            assert!(some.truncated);
            assert_eq!(some.to_value().get("truncated"), Some(&Value::Bool(true)));
        }
        let exact = validate_document_limited(&doc, ParseOptions::default(), all.issues.len());
        assert_eq!(exact.issues, all.issues);
        assert!(!exact.truncated);
    }
}
