//! The Archive's retention rules (issue 30 item 3; `docs/operations.md`, "Retention"): SQL on
//! its own schema, run in bounded batches by `lychd_runtime::retention`. Only recall receipts
//! age out (resolving one afterwards is `RECEIPT_NOT_FOUND`, and the recall's request id may be
//! used again); notes, their lifecycle and tombstones are memory, kept until revoked or
//! archived by their owner, never by age.

use lychd_runtime::retention::{Count, Rule, Rules};

/// Every rule of the office.
pub static RULES: Rules = Rules {
    rules: &[Rule {
        name: "recall_receipts",
        keep_seconds: 365 * 24 * 3600,
        sql: "DELETE FROM archive.recall_receipts WHERE id IN (
                  SELECT id FROM archive.recall_receipts
                   WHERE created_at < now() - $1 * interval '1 second'
                   ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
        count: Count::Affected,
    }],
    upkeep: &[],
};
