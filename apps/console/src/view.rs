//! What a page shows of a consent: every field the verdict binds, as text. The template
//! engine escapes each value; nothing here is HTML.

use lychd_proto::ward::v1::{Consent, ConsentState, EffectClass};

/// A consent as displayed.
pub struct ConsentView {
    pub id: String,
    pub state: &'static str,
    pub class: &'static str,
    pub live_only: bool,
    pub requested_by: String,
    pub run_id: String,
    pub effect: String,
    pub tool: String,
    pub deferred_call_id: String,
    pub arguments: String,
    pub arguments_digest: String,
    /// The bound optional fields that are set, as (name, value).
    pub bound: Vec<(&'static str, String)>,
    pub binding_digest: String,
    pub created_at: String,
    pub expires_at: String,
    pub decided_by: String,
    pub decided_at: String,
    pub consumed_at: String,
    pub revoked_at: String,
}

pub fn state_name(state: i32) -> &'static str {
    match ConsentState::try_from(state) {
        Ok(ConsentState::Pending) => "pending",
        Ok(ConsentState::Granted) => "granted",
        Ok(ConsentState::Denied) => "denied",
        Ok(ConsentState::Cancelled) => "cancelled",
        Ok(ConsentState::Expired) => "expired",
        _ => "unknown",
    }
}

fn class_name(class: i32) -> (&'static str, bool) {
    match EffectClass::try_from(class) {
        Ok(EffectClass::Standard) => ("standard", false),
        Ok(EffectClass::Bounded) => ("bounded", false),
        Ok(EffectClass::CoreMutation) => ("core mutation", true),
        Ok(EffectClass::Migration) => ("migration", true),
        Ok(EffectClass::DestructiveDeletion) => ("destructive deletion", true),
        Ok(EffectClass::SecretOrAuthorityChange) => ("secret or authority change", true),
        Ok(EffectClass::HostLifecycle) => ("host lifecycle", true),
        _ => ("unknown", false),
    }
}

/// A timestamp as RFC 3339 (UTC), empty when absent.
pub fn instant(t: Option<&prost_types::Timestamp>) -> String {
    let Some(t) = t else {
        return String::new();
    };
    let nanos = i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos);
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|d| {
            d.replace_nanosecond(0)
                .ok()?
                .format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

impl From<&Consent> for ConsentView {
    fn from(c: &Consent) -> Self {
        let (class, live_only) = class_name(c.effect_class);
        let mut bound = Vec::new();
        if let Some(b) = &c.binding {
            for (name, value) in [
                ("workflow version", &b.workflow_version),
                ("action hash", &b.action_hash),
                ("artifact hash", &b.artifact_hash),
                ("destination hash", &b.destination_hash),
                ("visibility", &b.visibility),
                ("scope", &b.scope),
                ("actor", &b.actor),
                ("nonce", &b.nonce),
                ("rationale (the proposer's words)", &b.rationale),
            ] {
                if !value.is_empty() {
                    bound.push((name, value.clone()));
                }
            }
            if b.expiry.is_some() {
                bound.push(("approval usable until", instant(b.expiry.as_ref())));
            }
        }
        ConsentView {
            id: c.consent_id.clone(),
            state: state_name(c.state),
            class,
            live_only,
            requested_by: c.requested_by.clone(),
            run_id: c.run_id.clone(),
            effect: format!(
                "{} / {} rev {}",
                c.effect_owner, c.effect_id, c.effect_revision
            ),
            tool: c.tool_name.clone(),
            deferred_call_id: c.deferred_call_id.clone(),
            arguments: c.censored_arguments_json.clone(),
            arguments_digest: c.arguments_digest.clone(),
            bound,
            binding_digest: c.binding_digest.clone(),
            created_at: instant(c.created_at.as_ref()),
            expires_at: instant(c.expires_at.as_ref()),
            decided_by: c.decided_by.clone(),
            decided_at: instant(c.decided_at.as_ref()),
            consumed_at: instant(c.consumed_at.as_ref()),
            revoked_at: instant(c.revoked_at.as_ref()),
        }
    }
}
