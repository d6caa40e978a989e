//! The arbiter's physical-transition section (LychD design rules §23, "Arbitration and
//! planning budget"): one physical transition at a time; waiters in descending priority,
//! then first come ([`crate::domain::phase::place`]).
//!
//! Invariant: at most one [`Permit`] exists at a time; a waiter that leaves (its cutoff
//! passed, or it was cancelled) gives up its place and wakes the others.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Mutex;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::domain::phase::{Place, place};

/// Why a waiter left the arbiter's queue.
pub(super) enum Left {
    Expired,
    Cancelled,
}

#[derive(Default)]
struct Section {
    busy: bool,
    ticket: u64,
    queue: BTreeSet<Place>,
}

/// The arbiter's physical-transition section.
#[derive(Default)]
pub(super) struct Arbiter {
    section: Mutex<Section>,
    wake: Notify,
}

/// The section, held until dropped.
pub(super) struct Permit<'a>(&'a Arbiter);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.0.lock().busy = false;
        self.0.wake.notify_waiters();
    }
}

impl Arbiter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Section> {
        self.section
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wait for the section in `priority` order; `Err` when `cutoff` passes or `cancelled`
    /// resolves first (the place is given up).
    pub(super) async fn acquire(
        &self,
        priority: u8,
        cutoff: Option<Instant>,
        cancelled: impl Future<Output = ()>,
    ) -> Result<Permit<'_>, Left> {
        tokio::pin!(cancelled);
        let me = {
            let mut s = self.lock();
            s.ticket += 1;
            let me = place(priority, s.ticket);
            s.queue.insert(me);
            me
        };
        loop {
            let notified = self.wake.notified();
            {
                let mut s = self.lock();
                if !s.busy && s.queue.first() == Some(&me) {
                    s.queue.remove(&me);
                    s.busy = true;
                    return Ok(Permit(self));
                }
            }
            let expired = async {
                match cutoff {
                    Some(c) => tokio::time::sleep_until(c).await,
                    None => std::future::pending().await,
                }
            };
            let left = tokio::select! {
                () = notified => continue,
                () = expired => Left::Expired,
                () = &mut cancelled => Left::Cancelled,
            };
            self.lock().queue.remove(&me);
            self.wake.notify_waiters();
            return Err(left);
        }
    }
}
