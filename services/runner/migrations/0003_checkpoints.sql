-- A checkpoint per accepted transition (loop-contract v1 `checkpoint`): the canonical body of
-- every persisted field and a checksum over it, keyed by the run's aggregate version (the
-- checkpoint sequence and the version rise together). Written in the transaction of the state
-- commit, only while the run is still at that version and lease generation (the fence).

CREATE TABLE runner.run_checkpoints (
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    version bigint NOT NULL CHECK (version >= 1),
    generation bigint NOT NULL CHECK (generation >= 1),
    state text NOT NULL,
    -- Canonical JSON (HL-C14N-1): state, pending effects and interrupts, budgets, retries,
    -- approvals, accepted-event cursor, F state, L supports, R frontier, results, evaluator
    -- state, versions. No input, no secret.
    body bytea NOT NULL,
    -- sha256 (hex) of the checkpoint domain and the body.
    checksum text NOT NULL CHECK (checksum ~ '^[0-9a-f]{64}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, version)
);
