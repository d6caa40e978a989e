-- Durability (issue 27, Runner I): recovery review out of QUARANTINED, explicit state-schema
-- migrations, provenance snapshots, and the contract's trace fields on every transition.

-- An operator's recovery review of a quarantined run (loop-contract v1
-- `checkpoint.corruption_outcome`): one per quarantine (the run version that entered
-- QUARANTINED), naming the checkpoint the operator inspected (the recovery point: the newest
-- earlier checkpoint whose checksum verifies) by its checksum. The rationale is kept here and
-- never logged.
CREATE TABLE runner.run_reviews (
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    -- The run version whose transition entered QUARANTINED (the review's subject).
    quarantined_version bigint NOT NULL CHECK (quarantined_version >= 1),
    decision text NOT NULL CHECK (decision IN ('resume', 'fail', 'cancel')),
    -- Ward's principal id of the reviewer.
    reviewer text NOT NULL,
    -- The recovery point the review was decided on (NULL / '' when no checkpoint verified).
    recovery_version bigint,
    recovery_checksum text NOT NULL CHECK (recovery_checksum ~ '^([0-9a-f]{64})?$'),
    rationale text NOT NULL CHECK (char_length(rationale) BETWEEN 1 AND 1024),
    -- The run version and lease generation the review's transition made.
    version bigint NOT NULL CHECK (version >= 1),
    generation bigint NOT NULL CHECK (generation >= 1),
    reviewed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, quarantined_version)
);

-- A run's state moved to another state-schema version by a registered migration (forward or
-- its rollback): the digests of the state before and after, the rollback rule, and the run
-- version whose checkpoint is the first under the new version. Never updated.
CREATE TABLE runner.state_migrations (
    id bigint GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    migration text NOT NULL,
    direction text NOT NULL CHECK (direction IN ('forward', 'rollback')),
    from_version text NOT NULL,
    to_version text NOT NULL,
    before_sha256 text NOT NULL CHECK (before_sha256 ~ '^[0-9a-f]{64}$'),
    after_sha256 text NOT NULL CHECK (after_sha256 ~ '^[0-9a-f]{64}$'),
    rollback_rule text NOT NULL,
    -- The run version whose checkpoint is written under `to_version`.
    checkpoint_version bigint NOT NULL CHECK (checkpoint_version >= 1),
    actor text NOT NULL,
    migrated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX state_migrations_run ON runner.state_migrations (run_id, id);

-- Every retrieved source a run uses (loop-contract v1 `security.provenance_snapshots`): the
-- run's input and every model answer. Digests only, never the content.
CREATE TABLE runner.provenance_snapshots (
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    -- The run version whose transition first used it (its checkpoint id).
    version bigint NOT NULL CHECK (version >= 1),
    -- `input`, or `model:<capability family>`.
    source text NOT NULL CHECK (source ~ '^(input|model:[a-z_]{1,32})$'),
    -- The workflow step that retrieved it ('' for the input).
    step text NOT NULL,
    content_sha256 text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
    parser_version text NOT NULL,
    -- Who produced it: the principal that started the run (input), or the capability key a
    -- Dispatcher lease granted (model answer).
    responsibility text NOT NULL,
    retrieved_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, version, source, content_sha256)
);

-- The contract's `trace.transition_fields` the first slice did not store (run_id,
-- workflow_version, state_schema_version, transition_id, source_state, target_state, trigger,
-- actor are there; `timestamp` is `recorded_at`; `checkpoint_id` is `(run_id, version)`).
ALTER TABLE runner.run_transitions
    -- The loop cycle: the number of steps the run had entered when it committed.
    ADD COLUMN cycle_id bigint NOT NULL DEFAULT 0,
    -- The capability family the transition's step used ('' for none).
    ADD COLUMN capability text NOT NULL DEFAULT '',
    -- sha256 digests of the evidence the transition recorded (a step's result).
    ADD COLUMN evidence_hashes text[] NOT NULL DEFAULT '{}',
    -- What the transition consumed of the budgets (`{"steps": n, "tokens": n}`).
    ADD COLUMN budget_delta jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- The OpenTelemetry trace and span of the span that committed it ('' without one).
    ADD COLUMN trace_id text NOT NULL DEFAULT '',
    ADD COLUMN span_id text NOT NULL DEFAULT '';
