//! Decoding consent requests (every bad field named, no value echoed) and encoding consents.

use lychd_proto::ward::v1 as pb;
use lychd_runtime::refusal::{Violations, bounds};
use uuid::Uuid;

use super::{Decoded, Field};
use crate::domain::consent::{
    self, Binding, ConsentState, EffectClass, Proposal, TEXT_MAX, Verdict,
};
use crate::domain::paging::{self, List};
use crate::error::WardError;
use crate::service::consent::{ConsentRecord, ListQuery};
use crate::service::proposals::RuleRecord;

const IDENT: &str = "must be 1..128 characters of [A-Za-z0-9._:-]";

fn ident(v: &mut Violations, field: &str, s: &str) -> Option<String> {
    v.field(
        field,
        if consent::is_ident(s) {
            Ok(s.to_owned())
        } else {
            Err(IDENT)
        },
    )
}

fn class(v: &mut Violations, field: &str, raw: i32) -> Option<EffectClass> {
    use pb::EffectClass as C;
    let class = match C::try_from(raw) {
        Ok(C::Standard) => Ok(EffectClass::Standard),
        Ok(C::Bounded) => Ok(EffectClass::Bounded),
        Ok(C::CoreMutation) => Ok(EffectClass::CoreMutation),
        Ok(C::Migration) => Ok(EffectClass::Migration),
        Ok(C::DestructiveDeletion) => Ok(EffectClass::DestructiveDeletion),
        Ok(C::SecretOrAuthorityChange) => Ok(EffectClass::SecretOrAuthorityChange),
        Ok(C::HostLifecycle) => Ok(EffectClass::HostLifecycle),
        Ok(C::Unspecified) | Err(_) => Err("must be one of the EFFECT_CLASS_ values"),
    };
    v.field(field, class)
}

fn class_pb(c: EffectClass) -> pb::EffectClass {
    use pb::EffectClass as C;
    match c {
        EffectClass::Standard => C::Standard,
        EffectClass::Bounded => C::Bounded,
        EffectClass::CoreMutation => C::CoreMutation,
        EffectClass::Migration => C::Migration,
        EffectClass::DestructiveDeletion => C::DestructiveDeletion,
        EffectClass::SecretOrAuthorityChange => C::SecretOrAuthorityChange,
        EffectClass::HostLifecycle => C::HostLifecycle,
    }
}

pub fn state(s: ConsentState) -> pb::ConsentState {
    match s {
        ConsentState::Pending => pb::ConsentState::Pending,
        ConsentState::Granted => pb::ConsentState::Granted,
        ConsentState::Denied => pb::ConsentState::Denied,
        ConsentState::Cancelled => pb::ConsentState::Cancelled,
        ConsentState::Expired => pb::ConsentState::Expired,
    }
}

/// An optional bound text field: empty = not bound; else printable and at most `max` bytes.
fn bound_text(v: &mut Violations, field: &str, s: &str, max: usize) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    v.field(
        field,
        if s.len() > max {
            Err("is too long")
        } else if s.chars().any(char::is_control) {
            Err("must not hold control characters")
        } else if !lychd_helmloop::is_nfc(s) {
            // It is bound into the canonical (HL-C14N-1) binding digest.
            Err("must be in Unicode NFC")
        } else {
            Ok(s.to_owned())
        },
    )
}

fn binding(v: &mut Violations, b: Option<&pb::ConsentBinding>) -> Binding {
    let Some(b) = b else {
        return Binding::default();
    };
    let short = consent::IDENT_MAX * 2;
    let expiry = b.expiry.as_ref().and_then(|t| {
        v.field(
            "binding.expiry",
            if t.nanos == 0 {
                bounds::unix_seconds(t.seconds)
            } else {
                Err("must be a positive whole second")
            },
        )
    });
    Binding {
        workflow_version: bound_text(v, "binding.workflow_version", &b.workflow_version, short),
        action_hash: bound_text(v, "binding.action_hash", &b.action_hash, short),
        artifact_hash: bound_text(v, "binding.artifact_hash", &b.artifact_hash, short),
        destination_hash: bound_text(v, "binding.destination_hash", &b.destination_hash, short),
        visibility: bound_text(v, "binding.visibility", &b.visibility, short),
        scope: bound_text(v, "binding.scope", &b.scope, short),
        actor: bound_text(v, "binding.actor", &b.actor, short),
        expiry,
        nonce: bound_text(v, "binding.nonce", &b.nonce, short),
        rationale: bound_text(v, "binding.rationale", &b.rationale, TEXT_MAX),
    }
}

/// A proposal, checked whole (every bad field named).
pub fn proposal(r: &pb::ProposeEffectRequest) -> Decoded<Proposal> {
    let mut v = Violations::new();
    let run_id = ident(&mut v, "run_id", &r.run_id);
    let effect_owner = ident(&mut v, "effect_owner", &r.effect_owner);
    let effect_id = ident(&mut v, "effect_id", &r.effect_id);
    let effect_revision = v.field(
        "effect_revision",
        i64::try_from(r.effect_revision)
            .ok()
            .filter(|n| *n > 0)
            .ok_or("must be positive (at most 2^63-1)"),
    );
    let tool_name = ident(&mut v, "tool_name", &r.tool_name);
    let deferred_call_id = ident(&mut v, "deferred_call_id", &r.deferred_call_id);
    let arguments = v.field(
        "arguments_json",
        consent::parse_arguments(&r.arguments_json).map_err(|e| e.describe()),
    );
    let class = class(&mut v, "effect_class", r.effect_class);
    let binding = binding(&mut v, r.binding.as_ref());
    match (
        run_id,
        effect_owner,
        effect_id,
        effect_revision,
        tool_name,
        deferred_call_id,
        arguments,
        class,
    ) {
        (
            Some(run_id),
            Some(effect_owner),
            Some(effect_id),
            Some(effect_revision),
            Some(tool_name),
            Some(deferred_call_id),
            Some(arguments),
            Some(class),
        ) if v.is_empty() => Ok(Proposal {
            run_id,
            effect_owner,
            effect_id,
            effect_revision,
            tool_name,
            deferred_call_id,
            class,
            binding,
            arguments,
        }),
        _ => Err(v.into()),
    }
}

fn digest(v: &mut Violations, field: &str, s: &str) -> Option<String> {
    let ok = s.len() == 71
        && s.starts_with("sha256:")
        && s[7..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    v.field(
        field,
        if ok {
            Ok(s.to_owned())
        } else {
            Err("must be sha256: and 64 lowercase hex digits")
        },
    )
}

/// A verdict on one consent.
pub fn decide(r: &pb::DecideRequest) -> Decoded<(Uuid, Verdict, String)> {
    let mut v = Violations::new();
    let id = super::uuid(&mut v, "consent_id", &r.consent_id);
    let verdict = v.field(
        "verdict",
        match pb::Verdict::try_from(r.verdict) {
            Ok(pb::Verdict::Approve) => Ok(Verdict::Approve),
            Ok(pb::Verdict::Deny) => Ok(Verdict::Deny),
            _ => Err("must be VERDICT_APPROVE or VERDICT_DENY"),
        },
    );
    let review = digest(&mut v, "review_digest", &r.review_digest);
    match (id, verdict, review) {
        (Some(id), Some(verdict), Some(review)) if v.is_empty() => Ok((id, verdict, review)),
        _ => Err(v.into()),
    }
}

/// A consumption: the consent and the binding digest of the call about to be made.
pub fn consume(r: &pb::ConsumeConsentRequest) -> Decoded<(Uuid, String)> {
    let mut v = Violations::new();
    let id = super::uuid(&mut v, "consent_id", &r.consent_id);
    let d = digest(&mut v, "binding_digest", &r.binding_digest);
    match (id, d) {
        (Some(id), Some(d)) if v.is_empty() => Ok((id, d)),
        _ => Err(v.into()),
    }
}

/// A run id.
pub fn run(field: &str, s: &str) -> Decoded<String> {
    let mut v = Violations::new();
    ident(&mut v, field, s).ok_or_else(|| v.into())
}

pub fn list(r: &pb::ListConsentsRequest) -> Decoded<ListQuery> {
    let mut v = Violations::new();
    let run_id = if r.run_id.is_empty() {
        None
    } else {
        ident(&mut v, "run_id", &r.run_id)
    };
    let state = match pb::ConsentState::try_from(r.state) {
        Ok(pb::ConsentState::Unspecified) => None,
        Ok(pb::ConsentState::Pending) => Some(ConsentState::Pending),
        Ok(pb::ConsentState::Granted) => Some(ConsentState::Granted),
        Ok(pb::ConsentState::Denied) => Some(ConsentState::Denied),
        Ok(pb::ConsentState::Cancelled) => Some(ConsentState::Cancelled),
        Ok(pb::ConsentState::Expired) => Some(ConsentState::Expired),
        Err(_) => v.field(
            "state",
            Err::<ConsentState, _>("is not a CONSENT_STATE_ value"),
        ),
    };
    let (size, token) = super::page(r.page.as_ref());
    let before = v.field("page.page_token", paging::seq_before(List::Consents, token));
    match before {
        Some(before) if v.is_empty() => Ok(ListQuery {
            run_id,
            state,
            size,
            before,
        }),
        _ => Err(WardError::from(v)),
    }
}

fn text(s: &Option<String>) -> String {
    s.clone().unwrap_or_default()
}

pub fn consent(c: &ConsentRecord) -> pb::Consent {
    let b = &c.binding;
    pb::Consent {
        consent_id: c.id.to_string(),
        run_id: c.run_id.clone(),
        effect_owner: c.effect_owner.clone(),
        effect_id: c.effect_id.clone(),
        effect_revision: u64::try_from(c.effect_revision).unwrap_or(0),
        tool_name: c.tool_name.clone(),
        deferred_call_id: c.deferred_call_id.clone(),
        censored_arguments_json: c.censored_arguments.clone(),
        arguments_digest: c.arguments_digest.clone(),
        effect_class: class_pb(c.class) as i32,
        binding: Some(pb::ConsentBinding {
            workflow_version: text(&b.workflow_version),
            action_hash: text(&b.action_hash),
            artifact_hash: text(&b.artifact_hash),
            destination_hash: text(&b.destination_hash),
            visibility: text(&b.visibility),
            scope: text(&b.scope),
            actor: text(&b.actor),
            expiry: b
                .expiry
                .map(|seconds| prost_types::Timestamp { seconds, nanos: 0 }),
            nonce: text(&b.nonce),
            rationale: text(&b.rationale),
        }),
        binding_digest: c.binding_digest.clone(),
        requested_by: c.requested_by.to_string(),
        created_at: Some(super::timestamp(c.created_at)),
        expires_at: Some(super::timestamp(c.expires_at)),
        state: state(c.state) as i32,
        decided_at: c.decided_at.map(super::timestamp),
        decided_by: c.decided_by.map(|p| p.to_string()).unwrap_or_default(),
        consumed_at: c.consumed_at.map(super::timestamp),
        consumed_by: c.consumed_by.map(|p| p.to_string()).unwrap_or_default(),
        revoked_at: c.revoked_at.map(super::timestamp),
        granted_by_rule: c
            .granted_by_rule
            .as_ref()
            .map(|(slug, _)| slug.clone())
            .unwrap_or_default(),
        rule_policy_digest: c
            .granted_by_rule
            .as_ref()
            .map(|(_, digest)| digest.clone())
            .unwrap_or_default(),
    }
}

/// A rule slug.
pub fn slug(s: &str) -> Decoded<String> {
    let ok = !s.is_empty()
        && s.len() <= crate::domain::preauth::SLUG_MAX
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let mut v = Violations::new();
    v.field(
        "slug",
        if ok {
            Ok(s.to_owned())
        } else {
            Err("must be 1..64 characters of [a-z0-9-]")
        },
    )
    .ok_or_else(|| v.into())
}

pub fn rule(r: &RuleRecord) -> pb::PreauthRule {
    pb::PreauthRule {
        slug: r.slug.clone(),
        source: r.source.clone(),
        effect_class: EffectClass::parse(&r.effect_class)
            .map(|c| class_pb(c) as i32)
            .unwrap_or(0),
        principal_pattern: r.principal_pattern.clone(),
        tool_pattern: r.tool_pattern.clone(),
        effect_owner_pattern: r.owner_pattern.clone(),
        priority: r.priority,
        expires_at: r.expires_at.map(super::timestamp),
        max_uses: r.max_uses.and_then(|n| u64::try_from(n).ok()).unwrap_or(0),
        uses: u64::try_from(r.uses).unwrap_or(0),
        policy_json: r.policy.clone(),
        policy_digest: r.policy_digest.clone(),
        in_files: r.in_files,
        disabled_at: r.disabled_at.map(super::timestamp),
    }
}
