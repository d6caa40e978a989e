-- Deterministic replay (issue 28, Runner II): every nondeterministic input the step loop's rules
-- read, recorded in the statement of the commit that consumed it (loop-contract v1
-- `replay.deterministic_replay_requirements`: "captured time, random, and identifier inputs",
-- "recorded model and tool responses").
--
-- One row per input, in the order the rules read it (`seq`, from 1 within a version), keyed by
-- the run version whose transition consumed it: the row exists only when that transition does
-- (it is inserted from the fenced update's returned row). `kind` is one of the registry's kinds
-- (`domain::replay::Kind`): `clock`, `random`, `task_result`, `model_response`, `capability`,
-- `tree`. `meta` holds the kind's small fields (JSON); `body` the bytes of a response (a model
-- answer's HTTP body) — kept here, never logged, traced or answered; checkpoints and transition
-- rows carry only its digest. `rules_version` is the step loop's rules that read it (a replay
-- refuses a version it cannot re-execute). Never updated.
CREATE TABLE runner.run_inputs (
    run_id uuid NOT NULL REFERENCES runner.runs (id),
    version bigint NOT NULL CHECK (version >= 2),
    seq integer NOT NULL CHECK (seq >= 1),
    kind text NOT NULL CHECK (kind ~ '^[a-z][a-z_]{0,31}$'),
    meta jsonb NOT NULL,
    body bytea NOT NULL DEFAULT ''::bytea,
    rules_version text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, version, seq)
);

-- Whether the run's inputs are recorded: runs started before this migration (NULL) were
-- driven without a record and cannot be replayed; every run started after it is (the default
-- is set after the column exists, so existing rows keep NULL).
ALTER TABLE runner.runs ADD COLUMN inputs_recorded boolean;
ALTER TABLE runner.runs ALTER COLUMN inputs_recorded SET DEFAULT true;
