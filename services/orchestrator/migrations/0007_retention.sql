-- Issue 30 item 3: retention. The Orchestrator's retention job (`store/retention.rs`) deletes, in
-- bounded batches, transitions whose final event was recorded long ago, with their events, the
-- requests that named them and their cleared runtime guard; never one with a containment
-- (recovered or not: containments are kept for good) or an armed guard. This index lets each
-- batch find the oldest final events without scanning the journal.
CREATE INDEX transition_events_final_by_time ON orchestrator.transition_events (recorded_at)
    WHERE final;
