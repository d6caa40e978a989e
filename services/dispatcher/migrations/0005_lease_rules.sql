-- Issue 31: the lease + release round trip, cheaper in PostgreSQL without weakening a rule.
--
-- PostgreSQL re-reads every CHECK constraint of a table from its stored text, and plans it,
-- each time a statement writes the table (the executor builds the constraint expressions anew
-- for every statement: `stringToNode` and `expression_planner` per execution). The six CHECKs
-- of `leases` cost about 0.1 ms of the database's CPU per lease + release (measured with
-- `pgbench` on the registration and release statements at 32 clients: 590 → 515 µs per round
-- trip, `docs/dispatcher.md` "CPU per round trip, issue 31 third round"). The same rules now
-- live in one PL/pgSQL trigger function, whose expressions are compiled once per connection;
-- the trigger runs before every insert and before every update that sets a column the rules
-- read, so a release (which sets `released_at` only) is not re-validated, and a renewal (which
-- sets `expires_at`) still is. Every rule is the CHECK it replaces, word for word; a row that
-- breaks one is refused with the same SQLSTATE (23514, check_violation).

CREATE FUNCTION leases_rules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (
        -- The key's shape (was `leases_check`): version 1 names a family and a model, version
        -- 2 an interface and a profile.
        ((NEW.key_version = 1 AND NEW.family IS NOT NULL AND NEW.model_id IS NOT NULL
              AND NEW.interface_id IS NULL AND NEW.profile_ref IS NULL)
         OR (NEW.key_version = 2 AND NEW.interface_id IS NOT NULL AND NEW.profile_ref IS NOT NULL
              AND NEW.family IS NULL AND NEW.model_id IS NULL))
        -- `leases_check1`
        AND NEW.expires_at > NEW.issued_at
        -- `leases_holder_check`
        AND length(NEW.holder) BETWEEN 1 AND 128
        -- `leases_priority_check`
        AND NEW.priority BETWEEN 0 AND 100
        -- `leases_request_id_check`
        AND (NEW.request_id IS NULL OR length(NEW.request_id) BETWEEN 1 AND 128)
    ) IS TRUE THEN
        -- A CHECK lets a NULL result pass; every column read here is NOT NULL or tested for
        -- NULL, so only `key_version IN (1, 2)` differs, and the shape rule above already
        -- requires 1 or 2.
        RAISE EXCEPTION 'new row for relation "leases" violates its rules'
            USING ERRCODE = 'check_violation', TABLE = 'leases';
    END IF;
    RETURN NEW;
END
$$;

ALTER TABLE leases
    DROP CONSTRAINT leases_check,
    DROP CONSTRAINT leases_check1,
    DROP CONSTRAINT leases_holder_check,
    DROP CONSTRAINT leases_key_version_check,
    DROP CONSTRAINT leases_priority_check,
    DROP CONSTRAINT leases_request_id_check;

CREATE TRIGGER leases_rules
    BEFORE INSERT OR UPDATE OF key_version, family, model_id, interface_id, profile_ref,
                               issued_at, expires_at, holder, priority, request_id
    ON leases FOR EACH ROW EXECUTE FUNCTION leases_rules();
