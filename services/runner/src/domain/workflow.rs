//! The workflow document a run follows (`lychd.runner.workflow/v1`): a small declarative JSON
//! object, validated with errors that name the JSON path (never a value).
//!
//! ```json
//! {"schema": "lychd.runner.workflow/v1", "name": "summarize", "version": "0.1.0",
//!  "obligations": [{"id": "summary", "evidence": ["model_answer"]}],
//!  "steps": [{"id": "draft", "kind": "model", "family": "chat", "closes": ["summary"]}],
//!  "verification": {"owner": "owner-alice"}}
//! ```
//!
//! Step kinds: `model` (a model step; `family` names the capability family), `task`, and
//! `effect` (an external effect through an adapter, `domain::effect`). Obligations are
//! what a run must close before it may be verified; each names the evidence it requires.
//! `verification` is required (issue 28 item 3; loop contract v1 `verification`: success only
//! on a PASS the run did not produce): it names the accountable owner, and a run of the
//! workflow succeeds only on the HelmLoop office's PASS — never on the runner's own check.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

pub use super::effect::EFFECT_RECEIPT;
use super::effect::{self, EffectSpec};

pub const SCHEMA: &str = "lychd.runner.workflow/v1";
/// Most bytes a document may have.
pub const MAX_BYTES: usize = 64 * 1024;
/// Most steps (the contract's `max_steps`: a workflow longer than a run may go is refused).
pub const MAX_STEPS: usize = 64;
const MAX_OBLIGATIONS: usize = 64;
/// The evidence an obligation may require (`obligations[].evidence`), each provided by a step's
/// recorded result (never by its content's claims):
/// - `model_answer`: a `model` step's answer whose content is not empty (after trimming
///   whitespace);
/// - `task_result`: a `task` step's recorded result.
///
/// A step closes an obligation it names in `closes` only when its result provides every
/// evidence the obligation requires (an obligation requiring none is closed by any result).
/// - `effect_receipt`: an `effect` step's confirmed external outcome (its receipt digest).
pub const EVIDENCE: [&str; 3] = [MODEL_ANSWER, TASK_RESULT, EFFECT_RECEIPT];
pub const MODEL_ANSWER: &str = "model_answer";
pub const TASK_RESULT: &str = "task_result";

const FAMILIES: [&str; 7] = [
    "chat",
    "vision",
    "embedding",
    "stt",
    "tts",
    "tool_execution",
    "rerank",
];

/// A step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub id: String,
    pub kind: StepKind,
    /// The obligations this step's result may close.
    pub closes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepKind {
    /// A model step: the capability `family` to lease, and optionally the `model` (a model id
    /// or an alias an animator declares) the lease must be for.
    Model {
        family: String,
        model: Option<String>,
    },
    Task,
    /// An external effect through an adapter (Runner II): its action, destination and risk.
    Effect(Box<EffectSpec>),
}

impl StepKind {
    /// Whether a result of a step of this kind can provide `evidence` (see [`EVIDENCE`]).
    pub fn can_provide(&self, evidence: &str) -> bool {
        match self {
            StepKind::Model { .. } => evidence == MODEL_ANSWER,
            StepKind::Task => evidence == TASK_RESULT,
            StepKind::Effect(_) => evidence == EFFECT_RECEIPT,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obligation {
    pub id: String,
    pub evidence: Vec<String>,
}

/// A valid workflow document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    pub name: String,
    pub version: String,
    pub obligations: Vec<Obligation>,
    pub steps: Vec<Step>,
    /// `verification` (required): the run succeeds only on an independent HelmLoop PASS;
    /// the runner's obligation check is recorded as the contract's success predicate, never
    /// a verdict of its own.
    pub verification: super::verdict::Spec,
}

/// Why a document is refused: the JSON pointer of the first bad place, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub path: String,
    pub problem: &'static str,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {}: {}", self.path, self.problem)
    }
}

fn bad<T>(path: impl Into<String>, problem: &'static str) -> Result<T, Invalid> {
    Err(Invalid {
        path: path.into(),
        problem,
    })
}

fn slug(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// A model id or alias as the Dispatcher takes it: 1 to 128 printable ASCII, no space.
fn model_id(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.chars().all(|c| c.is_ascii_graphic())
}

fn version(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| (1..=9).contains(&p.len()) && p.chars().all(|c| c.is_ascii_digit()))
}

fn object<'a>(v: &'a Value, path: &str, keys: &[&str]) -> Result<&'a Map<String, Value>, Invalid> {
    let Some(o) = v.as_object() else {
        return bad(path, "must be an object");
    };
    if let Some(k) = o.keys().find(|k| !keys.contains(&k.as_str())) {
        // The key itself is not echoed: it is caller content.
        let _ = k;
        return bad(path, "has a field the schema does not define");
    }
    Ok(o)
}

fn text<'a>(o: &'a Map<String, Value>, path: &str, key: &str) -> Result<&'a str, Invalid> {
    match o.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => bad(format!("{path}/{key}"), "must be a string"),
        None => bad(format!("{path}/{key}"), "is required"),
    }
}

fn slug_at<'a>(o: &'a Map<String, Value>, path: &str, key: &str) -> Result<&'a str, Invalid> {
    let s = text(o, path, key)?;
    if slug(s) {
        Ok(s)
    } else {
        bad(
            format!("{path}/{key}"),
            "must be a slug (a-z, 0-9, _ and -, at most 64)",
        )
    }
}

fn slugs(o: &Map<String, Value>, path: &str, key: &str) -> Result<Vec<String>, Invalid> {
    let Some(v) = o.get(key) else {
        return Ok(Vec::new());
    };
    let Some(items) = v.as_array() else {
        return bad(format!("{path}/{key}"), "must be an array");
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_str() {
            Some(s) if slug(s) && !out.iter().any(|o| o == s) => out.push(s.to_owned()),
            Some(s) if slug(s) => return bad(format!("{path}/{key}/{i}"), "is listed twice"),
            _ => return bad(format!("{path}/{key}/{i}"), "must be a slug"),
        }
    }
    Ok(out)
}

fn array<'a>(o: &'a Map<String, Value>, key: &str, max: usize) -> Result<&'a Vec<Value>, Invalid> {
    match o.get(key).map(Value::as_array) {
        Some(Some(a)) if a.len() > max => bad(format!("/{key}"), "has more items than allowed"),
        Some(Some(a)) => Ok(a),
        Some(None) => bad(format!("/{key}"), "must be an array"),
        None => bad(format!("/{key}"), "is required"),
    }
}

impl Workflow {
    /// Parse and validate `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Workflow, Invalid> {
        if bytes.is_empty() {
            return bad("", "is required");
        }
        if bytes.len() > MAX_BYTES {
            return bad("", "is larger than 64 KiB");
        }
        let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
            return bad("", "is not JSON");
        };
        let o = object(
            &v,
            "",
            &[
                "schema",
                "name",
                "version",
                "obligations",
                "steps",
                "verification",
            ],
        )?;
        if text(o, "", "schema")? != SCHEMA {
            return bad("/schema", "must be lychd.runner.workflow/v1");
        }
        let name = slug_at(o, "", "name")?.to_owned();
        let ver = text(o, "", "version")?;
        if !version(ver) {
            return bad("/version", "must be MAJOR.MINOR.PATCH");
        }
        let mut obligations = Vec::new();
        for (i, ov) in array(o, "obligations", MAX_OBLIGATIONS)?.iter().enumerate() {
            let path = format!("/obligations/{i}");
            let ob = object(ov, &path, &["id", "evidence"])?;
            let id = slug_at(ob, &path, "id")?.to_owned();
            if obligations.iter().any(|x: &Obligation| x.id == id) {
                return bad(format!("{path}/id"), "is declared twice");
            }
            let evidence = slugs(ob, &path, "evidence")?;
            if let Some(j) = evidence
                .iter()
                .position(|e| !EVIDENCE.contains(&e.as_str()))
            {
                return bad(
                    format!("{path}/evidence/{j}"),
                    "must be an evidence kind (model_answer, task_result, effect_receipt)",
                );
            }
            obligations.push(Obligation { id, evidence });
        }
        let mut steps = Vec::new();
        let items = array(o, "steps", MAX_STEPS)?;
        if items.is_empty() {
            return bad("/steps", "must have at least one step");
        }
        for (i, sv) in items.iter().enumerate() {
            let path = format!("/steps/{i}");
            let so = object(
                sv,
                &path,
                &[
                    "id",
                    "kind",
                    "family",
                    "model",
                    "closes",
                    "adapter",
                    "destination",
                    "action",
                    "risk",
                    "compensation",
                ],
            )?;
            if so.get("kind").and_then(Value::as_str) != Some("effect")
                && let Some(k) = ["adapter", "destination", "action", "risk", "compensation"]
                    .into_iter()
                    .find(|k| so.contains_key(*k))
            {
                return bad(format!("{path}/{k}"), "is only for effect steps");
            }
            let id = slug_at(so, &path, "id")?.to_owned();
            if steps.iter().any(|x: &Step| x.id == id) {
                return bad(format!("{path}/id"), "is declared twice");
            }
            let kind = match text(so, &path, "kind")? {
                "model" => {
                    let family = text(so, &path, "family")?;
                    if !FAMILIES.contains(&family) {
                        return bad(format!("{path}/family"), "must be a capability family");
                    }
                    let model = match so.get("model") {
                        None => None,
                        Some(Value::String(m)) if model_id(m) => Some(m.clone()),
                        Some(_) => {
                            return bad(
                                format!("{path}/model"),
                                "must be a model id (1 to 128 printable characters, no space)",
                            );
                        }
                    };
                    StepKind::Model {
                        family: family.to_owned(),
                        model,
                    }
                }
                "task" if so.contains_key("family") => {
                    return bad(format!("{path}/family"), "is only for model steps");
                }
                "task" if so.contains_key("model") => {
                    return bad(format!("{path}/model"), "is only for model steps");
                }
                "task" => StepKind::Task,
                "effect" if so.contains_key("family") || so.contains_key("model") => {
                    let k = if so.contains_key("family") {
                        "family"
                    } else {
                        "model"
                    };
                    return bad(format!("{path}/{k}"), "is only for model steps");
                }
                "effect" => {
                    let spec = effect::spec(
                        so.get("adapter"),
                        so.get("destination"),
                        so.get("action"),
                        so.get("risk"),
                    )
                    .and_then(|mut spec| {
                        spec.compensation = match so.get("compensation") {
                            Some(c) => Some(Box::new(effect::compensation(c)?)),
                            None => None,
                        };
                        Ok(spec)
                    })
                    .map_err(|(field, problem)| Invalid {
                        path: format!("{path}/{field}"),
                        problem,
                    })?;
                    StepKind::Effect(Box::new(spec))
                }
                _ => return bad(format!("{path}/kind"), "must be model, task or effect"),
            };
            let closes = slugs(so, &path, "closes")?;
            if let Some(j) = closes
                .iter()
                .position(|c| !obligations.iter().any(|o| &o.id == c))
            {
                return bad(format!("{path}/closes/{j}"), "names no declared obligation");
            }
            steps.push(Step { id, kind, closes });
        }
        let closed: BTreeSet<&str> = steps
            .iter()
            .flat_map(|s| s.closes.iter().map(String::as_str))
            .collect();
        if let Some(i) = obligations
            .iter()
            .position(|o| !closed.contains(o.id.as_str()))
        {
            return bad(format!("/obligations/{i}"), "no step can close it");
        }
        // Every obligation must be closable with its evidence: some step naming it provides
        // all of it (a `task` step never gives a model answer, nor a model step a task result).
        if let Some(i) = obligations.iter().position(|o| {
            !steps.iter().any(|s| {
                s.closes.contains(&o.id) && o.evidence.iter().all(|e| s.kind.can_provide(e))
            })
        }) {
            return bad(
                format!("/obligations/{i}/evidence"),
                "no step that closes it can provide it",
            );
        }
        let verification = match o.get("verification") {
            None => return bad("/verification", "is required"),
            Some(_) if obligations.is_empty() => {
                return bad("/verification", "needs at least one obligation to verify");
            }
            Some(v) => super::verdict::Spec::parse(v).or_else(|(p, m)| bad(p, m))?,
        };
        Ok(Workflow {
            name,
            version: ver.to_owned(),
            obligations,
            steps,
            verification,
        })
    }
}

#[cfg(test)]
mod tests;
