//! The Runner's retention rules (issue 30 item 3; `docs/operations.md`, "Retention"), run in
//! bounded batches by `lychd_runtime::retention`. A run goes only with its whole tree, once every
//! run of it is terminal and finished more than the age ago, with no consent release due and
//! every outbox row settled; with it go every row naming it. Trees with effects have their own,
//! longer age, and their effects and ledger (append-only) are deleted only through the owner's
//! `runner.prune_runs` of migration `0012_retention.sql`.

use lychd_runtime::retention::{Count, Rule, Rules};

/// Every rule of the office.
pub static RULES: Rules = Rules {
    rules: &[
        Rule {
            name: "runs",
            keep_seconds: 90 * 24 * 3600,
            sql: "SELECT runner.prune_runs($1 * interval '1 second', false, $2)",
            count: Count::Returned,
        },
        Rule {
            name: "effect_runs",
            keep_seconds: 365 * 24 * 3600,
            sql: "SELECT runner.prune_runs($1 * interval '1 second', true, $2)",
            count: Count::Returned,
        },
    ],
    upkeep: &[],
};
