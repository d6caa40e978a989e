-- Transitions that entered the rite (admission closed or about to be) and the durable
-- containment records that fence every further transition until an operator recovers them.
-- A transition row is written before admission is closed, so a restart finds every
-- transition that may have closed admission or touched the host (LychD design rules §23).

CREATE TABLE orchestrator.transitions (
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),
    capability_key text NOT NULL,
    priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 100),
    -- Ward's principal id of the cohort owner's caller.
    requested_by text NOT NULL,
    action text NOT NULL CHECK (action IN ('SOFT_SWAP', 'HARD_SWAP')),
    phase text NOT NULL CHECK (phase IN ('draining', 'actuating', 'verifying', 'compensating',
        'completed', 'declined_no_effect', 'failed_restored', 'contained_uncertain')),
    detail text NOT NULL DEFAULT '',
    config_digest text NOT NULL,
    target_animator text NOT NULL,
    evict text[] NOT NULL,
    launch text[] NOT NULL,
    expected_active text[] NOT NULL,
    affected text[] NOT NULL,
    -- The Dispatcher's closure token (absent until the close answered; the close is idempotent
    -- on the transition id, so it can be asked for again).
    closure_token text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX transitions_open ON orchestrator.transitions (created_at)
    WHERE phase IN ('draining', 'actuating', 'verifying', 'compensating');

CREATE TABLE orchestrator.containments (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transition_id text NOT NULL UNIQUE REFERENCES orchestrator.transitions (id),
    cause text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    recovered_at timestamptz,
    recovered_by text,
    CHECK ((recovered_at IS NULL) = (recovered_by IS NULL))
);

CREATE INDEX containments_fencing ON orchestrator.containments (id) WHERE recovered_at IS NULL;
