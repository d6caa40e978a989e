-- Ward II: standing preauthorization ("Codex", LychD design rules §25).
--
-- The rules come from TOML files named in Ward's configuration and are synchronised at start as
-- one complete set in one transaction: a rule keeps its row (and so its use count and a manual
-- disable) while its slug stays; its policy fields are replaced when they change; a rule no
-- longer in the files is disabled, never deleted. A use is consumed by a guarded
-- `UPDATE … RETURNING` in the same transaction that records the consent it granted.
CREATE TABLE ward.preauth_rules (
    slug text PRIMARY KEY CHECK (slug ~ '^[a-z0-9-]{1,64}$'),
    source text NOT NULL,
    effect_class text NOT NULL CHECK (effect_class IN ('standard', 'bounded')),
    principal_pattern text NOT NULL,
    tool_pattern text NOT NULL,
    owner_pattern text NOT NULL,
    priority integer NOT NULL,
    expires_at timestamptz,
    max_uses bigint CHECK (max_uses IS NULL OR max_uses > 0),
    -- Uses consumed (may exceed a max_uses lowered later: the rule then grants nothing more).
    uses bigint NOT NULL DEFAULT 0 CHECK (uses >= 0),
    -- The whole policy (patterns, class, limits, constraints) as canonical JSON, and its digest.
    policy text NOT NULL,
    policy_digest text NOT NULL CHECK (policy_digest ~ '^sha256:[0-9a-f]{64}$'),
    -- In the files at the last start.
    in_files boolean NOT NULL DEFAULT true,
    -- Disabled by an operator (kept across starts).
    disabled_by uuid REFERENCES ward.principals (id),
    disabled_at timestamptz,
    loaded_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    CONSTRAINT preauth_disabled CHECK ((disabled_by IS NULL) = (disabled_at IS NULL))
);

-- A consent granted by a rule names the rule and the digest of the policy that granted it; a
-- human verdict names its principal. Exactly one of the two for `granted`.
ALTER TABLE ward.consents ADD COLUMN granted_by_rule text REFERENCES ward.preauth_rules (slug);
ALTER TABLE ward.consents ADD COLUMN rule_policy_digest text;
ALTER TABLE ward.consents DROP CONSTRAINT consents_settled;
ALTER TABLE ward.consents ADD CONSTRAINT consents_settled CHECK (
    (state = 'pending' AND decided_at IS NULL AND decided_by IS NULL AND granted_by_rule IS NULL)
    OR (state = 'expired' AND decided_at IS NOT NULL AND decided_by IS NULL
        AND granted_by_rule IS NULL)
    OR (state IN ('denied', 'cancelled') AND decided_at IS NOT NULL AND decided_by IS NOT NULL
        AND granted_by_rule IS NULL)
    OR (state = 'granted' AND decided_at IS NOT NULL
        AND (decided_by IS NULL) <> (granted_by_rule IS NULL)));
ALTER TABLE ward.consents ADD CONSTRAINT consents_rule_digest CHECK (
    (granted_by_rule IS NULL) = (rule_policy_digest IS NULL));

-- Live-only classes are never granted by a rule.
ALTER TABLE ward.consents ADD CONSTRAINT consents_rule_class CHECK (
    granted_by_rule IS NULL OR effect_class IN ('standard', 'bounded'));

CREATE OR REPLACE FUNCTION ward.consents_guard() RETURNS trigger LANGUAGE plpgsql AS $$
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

REVOKE DELETE ON ward.preauth_rules FROM lychd_ward_app;
