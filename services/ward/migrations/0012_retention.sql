-- Issue 30 item 3: retention.
--
-- 1. The audit trail is partitioned by time (a range partition per calendar month of `at`, UTC),
--    so an operator can export a month and then detach and drop it (docs/operations.md, "The
--    audit: export and detach old months"); the office itself never deletes or edits a record.
--    Existing rows are kept (copied into their month). The append-only guarantee is kept on the
--    parent and on every partition: the runtime role has only INSERT and SELECT, and UPDATE,
--    DELETE and TRUNCATE meet a trigger even for the owner and the superuser. A month's partition
--    is created ahead of time by `ward.audit_ensure_partitions` (the owner's function; the
--    retention job calls it every round); `ward.audit_default` catches any row outside the
--    created months, so an insert never fails for want of a partition.
--
--    A unique constraint of a partitioned table must include the partition key: the decision
--    log's record id is unique with its time (`record_id, at`), and the decision log gives a
--    batch one `at` for all its attempts, so a retried batch is still written once.
--
-- 2. Consents and sessions may be deleted by retention only (the owner's `ward.prune_*`
--    functions, which the runtime role may call but whose DELETE it cannot issue itself):
--    a settled consent with no proposal and no promotion, decided more than the given age ago,
--    and not granted-and-unconsumed-and-unrevoked (still usable); a session expired or revoked
--    more than the given age ago. The guard triggers let a delete through only inside those
--    functions (`ward.pruning` set locally) and only for such rows.

ALTER TABLE ward.audit RENAME TO audit_unpartitioned;
ALTER TABLE ward.audit_unpartitioned RENAME CONSTRAINT audit_pkey TO audit_unpartitioned_pkey;
ALTER TABLE ward.audit_unpartitioned
    RENAME CONSTRAINT audit_record_id_key TO audit_unpartitioned_record_id_key;
ALTER TABLE ward.audit_unpartitioned RENAME CONSTRAINT audit_event_check
    TO audit_unpartitioned_event_check;
ALTER TABLE ward.audit_unpartitioned RENAME CONSTRAINT audit_detail_check
    TO audit_unpartitioned_detail_check;

CREATE TABLE ward.audit (
    seq bigint NOT NULL DEFAULT nextval('ward.audit_seq_seq'),
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    event text NOT NULL CHECK (event ~ '^[a-z_]+(\.[a-z_]+)+$'),
    actor_id uuid,
    subject_id uuid,
    detail jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object'),
    record_id uuid,
    PRIMARY KEY (seq, at),
    CONSTRAINT audit_record_id_key UNIQUE (record_id, at)
) PARTITION BY RANGE (at);
ALTER SEQUENCE ward.audit_seq_seq OWNED BY ward.audit.seq;
CREATE INDEX audit_by_seq ON ward.audit (seq);

CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON ward.audit
    FOR EACH ROW EXECUTE FUNCTION ward.refuse_change('the audit trail is append-only');
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON ward.audit
    FOR EACH STATEMENT EXECUTE FUNCTION ward.refuse_change('the audit trail is append-only');

-- Make `name` a partition of the audit for [from, to) (or the default one), append-only.
CREATE FUNCTION ward.audit_attach(name text, bounds text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, ward AS $$
BEGIN
    EXECUTE format('CREATE TABLE ward.%I PARTITION OF ward.audit %s', name, bounds);
    -- Row triggers are cloned from the parent; a statement trigger is not.
    EXECUTE format('CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON ward.%I
                    FOR EACH STATEMENT EXECUTE FUNCTION ward.refuse_change(%L)',
                   name, 'the audit trail is append-only');
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON ward.%I FROM lychd_ward_app', name);
END $$;

-- Create the monthly partitions from the month of `since` through `ahead` months after the
-- current one (those that do not exist yet). A month whose rows already went to the default
-- partition is skipped (the operator moves them: docs/operations.md). Returns how many it made.
CREATE FUNCTION ward.audit_ensure_partitions(ahead integer, since timestamptz DEFAULT now())
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ward SET TimeZone = 'UTC' AS $$
DECLARE
    month timestamptz := date_trunc('month', least(since, now()) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    last timestamptz := date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                        + make_interval(months => greatest(0, least(ahead, 24)));
    name text;
    made integer := 0;
BEGIN
    -- Bounded whatever the caller asks: at most twenty years back.
    month := greatest(month, last - interval '20 years');
    WHILE month <= last LOOP
        name := 'audit_y' || to_char(month AT TIME ZONE 'UTC', 'YYYY"m"MM');
        IF to_regclass('ward.' || name) IS NULL
           AND NOT EXISTS (SELECT 1 FROM ward.audit_default
                            WHERE at >= month AND at < month + interval '1 month') THEN
            PERFORM ward.audit_attach(name, format('FOR VALUES FROM (%L) TO (%L)',
                                                   month, month + interval '1 month'));
            made := made + 1;
        END IF;
        month := month + interval '1 month';
    END LOOP;
    RETURN made;
END $$;
REVOKE ALL ON FUNCTION ward.audit_attach(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ward.audit_ensure_partitions(integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ward.audit_ensure_partitions(integer, timestamptz) TO lychd_ward_app;

SELECT ward.audit_attach('audit_default', 'DEFAULT');
SELECT ward.audit_ensure_partitions(3, coalesce((SELECT min(at) FROM ward.audit_unpartitioned), now()));

INSERT INTO ward.audit (seq, at, event, actor_id, subject_id, detail, record_id)
SELECT seq, at, event, actor_id, subject_id, detail, record_id
  FROM ward.audit_unpartitioned ORDER BY seq;
DROP TABLE ward.audit_unpartitioned;

REVOKE UPDATE, DELETE, TRUNCATE ON ward.audit FROM lychd_ward_app;

-- 2. Pruning consents and sessions.

CREATE OR REPLACE FUNCTION ward.consents_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF current_setting('ward.pruning', true) = 'consents' AND OLD.state <> 'pending'
           AND NOT (OLD.state = 'granted' AND OLD.consumed_at IS NULL AND OLD.revoked_at IS NULL)
        THEN
            RETURN OLD;
        END IF;
        PERFORM ward.refuse('consents are never deleted');
    END IF;
    IF NEW.id <> OLD.id OR NEW.run_id <> OLD.run_id OR NEW.effect_owner <> OLD.effect_owner
       OR NEW.effect_id <> OLD.effect_id OR NEW.effect_revision <> OLD.effect_revision
       OR NEW.tool_name <> OLD.tool_name OR NEW.deferred_call_id <> OLD.deferred_call_id
       OR NEW.censored_arguments <> OLD.censored_arguments
       OR NEW.arguments_digest <> OLD.arguments_digest OR NEW.effect_class <> OLD.effect_class
       OR NEW.binding <> OLD.binding OR NEW.binding_digest <> OLD.binding_digest
       OR NEW.requested_by <> OLD.requested_by OR NEW.created_at <> OLD.created_at
       OR NEW.expires_at <> OLD.expires_at THEN
        PERFORM ward.refuse('a consent''s binding and lifetime are immutable');
    END IF;
    IF OLD.state <> 'pending' AND (NEW.state <> OLD.state
       OR NEW.decided_at IS DISTINCT FROM OLD.decided_at
       OR NEW.decided_by IS DISTINCT FROM OLD.decided_by
       OR NEW.granted_by_rule IS DISTINCT FROM OLD.granted_by_rule
       OR NEW.rule_policy_digest IS DISTINCT FROM OLD.rule_policy_digest) THEN
        PERFORM ward.refuse('a settled consent stays settled');
    END IF;
    IF (OLD.consumed_at IS NOT NULL AND NEW.consumed_at IS DISTINCT FROM OLD.consumed_at)
       OR (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) THEN
        PERFORM ward.refuse('consumption and revocation of a consent are monotonic');
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION ward.sessions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF current_setting('ward.pruning', true) = 'sessions'
           AND (OLD.expires_at < now() OR OLD.revoked_at IS NOT NULL) THEN
            RETURN OLD;
        END IF;
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

-- The change feed of a consent goes with it (its rows are append-only otherwise).
CREATE OR REPLACE FUNCTION ward.consent_changes_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('ward.pruning', true) = 'consents' THEN
        RETURN OLD;
    END IF;
    PERFORM ward.refuse('consent changes are append-only');
    RETURN NULL;
END $$;
DROP TRIGGER consent_changes_append_only ON ward.consent_changes;
CREATE TRIGGER consent_changes_append_only BEFORE UPDATE OR DELETE ON ward.consent_changes
    FOR EACH ROW EXECUTE FUNCTION ward.consent_changes_guard();

CREATE INDEX consents_settled_by_decision ON ward.consents (decided_at) WHERE state <> 'pending';
CREATE INDEX consent_changes_by_consent ON ward.consent_changes (consent_id);
CREATE INDEX sessions_by_expiry ON ward.sessions (expires_at);

-- Delete at most `batch` settled consents decided more than `keep` ago that nothing holds (no
-- proposal, no promotion, not still usable), with their change rows. Returns how many.
CREATE FUNCTION ward.prune_consents(keep interval, batch bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ward SET TimeZone = 'UTC' AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM set_config('ward.pruning', 'consents', true);
    WITH doomed AS (
        SELECT c.id FROM ward.consents c
         WHERE c.state <> 'pending' AND c.decided_at < now() - keep
           AND NOT (c.state = 'granted' AND c.consumed_at IS NULL AND c.revoked_at IS NULL)
           AND NOT EXISTS (SELECT 1 FROM ward.proposals p WHERE p.consent_id = c.id)
           AND NOT EXISTS (SELECT 1 FROM ward.promotions m WHERE m.consent_id = c.id)
         ORDER BY c.decided_at LIMIT batch FOR UPDATE SKIP LOCKED),
    changes AS (DELETE FROM ward.consent_changes WHERE consent_id IN (SELECT id FROM doomed))
    DELETE FROM ward.consents WHERE id IN (SELECT id FROM doomed);
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('ward.pruning', '', true);
    RETURN n;
END $$;

-- Delete at most `batch` sessions expired (or revoked) more than `keep` ago. Returns how many.
CREATE FUNCTION ward.prune_sessions(keep interval, batch bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ward SET TimeZone = 'UTC' AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM set_config('ward.pruning', 'sessions', true);
    DELETE FROM ward.sessions WHERE id IN (
        SELECT id FROM ward.sessions
         WHERE least(expires_at, coalesce(revoked_at, expires_at)) < now() - keep
         ORDER BY expires_at LIMIT batch FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('ward.pruning', '', true);
    RETURN n;
END $$;

REVOKE ALL ON FUNCTION ward.prune_consents(interval, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION ward.prune_sessions(interval, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ward.prune_consents(interval, bigint) TO lychd_ward_app;
GRANT EXECUTE ON FUNCTION ward.prune_sessions(interval, bigint) TO lychd_ward_app;
