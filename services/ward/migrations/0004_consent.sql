-- Ward II: consent for proposed effects ("25. HitL").
--
-- One row per exact proposed call. The binding (run, effect owner, effect id and revision,
-- tool, deferred call id, argument digest, class, optional binding fields, requesting principal)
-- is immutable; only the censored arguments are kept (never the uncensored ones). A consent
-- settles once: the first verdict wins (a guarded UPDATE … WHERE state = 'pending'), and a
-- settled consent always names when and by whom (the clock, for `expired`). An approval is
-- consumed at most once and revocation before consumption invalidates it.
CREATE TABLE ward.consents (
    id uuid PRIMARY KEY,
    -- Listing order (newest first) and page key.
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    run_id text NOT NULL,
    effect_owner text NOT NULL,
    effect_id text NOT NULL,
    effect_revision bigint NOT NULL CHECK (effect_revision > 0),
    tool_name text NOT NULL,
    deferred_call_id text NOT NULL,
    -- Canonical JSON text (HL-C14N-1) of the arguments with secret-like values replaced.
    censored_arguments text NOT NULL CHECK (censored_arguments LIKE '{%}'),
    arguments_digest text NOT NULL CHECK (arguments_digest ~ '^sha256:[0-9a-f]{64}$'),
    effect_class text NOT NULL CHECK (effect_class IN (
        'standard', 'bounded', 'core_mutation', 'migration', 'destructive_deletion',
        'secret_or_authority_change', 'host_lifecycle')),
    binding jsonb NOT NULL CHECK (jsonb_typeof(binding) = 'object'),
    binding_digest text NOT NULL CHECK (binding_digest ~ '^sha256:[0-9a-f]{64}$'),
    requested_by uuid NOT NULL REFERENCES ward.principals (id),
    created_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    expires_at timestamptz NOT NULL,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN (
        'pending', 'granted', 'denied', 'cancelled', 'expired')),
    decided_at timestamptz,
    decided_by uuid REFERENCES ward.principals (id),
    consumed_at timestamptz,
    consumed_by uuid REFERENCES ward.principals (id),
    revoked_at timestamptz,
    revoked_by uuid REFERENCES ward.principals (id),
    CONSTRAINT consents_identity UNIQUE (run_id, deferred_call_id, binding_digest),
    CONSTRAINT consents_ttl CHECK (expires_at > created_at),
    -- Settled ⇔ decided_at; settled by a principal unless the clock expired it.
    CONSTRAINT consents_settled CHECK (
        (state = 'pending' AND decided_at IS NULL AND decided_by IS NULL)
        OR (state = 'expired' AND decided_at IS NOT NULL AND decided_by IS NULL)
        OR (state IN ('granted', 'denied', 'cancelled')
            AND decided_at IS NOT NULL AND decided_by IS NOT NULL)),
    CONSTRAINT consents_consumed CHECK (
        (consumed_at IS NULL) = (consumed_by IS NULL)
        AND (consumed_at IS NULL OR state = 'granted')),
    CONSTRAINT consents_revoked CHECK (
        (revoked_at IS NULL) = (revoked_by IS NULL)
        AND (revoked_at IS NULL OR state = 'granted'))
);

CREATE INDEX consents_run ON ward.consents (run_id) WHERE state = 'pending';
CREATE INDEX consents_due ON ward.consents (expires_at) WHERE state = 'pending';

CREATE FUNCTION ward.consents_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
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
       OR NEW.decided_by IS DISTINCT FROM OLD.decided_by) THEN
        PERFORM ward.refuse('a settled consent stays settled');
    END IF;
    IF (OLD.consumed_at IS NOT NULL AND NEW.consumed_at IS DISTINCT FROM OLD.consumed_at)
       OR (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) THEN
        PERFORM ward.refuse('consumption and revocation of a consent are monotonic');
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER consents_guard BEFORE UPDATE OR DELETE ON ward.consents
    FOR EACH ROW EXECUTE FUNCTION ward.consents_guard();

-- Every change of a consent, in commit-independent sequence order, for `WatchConsents`: one row
-- per insert or update of a consent (proposed, settled, consumed, revoked), appended by the
-- same statement that changed it. Append-only.
CREATE TABLE ward.consent_changes (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consent_id uuid NOT NULL REFERENCES ward.consents (id),
    state text NOT NULL,
    at timestamptz NOT NULL DEFAULT statement_timestamp()
);

CREATE FUNCTION ward.consents_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ward.consent_changes (consent_id, state) VALUES (NEW.id, NEW.state);
    RETURN NULL;
END $$;

CREATE TRIGGER consents_changed AFTER INSERT OR UPDATE ON ward.consents
    FOR EACH ROW EXECUTE FUNCTION ward.consents_changed();

CREATE TRIGGER consent_changes_append_only BEFORE UPDATE OR DELETE ON ward.consent_changes
    FOR EACH ROW EXECUTE FUNCTION ward.refuse_change('consent changes are append-only');

-- As for the identity tables: the runtime role never deletes a consent and never changes a
-- recorded change.
REVOKE DELETE ON ward.consents FROM lychd_ward_app;
REVOKE UPDATE, DELETE ON ward.consent_changes FROM lychd_ward_app;
