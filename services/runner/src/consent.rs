//! Ward's consent as a peer (`[peers.ward]`, called with the runner's own Ward session, as
//! `model.rs` calls the Dispatcher): a high- or low-risk effect is proposed (`ProposeEffect`,
//! effect owner `runner`), its verdict read by proposing the same call again (an exact replay
//! answers the consent in whatever state it reached: no `ward:review` is needed), and a granted
//! approval consumed (`ConsumeConsent`) before the intent is committed. The runner's
//! effect-time permission (`runner:effect_http` on `destination:<host>`) is asked of Ward with
//! its own session too ([`Consents::authorize`]).
//!
//! Only digests and ids leave this module in logs; the action travels to Ward as the
//! arguments Ward censors and digests.

use lychd_proto::ward::v1 as wpb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::{PeerChannel, peer_channel};
use lychd_runtime::server::ServeContext;
use tonic_types::StatusExt;

/// The effect owner Ward's consents name: the Runner office executes the effects.
pub const EFFECT_OWNER: &str = "runner";

/// What Ward's consent says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pending,
    /// Granted (by a live verdict, or by a standing rule: its slug).
    Granted {
        by_rule: String,
    },
    /// Denied, cancelled or expired before a verdict.
    Denied,
}

/// A consent as the runner needs it.
#[derive(Debug, Clone)]
pub struct Proposed {
    pub consent_id: String,
    pub binding_digest: String,
    pub verdict: Verdict,
    /// Whether the approval was already consumed (by this runner: a crash after consuming).
    pub consumed: bool,
    pub revoked: bool,
}

/// Why consuming failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Stale: revoked, its bound expiry passed, a principal revoked, consumed by another, or
    /// its binding no longer matches (Ward's reason).
    Stale(String),
    /// Ward could not be asked (try again later).
    Unavailable,
}

/// The exact call proposed (the binding).
pub struct Call<'a> {
    pub run_id: &'a str,
    pub effect_id: &'a str,
    pub deferred_call_id: &'a str,
    pub tool: &'a str,
    pub arguments: Vec<u8>,
    pub binding: wpb::ConsentBinding,
}

/// The Ward peer for consent (absent: effects cannot be approved and wait).
#[derive(Clone)]
pub struct Consents {
    ward: Option<WardClient<PeerChannel>>,
    /// The runner's own session token source, for the effect-time permission.
    outgoing: lychd_runtime::client::Outgoing,
}

fn verdict(c: &wpb::Consent) -> Verdict {
    match wpb::ConsentState::try_from(c.state) {
        Ok(wpb::ConsentState::Pending) => Verdict::Pending,
        Ok(wpb::ConsentState::Granted) => Verdict::Granted {
            by_rule: c.granted_by_rule.clone(),
        },
        _ => Verdict::Denied,
    }
}

fn reason(s: &tonic::Status) -> String {
    s.get_error_details()
        .error_info()
        .map(|i| i.reason.clone())
        .unwrap_or_default()
}

impl Consents {
    pub fn new(ctx: &ServeContext) -> anyhow::Result<Consents> {
        let ward = match ctx.config.peers.get("ward") {
            Some(peer) => Some(WardClient::new(peer_channel(
                &peer.endpoint,
                ctx.outgoing.clone(),
            )?)),
            None => None,
        };
        Ok(Consents {
            ward,
            outgoing: ctx.outgoing.clone(),
        })
    }

    /// Whether a Ward is configured (without one, nothing can be released).
    pub fn has_ward(&self) -> bool {
        self.ward.is_some()
    }

    /// No Ward (tests of the step loop without effects).
    pub fn none() -> Consents {
        Consents {
            ward: None,
            outgoing: lychd_runtime::client::Outgoing::default(),
        }
    }

    /// Propose `call` (or read back the consent an identical proposal recorded).
    pub async fn propose(&self, call: &Call<'_>) -> Result<Proposed, Refused> {
        let Some(mut ward) = self.ward.clone() else {
            return Err(Refused::Unavailable);
        };
        let answer = ward
            .propose_effect(wpb::ProposeEffectRequest {
                run_id: call.run_id.to_owned(),
                effect_owner: EFFECT_OWNER.to_owned(),
                effect_id: call.effect_id.to_owned(),
                effect_revision: 1,
                tool_name: call.tool.to_owned(),
                deferred_call_id: call.deferred_call_id.to_owned(),
                arguments_json: call.arguments.clone(),
                effect_class: wpb::EffectClass::Standard as i32,
                binding: Some(call.binding.clone()),
            })
            .await
            .map_err(|s| {
                tracing::warn!(code = ?s.code(), reason = %reason(&s), "proposing an effect failed");
                Refused::Unavailable
            })?;
        let c = answer.into_inner().consent.ok_or(Refused::Unavailable)?;
        Ok(Proposed {
            verdict: verdict(&c),
            consumed: c.consumed_at.is_some(),
            revoked: c.revoked_at.is_some(),
            consent_id: c.consent_id,
            binding_digest: c.binding_digest,
        })
    }

    /// Consume the granted approval `consent_id` presenting `binding_digest` (the same consumer
    /// presenting the same digest again gets the same success: a crash after consuming).
    pub async fn consume(&self, consent_id: &str, binding_digest: &str) -> Result<(), Refused> {
        let Some(mut ward) = self.ward.clone() else {
            return Err(Refused::Unavailable);
        };
        match ward
            .consume_consent(wpb::ConsumeConsentRequest {
                consent_id: consent_id.to_owned(),
                binding_digest: binding_digest.to_owned(),
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(s)
                if matches!(
                    s.code(),
                    tonic::Code::FailedPrecondition
                        | tonic::Code::PermissionDenied
                        | tonic::Code::AlreadyExists
                ) && reason(&s).starts_with("CONSENT_") =>
            {
                Err(Refused::Stale(reason(&s)))
            }
            Err(s) => {
                tracing::warn!(code = ?s.code(), reason = %reason(&s), "consuming a consent failed");
                Err(Refused::Unavailable)
            }
        }
    }

    /// Settle every pending consent of run `run_id` as cancelled (`CancelForRun`, action
    /// `ward:cancel` on `run:<run_id>`, the runner's own session): how many Ward settled now
    /// (0 when none was pending, e.g. on a repeated ask).
    pub async fn cancel_for_run(&self, run_id: &str) -> Result<u32, Refused> {
        let Some(mut ward) = self.ward.clone() else {
            return Err(Refused::Unavailable);
        };
        ward.cancel_for_run(wpb::CancelForRunRequest {
            run_id: run_id.to_owned(),
        })
        .await
        .map(|a| a.into_inner().cancelled)
        .map_err(|s| {
            tracing::warn!(code = ?s.code(), reason = %reason(&s), "releasing an ended run's consents failed");
            Refused::Unavailable
        })
    }

    /// May the runner (its own principal, the effect's executor) perform `action` on
    /// `object` now? Asked of Ward immediately before every dispatch, never cached.
    pub async fn authorize(&self, action: &str, object: &str) -> Result<bool, Refused> {
        let Some(mut ward) = self.ward.clone() else {
            return Err(Refused::Unavailable);
        };
        let Some(token) = self
            .outgoing
            .session()
            .and_then(lychd_runtime::auth::SessionSource::current)
        else {
            return Err(Refused::Unavailable);
        };
        use secrecy::ExposeSecret as _;
        let answer = ward
            .authorize(wpb::AuthorizeRequest {
                token: token.expose_secret().to_owned(),
                action: action.to_owned(),
                object: object.to_owned(),
                audience: "runner".to_owned(),
                // An assignment's purpose is its action's verb (as provisioning writes it).
                purpose: action.split_once(':').map_or(action, |(_, v)| v).to_owned(),
                expected_policy_generation: None,
            })
            .await
            .map_err(|s| {
                tracing::warn!(code = ?s.code(), "asking ward for the effect permission failed");
                Refused::Unavailable
            })?
            .into_inner();
        Ok(answer.decision == wpb::Decision::Allow as i32)
    }
}
