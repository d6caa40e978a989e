//! The office's refusals: its own reasons (none yet beyond the common ones) and the one
//! builder of its statuses. Listed in `docs/refusals.md`.

use lychd_runtime::refusal::Refusals;

/// The office's own refusal reasons.
pub mod reasons {
    lychd_runtime::refusal::reasons! {}
}

/// The office's refusals.
pub const REFUSALS: Refusals = Refusals::new(crate::OFFICE.domain(), reasons::OWN);
