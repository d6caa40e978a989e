-- The step loop (issue 27, Runner I): a runner lease per run and the run's progress.
--
-- A runner process claims a runnable run by taking its lease: it names itself
-- (`lease_holder`), sets an expiry it renews by heartbeat, and raises `generation` — every
-- claim and every takeover is a new generation, and every state commit names the generation it
-- holds (the fence of 0002). `progress` is the run's step cursor, attempts, consumed budgets
-- and step results (digests only): written in the same fenced UPDATE as the state, and carried
-- whole in the checkpoint of that version, so a resume reads it back from a verified checkpoint.

ALTER TABLE runner.runs
    ADD COLUMN progress jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN lease_holder text,
    ADD COLUMN lease_expires_at timestamptz,
    -- A run that must not be claimed before this instant (a typed wait, e.g. WAIT_CAPABILITY).
    ADD COLUMN not_before timestamptz;

-- Claims look for runs in a drivable state whose lease is free or expired, oldest first.
CREATE INDEX runs_drivable ON runner.runs (listed)
    WHERE state IN ('CREATED', 'PLAN', 'ACT', 'WAIT_CAPABILITY', 'INGEST', 'VERIFY');
