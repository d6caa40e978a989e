//! The Dispatcher as a peer, called with this office's own session: fresh observations
//! (`ObserveAnimators`) — the Orchestrator never probes a runtime itself and never reads the
//! Dispatcher's tables — and lease admission (`CloseAdmission`, `AwaitDrain`,
//! `ReopenAdmission`), which only the Orchestrator's service principal holds.

use lychd_proto::dispatcher::v1 as dpb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_runtime::client::{PeerChannel, peer_channel};
use lychd_runtime::server::ServeContext;

use crate::domain::plan::{AnimatorView, Phase, World};
use crate::error::{OrchestratorError, Result};

/// Most animators one `ObserveAnimators` call may name (the Dispatcher's bound).
const PER_CALL: usize = 256;

/// The Dispatcher as a peer (`[peers.dispatcher]`); absent when not configured, and then
/// every call that needs observations is refused `OBSERVATION_UNAVAILABLE`.
#[derive(Clone)]
pub struct Dispatcher {
    client: Option<DispatcherClient<PeerChannel>>,
}

impl Dispatcher {
    pub fn new(ctx: &ServeContext) -> anyhow::Result<Self> {
        let client = match ctx.config.peers.get("dispatcher") {
            Some(peer) => Some(DispatcherClient::new(peer_channel(
                &peer.endpoint,
                ctx.outgoing.clone(),
            )?)),
            None => None,
        };
        Ok(Dispatcher { client })
    }

    fn client(&self) -> Result<DispatcherClient<PeerChannel>> {
        self.client
            .clone()
            .ok_or(OrchestratorError::ObservationUnavailable)
    }

    /// Probe `animators` now (through the Dispatcher) and return what it saw.
    pub async fn observe(&self, animators: &[String]) -> Result<World> {
        let mut world = World::new();
        for chunk in animators.chunks(PER_CALL) {
            let answer = self
                .client()?
                .observe_animators(dpb::ObserveAnimatorsRequest {
                    animators: chunk.to_vec(),
                })
                .await
                .map_err(|status| {
                    tracing::warn!(code = ?status.code(), "observing animators failed");
                    OrchestratorError::ObservationUnavailable
                })?
                .into_inner();
            for a in answer.animators {
                let phases = a
                    .observations
                    .iter()
                    .map(|o| (o.capability_key.clone(), phase(o.phase)))
                    .collect();
                let admission_open = a.admission.as_ref().is_some_and(|s| s.open_closures == 0);
                let live_leases = a.admission.as_ref().map_or(0, |s| s.live_leases);
                world.insert(
                    a.animator,
                    AnimatorView {
                        phases,
                        admission_open,
                        live_leases,
                    },
                );
            }
        }
        Ok(world)
    }
}

fn phase(v: i32) -> Phase {
    match dpb::Phase::try_from(v) {
        Ok(dpb::Phase::Cold) => Phase::Cold,
        Ok(dpb::Phase::Activatable) => Phase::Activatable,
        Ok(dpb::Phase::Warming) => Phase::Warming,
        Ok(dpb::Phase::Warm) => Phase::Warm,
        Ok(dpb::Phase::Error) => Phase::Error,
        _ => Phase::Unknown,
    }
}

/// A Dispatcher call that did not answer as asked (unreachable, refused): the code only, never
/// the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerFailure(pub tonic::Code);

fn failed(what: &'static str) -> impl Fn(tonic::Status) -> PeerFailure {
    move |status| {
        tracing::warn!(call = what, code = ?status.code(), "dispatcher call failed");
        PeerFailure(status.code())
    }
}

impl Dispatcher {
    fn peer(&self) -> std::result::Result<DispatcherClient<PeerChannel>, PeerFailure> {
        self.client
            .clone()
            .ok_or(PeerFailure(tonic::Code::Unavailable))
    }

    /// Close lease admission on `animators` under `request_id` (idempotent: the same id
    /// returns the same closure). The closure token.
    pub async fn close(
        &self,
        request_id: &str,
        animators: &[String],
        reason: &str,
    ) -> std::result::Result<String, PeerFailure> {
        Ok(self
            .peer()?
            .close_admission(dpb::CloseAdmissionRequest {
                request_id: request_id.to_owned(),
                animators: animators.to_vec(),
                reason: reason.to_owned(),
            })
            .await
            .map_err(failed("close_admission"))?
            .into_inner()
            .closure_token)
    }

    /// Wait up to `wait_ms` for no live lease on `animators`; whether they drained.
    pub async fn await_drain(
        &self,
        animators: &[String],
        wait_ms: u32,
    ) -> std::result::Result<bool, PeerFailure> {
        Ok(self
            .peer()?
            .await_drain(dpb::AwaitDrainRequest {
                animators: animators.to_vec(),
                wait_ms,
            })
            .await
            .map_err(failed("await_drain"))?
            .into_inner()
            .drained)
    }

    /// Reopen a closure (idempotent).
    pub async fn reopen(&self, closure_token: &str) -> std::result::Result<(), PeerFailure> {
        self.peer()?
            .reopen_admission(dpb::ReopenAdmissionRequest {
                closure_token: closure_token.to_owned(),
            })
            .await
            .map_err(failed("reopen_admission"))?;
        Ok(())
    }
}
