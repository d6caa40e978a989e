-- Transitions as resources that outlive any call (issue 25, point 1): every request a caller
-- made (its own `request_id`, idempotent per principal) and the feed of every recorded phase
-- of every transition, from `requested` to the final one, with a sequence that
-- `WatchTransitions` resumes from (the shared feed's gap rule: one sequence, cache 1; every
-- writer holds a transaction id before it allocates a number).

CREATE TABLE orchestrator.transition_requests (
    -- Ward's principal id of the caller.
    requested_by text NOT NULL,
    request_id text NOT NULL CHECK (request_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
    transition_id text NOT NULL CHECK (transition_id ~ '^[0-9a-f]{32}$'),
    capability_key text NOT NULL,
    priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 100),
    -- The request joined another request's in-flight cohort (it may not cancel it).
    joined boolean NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (requested_by, request_id)
);

CREATE INDEX transition_requests_by_transition
    ON orchestrator.transition_requests (transition_id, requested_by);

CREATE TABLE orchestrator.transition_events (
    sequence bigint GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    transition_id text NOT NULL CHECK (transition_id ~ '^[0-9a-f]{32}$'),
    capability_key text NOT NULL,
    priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 100),
    -- Every phase (`TransitionPhase::ALL`), the unrecorded `requested` and `arbitrating` too.
    phase text NOT NULL CHECK (phase = ANY (ARRAY['requested', 'arbitrating', 'draining',
        'actuating', 'verifying', 'compensating', 'completed', 'declined_no_effect',
        'failed_restored', 'cancelled_restored', 'contained_uncertain', 'failed'])),
    detail text NOT NULL DEFAULT '',
    -- The plan as computed (absent before planning): action, target, evict, launch, cost,
    -- expected_active, config_digest.
    plan jsonb,
    final boolean NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX transition_events_by_transition
    ON orchestrator.transition_events (transition_id, sequence);
-- At most one final phase per transition.
CREATE UNIQUE INDEX transition_events_one_final
    ON orchestrator.transition_events (transition_id) WHERE final;
-- `ListTransitions` pages on the `requested` event's sequence (one per transition).
CREATE INDEX transition_events_requested
    ON orchestrator.transition_events (sequence) WHERE phase = 'requested';
