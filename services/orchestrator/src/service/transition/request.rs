//! A transition request as the engine takes it: decoded and authorized by the caller's
//! handler ([`TransitionRequest`]), then owned under the generation of the host lease held
//! when it was recorded ([`Held`]); and [`LeaseLost`], what every write and effect answers
//! once that generation is no longer held.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::service::lease::Fence;

/// Ward asked again for the caller (with its first decision's policy generation) right
/// before an effect; `false` when Ward refuses (the caller's authority was withdrawn).
pub type Recheck = Arc<dyn Fn() -> BoxFuture<'static, bool> + Send + Sync>;

/// A decoded, authorized request.
pub struct TransitionRequest {
    pub capability_key: String,
    pub priority: u8,
    /// Absolute admission cutoff (monotonic clock), if the caller gave one.
    pub cutoff: Option<Instant>,
    pub principal_id: String,
    pub recheck: Recheck,
}

/// A request owned under a generation of the host lease: every write of its transition is
/// fenced by it, and every effect checks it ([`HostLease::valid`]).
pub(super) struct Held {
    pub(super) req: TransitionRequest,
    pub(super) fence: Fence,
}

impl std::ops::Deref for Held {
    type Target = TransitionRequest;
    fn deref(&self) -> &TransitionRequest {
        &self.req
    }
}

/// This process no longer holds the host lease at the transition's generation: it records
/// and actuates nothing more for it (the holder contains it when it takes the host over).
#[derive(Debug, Clone, Copy)]
pub(super) struct LeaseLost;
