//! The Orchestrator's retention rules (issue 30 item 3; `docs/operations.md`, "Retention"): SQL
//! on its own schema, run in bounded batches by `lychd_runtime::retention`. A transition goes
//! only once it is finished (its final event, recorded more than the age ago) and nothing holds
//! it: no containment (recovered or not — containments are kept for good), no runtime guard
//! still armed, no row of it in an open phase. With it go its events, the requests that named
//! it and its cleared guard, in one statement (foreign keys are checked at its end).

use lychd_runtime::retention::{Count, Rule, Rules};

/// Every rule of the office.
pub static RULES: Rules = Rules {
    rules: &[Rule {
        name: "transitions",
        keep_seconds: 30 * 24 * 3600,
        sql: "WITH doomed AS (
                  SELECT e.transition_id AS id FROM orchestrator.transition_events e
                   WHERE e.final AND e.recorded_at < now() - $1 * interval '1 second'
                     AND NOT EXISTS (SELECT 1 FROM orchestrator.containments c
                                      WHERE c.transition_id = e.transition_id)
                     AND NOT EXISTS (SELECT 1 FROM orchestrator.runtime_guards g
                                      WHERE g.transition_id = e.transition_id
                                        AND g.cleared_at IS NULL)
                     AND NOT EXISTS (SELECT 1 FROM orchestrator.transitions t
                                      WHERE t.id = e.transition_id
                                        AND t.phase IN ('draining', 'actuating', 'verifying',
                                                        'compensating'))
                   ORDER BY e.recorded_at LIMIT $2 FOR UPDATE OF e SKIP LOCKED),
              earlier AS (DELETE FROM orchestrator.transition_events
                           WHERE NOT final AND transition_id IN (SELECT id FROM doomed)),
              requests AS (DELETE FROM orchestrator.transition_requests
                            WHERE transition_id IN (SELECT id FROM doomed)),
              guards AS (DELETE FROM orchestrator.runtime_guards
                          WHERE transition_id IN (SELECT id FROM doomed)),
              rows AS (DELETE FROM orchestrator.transitions
                        WHERE id IN (SELECT id FROM doomed))
              DELETE FROM orchestrator.transition_events
               WHERE final AND transition_id IN (SELECT id FROM doomed)",
        count: Count::Affected,
    }],
    upkeep: &[],
};
