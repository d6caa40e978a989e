//! The Runner office's rules: pure (no sqlx, tonic or tokio, no clock read: time comes in
//! as a value). `fsm` (the control FSM as data, checked at load), `workflow` (the document a
//! run follows), `budgets` (never above the contract's), `run` (a start request's identity),
//! `progress` (a run's progress and the step loop's rules).

pub mod budgets;
pub mod checkpoint;
pub mod fsm;
pub mod progress;
pub mod run;
pub mod tree;
pub mod workflow;
