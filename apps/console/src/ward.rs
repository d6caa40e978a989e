//! The person's own calls to Ward, through Ward's generated client: the console adds nothing but
//! the person's session token as the bearer. A refusal comes back as the office's reason with
//! plain words and what to do next ([`Refusal`]).

use std::time::Duration;

use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{
    Consent, ConsentState, DecideRequest, DecideResponse, ExchangeCredentialRequest,
    ListConsentsRequest, Verdict, WatchConsentsRequest, WatchConsentsResponse,
};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};
use tonic_types::StatusExt;

/// The Ward office, as reached from the console.
#[derive(Clone)]
pub struct Ward {
    channel: Channel,
}

/// A signed-in person's session, as Ward answered the exchange.
pub struct Exchanged {
    pub token: String,
    pub principal: String,
    pub principal_id: String,
    pub lifetime: Duration,
}

/// An office's refusal, for a person: the reason Ward gave, what it means, what to do next.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: Code,
    pub reason: String,
    pub words: &'static str,
    pub next: &'static str,
}

impl Refusal {
    /// Ward no longer accepts the session: the console session ends.
    pub fn ends_session(&self) -> bool {
        self.code == Code::Unauthenticated
    }

    pub(crate) fn from_status(status: &Status) -> Self {
        let reason = status
            .get_details_error_info()
            .map(|i| i.reason)
            .unwrap_or_default();
        let (words, next) = explain(status.code(), &reason);
        Refusal {
            code: status.code(),
            reason: if reason.is_empty() {
                format!("{:?}", status.code()).to_uppercase()
            } else {
                reason
            },
            words,
            next,
        }
    }
}

/// Plain words and the next step for a reason (or, for a reason without its own words, for the
/// status code). An uncertain outcome is never described as success.
pub fn explain(code: Code, reason: &str) -> (&'static str, &'static str) {
    match reason {
        "REVIEW_DIGEST_MISMATCH" => (
            "The consent is no longer the call you reviewed: its binding digest is not the one shown to you. Nothing was settled.",
            "Reload the pending consents and review the call as it stands now before deciding.",
        ),
        "SELF_APPROVAL" => (
            "You requested this call yourself: no principal gives the verdict on its own effect. Nothing was settled.",
            "Ask another operator who holds approve power to decide it.",
        ),
        "LIVE_VERDICT_REQUIRED" => (
            "This class of effect needs a live verdict by a human principal; you are not signed in as one. Nothing was settled.",
            "Ask a human operator to decide it.",
        ),
        "NO_ASSIGNMENT" | "POLICY_GENERATION_STALE" => (
            "Ward refused: you hold no power for this action on this object. Nothing was changed.",
            "Ask an administrator to assign you the power (for verdicts: ward:approve on the effect's owner), or ask someone who holds it.",
        ),
        "CONSENT_NOT_FOUND" => (
            "Ward knows no such consent.",
            "Go back to the pending consents; it may have been listed from another stack.",
        ),
        "CREDENTIAL_UNKNOWN" | "CREDENTIAL_MALFORMED" | "CREDENTIAL_MISSING" => (
            "Ward does not recognise this credential.",
            "Check that you pasted your own Ward credential whole, then sign in again.",
        ),
        "CREDENTIAL_EXPIRED"
        | "CREDENTIAL_REVOKED"
        | "CREDENTIAL_EXCHANGED"
        | "PRINCIPAL_REVOKED" => (
            "Ward no longer accepts this credential.",
            "Ask an administrator for a new credential.",
        ),
        "SESSION_EXPIRED" | "SESSION_REVOKED" | "SESSION_UNKNOWN" | "SESSION_AUDIENCE_MISMATCH" => {
            (
                "Your Ward session has ended.",
                "Sign in again with your credential.",
            )
        }
        "TRANSITION_NOT_OWNED" => (
            "Only the principal whose request started this transition may cancel it; you joined it or did not request it. Nothing was changed.",
            "Ask the transition's owner to cancel it, or wait for it to settle.",
        ),
        "TRANSITION_NOT_RUNNING" => (
            "The transition has already settled (or is unknown), so there is nothing to cancel. Nothing was changed.",
            "Reload the transitions page and look at its final phase.",
        ),
        "WORLD_NOT_PROVEN" => (
            "The Dispatcher's fresh observation of the recorded animators proves neither the recorded prior world nor the transition's desired one, so the containment stays and nothing reopens.",
            "Bring the host to one of the recorded worlds (the proof columns on the containments page), check it, then recover again.",
        ),
        "CONTAINMENT_NOT_FOUND" => (
            "The Orchestrator has no containment with this id. Nothing was changed.",
            "Reload the containments page and recover one it lists.",
        ),
        "RUN_FINISHED" => (
            "The run has already ended, so there is nothing to cancel. Nothing was changed.",
            "Reload the run's page and look at its terminal category.",
        ),
        "RUN_NOT_FOUND" => (
            "The Runner shows you no run with this id (another principal's runs are not shown to you).",
            "Open the runs page and choose one it lists.",
        ),
        "NOT_CONFIGURED" => (
            "The console was started without this office's address.",
            "Start it with the office's endpoint (--orchestrator, --dispatcher, --runner); lychd dev does.",
        ),
        "STREAM_LIMIT_REACHED" | "STREAM_SHARE_REACHED" => (
            "The office (Ward for consents, the Orchestrator for transitions) serves as many live views as it may.",
            "Close another open console page, or reload this one later.",
        ),
        _ => match code {
            Code::Unauthenticated => (
                "Ward did not accept the session or credential.",
                "Sign in again with your own credential.",
            ),
            Code::PermissionDenied => (
                "Ward refused: you may not do this. Nothing was changed.",
                "Ask someone who holds the power, or an administrator to assign it.",
            ),
            Code::FailedPrecondition => (
                "The consent is not in a state that allows this. Nothing was changed.",
                "Reload and look at the consent as it stands now.",
            ),
            Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Aborted => (
                "Ward could not be reached or did not answer in time: the outcome is unknown.",
                "Look at the consent history before trying again; a verdict may have been recorded.",
            ),
            Code::ResourceExhausted => (
                "Ward is at a limit right now.",
                "Wait a little and try again.",
            ),
            Code::InvalidArgument => (
                "The request was malformed.",
                "Reload the page and use its forms as shown.",
            ),
            _ => (
                "Ward refused the call.",
                "Reload the page; if it persists, tell an operator with the reason shown.",
            ),
        },
    }
}

pub(crate) fn bearer(token: &str) -> Result<MetadataValue<tonic::metadata::Ascii>, Refusal> {
    MetadataValue::try_from(format!("Bearer {token}")).map_err(|_| {
        let (words, next) = explain(Code::Unauthenticated, "CREDENTIAL_MALFORMED");
        Refusal {
            code: Code::Unauthenticated,
            reason: "CREDENTIAL_MALFORMED".into(),
            words,
            next,
        }
    })
}

pub(crate) fn authorized<T>(message: T, token: &str) -> Result<tonic::Request<T>, Refusal> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(Duration::from_secs(10));
    request
        .metadata_mut()
        .insert("authorization", bearer(token)?);
    Ok(request)
}

impl Ward {
    /// Ward at `endpoint` (`http://host:port`), connected on first use.
    pub fn new(endpoint: &str) -> anyhow::Result<Self> {
        Self::with_ca(endpoint, None)
    }

    /// Ward at `endpoint`, over TLS verified by `ca` when it is `https://`.
    pub fn with_ca(
        endpoint: &str,
        ca: Option<&tonic::transport::Certificate>,
    ) -> anyhow::Result<Self> {
        Ok(Ward {
            channel: crate::office_channel(endpoint, ca)?,
        })
    }

    fn client(&self) -> WardClient<Channel> {
        WardClient::new(self.channel.clone())
    }

    /// The person's credential for a session bound to `office` alone (ADR 0005): the console
    /// holds one per office it calls, so no office can replay one at another.
    pub async fn exchange(&self, credential: &str, office: &str) -> Result<Exchanged, Refusal> {
        let request = authorized(
            ExchangeCredentialRequest {
                ttl_seconds: 0,
                audiences: vec![office.to_owned()],
            },
            credential,
        )?;
        let answer = self
            .client()
            .exchange_credential(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner();
        let principal = answer.principal.unwrap_or_default();
        Ok(Exchanged {
            token: answer.session_token,
            principal: principal.name,
            principal_id: principal.id,
            lifetime: Duration::from_secs(u64::from(answer.lifetime_seconds)),
        })
    }

    /// Consents in `state` (every state when `None`), newest first: one page.
    pub async fn consents(
        &self,
        token: &str,
        state: Option<ConsentState>,
    ) -> Result<Vec<Consent>, Refusal> {
        let request = authorized(
            ListConsentsRequest {
                run_id: String::new(),
                state: state.map_or(0, |s| s as i32),
                page: None,
            },
            token,
        )?;
        Ok(self
            .client()
            .list_consents(request)
            .await
            .map_err(|s| Refusal::from_status(&s))?
            .into_inner()
            .consents)
    }

    /// The verdict on one consent, bound to the review digest that was displayed.
    pub async fn decide(
        &self,
        token: &str,
        consent_id: &str,
        verdict: Verdict,
        review_digest: &str,
    ) -> Result<DecideResponse, Refusal> {
        let request = authorized(
            DecideRequest {
                consent_id: consent_id.to_owned(),
                verdict: verdict as i32,
                review_digest: review_digest.to_owned(),
            },
            token,
        )?;
        self.client()
            .decide(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| Refusal::from_status(&s))
    }

    /// Every change of every consent from the first, then as they commit.
    pub async fn watch(&self, token: &str) -> Result<Streaming<WatchConsentsResponse>, Refusal> {
        let mut request = tonic::Request::new(WatchConsentsRequest {
            after_change: 0,
            run_id: String::new(),
        });
        request
            .metadata_mut()
            .insert("authorization", bearer(token)?);
        self.client()
            .watch_consents(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| Refusal::from_status(&s))
    }

    /// A refusal for a stream that ended with `status`.
    pub fn refusal(status: &Status) -> Refusal {
        Refusal::from_status(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_outcome_is_never_described_as_success() {
        for code in [Code::Unavailable, Code::DeadlineExceeded, Code::Unknown] {
            let (words, next) = explain(code, "OUTCOME_UNKNOWN");
            assert!(words.contains("unknown"), "{code:?}: {words}");
            assert!(next.contains("history"), "{code:?}: {next}");
        }
    }

    #[test]
    fn each_verdict_refusal_says_what_to_do_next() {
        for reason in [
            "REVIEW_DIGEST_MISMATCH",
            "SELF_APPROVAL",
            "LIVE_VERDICT_REQUIRED",
            "NO_ASSIGNMENT",
        ] {
            let (words, next) = explain(Code::PermissionDenied, reason);
            assert!(words.contains("Nothing was"), "{reason}: {words}");
            assert!(!next.is_empty());
        }
    }
}
