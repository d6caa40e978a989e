-- Authority that holds at the effect: leases and closures belong to the principal that obtained
-- them, request ids are that principal's own, and a lease request's answer is kept under its
-- request id so a retry after a lost answer gets the same answer instead of a second lease.

-- A closure's request id is its closer's: the same id from another principal is another
-- closure, and names nothing of the first closer's.
ALTER TABLE closures DROP CONSTRAINT closures_request_id_key;
ALTER TABLE closures ADD CONSTRAINT closures_request_key UNIQUE (closed_by, request_id);

-- The caller-chosen request id a lease was asked under (NULL: none was given). At most one
-- lease per principal and request id.
ALTER TABLE leases ADD COLUMN request_id text
    CHECK (request_id IS NULL OR length(request_id) BETWEEN 1 AND 128);
CREATE UNIQUE INDEX leases_by_request ON leases (principal_id, request_id)
    WHERE request_id IS NOT NULL;
-- ListLeases of one principal (callers without the read-all action see only their own).
CREATE INDEX leases_by_principal ON leases (principal_id, issued_at DESC, id DESC);

-- The answer given to a lease request with a request id: the first answer written wins (the
-- primary key is the guard two concurrent calls with one id meet), and every retry with the
-- same request gets it back. A grant's lease is written in the same statement as its answer.
CREATE TABLE lease_requests (
    request_id             text NOT NULL CHECK (length(request_id) BETWEEN 1 AND 128),
    principal_id           text NOT NULL,
    -- The decoded request in canonical form: a retry must ask for exactly the same.
    demand                 text NOT NULL,
    outcome                text NOT NULL
        CHECK (outcome IN ('GRANTED', 'HARDWARE_TRANSITION_REQUIRED', 'UNAVAILABLE')),
    lease_id               uuid UNIQUE REFERENCES leases (id),
    capability_key         text NOT NULL DEFAULT '',
    animator               text NOT NULL DEFAULT '',
    ready_estimate_seconds integer CHECK (ready_estimate_seconds > 0),
    -- The `Unavailable` reason code (UNAVAILABLE only).
    reason                 text NOT NULL DEFAULT '',
    observed_phase         text
        CHECK (observed_phase IN ('COLD', 'ACTIVATABLE', 'WARMING', 'WARM', 'ERROR', 'UNKNOWN')),
    observed_reason        text NOT NULL DEFAULT '',
    answered_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal_id, request_id),
    CHECK ((outcome = 'GRANTED') = (lease_id IS NOT NULL))
);
