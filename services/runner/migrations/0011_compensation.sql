-- Compensation (issue 28, Runner II): an effect step may declare a compensating action,
-- delivered when the run ends in a failure or a cancel after the effect was confirmed
-- (services/runner/src/domain/compensation.rs). The ending marks the run due in its own
-- statement (`compensation_due`, when the job may look at it: pushed out before each look, so
-- replicas do not look at once; NULL once every compensation of the run is settled).
ALTER TABLE runner.runs ADD COLUMN compensation_due timestamptz;
CREATE INDEX runs_compensation_due ON runner.runs (compensation_due)
    WHERE compensation_due IS NOT NULL;

-- One row per compensation: its durable intent, written before any dispatch; `outcome` is
-- `pending` until an answer settles it (`compensated`, `rejected`, `denied` by Ward, or
-- `unknown`: never reported compensated). Its own idempotency key, derived from the effect's.
CREATE TABLE runner.effect_compensations (
    idempotency_key text PRIMARY KEY CHECK (idempotency_key ~ '^sha256:[0-9a-f]{64}$'),
    run_id uuid NOT NULL,
    effect_sequence integer NOT NULL,
    destination text NOT NULL,
    -- The canonical compensating action (the request body).
    action bytea NOT NULL,
    action_digest text NOT NULL CHECK (action_digest ~ '^sha256:[0-9a-f]{64}$'),
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    outcome text NOT NULL DEFAULT 'pending'
        CHECK (outcome IN ('pending', 'compensated', 'rejected', 'denied', 'unknown')),
    created_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    UNIQUE (run_id, effect_sequence),
    FOREIGN KEY (run_id, effect_sequence) REFERENCES runner.effects (run_id, effect_sequence)
);
