//! Transitions (LychD design rules §23): the arbiter (one physical transition at a time;
//! waiters by descending priority then first come; one cohort per capability and priority),
//! the deadlines (planning, drain and warm-up budgets; the optional admission cutoff and its
//! precedence) and the rite — close admission on the affected set through the Dispatcher,
//! await drain, freeze the intent, actuate, verify under one deadline, reopen only after
//! success, proved no effect or exact restoration; compensate; contain.
//!
//! - `request`: a request as the engine takes it, and owned under a lease generation;
//! - `engine`: the engine's state, its answers and shared primitives (record, reopen,
//!   contain, converge; the containment latch);
//! - `fence`: the engine under the host lease (the check before every write and effect,
//!   the fenced write's judgement, recording a containment);
//! - `cohort`: joining or owning a cohort; the owner's planning, arbitration and checks;
//! - `arbiter`: the physical-transition section;
//! - `rite`: the rite's effects, driven by the pure step table `domain::rite`;
//! - `soft`: soft activation and its runtime guard;
//! - `cancel`: explicit cancellation.
//!
//! The cohort owner runs in its own task: a caller that goes away (or cancels repeatedly)
//! never interrupts the rite, its compensation or its cleanup; it only stops hearing of it.

mod arbiter;
mod cancel;
mod cohort;
mod engine;
mod fence;
mod request;
mod rite;
mod soft;

pub use cancel::Cancelled;
pub use cohort::{Submitted, Waiting};
pub use engine::{Event, Heard, Outcome, Settled, Transitions};
pub use request::{Recheck, TransitionRequest};
