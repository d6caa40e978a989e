-- One Orchestrator per host, fenced (issue 25, point 2): the host lease, held by one process
-- at a time with a generation that only grows. Its expiry is the database clock's
-- (`now()` + the holder's TTL); a process takes the lease with one guarded statement (a new
-- row, or a row whose lease has lapsed: the generation + 1) and renews it well before expiry.
-- Every recorded phase and every containment is written in a transaction that first holds
-- the lease row at the writer's generation (`orchestrator.hold_host_lease`), so a process
-- that lost the lease writes nothing more: its statement fails with SQLSTATE `LH001`.

CREATE TABLE orchestrator.host_leases (
    host_id text PRIMARY KEY CHECK (host_id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    -- The holding process's own id (random per process start).
    holder text NOT NULL CHECK (length(holder) BETWEEN 1 AND 128),
    generation bigint NOT NULL CHECK (generation > 0),
    acquired_at timestamptz NOT NULL DEFAULT now(),
    renewed_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

-- Hold the lease row of `p_host` for the rest of the transaction (a takeover waits for it),
-- or fail with SQLSTATE `LH001` when `p_holder` does not hold it at `p_generation`, unexpired.
CREATE FUNCTION orchestrator.hold_host_lease(p_host text, p_holder text, p_generation bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM orchestrator.host_leases
     WHERE host_id = p_host AND holder = p_holder AND generation = p_generation
       AND expires_at > now()
       FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'host lease not held at this generation' USING ERRCODE = 'LH001';
    END IF;
END
$$;

-- Which generation wrote a transition row, a phase of the feed and a containment (absent on
-- rows written before host leases existed).
ALTER TABLE orchestrator.transitions ADD COLUMN generation bigint;
ALTER TABLE orchestrator.transition_events ADD COLUMN generation bigint;
ALTER TABLE orchestrator.containments ADD COLUMN generation bigint;
