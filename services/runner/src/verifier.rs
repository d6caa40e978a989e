//! The independent completion verifier as peers: the HelmLoop office (`[peers.helmloop]`) and
//! Ward's promotion authority (`[peers.ward]`), both called with the runner's own Ward
//! session. The runner appends its candidate observations (receipt and evidence) to HelmLoop,
//! *proposes* the owner records (contract, assurance) and the promotion to Ward — which issues
//! them only on the accountable owner's approval — and asks HelmLoop to reduce what is stored
//! for the run's subject and revision. It never appends an owner record itself (its principal
//! holds no such action) and never composes a verdict.
//!
//! Every call is idempotent: an append of the same bytes is `REPLAYED`, a proposal of the same
//! terms in the same run answers the consent already recorded, a reduction of the same input
//! is the stored evaluation. Nothing here logs a record body.

use lychd_proto::helmloop::v1 as hl;
use lychd_proto::helmloop::v1::helm_loop_client::HelmLoopClient;
use lychd_proto::ward::v1 as wpb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_runtime::client::{Outgoing, PeerChannel, peer_channel};
use lychd_runtime::server::ServeContext;

use crate::domain::verification::{Bundle, OWNER_DENIED, Ref};

/// Why no answer was had (the run is asked again later; never a verdict).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable;

/// What the verifier said: a HelmLoop disposition (or the owner's refusal), its reasons and
/// axes, the stored evaluation's input digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub disposition: String,
    pub reasons: Vec<String>,
    pub axes: Vec<(String, String)>,
    pub input_digest: String,
}

impl Answer {
    fn held(reason: &str) -> Answer {
        Answer {
            disposition: "HOLD".into(),
            reasons: vec![reason.into()],
            ..Answer::default()
        }
    }
}

/// The peers (absent when not configured: every verification is then held).
#[derive(Clone)]
pub struct Verifier {
    helmloop: Option<HelmLoopClient<PeerChannel>>,
    ward: Option<WardClient<PeerChannel>>,
    /// How long a held verification waits before it is asked again (ms).
    recheck_ms: u64,
}

/// The default of `[office] verify_recheck_ms`.
pub const RECHECK_MS: u64 = 2_000;

impl Verifier {
    pub fn new(ctx: &ServeContext) -> anyhow::Result<Verifier> {
        let client = |name: &str| -> anyhow::Result<Option<PeerChannel>> {
            ctx.config
                .peers
                .get(name)
                .map(|p| peer_channel(&p.endpoint, ctx.outgoing.clone()))
                .transpose()
                .map_err(anyhow::Error::from)
        };
        Ok(Verifier {
            helmloop: client("helmloop")?.map(HelmLoopClient::new),
            ward: client("ward")?.map(WardClient::new),
            recheck_ms: RECHECK_MS,
        })
    }

    /// HelmLoop at `helmloop` and Ward at `ward`, called with `outgoing`'s session.
    pub fn at(helmloop: &str, ward: &str, outgoing: Outgoing) -> anyhow::Result<Verifier> {
        Ok(Verifier {
            helmloop: Some(HelmLoopClient::new(peer_channel(
                helmloop,
                outgoing.clone(),
            )?)),
            ward: Some(WardClient::new(peer_channel(ward, outgoing)?)),
            recheck_ms: RECHECK_MS,
        })
    }

    /// No peers.
    pub fn none() -> Verifier {
        Verifier {
            helmloop: None,
            ward: None,
            recheck_ms: RECHECK_MS,
        }
    }

    /// Asked again `ms` after a held answer.
    pub fn recheck_ms(mut self, ms: u64) -> Verifier {
        self.recheck_ms = ms;
        self
    }

    pub fn recheck(&self) -> u64 {
        self.recheck_ms
    }

    /// Ask about run `run_id`'s verification as of `now_ms`: append the observations, propose
    /// what the owner has not issued yet, reduce.
    pub async fn ask(&self, b: &Bundle, run_id: &str, now_ms: i64) -> Result<Answer, Unavailable> {
        let (Some(mut helmloop), Some(mut ward)) = (self.helmloop.clone(), self.ward.clone())
        else {
            tracing::warn!("verification needs the helmloop and ward peers; held");
            return Ok(Answer::held("VERIFIER_NOT_CONFIGURED"));
        };
        // 1. The runner's candidate observations (digests only).
        let appended = helmloop
            .append_records(hl::AppendRecordsRequest {
                records: b.observations.iter().map(|d| d.body.clone()).collect(),
            })
            .await;
        match appended {
            Ok(a) => {
                for r in a.into_inner().results {
                    if r.outcome == hl::AppendOutcome::Equivocation as i32 {
                        tracing::error!(record_type = %r.record_type, id = %r.id, "a second body under a run's record identity");
                    }
                }
            }
            Err(status) => return refused(&status, "APPEND_REFUSED"),
        }
        // 2. The owner records (contract, assurance), until the owner issued them.
        let mut issued = true;
        for r in [b.contract(), b.assurance()] {
            issued &= stored(&mut helmloop, r).await?;
        }
        if !issued {
            let proposed = ward
                .propose_owner_records(wpb::ProposeOwnerRecordsRequest {
                    run_id: run_id.to_owned(),
                    records: b.owner_records.iter().map(|d| d.body.clone()).collect(),
                })
                .await;
            return match proposed {
                Ok(p) => Ok(consent(p.into_inner().consent, "OWNER_RECORDS")),
                Err(status) => refused(&status, "OWNER_RECORDS_REFUSED"),
            };
        }
        // 3. The promotion, proposed to the owner (the same terms answer the same consent).
        let at = |ms: i64| prost_types::Timestamp {
            seconds: ms.div_euclid(1000),
            nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
        };
        let href = |r: &Ref| wpb::HelmLoopRef {
            id: r.id.clone(),
            digest: r.digest.clone(),
        };
        let revision = wpb::HelmLoopRef {
            id: text(&b.revision, "id"),
            digest: text(&b.revision, "digest"),
        };
        let promoted = ward
            .propose_promotion(wpb::ProposePromotionRequest {
                run_id: run_id.to_owned(),
                contract: Some(href(b.contract())),
                target_revision: Some(revision),
                assurance: Some(href(b.assurance())),
                evidence: b.evidence.iter().map(href).collect(),
                grantee_id: b.grantee.clone(),
                scope: b.scope.clone(),
                not_after: Some(at(b.not_after_ms)),
            })
            .await;
        match promoted {
            Ok(p) => {
                let c = consent(p.into_inner().consent, "PROMOTION");
                if c.disposition == OWNER_DENIED {
                    return Ok(c);
                }
            }
            Err(status) => return refused(&status, "PROMOTION_REFUSED"),
        }
        // 4. The reduction of everything stored for the run's subject and revision.
        let reduced = helmloop
            .reduce_stored(hl::ReduceStoredRequest {
                context: b.context_at(now_ms),
                return_input: false,
            })
            .await;
        let summary = match reduced {
            Ok(r) => r.into_inner().summary.unwrap_or_default(),
            Err(status) => return refused(&status, "REDUCE_REFUSED"),
        };
        let disposition = match hl::Disposition::try_from(summary.disposition) {
            Ok(hl::Disposition::Pass) => "PASS",
            Ok(hl::Disposition::Reject) => "REJECT",
            _ => "HOLD",
        };
        let axes = summary.axes.unwrap_or_default();
        let mut reasons = summary.reject_codes;
        reasons.extend(summary.hold_codes);
        Ok(Answer {
            disposition: disposition.into(),
            reasons,
            axes: vec![
                ("execution".into(), axes.execution),
                ("evidence".into(), axes.evidence),
                ("authority".into(), axes.authority),
                ("promotion".into(), axes.promotion),
                ("reconciliation".into(), axes.reconciliation),
                ("observedOutcome".into(), axes.observed_outcome),
            ],
            input_digest: summary.input_digest,
        })
    }
}

fn text(v: &lychd_canon::Value, key: &str) -> String {
    v.get(key)
        .and_then(lychd_canon::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Whether HelmLoop holds the exact body `r` names.
async fn stored(h: &mut HelmLoopClient<PeerChannel>, r: &Ref) -> Result<bool, Unavailable> {
    match h
        .get_record(hl::GetRecordRequest {
            record_type: r.record_type.clone(),
            id: r.id.clone(),
        })
        .await
    {
        Ok(a) => Ok(a.into_inner().records.iter().any(|x| x.digest == r.digest)),
        Err(s) if s.code() == tonic::Code::NotFound => Ok(false),
        Err(s) => {
            tracing::warn!(code = ?s.code(), "reading a run's owner record at helmloop failed");
            Err(Unavailable)
        }
    }
}

/// A proposal's consent (`what`: `OWNER_RECORDS` or `PROMOTION`): pending (`<what>_PENDING`)
/// or granted and not yet delivered (`<what>_DELIVERY`) holds; denied, expired or cancelled is
/// the owner's refusal (`<what>_REFUSED_BY_OWNER`).
fn consent(c: Option<wpb::Consent>, what: &str) -> Answer {
    let state = c.map_or(wpb::ConsentState::Unspecified as i32, |c| c.state);
    match wpb::ConsentState::try_from(state) {
        Ok(
            wpb::ConsentState::Denied | wpb::ConsentState::Expired | wpb::ConsentState::Cancelled,
        ) => Answer {
            disposition: OWNER_DENIED.into(),
            reasons: vec![format!("{what}_REFUSED_BY_OWNER")],
            ..Answer::default()
        },
        Ok(wpb::ConsentState::Granted) => Answer::held(&format!("{what}_DELIVERY")),
        _ => Answer::held(&format!("{what}_PENDING")),
    }
}

/// A refused call: a transport or availability failure asks again later; a refusal the runner
/// cannot change by asking (its authority, its input) holds the run for review, its reason
/// named.
fn refused(status: &tonic::Status, what: &str) -> Result<Answer, Unavailable> {
    use tonic::Code;
    tracing::warn!(code = ?status.code(), what, "a verification call was refused");
    match status.code() {
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::Unknown
        | Code::ResourceExhausted
        | Code::Internal
        | Code::Cancelled => Err(Unavailable),
        code => Ok(Answer::held(&format!("{what}_{code:?}").to_uppercase())),
    }
}
