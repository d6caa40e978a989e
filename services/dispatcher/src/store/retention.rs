//! The Dispatcher's retention rules (issue 30 item 3; `docs/operations.md`, "Retention"): SQL
//! on its own schema, run in bounded batches by `lychd_runtime::retention`. Each statement
//! deletes at most `$2` rows older than `$1` seconds by the database clock, and never a live
//! lease (one that is neither released nor expired: an ended lease ended before the cutoff,
//! which is not after `now()`) or an open closure. Rows a batch would touch that a live
//! statement holds are skipped (`SKIP LOCKED`) and taken at a later round.

use lychd_runtime::retention::{Count, Rule, Rules};

/// Every rule of the office.
pub static RULES: Rules = Rules {
    rules: &[
        Rule {
            name: "leases",
            keep_seconds: 7 * 24 * 3600,
            // A lease, its dispatch event and the request that granted it, together (the
            // foreign keys are checked at the end of the statement).
            // Ended: not live by the one definition, and its end (release, or expiry) before
            // the cutoff.
            sql: concat!(
                "WITH doomed AS (
                      SELECT l.id FROM leases l
                       WHERE NOT ",
                live!(),
                " AND coalesce(l.released_at, l.expires_at) < now() - $1 * interval '1 second'
                       ORDER BY coalesce(l.released_at, l.expires_at)
                       LIMIT $2 FOR UPDATE SKIP LOCKED),
                  events AS (DELETE FROM dispatch_events WHERE lease_id IN (SELECT id FROM doomed)),
                  requests AS (DELETE FROM lease_requests WHERE lease_id IN (SELECT id FROM doomed))
                  DELETE FROM leases WHERE id IN (SELECT id FROM doomed)"
            ),
            count: Count::Affected,
        },
        Rule {
            name: "dispatch_events",
            keep_seconds: 7 * 24 * 3600,
            // The event of a live lease stays as long as its lease is live.
            sql: concat!(
                "DELETE FROM dispatch_events WHERE sequence IN (
                      SELECT e.sequence FROM dispatch_events e JOIN leases l ON l.id = e.lease_id
                       WHERE e.admitted_at < now() - $1 * interval '1 second' AND NOT ",
                live!(),
                " ORDER BY e.admitted_at LIMIT $2 FOR UPDATE OF e SKIP LOCKED)"
            ),
            count: Count::Affected,
        },
        Rule {
            name: "lease_requests",
            keep_seconds: 24 * 3600,
            // Answers that granted nothing (the granted ones go with their lease).
            sql: "DELETE FROM lease_requests WHERE (principal_id, request_id) IN (
                      SELECT principal_id, request_id FROM lease_requests
                       WHERE lease_id IS NULL
                         AND answered_at < now() - $1 * interval '1 second'
                       ORDER BY answered_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
            count: Count::Affected,
        },
        Rule {
            name: "closures",
            keep_seconds: 30 * 24 * 3600,
            // Only reopened closures; an open one keeps admission closed and is never touched.
            sql: "WITH doomed AS (
                      SELECT token FROM closures
                       WHERE reopened_at IS NOT NULL
                         AND reopened_at < now() - $1 * interval '1 second'
                       ORDER BY reopened_at LIMIT $2 FOR UPDATE SKIP LOCKED),
                  animators AS (DELETE FROM closure_animators
                                 WHERE token IN (SELECT token FROM doomed))
                  DELETE FROM closures WHERE token IN (SELECT token FROM doomed)",
            count: Count::Affected,
        },
    ],
    upkeep: &[],
};
