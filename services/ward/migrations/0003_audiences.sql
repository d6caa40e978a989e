-- Ward I+: sessions bound to audiences; the roles tables go.
--
-- A session names the offices it may be presented to, chosen at exchange. Ward refuses a token
-- asked about for any other audience, so an office that receives a caller's session cannot
-- replay it elsewhere (above all not at Ward's administration). Sessions minted before this
-- migration name no audience and so authenticate nowhere: their holders exchange again.
ALTER TABLE ward.sessions ADD COLUMN audiences text[] NOT NULL DEFAULT '{}';
ALTER TABLE ward.sessions ALTER COLUMN audiences DROP DEFAULT;
ALTER TABLE ward.sessions ADD CONSTRAINT sessions_audiences CHECK (
    cardinality(audiences) <= 16
    AND array_to_string(audiences, ',') ~ '^([a-z][a-z0-9_-]{0,31}(,|$))*$'
);

-- Roles were never consulted by a decision nor administered over the API: a table nothing reads
-- is a table nobody audits. Exact assignments are the only grants.
DROP TABLE ward.role_members;
DROP TABLE ward.role_permissions;
DROP TABLE ward.roles;

-- A session's audiences are as immutable as its identity and lifetime.
CREATE OR REPLACE FUNCTION ward.sessions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM ward.refuse('sessions are never deleted');
    END IF;
    IF NEW.id <> OLD.id OR NEW.digest <> OLD.digest OR NEW.principal_id <> OLD.principal_id
       OR NEW.credential_id <> OLD.credential_id OR NEW.created_at <> OLD.created_at
       OR NEW.expires_at <> OLD.expires_at OR NEW.audiences IS DISTINCT FROM OLD.audiences THEN
        PERFORM ward.refuse('a session''s identity, digest, audiences and lifetime are immutable');
    END IF;
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        PERFORM ward.refuse('session revocation is monotonic');
    END IF;
    RETURN NEW;
END $$;
