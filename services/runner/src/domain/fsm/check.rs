//! The contract's invariants over a control FSM document, checked mechanically at load. Each
//! broken one is refused by its name ([`Broken`]); the first found is answered.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{Document, EFFECT_CRITICAL, Edge, ISSUERS, Kind, NAMED_STATES, TERMINAL_CATEGORIES};

/// Why an FSM document is refused: the invariant it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    #[error("the fsm is not a readable fsm document: {0}")]
    Unreadable(String),
    #[error("the fsm's digest is not the recorded one")]
    DigestMismatch,
    #[error("schema or machine_id is not lychd.runner.run-fsm/v1 control")]
    WrongSchema,
    #[error("a name is declared twice or is not UPPER_SNAKE / lower_snake: {0}")]
    BadName(String),
    #[error("an edge, guard, issuer or initial state names what is not declared: {0}")]
    Undeclared(String),
    #[error("two edges leave {0} on one event")]
    Nondeterministic(String),
    #[error("terminal category {0} is missing (or not a contract category)")]
    TerminalCategory(String),
    #[error("effect-critical state {0} is missing or not declared effect_critical")]
    EffectCriticalState(String),
    #[error("state {0}, which the contract names, is missing")]
    NamedState(String),
    #[error("terminal-states-have-no-outgoing-transitions: {0} has an outgoing edge")]
    TerminalHasEdge(String),
    #[error("authority-is-external: event {0}'s issuer is not an external authority")]
    ContentIssuer(String),
    #[error("effect-intent-first: {0} reaches an intent without WAIT_APPROVAL then COMMIT_INTENT")]
    IntentWithoutApproval(String),
    #[error("verified-success-only: edge {0} into success lacks its verifier or its guards")]
    UnverifiedSuccess(String),
    #[error("receipt-reingestion: {0} reaches verification without re-entering INGEST")]
    ReceiptNotReingested(String),
    #[error("state {0} is unreachable from the initial state or cannot reach a terminal")]
    Stranded(String),
}

/// The guards every edge into a success terminal carries (`verification.success_predicate`).
pub const SUCCESS_GUARDS: [&str; 2] = ["obligations_closed", "no_unknown_effect"];
/// The guard the edge into `COMMIT_INTENT` carries (`effects.high_risk_gate`).
pub const APPROVAL_GUARD: &str = "exact_hash_approval";

fn upper(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

fn lower(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

fn label(e: &Edge) -> String {
    format!("{} --{}--> {}", e.from, e.event, e.to)
}

type Edges = BTreeMap<(String, String), Edge>;

/// Check `doc`; its edges keyed by `(from, event)`.
pub(super) fn check(doc: &Document) -> Result<Edges, Broken> {
    if doc.schema != "lychd.runner.run-fsm/v1" || doc.machine_id != "control" {
        return Err(Broken::WrongSchema);
    }
    let states = names(doc.states.iter().map(|s| s.name.as_str()), upper)?;
    let events = names(doc.events.iter().map(|e| e.name.as_str()), lower)?;
    let guards = names(doc.guards.iter().map(|g| g.name.as_str()), lower)?;
    let issuers = names(doc.issuers.iter().map(String::as_str), lower)?;
    if !states.contains(doc.initial.as_str()) {
        return Err(Broken::Undeclared(doc.initial.clone()));
    }
    // Issuers are external authorities only: content is never one.
    for i in &issuers {
        if !ISSUERS.contains(i) {
            return Err(Broken::ContentIssuer(i.to_string()));
        }
    }
    for e in &doc.events {
        if !issuers.contains(e.issuer.as_str()) {
            return Err(Broken::ContentIssuer(e.name.clone()));
        }
    }
    let mut edges = Edges::new();
    for e in &doc.transitions {
        for n in [&e.from, &e.to] {
            if !states.contains(n.as_str()) {
                return Err(Broken::Undeclared(n.clone()));
            }
        }
        if !events.contains(e.event.as_str()) {
            return Err(Broken::Undeclared(e.event.clone()));
        }
        if let Some(g) = e.guards.iter().find(|g| !guards.contains(g.as_str())) {
            return Err(Broken::Undeclared(g.clone()));
        }
        let key = (e.from.clone(), e.event.clone());
        if edges.insert(key, e.clone()).is_some() {
            return Err(Broken::Nondeterministic(e.from.clone()));
        }
    }
    categories(doc)?;
    let kind = |n: &str| doc.states.iter().find(|s| s.name == n).map(|s| s.kind);
    for s in EFFECT_CRITICAL {
        if kind(s) != Some(Kind::EffectCritical) {
            return Err(Broken::EffectCriticalState(s.into()));
        }
    }
    for s in NAMED_STATES {
        if kind(s).is_none() {
            return Err(Broken::NamedState(s.into()));
        }
    }
    if let Some(e) = doc
        .transitions
        .iter()
        .find(|e| kind(&e.from) == Some(Kind::Terminal))
    {
        return Err(Broken::TerminalHasEdge(e.from.clone()));
    }
    let issuer = |ev: &str| {
        doc.events
            .iter()
            .find(|e| e.name == ev)
            .map(|e| e.issuer.as_str())
    };
    effect_gate(doc, issuer)?;
    success(doc, issuer)?;
    reingestion(doc)?;
    reachability(doc)?;
    Ok(edges)
}

/// Distinct, well-formed names.
fn names<'a>(
    it: impl Iterator<Item = &'a str>,
    form: fn(&str) -> bool,
) -> Result<BTreeSet<&'a str>, Broken> {
    let mut set = BTreeSet::new();
    for n in it {
        if !form(n) || !set.insert(n) {
            return Err(Broken::BadName(n.into()));
        }
    }
    Ok(set)
}

/// Every terminal has a contract category, and every category has a terminal.
fn categories(doc: &Document) -> Result<(), Broken> {
    let mut seen = BTreeSet::new();
    for s in &doc.states {
        match (s.kind, s.category.as_deref()) {
            (Kind::Terminal, Some(c)) if TERMINAL_CATEGORIES.contains(&c) => {
                seen.insert(c);
            }
            (Kind::Terminal, c) => {
                return Err(Broken::TerminalCategory(c.unwrap_or_default().into()));
            }
            (_, Some(c)) => return Err(Broken::TerminalCategory(c.into())),
            (_, None) => {}
        }
    }
    match TERMINAL_CATEGORIES.iter().find(|c| !seen.contains(*c)) {
        Some(c) => Err(Broken::TerminalCategory((*c).into())),
        None => Ok(()),
    }
}

/// A high-risk intent only through `WAIT_APPROVAL` (an approver's event, the exact-hash guard)
/// then `COMMIT_INTENT`; `EXECUTE` only from `COMMIT_INTENT`.
fn effect_gate<'a>(
    doc: &'a Document,
    issuer: impl Fn(&str) -> Option<&'a str>,
) -> Result<(), Broken> {
    for e in &doc.transitions {
        let into_intent = e.to == "COMMIT_INTENT" && e.from != "COMMIT_INTENT";
        if into_intent
            && (e.from != "WAIT_APPROVAL"
                || issuer(&e.event) != Some("approver")
                || !e.guards.iter().any(|g| g == APPROVAL_GUARD))
        {
            return Err(Broken::IntentWithoutApproval(label(e)));
        }
        if e.to == "EXECUTE" && e.from != "COMMIT_INTENT" && e.from != "EXECUTE" {
            return Err(Broken::IntentWithoutApproval(label(e)));
        }
    }
    Ok(())
}

/// Every edge into a success terminal: from `VERIFY`, on the verifier's event, guarded by
/// closed obligations and no unknown effect.
fn success<'a>(doc: &'a Document, issuer: impl Fn(&str) -> Option<&'a str>) -> Result<(), Broken> {
    let succeeding: BTreeSet<&str> = doc
        .states
        .iter()
        .filter(|s| s.category.as_deref() == Some("success"))
        .map(|s| s.name.as_str())
        .collect();
    for e in doc
        .transitions
        .iter()
        .filter(|e| succeeding.contains(e.to.as_str()))
    {
        let guarded = SUCCESS_GUARDS
            .iter()
            .all(|g| e.guards.iter().any(|h| h == g));
        if e.from != "VERIFY" || issuer(&e.event) != Some("verifier") || !guarded {
            return Err(Broken::UnverifiedSuccess(label(e)));
        }
    }
    Ok(())
}

/// From any state after dispatch (`EXECUTE` and what follows it), neither `VERIFY` nor a
/// success terminal is reachable without passing `INGEST` (receipts are re-ingested first;
/// an unknown outcome is never success).
fn reingestion(doc: &Document) -> Result<(), Broken> {
    let forbidden: BTreeSet<&str> = doc
        .states
        .iter()
        .filter(|s| s.name == "VERIFY" || s.category.as_deref() == Some("success"))
        .map(|s| s.name.as_str())
        .collect();
    for start in [
        "EXECUTE",
        "RECONCILE",
        "HUMAN_RECONCILIATION",
        "HONOR_PENDING_INTERRUPT",
    ] {
        let reached = reach(doc, start, |e| e.to != "INGEST");
        if let Some(bad) = reached.iter().find(|s| forbidden.contains(*s)) {
            return Err(Broken::ReceiptNotReingested(format!("{start} -> {bad}")));
        }
    }
    Ok(())
}

/// Every state is reachable from the initial one, and every state reaches a terminal.
fn reachability(doc: &Document) -> Result<(), Broken> {
    let from_initial = reach(doc, &doc.initial, |_| true);
    for s in &doc.states {
        if !from_initial.contains(s.name.as_str()) {
            return Err(Broken::Stranded(s.name.clone()));
        }
        let ends = reach(doc, &s.name, |_| true);
        let terminal = doc
            .states
            .iter()
            .any(|t| t.kind == Kind::Terminal && ends.contains(t.name.as_str()));
        if !terminal {
            return Err(Broken::Stranded(s.name.clone()));
        }
    }
    Ok(())
}

/// States reachable from `start` (itself included) over edges `keep` admits.
fn reach<'a>(doc: &'a Document, start: &'a str, keep: impl Fn(&Edge) -> bool) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::from([start]);
    let mut queue = VecDeque::from([start]);
    while let Some(s) = queue.pop_front() {
        for e in doc.transitions.iter().filter(|e| e.from == s && keep(e)) {
            if seen.insert(e.to.as_str()) {
                queue.push_back(e.to.as_str());
            }
        }
    }
    seen
}
