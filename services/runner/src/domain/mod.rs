//! The Runner office's rules: pure (no sqlx, tonic or tokio, no clock read: time comes in
//! as a value). `fsm` (the control FSM as data, checked at load), `workflow` (the document a
//! run follows), `budgets` (never above the contract's), `run` (a start request's identity).

pub mod budgets;
pub mod checkpoint;
pub mod fsm;
pub mod run;
pub mod workflow;
