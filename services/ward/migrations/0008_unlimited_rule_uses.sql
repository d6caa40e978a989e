-- Ward II: a rule without `max_uses` grants without taking its row.
--
-- Counting every use on the rule's row made every grant by one busy rule update the same row
-- (and share it with the foreign-key checks of the consents it granted): concurrent
-- preauthorized proposals queued on that row. A limit needs the counter (the guarded
-- `UPDATE … RETURNING` that consumes a use stays, for limited rules only); without a limit
-- nothing needs it. So `uses` is the counter of a limited rule, and the uses reported for any
-- rule are the consents it granted (consents are never deleted). When a rule gains a limit, its
-- counter starts from those consents, so a limit counts the grants made before it.
--
-- The consents' random ids spread one rule's entries over the index (a busy rule's grants
-- would otherwise all insert into one leaf page).
CREATE INDEX consents_granted_by_rule ON ward.consents (granted_by_rule, id)
    WHERE granted_by_rule IS NOT NULL;

CREATE FUNCTION ward.preauth_rules_recount() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.max_uses IS NOT NULL AND OLD.max_uses IS NULL THEN
        NEW.uses := (SELECT count(*) FROM ward.consents c WHERE c.granted_by_rule = NEW.slug);
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER preauth_rules_recount BEFORE UPDATE OF max_uses ON ward.preauth_rules
    FOR EACH ROW EXECUTE FUNCTION ward.preauth_rules_recount();
