//! Ward's retention rules (issue 30 item 3; `docs/operations.md`, "Retention"), run in bounded
//! batches by `lychd_runtime::retention`. Consents and sessions are deleted only through the
//! owner's functions of migration `0012_retention.sql` (the runtime role holds no `DELETE` on
//! them, and their guard triggers let a delete through only inside those functions and only
//! for rows nothing can use any more). The audit is never deleted from: each round makes sure
//! its monthly partitions exist ahead; old months are exported and detached by the operator.

use lychd_runtime::retention::{Count, Rule, Rules};

/// Every rule of the office.
pub static RULES: Rules = Rules {
    rules: &[
        Rule {
            name: "consents",
            keep_seconds: 90 * 24 * 3600,
            // Settled (not pending), not still usable (granted, unconsumed, unrevoked), with no
            // proposal and no promotion; with its change rows.
            sql: "SELECT ward.prune_consents($1 * interval '1 second', $2)",
            count: Count::Returned,
        },
        Rule {
            name: "sessions",
            keep_seconds: 30 * 24 * 3600,
            // Expired, or revoked, that long ago.
            sql: "SELECT ward.prune_sessions($1 * interval '1 second', $2)",
            count: Count::Returned,
        },
    ],
    // Three months of audit partitions created ahead of the current one.
    upkeep: &["SELECT ward.audit_ensure_partitions(3)"],
};
