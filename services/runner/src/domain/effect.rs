//! External effects (Runner II, loop-contract v1 `action_types.ExternalEffect`, `effects`,
//! `approval`): an `effect` workflow step, its action digest, its idempotency key, the nonce of
//! its exact-hash approval, the ledger's entry kinds and the pending effect a run carries in its
//! progress. Pure: the driver (`service/driver/effects.rs`) does the I/O.
//!
//! **The idempotency key** is exactly the contract's tuple `run_id, transition_id,
//! effect_sequence, action_digest, adapter_version`, encoded as the text
//! `lychd.runner.effect/v1|<run_id>|<transition_id>|<effect_sequence>|<action_digest>|<adapter_version>`
//! (UUIDs hyphenated lowercase, the sequence in decimal, the digest `sha256:<hex>`); what travels
//! in the `Idempotency-Key` header is `sha256:<hex>` of that text (fixed length, no identifiers
//! on the wire). `transition_id` is the id of the transition that committed the intent
//! (`COMMIT_INTENT → EXECUTE`): the key exists only once the intent does.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The HTTP adapter's name and version (the version is part of the idempotency key: a changed
/// adapter is another delivery).
pub const HTTP_ADAPTER: &str = "http";
pub const HTTP_ADAPTER_VERSION: &str = "lychd.runner.adapter.http/1";

/// The evidence kind an effect step's confirmed outcome provides.
pub const EFFECT_RECEIPT: &str = "effect_receipt";

/// Most bytes of an effect's action document (canonical JSON).
pub const MAX_ACTION_BYTES: usize = 16 * 1024;

/// How risky an effect is: a high-risk effect needs a live, exact-hash human approval (a grant
/// by a standing rule is not honoured); a low-risk one goes through Ward's preauthorization
/// rules like any caller's proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    High,
    Low,
}

/// An effect step as the workflow declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectSpec {
    /// The adapter (`http`).
    pub adapter: String,
    /// `http://host:port/path` (plain http on loopback or the effect network).
    pub destination: String,
    /// The destination's host (the object of the effect permission: `destination:<host>`).
    pub host: String,
    /// The action's canonical JSON (HL-C14N-1).
    pub action: Vec<u8>,
    /// `sha256:<hex>` binding digest of the canonical action.
    pub action_digest: String,
    pub risk: Risk,
    /// The compensating action, when the step declares one (`domain::compensation`).
    pub compensation: Option<Box<Compensation>>,
}

impl EffectSpec {
    /// The adapter version of this effect (part of its idempotency key).
    pub fn adapter_version(&self) -> &'static str {
        HTTP_ADAPTER_VERSION
    }

    /// `sha256:<hex>` of the destination (the approval's `destination_hash`).
    pub fn destination_hash(&self) -> String {
        format!(
            "sha256:{}",
            hex::encode(Sha256::digest(self.destination.as_bytes()))
        )
    }
}

/// Why an effect step's fields are refused: the JSON pointer suffix under the step, and what.
pub type FieldError = (&'static str, &'static str);

/// Check an effect step's `adapter`, `destination`, `action` (a JSON object) and `risk`.
pub fn spec(
    adapter: Option<&serde_json::Value>,
    destination: Option<&serde_json::Value>,
    action: Option<&serde_json::Value>,
    risk: Option<&serde_json::Value>,
) -> Result<EffectSpec, FieldError> {
    match adapter {
        Some(serde_json::Value::String(a)) if a == HTTP_ADAPTER => {}
        Some(_) => return Err(("adapter", "must be an effect adapter (http)")),
        None => return Err(("adapter", "is required")),
    }
    let destination = match destination {
        Some(serde_json::Value::String(d)) => d.clone(),
        Some(_) => return Err(("destination", "must be a string")),
        None => return Err(("destination", "is required")),
    };
    let host = http_host(&destination).ok_or((
        "destination",
        "must be an http://host:port/path URL (no user, query or fragment)",
    ))?;
    let action = match action {
        Some(v @ serde_json::Value::Object(_)) => v,
        Some(_) => return Err(("action", "must be a JSON object")),
        None => return Err(("action", "is required")),
    };
    let text = serde_json::to_vec(action).map_err(|_| ("action", "must be a JSON object"))?;
    let value = lychd_canon::parse(&text).map_err(|_| {
        (
            "action",
            "must be canonical JSON (HL-C14N-1: no floats, NFC strings)",
        )
    })?;
    let canonical = lychd_canon::to_canonical_vec(&value).map_err(|_| {
        (
            "action",
            "must be canonical JSON (HL-C14N-1: no floats, NFC strings)",
        )
    })?;
    if canonical.len() > MAX_ACTION_BYTES {
        return Err(("action", "is larger than 16 KiB"));
    }
    let action_digest = lychd_canon::binding_digest(&value)
        .map_err(|_| {
            (
                "action",
                "must be canonical JSON (HL-C14N-1: no floats, NFC strings)",
            )
        })?
        .to_string();
    let risk = match risk.and_then(|r| r.as_str()) {
        Some("high") => Risk::High,
        Some("low") => Risk::Low,
        Some(_) => return Err(("risk", "must be high or low")),
        None if risk.is_some() => return Err(("risk", "must be high or low")),
        None => return Err(("risk", "is required")),
    };
    Ok(EffectSpec {
        adapter: HTTP_ADAPTER.into(),
        destination,
        host,
        action: canonical,
        action_digest,
        risk,
        compensation: None,
    })
}

/// The host of `http://host:port/path` (a slug-like host: letters, digits, `.`, `-`), if the
/// URL is that shape.
pub fn http_host(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if url.len() > 512 || path.contains(['?', '#', ' ']) || authority.contains('@') {
        return None;
    }
    let (host, port) = authority.rsplit_once(':')?;
    port.parse::<u16>().ok().filter(|p| *p > 0)?;
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    ok.then(|| host.to_ascii_lowercase())
}

/// The contract's idempotency key tuple as text (see the module's documentation).
pub fn idempotency_tuple(
    run_id: &str,
    transition_id: &str,
    effect_sequence: u32,
    action_digest: &str,
    adapter_version: &str,
) -> String {
    format!(
        "lychd.runner.effect/v1|{run_id}|{transition_id}|{effect_sequence}|{action_digest}|{adapter_version}"
    )
}

/// The key sent on the wire: `sha256:<hex>` of [`idempotency_tuple`].
pub fn idempotency_key(tuple: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(tuple.as_bytes())))
}

/// The approval's nonce: one per proposal of an effect (a stale approval is proposed again
/// with the next `proposal`, so it is a new exact-hash approval).
pub fn nonce(run_id: &str, effect_sequence: u32, proposal: u32) -> String {
    format!("{run_id}.{effect_sequence}.{proposal}")
}

/// The ledger's entry kinds (the contract's `durable_ledger`, in its order): append-only rows
/// of `runner.effect_ledger`.
pub const LEDGER: [&str; 10] = [
    "proposal",
    "policy_verdict",
    "approval_consumption",
    "intent",
    "attempt",
    "response",
    "receipt",
    "acknowledgement",
    "reconciliation",
    "compensation",
];

/// Where a run's effect in flight stands (in its progress, so every checkpoint carries it: the
/// contract's `pending effects` and `approvals`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pending {
    /// The workflow index of the effect step.
    pub step: usize,
    /// The run's effect sequence number (1 for its first effect).
    pub sequence: u32,
    /// `sha256:<hex>` of the canonical action.
    pub action_digest: String,
    /// How many times it was proposed (a stale approval is proposed again).
    pub proposal: u32,
    /// Ward's consent id, once proposed.
    #[serde(default)]
    pub consent_id: String,
    /// The consent's binding digest (what is consumed).
    #[serde(default)]
    pub binding_digest: String,
    /// The idempotency key, once the intent is committed.
    #[serde(default)]
    pub idempotency_key: String,
    /// `sha256:<hex>` of the receipt, once the outcome is confirmed.
    #[serde(default)]
    pub receipt_digest: String,
    /// Whether the external system answered a definite refusal (not applied).
    #[serde(default)]
    pub rejected: bool,
}

/// What a delivery attempt or status query came to (the adapter's answer, classified).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Applied: the receipt's digest.
    Applied { receipt_digest: String },
    /// The system definitely did not apply it and will not (a 4xx other than 408 and 429).
    Rejected { status: u16 },
    /// The system definitely did not apply it yet (refused the connection, 5xx, 429, or a
    /// status query that knows no such key): safe to deliver again with the same key.
    NotApplied,
    /// The outcome is unknown (timeout, dropped response, malformed answer).
    Unknown,
}

/// The operator's resolution of an unknown outcome (`ResolveUnknownOutcome`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The effect was applied; the receipt the operator saw.
    Confirmed { receipt_digest: String },
    /// The effect was not applied (the run fails: nothing is delivered blind).
    NotApplied,
    /// Nobody can tell: the run ends `EFFECT_OUTCOME_UNKNOWN`.
    Abandon,
}

impl Resolution {
    /// The FSM event of the resolution (from `HUMAN_RECONCILIATION`).
    pub fn event(&self) -> &'static str {
        match self {
            Resolution::Confirmed { .. } => "reconciled_confirmed",
            Resolution::NotApplied => "reconciled_not_applied",
            Resolution::Abandon => "abandoned",
        }
    }
}

/// Whether `s` is a `sha256:<64 lowercase hex>` digest.
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

/// The digest of a receipt body (what an operator compares).
pub fn receipt_digest(body: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(body)))
}

/// A compensating action as an effect step declares it (`domain::compensation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compensation {
    /// `http://host:port/path`.
    pub destination: String,
    /// The destination's host (the object of the adapter permission).
    pub host: String,
    /// The action's canonical JSON.
    pub action: Vec<u8>,
    /// `sha256:<hex>` binding digest of the canonical action.
    pub action_digest: String,
}

/// Check an effect step's `compensation` object (`destination`, `action`).
pub fn compensation(v: &serde_json::Value) -> Result<Compensation, FieldError> {
    let serde_json::Value::Object(o) = v else {
        return Err((
            "compensation",
            "must be an object with destination and action",
        ));
    };
    if o.keys().any(|k| k != "destination" && k != "action") {
        return Err((
            "compensation",
            "has a field other than destination and action",
        ));
    }
    let destination = match o.get("destination") {
        Some(serde_json::Value::String(d)) => d.clone(),
        _ => return Err(("compensation/destination", "must be a string")),
    };
    let host = http_host(&destination).ok_or((
        "compensation/destination",
        "must be an http://host:port/path URL (no user, query or fragment)",
    ))?;
    const NOT_CANONICAL: FieldError = (
        "compensation/action",
        "must be canonical JSON (HL-C14N-1: no floats, NFC strings)",
    );
    let action = match o.get("action") {
        Some(a @ serde_json::Value::Object(_)) => a,
        _ => return Err(("compensation/action", "must be a JSON object")),
    };
    let text = serde_json::to_vec(action).map_err(|_| NOT_CANONICAL)?;
    let value = lychd_canon::parse(&text).map_err(|_| NOT_CANONICAL)?;
    let canonical = lychd_canon::to_canonical_vec(&value).map_err(|_| NOT_CANONICAL)?;
    if canonical.len() > MAX_ACTION_BYTES {
        return Err(("compensation/action", "is larger than 16 KiB"));
    }
    let action_digest = lychd_canon::binding_digest(&value)
        .map_err(|_| NOT_CANONICAL)?
        .to_string();
    Ok(Compensation {
        destination,
        host,
        action: canonical,
        action_digest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(action: serde_json::Value) -> Result<EffectSpec, FieldError> {
        spec(
            Some(&json!("http")),
            Some(&json!("http://127.0.0.1:8080/orders")),
            Some(&action),
            Some(&json!("high")),
        )
    }

    #[test]
    fn the_action_digest_is_of_the_canonical_action_whatever_its_member_order() {
        let a = ok(json!({"b": 1, "a": "x"})).expect("valid");
        let b = ok(json!({"a": "x", "b": 1})).expect("valid");
        assert_eq!(a.action_digest, b.action_digest);
        assert_eq!(a.action, br#"{"a":"x","b":1}"#.to_vec());
        assert!(is_digest(&a.action_digest), "{}", a.action_digest);
        assert_ne!(
            a.action_digest,
            ok(json!({"a": "y", "b": 1})).unwrap().action_digest
        );
        assert_eq!(a.host, "127.0.0.1");
    }

    #[test]
    fn bad_fields_are_named() {
        let u = json!("http://h:1/p");
        let o = json!({});
        let h = json!("high");
        let http = json!("http");
        for (args, field) in [
            ((None, Some(&u), Some(&o), Some(&h)), "adapter"),
            (
                (Some(&json!("smtp")), Some(&u), Some(&o), Some(&h)),
                "adapter",
            ),
            ((Some(&http), None, Some(&o), Some(&h)), "destination"),
            (
                (
                    Some(&http),
                    Some(&json!("https://h:1/")),
                    Some(&o),
                    Some(&h),
                ),
                "destination",
            ),
            (
                (
                    Some(&http),
                    Some(&json!("http://u:p@h:1/")),
                    Some(&o),
                    Some(&h),
                ),
                "destination",
            ),
            (
                (Some(&http), Some(&json!("http://h/")), Some(&o), Some(&h)),
                "destination",
            ),
            (
                (
                    Some(&http),
                    Some(&json!("http://h:1/?q")),
                    Some(&o),
                    Some(&h),
                ),
                "destination",
            ),
            (
                (Some(&http), Some(&u), Some(&json!([1])), Some(&h)),
                "action",
            ),
            (
                (Some(&http), Some(&u), Some(&json!({"f": 1.5})), Some(&h)),
                "action",
            ),
            (
                (Some(&http), Some(&u), Some(&o), Some(&json!("medium"))),
                "risk",
            ),
            ((Some(&http), Some(&u), Some(&o), None), "risk"),
        ] {
            assert_eq!(
                spec(args.0, args.1, args.2, args.3).unwrap_err().0,
                field,
                "{args:?}"
            );
        }
    }

    #[test]
    fn the_idempotency_key_binds_every_member_of_the_tuple() {
        let base = ("r", "t", 1, "sha256:00", HTTP_ADAPTER_VERSION);
        let key = |t: (&str, &str, u32, &str, &str)| {
            idempotency_key(&idempotency_tuple(t.0, t.1, t.2, t.3, t.4))
        };
        let k = key(base);
        assert!(is_digest(&k));
        assert_eq!(k, key(base));
        for other in [
            ("r2", "t", 1, "sha256:00", HTTP_ADAPTER_VERSION),
            ("r", "t2", 1, "sha256:00", HTTP_ADAPTER_VERSION),
            ("r", "t", 2, "sha256:00", HTTP_ADAPTER_VERSION),
            ("r", "t", 1, "sha256:01", HTTP_ADAPTER_VERSION),
            ("r", "t", 1, "sha256:00", "other/2"),
        ] {
            assert_ne!(key(other), k, "{other:?}");
        }
        assert_eq!(
            idempotency_tuple("r", "t", 3, "sha256:ab", "v/1"),
            "lychd.runner.effect/v1|r|t|3|sha256:ab|v/1"
        );
    }

    #[test]
    fn resolutions_name_their_fsm_event() {
        assert_eq!(
            Resolution::Confirmed {
                receipt_digest: String::new()
            }
            .event(),
            "reconciled_confirmed"
        );
        assert_eq!(Resolution::NotApplied.event(), "reconciled_not_applied");
        assert_eq!(Resolution::Abandon.event(), "abandoned");
    }
}
