-- Effects (issue 28, Runner II): the intent, the outbox and the durable effect ledger of
-- loop-contract v1 `effects`. The intent and its outbox row are written in the transaction of
-- the fenced commit that enters EXECUTE (COMMIT_INTENT -> EXECUTE), before any dispatch.

-- One row per effect intent. The idempotency key is sha256 of the contract's tuple
-- (run_id, transition_id, effect_sequence, action_digest, adapter_version), `transition_id`
-- being the transition that committed the intent (see services/runner/src/domain/effect.rs).
CREATE TABLE runner.effects (
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    effect_sequence integer NOT NULL CHECK (effect_sequence >= 1),
    transition_id uuid NOT NULL,
    step text NOT NULL,
    adapter text NOT NULL,
    adapter_version text NOT NULL,
    destination text NOT NULL,
    action_digest text NOT NULL CHECK (action_digest ~ '^sha256:[0-9a-f]{64}$'),
    -- The text the key digests (the tuple) and the key sent on the wire.
    idempotency_tuple text NOT NULL,
    idempotency_key text NOT NULL UNIQUE CHECK (idempotency_key ~ '^sha256:[0-9a-f]{64}$'),
    -- Ward's consent consumed for it and the binding digest presented.
    consent_id text NOT NULL,
    binding_digest text NOT NULL,
    -- The run version whose checkpoint committed the intent.
    version bigint NOT NULL CHECK (version >= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, effect_sequence)
);

-- The outbox: what the adapter delivers. Claimed by the holder of the run's lease at the
-- generation it holds (the claim is fenced on the run row); `settled_at` once the outcome is
-- known (confirmed, rejected or resolved by an operator).
CREATE TABLE runner.effect_outbox (
    idempotency_key text PRIMARY KEY REFERENCES runner.effects (idempotency_key),
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    effect_sequence integer NOT NULL,
    destination text NOT NULL,
    -- The canonical action (the request body).
    action bytea NOT NULL,
    claimed_generation bigint,
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    settled_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The durable ledger (loop-contract v1 `effects.durable_ledger`): append-only rows, one per
-- entry, in the contract's kinds. `detail` holds digests, ids, statuses and counts only: never
-- the action, a response body, a credential or an operator's note.
CREATE TABLE runner.effect_ledger (
    seq bigint GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    effect_sequence integer NOT NULL CHECK (effect_sequence >= 1),
    kind text NOT NULL CHECK (kind IN ('proposal', 'policy_verdict', 'approval_consumption',
        'intent', 'attempt', 'response', 'receipt', 'acknowledgement', 'reconciliation',
        'compensation')),
    -- The lease generation of the runner (or 0 for an operator's entry) that wrote it.
    generation bigint NOT NULL CHECK (generation >= 0),
    actor text NOT NULL,
    detail jsonb NOT NULL DEFAULT '{}'::jsonb,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX effect_ledger_run ON runner.effect_ledger (run_id, effect_sequence, seq);

CREATE FUNCTION runner.effect_ledger_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'runner.effect_ledger is append-only' USING ERRCODE = '42501';
END;
$$;
CREATE TRIGGER effect_ledger_append_only BEFORE UPDATE OR DELETE ON runner.effect_ledger
    FOR EACH ROW EXECUTE FUNCTION runner.effect_ledger_append_only();
CREATE TRIGGER effects_append_only BEFORE UPDATE OR DELETE ON runner.effects
    FOR EACH ROW EXECUTE FUNCTION runner.effect_ledger_append_only();
