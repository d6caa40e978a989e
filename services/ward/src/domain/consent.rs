//! Consent ("25. HitL"): what one exact proposed call binds, how its arguments are censored
//! and digested, and which classes of effect only a live human may settle. Pure: the store
//! applies these rules; nothing here reads a clock or a database.

use lychd_helmloop::{C14nError, Map, ParseOptions, Value, binding_digest};

use super::grammar::Object;

/// Largest `arguments_json` accepted.
pub const ARGUMENTS_MAX_BYTES: usize = 64 * 1024;
/// Longest identifier (run, effect owner, effect id, tool, deferred call id).
pub const IDENT_MAX: usize = 128;
/// Longest free-text binding field (rationale).
pub const TEXT_MAX: usize = 2048;
/// What replaces a secret-like argument's value in the kept copy.
pub const CENSORED: &str = "[censored]";

/// Classes of effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectClass {
    Standard,
    Bounded,
    CoreMutation,
    Migration,
    DestructiveDeletion,
    SecretOrAuthorityChange,
    HostLifecycle,
}

impl EffectClass {
    pub const ALL: [EffectClass; 7] = [
        EffectClass::Standard,
        EffectClass::Bounded,
        EffectClass::CoreMutation,
        EffectClass::Migration,
        EffectClass::DestructiveDeletion,
        EffectClass::SecretOrAuthorityChange,
        EffectClass::HostLifecycle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EffectClass::Standard => "standard",
            EffectClass::Bounded => "bounded",
            EffectClass::CoreMutation => "core_mutation",
            EffectClass::Migration => "migration",
            EffectClass::DestructiveDeletion => "destructive_deletion",
            EffectClass::SecretOrAuthorityChange => "secret_or_authority_change",
            EffectClass::HostLifecycle => "host_lifecycle",
        }
    }

    pub fn parse(s: &str) -> Option<EffectClass> {
        EffectClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Classes only a live human verdict may settle, whatever standing policy says.
    pub fn live_only(self) -> bool {
        !matches!(self, EffectClass::Standard | EffectClass::Bounded)
    }
}

/// Where a consent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsentState {
    Pending,
    Granted,
    Denied,
    Cancelled,
    Expired,
}

impl ConsentState {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsentState::Pending => "pending",
            ConsentState::Granted => "granted",
            ConsentState::Denied => "denied",
            ConsentState::Cancelled => "cancelled",
            ConsentState::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<ConsentState> {
        [
            ConsentState::Pending,
            ConsentState::Granted,
            ConsentState::Denied,
            ConsentState::Cancelled,
            ConsentState::Expired,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// A verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Deny,
}

impl Verdict {
    /// The state it settles a pending consent in.
    pub fn state(self) -> ConsentState {
        match self {
            Verdict::Approve => ConsentState::Granted,
            Verdict::Deny => ConsentState::Denied,
        }
    }
}

/// Why a consent cannot be settled, consumed or revoked as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsentRefusal {
    ReviewDigestMismatch,
    NotGranted,
    Consumed,
    Revoked,
    BindingExpired,
    PrincipalRevoked,
    BindingMismatch,
    RuleInvalid,
}

impl ConsentRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            ConsentRefusal::ReviewDigestMismatch => "review digest mismatch",
            ConsentRefusal::NotGranted => "not granted",
            ConsentRefusal::Consumed => "consumed",
            ConsentRefusal::Revoked => "revoked",
            ConsentRefusal::BindingExpired => "binding expired",
            ConsentRefusal::PrincipalRevoked => "principal revoked",
            ConsentRefusal::BindingMismatch => "binding mismatch",
            ConsentRefusal::RuleInvalid => "rule invalid",
        }
    }
}

/// Facts about a consent at consumption (read in the consuming statement's snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumeFacts {
    pub state: ConsentState,
    pub consumed: bool,
    pub revoked: bool,
    /// The bound expiry has passed (database time).
    pub binding_expired: bool,
    /// The requesting or the deciding principal is revoked.
    pub principal_revoked: bool,
    /// The presented binding digest equals the consent's.
    pub digest_equal: bool,
    /// Granted by a standing rule that is no longer enabled, unexpired and digest-equal.
    pub rule_invalid: bool,
}

/// May an approval with these facts be consumed? The first failing rule, in a fixed order.
pub fn consumable(f: ConsumeFacts) -> Result<(), ConsentRefusal> {
    if f.state != ConsentState::Granted {
        return Err(ConsentRefusal::NotGranted);
    }
    if !f.digest_equal {
        return Err(ConsentRefusal::BindingMismatch);
    }
    if f.consumed {
        return Err(ConsentRefusal::Consumed);
    }
    if f.revoked {
        return Err(ConsentRefusal::Revoked);
    }
    if f.binding_expired {
        return Err(ConsentRefusal::BindingExpired);
    }
    if f.principal_revoked {
        return Err(ConsentRefusal::PrincipalRevoked);
    }
    if f.rule_invalid {
        return Err(ConsentRefusal::RuleInvalid);
    }
    Ok(())
}

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

impl Binding {
    /// The bound fields as one object (names in loop-contract v1's spelling).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        let texts = [
            ("workflow_version", &self.workflow_version),
            ("action_hash", &self.action_hash),
            ("artifact_hash", &self.artifact_hash),
            ("destination_hash", &self.destination_hash),
            ("visibility", &self.visibility),
            ("scope", &self.scope),
            ("actor", &self.actor),
            ("nonce", &self.nonce),
            ("rationale", &self.rationale),
        ];
        for (name, value) in texts {
            if let Some(v) = value {
                m.insert(name, Value::String(v.clone()));
            }
        }
        if let Some(e) = self.expiry {
            m.insert("expiry", Value::Int(e));
        }
        Value::Object(m)
    }
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

/// Whether a member name looks like it holds a secret (case-insensitive substring).
pub fn is_secret_like(name: &str) -> bool {
    const MARKS: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "private_key",
        "privatekey",
        "credential",
        "authorization",
        "cookie",
        "session",
        "bearer",
    ];
    let lower = name.to_ascii_lowercase();
    MARKS.iter().any(|m| lower.contains(m))
}

/// `value` with every member under a secret-like name replaced by [`CENSORED`], at any depth.
pub fn censor(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let kept = if is_secret_like(k) {
                        Value::String(CENSORED.to_owned())
                    } else {
                        censor(v)
                    };
                    (k.to_owned(), kept)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(censor).collect()),
        other => other.clone(),
    }
}

/// The digests of a proposal by `requested_by`: of its canonical (uncensored) arguments, and
/// of everything it binds (what an approver reviews and a consumer presents).
pub fn digests(p: &Proposal, requested_by: &str) -> Result<(String, String), C14nError> {
    let arguments = binding_digest(&p.arguments)?.to_string();
    let mut m = Map::new();
    m.insert("run_id", Value::String(p.run_id.clone()));
    m.insert("effect_owner", Value::String(p.effect_owner.clone()));
    m.insert("effect_id", Value::String(p.effect_id.clone()));
    m.insert("effect_revision", Value::Int(p.effect_revision));
    m.insert("tool_name", Value::String(p.tool_name.clone()));
    m.insert(
        "deferred_call_id",
        Value::String(p.deferred_call_id.clone()),
    );
    m.insert("arguments_digest", Value::String(arguments.clone()));
    m.insert("effect_class", Value::String(p.class.as_str().to_owned()));
    m.insert("binding", p.binding.to_value());
    m.insert("requested_by", Value::String(requested_by.to_owned()));
    let binding = binding_digest(&Value::Object(m))?.to_string();
    Ok((arguments, binding))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(args: &str) -> Proposal {
        Proposal {
            run_id: "run-1".into(),
            effect_owner: "runner".into(),
            effect_id: "write-file".into(),
            effect_revision: 1,
            tool_name: "fs.write".into(),
            deferred_call_id: "call-1".into(),
            class: EffectClass::Standard,
            binding: Binding::default(),
            arguments: parse_arguments(args.as_bytes()).expect("arguments"),
        }
    }

    #[test]
    fn secret_like_values_are_censored_at_any_depth_and_nothing_else() {
        let args = parse_arguments(
            br#"{"path":"/tmp/a","auth":{"API_Key":"k","user":"u"},"list":[{"sessionId":"s"}],"Password":1}"#,
        )
        .expect("arguments");
        let censored = lychd_helmloop::to_canonical_string(&censor(&args)).expect("canonical");
        assert_eq!(
            censored,
            r#"{"Password":"[censored]","auth":{"API_Key":"[censored]","user":"u"},"list":[{"sessionId":"[censored]"}],"path":"/tmp/a"}"#
        );
    }

    #[test]
    fn the_binding_digest_moves_with_every_bound_field_and_not_with_key_order() {
        let base = proposal(r#"{"a":1,"b":"x"}"#);
        let (args, bound) = digests(&base, "p1").expect("digests");
        let reordered = proposal(r#"{"b":"x","a":1}"#);
        assert_eq!(
            digests(&reordered, "p1").expect("digests"),
            (args.clone(), bound.clone())
        );
        let changed_arg = proposal(r#"{"a":2,"b":"x"}"#);
        let (args2, bound2) = digests(&changed_arg, "p1").expect("digests");
        assert_ne!(args, args2);
        assert_ne!(bound, bound2);
        assert_ne!(
            bound,
            digests(&base, "p2").expect("digests").1,
            "requester is bound"
        );
        let mut revised = base.clone();
        revised.effect_revision = 2;
        assert_ne!(bound, digests(&revised, "p1").expect("digests").1);
        let mut nonce = base.clone();
        nonce.binding.nonce = Some("n".into());
        assert_ne!(bound, digests(&nonce, "p1").expect("digests").1);
        let mut class = base;
        class.class = EffectClass::Migration;
        assert_ne!(bound, digests(&class, "p1").expect("digests").1);
    }

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

    #[test]
    fn consumption_needs_every_fact_and_names_the_first_missing() {
        let ok = ConsumeFacts {
            state: ConsentState::Granted,
            consumed: false,
            revoked: false,
            binding_expired: false,
            principal_revoked: false,
            digest_equal: true,
            rule_invalid: false,
        };
        assert_eq!(consumable(ok), Ok(()));
        for state in [
            ConsentState::Pending,
            ConsentState::Denied,
            ConsentState::Cancelled,
            ConsentState::Expired,
        ] {
            assert_eq!(
                consumable(ConsumeFacts { state, ..ok }),
                Err(ConsentRefusal::NotGranted)
            );
        }
        let cases = [
            (
                ConsumeFacts {
                    digest_equal: false,
                    consumed: true,
                    ..ok
                },
                ConsentRefusal::BindingMismatch,
            ),
            (
                ConsumeFacts {
                    consumed: true,
                    revoked: true,
                    ..ok
                },
                ConsentRefusal::Consumed,
            ),
            (
                ConsumeFacts {
                    revoked: true,
                    ..ok
                },
                ConsentRefusal::Revoked,
            ),
            (
                ConsumeFacts {
                    binding_expired: true,
                    ..ok
                },
                ConsentRefusal::BindingExpired,
            ),
            (
                ConsumeFacts {
                    principal_revoked: true,
                    ..ok
                },
                ConsentRefusal::PrincipalRevoked,
            ),
        ];
        for (facts, refusal) in cases {
            assert_eq!(consumable(facts), Err(refusal), "{facts:?}");
        }
    }

    #[test]
    fn identifiers_and_live_only_classes() {
        assert!(is_ident("run:2026-12-03.a_b"));
        assert!(!is_ident(""));
        assert!(!is_ident("has space"));
        assert!(!is_ident(&"x".repeat(IDENT_MAX + 1)));
        let live: Vec<_> = EffectClass::ALL
            .into_iter()
            .filter(|c| c.live_only())
            .collect();
        assert_eq!(live.len(), 5);
        for c in EffectClass::ALL {
            assert_eq!(EffectClass::parse(c.as_str()), Some(c));
        }
    }
}
