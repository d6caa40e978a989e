-- Runs as durable resources (issue 27, first slice): a run per caller's start request
-- (idempotent per principal and `request_id`), its current state under the control FSM with
-- an aggregate version and the runner lease generation that fences every state commit, and
-- the feed of every transition it took (`run_transitions`, one sequence, cache 1, for
-- resuming readers; every writer holds a transaction id before it allocates a number).

CREATE TABLE runner.runs (
    id uuid PRIMARY KEY,
    -- `ListRuns` pages on it (newest first).
    listed bigint GENERATED ALWAYS AS IDENTITY (CACHE 1) UNIQUE,
    -- Ward's principal id of the caller that started it.
    owner text NOT NULL,
    request_id text NOT NULL CHECK (request_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
    -- sha256 of the workflow digest, input digest and budgets: the same request id with
    -- another digest is a conflict.
    request_sha256 text NOT NULL CHECK (request_sha256 ~ '^[0-9a-f]{64}$'),
    workflow bytea NOT NULL,
    workflow_sha256 text NOT NULL CHECK (workflow_sha256 ~ '^[0-9a-f]{64}$'),
    workflow_name text NOT NULL,
    workflow_version text NOT NULL,
    state_schema_version text NOT NULL,
    -- The control FSM the run is bound to (its file's sha256).
    fsm_sha256 text NOT NULL CHECK (fsm_sha256 ~ '^[0-9a-f]{64}$'),
    input bytea NOT NULL,
    input_sha256 text NOT NULL CHECK (input_sha256 ~ '^[0-9a-f]{64}$'),
    -- Budgets, each at most the contract's (checked by the office; 0 never stored).
    max_steps integer NOT NULL CHECK (max_steps BETWEEN 1 AND 64),
    max_tool_calls integer NOT NULL CHECK (max_tool_calls BETWEEN 1 AND 24),
    max_retries_per_transition integer NOT NULL CHECK (max_retries_per_transition BETWEEN 1 AND 3),
    max_wall_seconds integer NOT NULL CHECK (max_wall_seconds BETWEEN 1 AND 600),
    max_suspended_seconds integer NOT NULL CHECK (max_suspended_seconds BETWEEN 1 AND 86400),
    max_tokens integer NOT NULL CHECK (max_tokens BETWEEN 1 AND 100000),
    max_cost_milli integer NOT NULL CHECK (max_cost_milli BETWEEN 1 AND 20000),
    max_recursion_depth integer NOT NULL CHECK (max_recursion_depth BETWEEN 1 AND 3),
    max_parallelism integer NOT NULL CHECK (max_parallelism BETWEEN 1 AND 4),
    -- A state of the control FSM (the office checks it against the file).
    state text NOT NULL CHECK (state ~ '^[A-Z_]{1,64}$'),
    -- The terminal category once the state is terminal.
    terminal_category text,
    -- Aggregate version: rises by one with every committed transition.
    version bigint NOT NULL CHECK (version >= 1),
    -- The runner lease generation: a state commit names the one it holds and is refused when
    -- it is not the row's.
    generation bigint NOT NULL CHECK (generation >= 1),
    -- A cancellation recorded while the run was effect-critical, honoured at
    -- HONOR_PENDING_INTERRUPT.
    interrupt_pending boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner, request_id)
);

CREATE TABLE runner.run_transitions (
    sequence bigint GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    transition_id uuid NOT NULL UNIQUE,
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    -- The run's aggregate version this transition made (1: its start).
    version bigint NOT NULL CHECK (version >= 1),
    generation bigint NOT NULL CHECK (generation >= 1),
    workflow_version text NOT NULL,
    state_schema_version text NOT NULL,
    -- Empty for the run's creation.
    source_state text NOT NULL,
    target_state text NOT NULL,
    -- The FSM event taken (`created` for the creation).
    trigger text NOT NULL,
    -- Who issued it: a principal id, or `runner`.
    actor text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, version)
);
