//! End-to-end tests live in `e2e/` (and the stack in containers in `containers/`); this
//! library holds what both read: the Quadlet units' parse ([`quadlet`]).

pub mod quadlet;
