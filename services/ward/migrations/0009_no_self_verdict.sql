-- Ward II: no principal is the authority for its own effect (LychD design rules §25: "an Agent
-- may propose an effect, never become its authority"; loop contract: an exact-hash human
-- approver for high-risk effects).
--
-- `Decide` settles a consent only in a guarded UPDATE whose guard holds both rules; these are
-- the same rules as the database's own, so a consent that breaks them can never be written —
-- and so never consumed — whatever path writes it (defense in depth):
-- 1. a verdict (granted, denied) is never given by the consent's requesting principal;
-- 2. a verdict on a live-only class is given by a human principal (never by a rule: that is
--    `consents_rule_class`, migration 0005).
--
-- Consents recorded before this rule that break it are not rewritten (a settled consent stays
-- settled): a self-granted approval not yet consumed is revoked by its own requester here, so
-- it can never be consumed, and the check is added NOT VALID (it holds for every new row and
-- every change of an old one).
UPDATE ward.consents
SET revoked_at = statement_timestamp(), revoked_by = requested_by
WHERE state = 'granted' AND decided_by = requested_by
  AND consumed_at IS NULL AND revoked_at IS NULL;

ALTER TABLE ward.consents ADD CONSTRAINT consents_no_self_verdict CHECK (
    state NOT IN ('granted', 'denied') OR decided_by IS DISTINCT FROM requested_by) NOT VALID;

CREATE FUNCTION ward.consents_live_verdict() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('granted', 'denied') AND NEW.decided_by IS NOT NULL
       AND (TG_OP = 'INSERT' OR OLD.state IS DISTINCT FROM NEW.state)
       AND NEW.effect_class NOT IN ('standard', 'bounded')
       AND NOT EXISTS (SELECT 1 FROM ward.principals p
                       WHERE p.id = NEW.decided_by AND p.kind = 'human') THEN
        PERFORM ward.refuse('a live-only consent is settled by a human principal only');
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER consents_live_verdict BEFORE INSERT OR UPDATE OF state ON ward.consents
    FOR EACH ROW EXECUTE FUNCTION ward.consents_live_verdict();
