//! The registry: animators and their capabilities as declared in configuration, validated as
//! one set before anything is served — the shared registry crate's (`lychd-registry`), the one
//! parser and validator the Dispatcher and the Orchestrator both read.

pub use lychd_registry::registry::*;

#[cfg(test)]
pub(crate) mod tests {
    pub use lychd_registry::fixtures::{cap, portal, soulstone};
}
