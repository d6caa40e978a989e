-- Ward II, part 4: the owner's promotion authority for HelmLoop.
--
-- A promotion is a live-only consent (`ward.consents`, class `secret_or_authority_change`) with
-- HelmLoop terms: the contract it is under, the revision to promote, the assurance and evidence
-- it cites, the grantee, scope and validity end of the `promote` grant, and the accountable
-- owner — the only principal that may settle it. On the owner's approval the statement
-- sequence that settles the consent also consumes it and appends the issued HelmLoop records to
-- the outbox, in one transaction; a delivery loop hands them to the HelmLoop office until each
-- is acknowledged. Nothing is ever deleted, and an issued record never changes.
CREATE TABLE ward.promotions (
    consent_id uuid PRIMARY KEY REFERENCES ward.consents (id),
    owner_id uuid NOT NULL REFERENCES ward.principals (id),
    owner_name text NOT NULL,
    -- Canonical JSON (HL-C14N-1) of the terms.
    terms text NOT NULL CHECK (terms LIKE '{%}'),
    created_at timestamptz NOT NULL DEFAULT statement_timestamp()
);

CREATE TRIGGER promotions_immutable BEFORE UPDATE OR DELETE ON ward.promotions
    FOR EACH ROW EXECUTE FUNCTION ward.refuse_change('a promotion''s terms are immutable');

-- The records issued on approval, in issue order. `attempts` counts delivery attempts (bumped
-- before each send, so a lost acknowledgement is known to need a look-up); `delivered_at` and
-- `delivery` are set once, by the acknowledgement or the look-up that found the record.
CREATE TABLE ward.promotion_outbox (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consent_id uuid NOT NULL REFERENCES ward.promotions (consent_id),
    position smallint NOT NULL CHECK (position > 0),
    record_type text NOT NULL CHECK (record_type IN ('AuthorityGrantV1', 'PromotionDecisionV1')),
    record_id text NOT NULL,
    digest text NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    body text NOT NULL CHECK (body LIKE '{%}'),
    issued_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    delivered_at timestamptz,
    delivery text CHECK (delivery IN ('stored', 'replayed', 'equivocation', 'found')),
    CONSTRAINT promotion_outbox_identity UNIQUE (record_type, record_id),
    CONSTRAINT promotion_outbox_position UNIQUE (consent_id, position),
    CONSTRAINT promotion_outbox_delivered CHECK ((delivered_at IS NULL) = (delivery IS NULL))
);

CREATE INDEX promotion_outbox_undelivered ON ward.promotion_outbox (seq)
    WHERE delivered_at IS NULL;

CREATE FUNCTION ward.promotion_outbox_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM ward.refuse('issued records are never deleted');
    END IF;
    IF NEW.seq <> OLD.seq OR NEW.consent_id <> OLD.consent_id OR NEW.position <> OLD.position
       OR NEW.record_type <> OLD.record_type OR NEW.record_id <> OLD.record_id
       OR NEW.digest <> OLD.digest OR NEW.body <> OLD.body OR NEW.issued_at <> OLD.issued_at THEN
        PERFORM ward.refuse('an issued record never changes');
    END IF;
    IF NEW.attempts < OLD.attempts THEN
        PERFORM ward.refuse('delivery attempts only grow');
    END IF;
    IF OLD.delivered_at IS NOT NULL AND (NEW.delivered_at IS DISTINCT FROM OLD.delivered_at
       OR NEW.delivery IS DISTINCT FROM OLD.delivery) THEN
        PERFORM ward.refuse('a delivered record stays delivered');
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER promotion_outbox_guard BEFORE UPDATE OR DELETE ON ward.promotion_outbox
    FOR EACH ROW EXECUTE FUNCTION ward.promotion_outbox_guard();

REVOKE UPDATE, DELETE, TRUNCATE ON ward.promotions FROM lychd_ward_app;
REVOKE DELETE, TRUNCATE ON ward.promotion_outbox FROM lychd_ward_app;
