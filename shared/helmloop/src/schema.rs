//! The executable HelmLoop v0.1 schema bundle (resolutions §B–§D).
//!
//! The bundle, the eight entry schemas and the portability receipt schema are
//! compiled into the crate and validated with the `jsonschema` crate (JSON
//! Schema 2020-12, formats asserted). No schema is ever fetched: the bundle is
//! registered under its `$id`, so every `$ref` resolves offline.
//!
//! The reducer's yes/no check ([`is_valid_value`]) runs a structural validator
//! compiled once from the same schema text (`crate::structural`) on the value
//! itself; `jsonschema` remains the reference and reports the issue lists.

use std::fmt;
use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, Resource, Validator};
use serde_json::Value as Json;

use crate::structural::Program;
use crate::value::Value;

/// `$id` of the bundle.
pub const BUNDLE_ID: &str = "https://lychd.invalid/schemas/helmloop-v0.1.schema.json";
/// Text of `schemas/helmloop-v0.1.schema.json`.
pub const BUNDLE_JSON: &str = include_str!("../../../schemas/helmloop-v0.1.schema.json");
/// Text of `schemas/portability-receipt.schema.json`.
pub const PORTABILITY_RECEIPT_JSON: &str =
    include_str!("../../../schemas/portability-receipt.schema.json");

/// The eight normative record types (spec §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordType {
    /// `OutcomeContractV1`
    OutcomeContract,
    /// `AuthorityGrantV1`
    AuthorityGrant,
    /// `ExecutionReceiptV1`
    ExecutionReceipt,
    /// `EvidenceRecordV1`
    EvidenceRecord,
    /// `AssuranceDecisionV1`
    AssuranceDecision,
    /// `PromotionDecisionV1`
    PromotionDecision,
    /// `ReconciliationRecordV1`
    ReconciliationRecord,
    /// `LearningSignalV1`
    LearningSignal,
}

impl RecordType {
    /// Every record type, in spec order.
    pub const ALL: [RecordType; 8] = [
        RecordType::OutcomeContract,
        RecordType::AuthorityGrant,
        RecordType::ExecutionReceipt,
        RecordType::EvidenceRecord,
        RecordType::AssuranceDecision,
        RecordType::PromotionDecision,
        RecordType::ReconciliationRecord,
        RecordType::LearningSignal,
    ];

    /// The `recordType` string, e.g. `OutcomeContractV1`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RecordType::OutcomeContract => "OutcomeContractV1",
            RecordType::AuthorityGrant => "AuthorityGrantV1",
            RecordType::ExecutionReceipt => "ExecutionReceiptV1",
            RecordType::EvidenceRecord => "EvidenceRecordV1",
            RecordType::AssuranceDecision => "AssuranceDecisionV1",
            RecordType::PromotionDecision => "PromotionDecisionV1",
            RecordType::ReconciliationRecord => "ReconciliationRecordV1",
            RecordType::LearningSignal => "LearningSignalV1",
        }
    }

    /// The record type named `s`.
    pub fn from_name(s: &str) -> Option<RecordType> {
        RecordType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether a record of this type (a learning signal with `disposition`) is owner-issued:
    /// one an observation adapter may never create (spec §8) — contracts, grants, assurance and
    /// promotion decisions, and a learning signal that accepts. The one definition both Ward
    /// (which issues them) and the HelmLoop office (which reserves their append) use.
    pub fn is_owner_issued(self, disposition: Option<&str>) -> bool {
        match self {
            RecordType::OutcomeContract
            | RecordType::AuthorityGrant
            | RecordType::AssuranceDecision
            | RecordType::PromotionDecision => true,
            RecordType::LearningSignal => disposition == Some("accepted"),
            RecordType::ExecutionReceipt
            | RecordType::EvidenceRecord
            | RecordType::ReconciliationRecord => false,
        }
    }

    /// File name of the entry schema in `schemas/`.
    pub const fn entry_file(self) -> &'static str {
        match self {
            RecordType::OutcomeContract => "outcome-contract-v1.schema.json",
            RecordType::AuthorityGrant => "authority-grant-v1.schema.json",
            RecordType::ExecutionReceipt => "execution-receipt-v1.schema.json",
            RecordType::EvidenceRecord => "evidence-record-v1.schema.json",
            RecordType::AssuranceDecision => "assurance-decision-v1.schema.json",
            RecordType::PromotionDecision => "promotion-decision-v1.schema.json",
            RecordType::ReconciliationRecord => "reconciliation-record-v1.schema.json",
            RecordType::LearningSignal => "learning-signal-v1.schema.json",
        }
    }

    /// Text of the entry schema.
    pub const fn entry_json(self) -> &'static str {
        match self {
            RecordType::OutcomeContract => {
                include_str!("../../../schemas/outcome-contract-v1.schema.json")
            }
            RecordType::AuthorityGrant => {
                include_str!("../../../schemas/authority-grant-v1.schema.json")
            }
            RecordType::ExecutionReceipt => {
                include_str!("../../../schemas/execution-receipt-v1.schema.json")
            }
            RecordType::EvidenceRecord => {
                include_str!("../../../schemas/evidence-record-v1.schema.json")
            }
            RecordType::AssuranceDecision => {
                include_str!("../../../schemas/assurance-decision-v1.schema.json")
            }
            RecordType::PromotionDecision => {
                include_str!("../../../schemas/promotion-decision-v1.schema.json")
            }
            RecordType::ReconciliationRecord => {
                include_str!("../../../schemas/reconciliation-record-v1.schema.json")
            }
            RecordType::LearningSignal => {
                include_str!("../../../schemas/learning-signal-v1.schema.json")
            }
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for RecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A shape the schemas can check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// One record, through its entry schema.
    Record(RecordType),
    /// Any of the eight records, selected by `recordType` (`$defs/AnyRecord`).
    AnyRecord,
    /// `$defs/EvaluationContext`.
    EvaluationContext,
    /// `$defs/EvaluationInput`.
    EvaluationInput,
    /// `$defs/ReductionResult`.
    ReductionResult,
    /// `portability-receipt.schema.json`.
    PortabilityReceipt,
}

/// One schema violation. Messages are fixed per keyword and never echo
/// instance values; `instance_path` is a JSON Pointer (for unknown and
/// missing properties it names the property itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaIssue {
    /// JSON Pointer into the validated instance.
    pub instance_path: String,
    /// The failing keyword (`additionalProperties`, `required`, `type`...).
    pub keyword: String,
    /// JSON Pointer into the schema (through `$ref`s).
    pub schema_path: String,
    /// Fixed description of the failure.
    pub message: String,
}

struct Compiled {
    records: Vec<Validator>,
    any_record: Validator,
    context: Validator,
    input: Validator,
    result: Validator,
    portability: Validator,
}

fn parse_embedded(text: &str, what: &str) -> Result<Json, String> {
    serde_json::from_str(text).map_err(|e| format!("embedded {what} is not json: {e}"))
}

fn compile() -> Result<Compiled, String> {
    let bundle = parse_embedded(BUNDLE_JSON, "schema bundle")?;
    let options = || -> Result<jsonschema::ValidationOptions, String> {
        let resource = Resource::from_contents(bundle.clone())
            .map_err(|e| format!("schema bundle is not a resource: {e}"))?;
        Ok(jsonschema::options()
            .with_draft(Draft::Draft202012)
            .should_validate_formats(true)
            // The bundle's patterns need no lookaround; the `regex` engine is
            // linear-time and faster than the default backtracking one.
            .with_pattern_options(jsonschema::PatternOptions::regex())
            .with_resource(BUNDLE_ID, resource))
    };
    let build = |schema: &Json, what: &str| -> Result<Validator, String> {
        options()?
            .build(schema)
            .map_err(|e| format!("{what} does not compile: {e}"))
    };
    let def = |name: &str| -> Result<Validator, String> {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": format!("{BUNDLE_ID}#/$defs/{name}"),
        });
        build(&schema, name)
    };
    let mut records = Vec::with_capacity(8);
    for t in RecordType::ALL {
        let entry = parse_embedded(t.entry_json(), t.entry_file())?;
        records.push(build(&entry, t.entry_file())?);
    }
    let portability = parse_embedded(PORTABILITY_RECEIPT_JSON, "portability receipt schema")?;
    Ok(Compiled {
        records,
        any_record: def("AnyRecord")?,
        context: def("EvaluationContext")?,
        input: def("EvaluationInput")?,
        result: def("ReductionResult")?,
        portability: build(&portability, "portability receipt schema")?,
    })
}

fn compiled() -> Result<&'static Compiled, &'static str> {
    static COMPILED: OnceLock<Result<Compiled, String>> = OnceLock::new();
    COMPILED
        .get_or_init(compile)
        .as_ref()
        .map_err(String::as_str)
}

/// Compiles every embedded schema; an error names the schema that failed.
/// (The embedded schemas are tested to compile, so this is a self-check.)
pub fn self_check() -> Result<(), String> {
    compiled().map(|_| ()).map_err(str::to_owned)
}

/// Whether `instance` is valid against `shape`: the fast path (no error
/// collection) for the reducer; `false` when the bundle is unavailable.
pub fn is_valid(shape: Shape, instance: &Json) -> bool {
    let Ok(c) = compiled() else { return false };
    let validator = match shape {
        Shape::Record(t) => &c.records[t.index()],
        Shape::AnyRecord => &c.any_record,
        Shape::EvaluationContext => &c.context,
        Shape::EvaluationInput => &c.input,
        Shape::ReductionResult => &c.result,
        Shape::PortabilityReceipt => &c.portability,
    };
    validator.is_valid(instance)
}

/// The shapes compiled by [`crate::structural`], `None` where a schema uses
/// something that module does not compile.
struct Structural {
    records: Vec<Option<Program>>,
    any_record: Option<Program>,
    context: Option<Program>,
    input: Option<Program>,
    result: Option<Program>,
    portability: Option<Program>,
    /// Member by member: `$defs/EvaluationInput` and `$defs/EvaluationContext`.
    input_members: Option<Members>,
    context_members: Option<Members>,
}

/// A closed object definition (`type: object`, `properties`, `required`,
/// `additionalProperties: false`, annotations) compiled member by member, so
/// a verdict can say *which kind* of member failed without collecting every
/// issue.
pub(crate) struct Members {
    /// Property name and its compiled schema, sorted by name.
    properties: Vec<(String, Program)>,
    required: Vec<String>,
}

/// What is wrong with an object under a [`Members`] definition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MemberVerdict {
    /// A required member is absent.
    pub missing: bool,
    /// A member is unknown or fails its schema, or the value is not an object.
    pub invalid: bool,
}

impl Members {
    fn compile(bundle: &Json, def: &str) -> Option<Members> {
        let d = bundle.get("$defs")?.get(def)?.as_object()?;
        for k in d.keys() {
            if !matches!(
                k.as_str(),
                "type" | "properties" | "required" | "additionalProperties" | "description"
            ) {
                return None;
            }
        }
        if d.get("type")? != "object" || d.get("additionalProperties")? != false {
            return None;
        }
        let mut properties = Vec::new();
        for (name, schema) in d.get("properties")?.as_object()? {
            properties.push((
                name.clone(),
                Program::compile_subschema(schema, bundle, BUNDLE_ID)?,
            ));
        }
        properties.sort_by(|a, b| a.0.cmp(&b.0));
        let required = d
            .get("required")?
            .as_array()?
            .iter()
            .map(|n| n.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()?;
        Some(Members {
            properties,
            required,
        })
    }

    /// The verdict on `v`, skipping the members named in `skip` (judged
    /// by the caller).
    pub(crate) fn verdict(&self, v: &Value, skip: &[&str]) -> MemberVerdict {
        let mut out = MemberVerdict::default();
        let Value::Object(m) = v else {
            out.invalid = true;
            return out;
        };
        out.missing = self
            .required
            .iter()
            .any(|r| !skip.contains(&r.as_str()) && !m.contains_key(r));
        out.invalid = m.iter().any(|(k, x)| {
            !skip.contains(&k)
                && match self.properties.binary_search_by(|(n, _)| n.as_str().cmp(k)) {
                    Ok(i) => !self.properties[i].1.is_valid(x),
                    Err(_) => true,
                }
        });
        out
    }
}

/// `$defs/EvaluationInput` member by member, when it compiles.
pub(crate) fn input_members() -> Option<&'static Members> {
    structural().input_members.as_ref()
}

/// `$defs/EvaluationContext` member by member, when it compiles.
pub(crate) fn context_members() -> Option<&'static Members> {
    structural().context_members.as_ref()
}

fn structural() -> &'static Structural {
    static STRUCTURAL: OnceLock<Structural> = OnceLock::new();
    STRUCTURAL.get_or_init(|| {
        let bundle: Json = serde_json::from_str(BUNDLE_JSON).unwrap_or(Json::Null);
        let document = |text: &str| {
            serde_json::from_str(text)
                .ok()
                .and_then(|schema| Program::compile_document(&schema, &bundle, BUNDLE_ID))
        };
        let def = |name: &str| Program::compile_def(name, &bundle, BUNDLE_ID);
        Structural {
            records: RecordType::ALL
                .iter()
                .map(|t| document(t.entry_json()))
                .collect(),
            any_record: def("AnyRecord"),
            context: def("EvaluationContext"),
            input: def("EvaluationInput"),
            result: def("ReductionResult"),
            portability: document(PORTABILITY_RECEIPT_JSON),
            input_members: Members::compile(&bundle, "EvaluationInput"),
            context_members: Members::compile(&bundle, "EvaluationContext"),
        }
    })
}

/// Whether `instance` is valid against `shape`, by the structural validator
/// compiled once from the same embedded schemas; `None` when that shape did
/// not compile there. Tested to agree with [`is_valid`].
pub fn structural_is_valid(shape: Shape, instance: &Value) -> Option<bool> {
    let s = structural();
    let program = match shape {
        Shape::Record(t) => s.records[t.index()].as_ref(),
        Shape::AnyRecord => s.any_record.as_ref(),
        Shape::EvaluationContext => s.context.as_ref(),
        Shape::EvaluationInput => s.input.as_ref(),
        Shape::ReductionResult => s.result.as_ref(),
        Shape::PortabilityReceipt => s.portability.as_ref(),
    };
    program.map(|p| p.is_valid(instance))
}

/// Whether `instance` is valid against `shape`: the reducer's fast path, on
/// the value itself ([`structural_is_valid`], falling back to [`is_valid`]).
pub fn is_valid_value(shape: Shape, instance: &Value) -> bool {
    structural_is_valid(shape, instance).unwrap_or_else(|| is_valid(shape, &instance.to_serde()))
}

/// Validates `instance` against `shape`; an empty list means valid.
pub fn validate(shape: Shape, instance: &Json) -> Vec<SchemaIssue> {
    validate_limited(shape, instance, usize::MAX).0
}

/// [`validate`] stopping after `limit` issues; the flag says whether more
/// were left unlisted. The interpreter's errors are taken lazily, so the
/// cost of a document with a million issues is bounded by `limit`.
pub fn validate_limited(shape: Shape, instance: &Json, limit: usize) -> (Vec<SchemaIssue>, bool) {
    if limit == 0 {
        return (Vec::new(), !is_valid(shape, instance));
    }
    let c = match compiled() {
        Ok(c) => c,
        Err(e) => {
            let issue = SchemaIssue {
                instance_path: String::new(),
                keyword: "$schema".to_owned(),
                schema_path: String::new(),
                message: format!("schema bundle unavailable: {e}"),
            };
            return (vec![issue], false);
        }
    };
    let validator = match shape {
        Shape::Record(t) => &c.records[t.index()],
        Shape::AnyRecord => &c.any_record,
        Shape::EvaluationContext => &c.context,
        Shape::EvaluationInput => &c.input,
        Shape::ReductionResult => &c.result,
        Shape::PortabilityReceipt => &c.portability,
    };
    let mut issues = Vec::new();
    for e in validator.iter_errors(instance) {
        if issues.len() >= limit {
            return (issues, true);
        }
        let path = e.instance_path.as_str().to_owned();
        let schema_path = e.schema_path.as_str().to_owned();
        let keyword = schema_path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        match &e.kind {
            ValidationErrorKind::AdditionalProperties { unexpected }
            | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                // One more than the room left tells that there are more.
                let room = limit.saturating_sub(issues.len()).saturating_add(1);
                for name in unexpected.iter().take(room) {
                    issues.push(SchemaIssue {
                        instance_path: join_pointer(&path, name),
                        keyword: keyword.clone(),
                        schema_path: schema_path.clone(),
                        message: "unknown property".to_owned(),
                    });
                }
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                issues.push(SchemaIssue {
                    instance_path: join_pointer(&path, name),
                    keyword,
                    schema_path,
                    message: "missing required property".to_owned(),
                });
            }
            kind => issues.push(SchemaIssue {
                instance_path: path,
                message: describe(kind),
                keyword,
                schema_path,
            }),
        }
    }
    let more = issues.len() > limit;
    issues.truncate(limit);
    (issues, more)
}

/// Whether the interpreter reports a missing required member whose JSON
/// Pointer (the object's path plus the member name) satisfies `pred`. Errors
/// are taken one at a time and none is kept, and the first match stops the
/// walk.
pub(crate) fn reports_missing(shape: Shape, instance: &Json, pred: impl Fn(&str) -> bool) -> bool {
    let Ok(c) = compiled() else { return false };
    let validator = match shape {
        Shape::Record(t) => &c.records[t.index()],
        Shape::AnyRecord => &c.any_record,
        Shape::EvaluationContext => &c.context,
        Shape::EvaluationInput => &c.input,
        Shape::ReductionResult => &c.result,
        Shape::PortabilityReceipt => &c.portability,
    };
    validator.iter_errors(instance).any(|e| match &e.kind {
        ValidationErrorKind::Required { property } => pred(&join_pointer(
            e.instance_path.as_str(),
            property.as_str().unwrap_or_default(),
        )),
        _ => false,
    })
}

fn join_pointer(base: &str, name: &str) -> String {
    let mut s = String::with_capacity(base.len() + name.len() + 1);
    s.push_str(base);
    s.push('/');
    for c in name.chars() {
        match c {
            '~' => s.push_str("~0"),
            '/' => s.push_str("~1"),
            c => s.push(c),
        }
    }
    s
}

/// A fixed description of a failure kind; schema-side constants only, never
/// instance content.
fn describe(kind: &ValidationErrorKind) -> String {
    use ValidationErrorKind as K;
    match kind {
        K::Type { kind } => format!("wrong type, expected {}", type_name(kind)),
        K::Constant { .. } => "value is not the required constant".to_owned(),
        K::Enum { .. } => "value is not one of the allowed values".to_owned(),
        K::Pattern { .. } => "string does not match the required pattern".to_owned(),
        K::Format { format } => format!("string is not a valid {format}"),
        K::MinLength { limit } => format!("string shorter than {limit}"),
        K::MaxLength { limit } => format!("string longer than {limit}"),
        K::MinItems { limit } => format!("fewer than {limit} items"),
        K::MaxItems { limit } => format!("more than {limit} items"),
        K::UniqueItems => "items are not unique".to_owned(),
        K::Minimum { .. } | K::ExclusiveMinimum { .. } => "number below the minimum".to_owned(),
        K::Maximum { .. } | K::ExclusiveMaximum { .. } => "number above the maximum".to_owned(),
        K::Not { .. } => "value matches a forbidden shape".to_owned(),
        K::FalseSchema => "no value is allowed here".to_owned(),
        K::AnyOf { .. } => "value matches none of the allowed shapes".to_owned(),
        K::OneOfNotValid { .. } => "value matches none of the allowed shapes".to_owned(),
        K::OneOfMultipleValid { .. } => "value matches more than one exclusive shape".to_owned(),
        _ => "value fails the schema".to_owned(),
    }
}

fn type_name(kind: &jsonschema::error::TypeKind) -> String {
    match kind {
        jsonschema::error::TypeKind::Single(t) => t.to_string(),
        jsonschema::error::TypeKind::Multiple(set) => set
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(" or "),
    }
}
