-- Durable dispatcher state: per-animator admission with counted closures and generations,
-- leases with enforced expiry, readiness observations, and dispatch events. Registry
-- declarations live in configuration; rows here name animators and keys by their text.
--
-- Keys: `key_version` 1 is `{animator}:{family}:{model_id}`; version 2
-- (`{animator}:{interface_id}:{profile_ref}`, designed) has its columns already, so admitting
-- it needs no table rewrite.

CREATE TABLE admission (
    animator      text PRIMARY KEY,
    -- Moves on every close and reopen; a lease registers only under the generation its issue
    -- captured before probing.
    generation    bigint  NOT NULL DEFAULT 0 CHECK (generation >= 0),
    -- Closures naming this animator that are not reopened; admission is open at 0.
    open_closures integer NOT NULL DEFAULT 0 CHECK (open_closures >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE closures (
    token        uuid PRIMARY KEY,
    -- Caller-owned identity (e.g. the Orchestrator's transition id): a replay returns the
    -- same closure.
    request_id   text NOT NULL UNIQUE CHECK (length(request_id) BETWEEN 1 AND 128),
    reason       text NOT NULL CHECK (length(reason) BETWEEN 1 AND 256),
    closed_by    text NOT NULL,
    closed_at    timestamptz NOT NULL DEFAULT now(),
    reopened_by  text,
    reopened_at  timestamptz,
    CHECK ((reopened_at IS NULL) = (reopened_by IS NULL))
);

CREATE TABLE closure_animators (
    token      uuid NOT NULL REFERENCES closures (token),
    animator   text NOT NULL REFERENCES admission (animator),
    PRIMARY KEY (token, animator)
);

CREATE TABLE leases (
    id                   uuid PRIMARY KEY,
    capability_key       text NOT NULL,
    key_version          smallint NOT NULL DEFAULT 1 CHECK (key_version IN (1, 2)),
    family               text,
    model_id             text,
    interface_id         text,
    profile_ref          text,
    operation            text,
    CHECK (
        (key_version = 1 AND family IS NOT NULL AND model_id IS NOT NULL
            AND interface_id IS NULL AND profile_ref IS NULL)
        OR (key_version = 2 AND interface_id IS NOT NULL AND profile_ref IS NOT NULL
            AND family IS NULL AND model_id IS NULL)
    ),
    animator             text NOT NULL REFERENCES admission (animator),
    holder               text NOT NULL CHECK (length(holder) BETWEEN 1 AND 128),
    principal_id         text NOT NULL,
    run_id               text NOT NULL DEFAULT '',
    attempt_id           text NOT NULL DEFAULT '',
    priority             smallint NOT NULL CHECK (priority BETWEEN 0 AND 100),
    admission_generation bigint NOT NULL,
    issued_at            timestamptz NOT NULL,
    expires_at           timestamptz NOT NULL CHECK (expires_at > issued_at),
    renewed_at           timestamptz,
    released_at          timestamptz
);

-- Drain: live leases of an animator.
CREATE INDEX leases_unreleased_by_animator ON leases (animator, expires_at)
    WHERE released_at IS NULL;
-- ListLeases: newest first.
CREATE INDEX leases_by_issue ON leases (issued_at DESC, id DESC);

CREATE TABLE observations (
    capability_key text PRIMARY KEY,
    key_version    smallint NOT NULL DEFAULT 1 CHECK (key_version IN (1, 2)),
    animator       text NOT NULL,
    phase          text NOT NULL
        CHECK (phase IN ('COLD', 'ACTIVATABLE', 'WARMING', 'WARM', 'ERROR', 'UNKNOWN')),
    reason         text NOT NULL DEFAULT '',
    observed_at    timestamptz NOT NULL
);

CREATE INDEX observations_by_animator ON observations (animator);

CREATE TABLE dispatch_events (
    sequence       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lease_id       uuid NOT NULL UNIQUE REFERENCES leases (id),
    capability_key text NOT NULL,
    animator       text NOT NULL,
    holder         text NOT NULL,
    run_id         text NOT NULL,
    attempt_id     text NOT NULL,
    priority       smallint NOT NULL,
    admitted_at    timestamptz NOT NULL
);
