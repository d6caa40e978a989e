//! The control FSM as data: `schemas/runner/run-fsm.v1.json`, the sole authority on which
//! state a run may move to on which event (loop-contract v1, `control_fsm_binding`).
//!
//! The contract binds `spec/run-fsm.v1.json` by digest, but that artifact is not published:
//! this file is the project's own, a design inference, and its digest ([`FSM_SHA256`]) is not
//! the contract's ([`CONTRACT_FSM_SHA256`]). Loading checks the contract's invariants
//! mechanically (`fsm/check.rs`); a broken one is refused by name ([`Broken`]). The runner
//! takes no transition that is not in the file: [`Fsm::next`] is the only way to a new state.

mod check;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use sha2::{Digest, Sha256};

pub use check::Broken;

/// The file as compiled into the office (read at start-up, checked before serving).
pub const FSM_JSON: &[u8] = include_bytes!("../../../../schemas/runner/run-fsm.v1.json");

/// The recorded sha256 of [`FSM_JSON`] (also in `docs/runner.md`); a test keeps them equal.
pub const FSM_SHA256: &str = "1c8acee612d97b45a16037235167f290045f17e95157ad8c63463b1982ec07c8";

/// The digest loop-contract v1 binds (`control_fsm_binding.file_sha256`): of an artifact that
/// is not published, so no file here can match it.
pub const CONTRACT_FSM_SHA256: &str =
    "043d8038f8bf91d7f60c2b57f7fcf788e25684eed6409f184b607fae227537ea";

/// The contract's `required_terminal_categories`.
pub const TERMINAL_CATEGORIES: [&str; 9] = [
    "success",
    "permanent_failure",
    "retry_exhausted",
    "budget_exhausted",
    "timeout",
    "canceled",
    "pathology",
    "saturated",
    "unknown_external_outcome",
];

/// The contract's `required_effect_critical_states`.
pub const EFFECT_CRITICAL: [&str; 5] = [
    "COMMIT_INTENT",
    "EXECUTE",
    "RECONCILE",
    "HUMAN_RECONCILIATION",
    "HONOR_PENDING_INTERRUPT",
];

/// States the contract names elsewhere (approval, effects, no-progress) that must exist too.
pub const NAMED_STATES: [&str; 4] = ["WAIT_APPROVAL", "PLAN_EFFECTS", "INGEST", "NO_PROGRESS"];

/// Who may issue a control event: authorities outside the content of a run. Retrieved and
/// model-produced content is data and is none of these (it can never issue a control event).
pub const ISSUERS: [&str; 8] = [
    "runner",
    "caller",
    "operator",
    "dispatcher",
    "approver",
    "reconciler",
    "verifier",
    "budget_governor",
];

/// What a state is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Control,
    EffectCritical,
    Terminal,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateDef {
    pub name: String,
    pub kind: Kind,
    /// A terminal state's category (one of [`TERMINAL_CATEGORIES`]).
    #[serde(default)]
    pub category: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventDef {
    pub name: String,
    pub issuer: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardDef {
    pub name: String,
    pub meaning: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    pub from: String,
    pub event: String,
    pub to: String,
    /// What must hold for the edge to be taken (names of `guards`).
    #[serde(default)]
    pub guards: Vec<String>,
}

/// The file's shape.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    pub schema: String,
    pub machine_id: String,
    pub provenance: String,
    pub initial: String,
    pub states: Vec<StateDef>,
    pub issuers: Vec<String>,
    pub events: Vec<EventDef>,
    pub guards: Vec<GuardDef>,
    pub transitions: Vec<Edge>,
}

/// A checked control FSM.
#[derive(Debug, Clone)]
pub struct Fsm {
    doc: Document,
    /// `(from, event)` → the edge.
    edges: BTreeMap<(String, String), Edge>,
    sha256: String,
}

impl Fsm {
    /// The office's FSM ([`FSM_JSON`]), checked; its digest must be the recorded one.
    pub fn bound() -> Result<Fsm, Broken> {
        let fsm = Fsm::load(FSM_JSON)?;
        if fsm.sha256 != FSM_SHA256 {
            return Err(Broken::DigestMismatch);
        }
        Ok(fsm)
    }

    /// Parse and check `bytes` against every invariant of the contract.
    pub fn load(bytes: &[u8]) -> Result<Fsm, Broken> {
        let doc: Document =
            serde_json::from_slice(bytes).map_err(|e| Broken::Unreadable(e.to_string()))?;
        let edges = check::check(&doc)?;
        Ok(Fsm {
            doc,
            edges,
            sha256: hex::encode(Sha256::digest(bytes)),
        })
    }

    /// The file's sha256 (hex).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    pub fn initial(&self) -> &str {
        &self.doc.initial
    }

    pub fn document(&self) -> &Document {
        &self.doc
    }

    /// The edge `event` takes from `state`, if the file has one (else the transition is refused).
    pub fn next(&self, state: &str, event: &str) -> Option<&Edge> {
        self.edges.get(&(state.to_owned(), event.to_owned()))
    }

    /// Every edge, in file order.
    pub fn edges(&self) -> impl Iterator<Item = &Edge> {
        self.doc.transitions.iter()
    }

    fn state(&self, name: &str) -> Option<&StateDef> {
        self.doc.states.iter().find(|s| s.name == name)
    }

    /// Whether `state` is terminal (no edge leaves it).
    pub fn is_terminal(&self, state: &str) -> bool {
        self.state(state).is_some_and(|s| s.kind == Kind::Terminal)
    }

    /// Whether `state` is effect-critical (an interrupt there is recorded, honoured later).
    pub fn is_effect_critical(&self, state: &str) -> bool {
        self.state(state)
            .is_some_and(|s| s.kind == Kind::EffectCritical)
    }

    /// A terminal state's category.
    pub fn category(&self, state: &str) -> Option<&str> {
        self.state(state).and_then(|s| s.category.as_deref())
    }

    /// Every state name.
    pub fn states(&self) -> BTreeSet<&str> {
        self.doc.states.iter().map(|s| s.name.as_str()).collect()
    }

    /// Every event name.
    pub fn events(&self) -> BTreeSet<&str> {
        self.doc.events.iter().map(|e| e.name.as_str()).collect()
    }
}
