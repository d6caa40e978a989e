//! What a consent binds: THE one definition of the bound fields, the binding document (the
//! binding digest's input) and the digests of a proposal.
//!
//! Invariant: pure; a field is digested, stored and re-checked at consumption, or the code does
//! not compile.

use lychd_helmloop::{C14nError, Map, Value, binding_digest};

use super::proposal::Proposal;

/// Where a bound field is kept in `ward.consents`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Its own column, of this SQL type; a top-level member of the binding document.
    Column(&'static str),
    /// A member of the `binding` object (loop-contract v1's optional `approval.binding_fields`),
    /// absent when not bound.
    Binding,
}

macro_rules! bound_fields {
    ($($(#[$doc:meta])* $field:ident = $name:literal, $kept:expr;)*) => {
        /// Every field a consent binds: THE one definition from which the binding document
        /// (the binding digest's input), the stored columns and the comparison at consumption
        /// are all derived. A field added here is digested, stored and re-checked, or the
        /// code does not compile (every match on it is exhaustive).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum BoundField {
            $($(#[$doc])* $field,)*
        }

        impl BoundField {
            /// Every bound field, in definition order.
            pub const ALL: &'static [BoundField] = &[$(BoundField::$field,)*];

            /// Its name in the binding document (loop-contract v1's spelling) and in storage.
            pub fn name(self) -> &'static str {
                match self {
                    $(BoundField::$field => $name,)*
                }
            }

            /// Where it is kept.
            pub fn kept(self) -> Kept {
                match self {
                    $(BoundField::$field => $kept,)*
                }
            }
        }
    };
}

bound_fields! {
    RunId = "run_id", Kept::Column("text");
    EffectOwner = "effect_owner", Kept::Column("text");
    EffectId = "effect_id", Kept::Column("text");
    EffectRevision = "effect_revision", Kept::Column("bigint");
    ToolName = "tool_name", Kept::Column("text");
    DeferredCallId = "deferred_call_id", Kept::Column("text");
    /// The arguments, by the digest of their canonical, uncensored form.
    ArgumentsDigest = "arguments_digest", Kept::Column("text");
    EffectClass = "effect_class", Kept::Column("text");
    WorkflowVersion = "workflow_version", Kept::Binding;
    ActionHash = "action_hash", Kept::Binding;
    ArtifactHash = "artifact_hash", Kept::Binding;
    DestinationHash = "destination_hash", Kept::Binding;
    Visibility = "visibility", Kept::Binding;
    Scope = "scope", Kept::Binding;
    Actor = "actor", Kept::Binding;
    /// An absolute instant, Unix seconds.
    Expiry = "expiry", Kept::Binding;
    Nonce = "nonce", Kept::Binding;
    Rationale = "rationale", Kept::Binding;
    /// The requesting principal (the caller, never a field of the request).
    RequestedBy = "requested_by", Kept::Column("uuid");
}

/// Name of the object member (and of the column) that holds the [`Kept::Binding`] fields.
pub const BINDING_MEMBER: &str = "binding";

impl BoundField {
    /// This field's value for proposal `p` by `requested_by` whose arguments digest is
    /// `arguments_digest`; `None` for an optional field that is not bound.
    pub fn value(self, p: &Proposal, arguments_digest: &str, requested_by: &str) -> Option<Value> {
        let text = |s: &str| Some(Value::String(s.to_owned()));
        let bound = |s: &Option<String>| s.as_ref().map(|v| Value::String(v.clone()));
        let b = &p.binding;
        match self {
            BoundField::RunId => text(&p.run_id),
            BoundField::EffectOwner => text(&p.effect_owner),
            BoundField::EffectId => text(&p.effect_id),
            BoundField::EffectRevision => Some(Value::Int(p.effect_revision)),
            BoundField::ToolName => text(&p.tool_name),
            BoundField::DeferredCallId => text(&p.deferred_call_id),
            BoundField::ArgumentsDigest => text(arguments_digest),
            BoundField::EffectClass => text(p.class.as_str()),
            BoundField::WorkflowVersion => bound(&b.workflow_version),
            BoundField::ActionHash => bound(&b.action_hash),
            BoundField::ArtifactHash => bound(&b.artifact_hash),
            BoundField::DestinationHash => bound(&b.destination_hash),
            BoundField::Visibility => bound(&b.visibility),
            BoundField::Scope => bound(&b.scope),
            BoundField::Actor => bound(&b.actor),
            BoundField::Expiry => b.expiry.map(Value::Int),
            BoundField::Nonce => bound(&b.nonce),
            BoundField::Rationale => bound(&b.rationale),
            BoundField::RequestedBy => text(requested_by),
        }
    }
}

/// The binding document of proposal `p` by `requested_by`: every [`BoundField`], the
/// column-kept ones as top-level members and the others inside [`BINDING_MEMBER`] (present,
/// possibly empty). It is exactly what is stored (the columns and the `binding` object) and what
/// the binding digest is taken of.
pub fn binding_document(p: &Proposal, arguments_digest: &str, requested_by: &str) -> Value {
    let mut top = Map::new();
    let mut binding = Map::new();
    for &f in BoundField::ALL {
        let Some(v) = f.value(p, arguments_digest, requested_by) else {
            continue;
        };
        match f.kept() {
            Kept::Column(_) => top.insert(f.name(), v),
            Kept::Binding => binding.insert(f.name(), v),
        };
    }
    top.insert(BINDING_MEMBER, Value::Object(binding));
    Value::Object(top)
}

/// The digests of a proposal by `requested_by`: of its canonical (uncensored) arguments, and
/// of its binding document (what an approver reviews and a consumer presents).
pub fn digests(p: &Proposal, requested_by: &str) -> Result<(String, String), C14nError> {
    let arguments = binding_digest(&p.arguments)?.to_string();
    let binding = binding_digest(&binding_document(p, &arguments, requested_by))?.to_string();
    Ok((arguments, binding))
}

/// Whether a stored binding document (read back from the columns [`BoundField`] names) still
/// digests to the stored binding digest: what consumption checks before comparing digests.
pub fn document_matches(document: &Value, binding_digest_stored: &str) -> bool {
    binding_digest(document).is_ok_and(|d| d.to_string() == binding_digest_stored)
}
#[cfg(test)]
mod tests {
    use super::super::proposal::{Binding, parse_arguments};
    use super::super::settle::EffectClass;
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

    /// Change `f` in `p` (or the requester): every bound field, one at a time.
    fn vary(f: BoundField, p: &mut Proposal, requester: &mut String) {
        let bump = |s: &mut Option<String>| match s {
            Some(v) => v.push('x'),
            None => *s = Some("x".into()),
        };
        let b = &mut p.binding;
        match f {
            BoundField::RunId => p.run_id.push('x'),
            BoundField::EffectOwner => p.effect_owner.push('x'),
            BoundField::EffectId => p.effect_id.push('x'),
            BoundField::EffectRevision => p.effect_revision += 1,
            BoundField::ToolName => p.tool_name.push('x'),
            BoundField::DeferredCallId => p.deferred_call_id.push('x'),
            BoundField::ArgumentsDigest => {
                p.arguments = parse_arguments(br#"{"other":1}"#).expect("arguments")
            }
            BoundField::EffectClass => {
                p.class = if p.class == EffectClass::Standard {
                    EffectClass::Bounded
                } else {
                    EffectClass::Standard
                }
            }
            BoundField::WorkflowVersion => bump(&mut b.workflow_version),
            BoundField::ActionHash => bump(&mut b.action_hash),
            BoundField::ArtifactHash => bump(&mut b.artifact_hash),
            BoundField::DestinationHash => bump(&mut b.destination_hash),
            BoundField::Visibility => bump(&mut b.visibility),
            BoundField::Scope => bump(&mut b.scope),
            BoundField::Actor => bump(&mut b.actor),
            BoundField::Expiry => b.expiry = Some(b.expiry.unwrap_or(1_900_000_000) + 1),
            BoundField::Nonce => bump(&mut b.nonce),
            BoundField::Rationale => bump(&mut b.rationale),
            BoundField::RequestedBy => requester.push('x'),
        }
    }

    fn fully_bound() -> Proposal {
        let mut p = proposal(r#"{"a":1,"b":"x"}"#);
        p.binding = Binding {
            workflow_version: Some("wf-1".into()),
            action_hash: Some("ah".into()),
            artifact_hash: Some("arh".into()),
            destination_hash: Some("dh".into()),
            visibility: Some("private".into()),
            scope: Some("reports".into()),
            actor: Some("agent-1".into()),
            expiry: Some(1_900_000_000),
            nonce: Some("n-1".into()),
            rationale: Some("why".into()),
        };
        p
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
        // Every field of the one definition, from unbound and from bound.
        for start in [base, fully_bound()] {
            let (_, before) = digests(&start, "p1").expect("digests");
            let mut seen = std::collections::HashSet::new();
            for &f in BoundField::ALL {
                let (mut p, mut requester) = (start.clone(), "p1".to_owned());
                vary(f, &mut p, &mut requester);
                let (_, after) = digests(&p, &requester).expect("digests");
                assert_ne!(before, after, "{f:?} is not bound");
                assert!(seen.insert(after), "{f:?} collides with another field");
            }
        }
    }

    #[test]
    fn the_binding_document_is_what_was_digested_before_the_one_definition() {
        // The layout digested before the fields had one definition: consents stored then keep
        // their digests (a pinned equality, so a change of layout cannot pass unnoticed).
        let p = fully_bound();
        let (args, bound) = digests(&p, "p1").expect("digests");
        let mut b = Map::new();
        for (k, v) in [
            ("workflow_version", "wf-1"),
            ("action_hash", "ah"),
            ("artifact_hash", "arh"),
            ("destination_hash", "dh"),
            ("visibility", "private"),
            ("scope", "reports"),
            ("actor", "agent-1"),
            ("nonce", "n-1"),
            ("rationale", "why"),
        ] {
            b.insert(k, Value::String(v.into()));
        }
        b.insert("expiry", Value::Int(1_900_000_000));
        let mut m = Map::new();
        for (k, v) in [
            ("run_id", "run-1"),
            ("effect_owner", "runner"),
            ("effect_id", "write-file"),
            ("tool_name", "fs.write"),
            ("deferred_call_id", "call-1"),
            ("arguments_digest", args.as_str()),
            ("effect_class", "standard"),
            ("requested_by", "p1"),
        ] {
            m.insert(k, Value::String(v.into()));
        }
        m.insert("effect_revision", Value::Int(1));
        m.insert("binding", Value::Object(b));
        assert_eq!(
            bound,
            binding_digest(&Value::Object(m))
                .expect("digest")
                .to_string()
        );
        assert!(document_matches(&binding_document(&p, &args, "p1"), &bound));
    }
}
