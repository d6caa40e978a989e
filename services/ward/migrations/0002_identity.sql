-- Ward I: identities, credentials, sessions, roles, assignments and the audit trail.
--
-- Rules the tables enforce themselves (so that no code path, present or future, can break them):
--   * a principal's id, kind, name and creation time never change; principals are never deleted;
--   * revocations are monotonic: a `revoked_at` (and `exchanged_at`, `replaced_by`) is set once;
--   * generations only grow;
--   * secrets are never stored: credentials and sessions keep only the SHA-256 digest (32 bytes);
--   * the audit trail is append-only.
--
-- Serialization discipline (store code): every administrative change to a principal, its
-- credentials, sessions or assignments first locks the principal row (`SELECT … FOR UPDATE`) and
-- bumps its generation in the same READ COMMITTED transaction; decisions are one statement, so
-- they see either all of a change or none of it.

-- The identity of this installation's Ward as a credential issuer (one row, created here).
CREATE TABLE ward.issuer (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO ward.issuer DEFAULT VALUES;

CREATE TABLE ward.principals (
    id uuid PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('human', 'service', 'peer', 'node')),
    name text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    -- Bumped by every change to the principal's assignments.
    policy_generation bigint NOT NULL DEFAULT 0 CHECK (policy_generation >= 0),
    -- Bumped by every revocation of the principal, its credentials or sessions.
    revocation_generation bigint NOT NULL DEFAULT 0 CHECK (revocation_generation >= 0),
    -- Target of the composite key that binds users to human principals.
    UNIQUE (id, kind)
);

-- The shared human account, bound 1:1 to a human principal.
CREATE TABLE ward.users (
    principal_id uuid PRIMARY KEY,
    kind text NOT NULL DEFAULT 'human' CHECK (kind = 'human'),
    display_name text NOT NULL CHECK (char_length(display_name) BETWEEN 1 AND 128),
    created_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (principal_id, kind) REFERENCES ward.principals (id, kind)
);

CREATE TABLE ward.credentials (
    id uuid PRIMARY KEY,
    principal_id uuid NOT NULL REFERENCES ward.principals (id),
    -- SHA-256 of the secret; the secret itself is shown once and never stored.
    digest bytea NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
    -- `enrollment`: exchangeable once; `standing`: until rotated, revoked or expired.
    kind text NOT NULL CHECK (kind IN ('enrollment', 'standing')),
    protocol text NOT NULL CHECK (protocol = 'lychd-opaque-sha256-v1'),
    issuer uuid NOT NULL,
    audience text NOT NULL CHECK (audience = 'ward'),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    -- First exchange (for enrollment credentials: the only one).
    exchanged_at timestamptz,
    revoked_at timestamptz,
    -- The credential that replaced this one (rotation).
    replaced_by uuid REFERENCES ward.credentials (id),
    CHECK (expires_at > created_at),
    CHECK (replaced_by IS NULL OR revoked_at IS NOT NULL),
    -- Target of the composite key that keeps a session's principal equal to its credential's.
    UNIQUE (id, principal_id)
);
CREATE INDEX credentials_principal ON ward.credentials (principal_id);

CREATE TABLE ward.sessions (
    id uuid PRIMARY KEY,
    -- SHA-256 of the session token; the token itself is shown once and never stored.
    digest bytea NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
    principal_id uuid NOT NULL,
    credential_id uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    CHECK (expires_at > created_at),
    FOREIGN KEY (credential_id, principal_id) REFERENCES ward.credentials (id, principal_id)
);
CREATE INDEX sessions_live_by_credential ON ward.sessions (credential_id) WHERE revoked_at IS NULL;
CREATE INDEX sessions_live_by_principal ON ward.sessions (principal_id) WHERE revoked_at IS NULL;

-- Roles: named bundles of permissions with members. Not yet consulted by decisions and not yet
-- administered over the API: when they are, every change to a role must bump the policy
-- generation of each member under that member's principal lock, like an assignment does.
CREATE TABLE ward.roles (
    id uuid PRIMARY KEY,
    name text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ward.role_permissions (
    role_id uuid NOT NULL REFERENCES ward.roles (id),
    action text NOT NULL CHECK (action ~ '^[a-z][a-z0-9_-]{0,31}:[a-z][a-z0-9_-]{0,63}$'),
    object text NOT NULL CHECK (object ~ '^[a-z][a-z0-9_-]{0,31}:(\*|[A-Za-z0-9._:/@+-]{1,128})$'),
    audience text NOT NULL CHECK (audience ~ '^[a-z][a-z0-9_-]{0,31}$'),
    purpose text NOT NULL CHECK (purpose ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    PRIMARY KEY (role_id, action, object, audience, purpose)
);
CREATE TABLE ward.role_members (
    role_id uuid NOT NULL REFERENCES ward.roles (id),
    principal_id uuid NOT NULL REFERENCES ward.principals (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz,
    PRIMARY KEY (role_id, principal_id)
);

-- Exact grants: principal × action × object × audience × purpose, optionally until `expires_at`.
CREATE TABLE ward.assignments (
    id uuid PRIMARY KEY,
    principal_id uuid NOT NULL REFERENCES ward.principals (id),
    action text NOT NULL CHECK (action ~ '^[a-z][a-z0-9_-]{0,31}:[a-z][a-z0-9_-]{0,63}$'),
    object text NOT NULL CHECK (object ~ '^[a-z][a-z0-9_-]{0,31}:(\*|[A-Za-z0-9._:/@+-]{1,128})$'),
    audience text NOT NULL CHECK (audience ~ '^[a-z][a-z0-9_-]{0,31}$'),
    purpose text NOT NULL CHECK (purpose ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz,
    CHECK (expires_at IS NULL OR expires_at > created_at)
);
-- The decision lookup, and at most one live assignment per exact grant.
CREATE UNIQUE INDEX assignments_live ON ward.assignments (principal_id, action, audience, purpose, object)
    WHERE revoked_at IS NULL;

-- Append-only trail of decisions and administrative changes: identities and generations only.
CREATE TABLE ward.audit (
    seq bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    event text NOT NULL CHECK (event ~ '^[a-z_]+(\.[a-z_]+)+$'),
    -- The principal that acted (NULL: bootstrap, or an unresolved presenter).
    actor_id uuid,
    -- The principal acted upon or decided about.
    subject_id uuid,
    detail jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object')
);

-- Guards ------------------------------------------------------------------------------------------

CREATE FUNCTION ward.refuse(message text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'integrity_constraint_violation', MESSAGE = message;
END $$;

CREATE FUNCTION ward.principals_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM ward.refuse('principals are never deleted');
    END IF;
    IF NEW.id <> OLD.id OR NEW.kind <> OLD.kind OR NEW.name <> OLD.name
       OR NEW.created_at <> OLD.created_at THEN
        PERFORM ward.refuse('a principal''s id, kind, name and creation time are immutable');
    END IF;
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        PERFORM ward.refuse('principal revocation is monotonic');
    END IF;
    IF NEW.policy_generation < OLD.policy_generation
       OR NEW.revocation_generation < OLD.revocation_generation THEN
        PERFORM ward.refuse('generations only grow');
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER principals_guard BEFORE UPDATE OR DELETE ON ward.principals
    FOR EACH ROW EXECUTE FUNCTION ward.principals_guard();

CREATE FUNCTION ward.users_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM ward.refuse('users are never deleted');
    END IF;
    IF NEW.principal_id <> OLD.principal_id OR NEW.created_at <> OLD.created_at THEN
        PERFORM ward.refuse('a user''s principal binding is immutable');
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER users_guard BEFORE UPDATE OR DELETE ON ward.users
    FOR EACH ROW EXECUTE FUNCTION ward.users_guard();

CREATE FUNCTION ward.credentials_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM ward.refuse('credentials are never deleted');
    END IF;
    IF NEW.id <> OLD.id OR NEW.principal_id <> OLD.principal_id OR NEW.digest <> OLD.digest
       OR NEW.kind <> OLD.kind OR NEW.protocol <> OLD.protocol OR NEW.issuer <> OLD.issuer
       OR NEW.audience <> OLD.audience OR NEW.created_at <> OLD.created_at
       OR NEW.expires_at <> OLD.expires_at THEN
        PERFORM ward.refuse('a credential''s identity, digest and lifetime are immutable');
    END IF;
    IF (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at)
       OR (OLD.exchanged_at IS NOT NULL AND NEW.exchanged_at IS DISTINCT FROM OLD.exchanged_at)
       OR (OLD.replaced_by IS NOT NULL AND NEW.replaced_by IS DISTINCT FROM OLD.replaced_by) THEN
        PERFORM ward.refuse('credential revocation, exchange and replacement are set once');
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER credentials_guard BEFORE UPDATE OR DELETE ON ward.credentials
    FOR EACH ROW EXECUTE FUNCTION ward.credentials_guard();

CREATE FUNCTION ward.sessions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM ward.refuse('sessions are never deleted');
    END IF;
    IF NEW.id <> OLD.id OR NEW.digest <> OLD.digest OR NEW.principal_id <> OLD.principal_id
       OR NEW.credential_id <> OLD.credential_id OR NEW.created_at <> OLD.created_at
       OR NEW.expires_at <> OLD.expires_at THEN
        PERFORM ward.refuse('a session''s identity, digest and lifetime are immutable');
    END IF;
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        PERFORM ward.refuse('session revocation is monotonic');
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER sessions_guard BEFORE UPDATE OR DELETE ON ward.sessions
    FOR EACH ROW EXECUTE FUNCTION ward.sessions_guard();

CREATE FUNCTION ward.assignments_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM ward.refuse('assignments are never deleted');
    END IF;
    IF NEW.id <> OLD.id OR NEW.principal_id <> OLD.principal_id OR NEW.action <> OLD.action
       OR NEW.object <> OLD.object OR NEW.audience <> OLD.audience OR NEW.purpose <> OLD.purpose
       OR NEW.created_at <> OLD.created_at OR NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
        PERFORM ward.refuse('an assignment is immutable except for its revocation');
    END IF;
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        PERFORM ward.refuse('assignment revocation is monotonic');
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER assignments_guard BEFORE UPDATE OR DELETE ON ward.assignments
    FOR EACH ROW EXECUTE FUNCTION ward.assignments_guard();

-- Row and statement guard for tables that never change once written; TG_ARGV[0] says why.
CREATE FUNCTION ward.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ward.refuse(TG_ARGV[0]);
    RETURN NULL;
END $$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON ward.audit
    FOR EACH ROW EXECUTE FUNCTION ward.refuse_change('the audit trail is append-only');
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON ward.audit
    FOR EACH STATEMENT EXECUTE FUNCTION ward.refuse_change('the audit trail is append-only');
CREATE TRIGGER issuer_fixed BEFORE UPDATE OR DELETE ON ward.issuer
    FOR EACH ROW EXECUTE FUNCTION ward.refuse_change('the issuer identity never changes');

-- The runtime role got DML on every table through default privileges; take back what no code
-- path needs, so the guards above are not the only line.
REVOKE UPDATE, DELETE ON ward.audit FROM lychd_ward_app;
REVOKE INSERT, UPDATE, DELETE ON ward.issuer FROM lychd_ward_app;
REVOKE DELETE ON ward.principals, ward.users, ward.credentials, ward.sessions, ward.assignments
    FROM lychd_ward_app;
