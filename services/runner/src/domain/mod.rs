//! The Runner office's rules: pure (no sqlx, tonic or tokio, no clock read: time comes in
//! as a value). `fsm` (the control FSM as data, checked at load), `workflow` (the document a
//! run follows), `budgets` (never above the contract's), `run` (a start request's identity),
//! `progress` (a run's progress and the step loop's rules), `recovery` (recovery review of a
//! quarantined run), `migration` (state-schema migrations), `trace` (the contract's trace
//! fields of a transition), `effect` (external effects: the step, action digest, idempotency
//! key, ledger kinds, the pending effect), `replay` (the recorded inputs and the re-execution
//! of a run), `answer` (a model answer read from its body), `release` (which endings release a
//! run's pending consents at Ward), `compensation` (an effect's compensating action).

pub mod answer;
pub mod budgets;
pub mod checkpoint;
pub mod compensation;
pub mod effect;
pub mod fsm;
pub mod migration;
pub mod progress;
pub mod recovery;
pub mod release;
pub mod replay;
pub mod run;
pub mod trace;
pub mod tree;
pub mod verdict;
pub mod verification;
pub mod workflow;
