-- Ward II: proposal history ("25. HitL", "Consent history and proposal branches").
--
-- A proposal has a stable identity distinct from the consent that judges it: it binds exactly
-- one consent (its own — branches never inherit consent), the run and occurrence it came from,
-- the principal that initiated it, a history group (for inspection only: a group grants
-- nothing) and, for a revision, the proposal it revises. Nothing of a proposal ever changes
-- except its record counter.
--
-- Revision links are acyclic by construction: `revises` is a foreign key to an EXISTING
-- proposal of the SAME group (the composite key (group_id, revises) → (group_id, id)), ids and
-- links are immutable, and a proposal cannot revise itself. A proposal can therefore only
-- revise one created before it, so following `revises` always ends at a root.
CREATE TABLE ward.proposals (
    id uuid PRIMARY KEY,
    -- Listing order and page key.
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    group_id uuid NOT NULL,
    consent_id uuid NOT NULL UNIQUE REFERENCES ward.consents (id),
    revises uuid,
    run_id text NOT NULL,
    occurrence text NOT NULL CHECK (occurrence ~ '^[A-Za-z0-9._:-]{1,128}$'),
    initiated_by uuid NOT NULL REFERENCES ward.principals (id),
    created_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    -- Records appended so far: the last record's sequence number (owner-assigned, gapless).
    records bigint NOT NULL DEFAULT 0 CHECK (records >= 0),
    CONSTRAINT proposals_group_member UNIQUE (group_id, id),
    CONSTRAINT proposals_revises FOREIGN KEY (group_id, revises)
        REFERENCES ward.proposals (group_id, id),
    CONSTRAINT proposals_not_self CHECK (revises IS NULL OR revises <> id)
);

CREATE INDEX proposals_group ON ward.proposals (group_id, seq);

CREATE FUNCTION ward.proposals_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM ward.refuse('proposals are never deleted');
    END IF;
    IF NEW.id <> OLD.id OR NEW.seq <> OLD.seq OR NEW.group_id <> OLD.group_id
       OR NEW.consent_id <> OLD.consent_id OR NEW.revises IS DISTINCT FROM OLD.revises
       OR NEW.run_id <> OLD.run_id OR NEW.occurrence <> OLD.occurrence
       OR NEW.initiated_by <> OLD.initiated_by OR NEW.created_at <> OLD.created_at THEN
        PERFORM ward.refuse('a proposal is immutable');
    END IF;
    IF NEW.records <> OLD.records + 1 THEN
        PERFORM ward.refuse('a proposal''s records are counted one at a time');
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER proposals_guard BEFORE UPDATE OR DELETE ON ward.proposals
    FOR EACH ROW EXECUTE FUNCTION ward.proposals_guard();

-- Each proposal's append-only record sequence. `seq` is assigned by Ward in the inserting
-- statement from the proposal's counter (a row lock on the proposal serialises appends; a
-- failed insert rolls the counter back), so it is 1, 2, 3… without gaps or duplicates.
CREATE TABLE ward.proposal_records (
    id uuid PRIMARY KEY,
    proposal_id uuid NOT NULL REFERENCES ward.proposals (id),
    seq bigint NOT NULL CHECK (seq > 0),
    kind text NOT NULL CHECK (kind IN (
        'preparation', 'judgment', 'withdrawal', 'supersession', 'attempt_reference',
        'receipt_reference', 'correction', 'explanation')),
    -- Who appended it; none only for a judgment by a standing rule or by the clock (expiry).
    actor uuid REFERENCES ward.principals (id),
    source text NOT NULL CHECK (source IN ('human', 'standing_policy', 'service')),
    recorded_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    -- Bounded, untrusted text (stored, never interpreted).
    body text CHECK (octet_length(body) BETWEEN 1 AND 2048),
    attempt_id text CHECK (attempt_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
    receipt_id text CHECK (receipt_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
    -- A supersession names the successor.
    successor uuid REFERENCES ward.proposals (id),
    -- A judgment names the state the consent settled in, and the standing rule if one granted.
    judged text CHECK (judged IN ('granted', 'denied', 'cancelled', 'expired')),
    rule text,
    CONSTRAINT proposal_records_seq UNIQUE (proposal_id, seq),
    CONSTRAINT proposal_records_actor CHECK (
        actor IS NOT NULL OR (kind = 'judgment' AND (source = 'standing_policy'
                                                     OR judged = 'expired'))),
    CONSTRAINT proposal_records_shape CHECK (
        (kind IN ('explanation', 'correction')) = (body IS NOT NULL)
        AND (kind = 'judgment') = (judged IS NOT NULL)
        AND (kind = 'supersession') = (successor IS NOT NULL)
        AND (kind <> 'attempt_reference' OR attempt_id IS NOT NULL)
        AND (kind <> 'receipt_reference' OR receipt_id IS NOT NULL)
        AND (kind IN ('attempt_reference', 'receipt_reference')
             OR (attempt_id IS NULL AND receipt_id IS NULL))
        AND ((rule IS NOT NULL) = (kind = 'judgment' AND source = 'standing_policy')))
);

CREATE TRIGGER proposal_records_append_only BEFORE UPDATE OR DELETE ON ward.proposal_records
    FOR EACH ROW EXECUTE FUNCTION ward.refuse_change('proposal records are append-only');
CREATE TRIGGER proposal_records_no_truncate BEFORE TRUNCATE ON ward.proposal_records
    FOR EACH STATEMENT EXECUTE FUNCTION ward.refuse_change('proposal records are append-only');

-- The judgment history commits with the consent state: when a consent bound by a proposal
-- settles, the same statement appends the judgment record (human, standing policy or clock).
CREATE FUNCTION ward.consent_judged() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    proposal uuid;
    n bigint;
BEGIN
    IF NEW.state = OLD.state OR NEW.state = 'pending' THEN
        RETURN NULL;
    END IF;
    UPDATE ward.proposals SET records = records + 1 WHERE consent_id = NEW.id
        RETURNING id, records INTO proposal, n;
    IF proposal IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO ward.proposal_records (id, proposal_id, seq, kind, actor, source, judged, rule)
    VALUES (gen_random_uuid(), proposal, n, 'judgment', NEW.decided_by,
            CASE WHEN NEW.granted_by_rule IS NOT NULL THEN 'standing_policy'
                 WHEN NEW.decided_by IS NULL THEN 'service'
                 WHEN (SELECT kind FROM ward.principals WHERE id = NEW.decided_by) = 'human'
                     THEN 'human'
                 ELSE 'service' END,
            NEW.state, NEW.granted_by_rule);
    RETURN NULL;
END $$;

CREATE TRIGGER consents_judged AFTER UPDATE OF state ON ward.consents
    FOR EACH ROW EXECUTE FUNCTION ward.consent_judged();

REVOKE DELETE ON ward.proposals FROM lychd_ward_app;
REVOKE UPDATE, DELETE, TRUNCATE ON ward.proposal_records FROM lychd_ward_app;
