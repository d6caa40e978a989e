-- The append-only record store and the stored evaluations.
--
-- `records` keeps every distinct submitted body forever: one row per canonical body (its
-- binding digest is unique, so an exact replay stores nothing). A second body under the same
-- identity (record type, id) is another row, marked `equivocates`; nothing is overwritten, and
-- every reduction over the identity sees both bodies and rejects with `RECORD_EQUIVOCATION`.
-- The runtime role may only insert and read: no row is ever updated or deleted.

CREATE TABLE records (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    record_type     text NOT NULL CHECK (record_type IN (
                        'OutcomeContractV1', 'AuthorityGrantV1', 'ExecutionReceiptV1',
                        'EvidenceRecordV1', 'AssuranceDecisionV1', 'PromotionDecisionV1',
                        'ReconciliationRecordV1', 'LearningSignalV1')),
    record_id       text NOT NULL CHECK (length(record_id) BETWEEN 1 AND 128),
    -- The record's declared `digest`, verified against its record digest before storing.
    digest          text NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    -- Binding digest of the complete canonical body (the reducer's `bodyDigest`).
    body_digest     text NOT NULL UNIQUE CHECK (body_digest ~ '^sha256:[0-9a-f]{64}$'),
    -- HL-C14N-1 canonical bytes of the complete body.
    body            bytea NOT NULL,
    subject_id      text NOT NULL,
    revision_id     text NOT NULL,
    issued_at       timestamptz NOT NULL,
    -- The Ward principal that submitted this body first.
    submitted_by    text NOT NULL,
    stored_at       timestamptz NOT NULL DEFAULT now(),
    -- Another body was stored under the same identity before this one.
    equivocates     boolean NOT NULL
);

CREATE INDEX records_identity ON records (record_type, record_id, seq);
CREATE INDEX records_subject ON records (subject_id, revision_id, seq);

-- Evaluations, keyed by the input digest (which commits the context and every distinct
-- record body): the full canonical result, the context it was reduced under and the
-- principal that asked first. A second evaluation of the same input is the same result.
CREATE TABLE evaluations (
    input_digest    text PRIMARY KEY CHECK (input_digest ~ '^sha256:[0-9a-f]{64}$'),
    disposition     text NOT NULL CHECK (disposition IN ('PASS', 'HOLD', 'REJECT')),
    result          bytea NOT NULL,
    context         bytea NOT NULL,
    subject_id      text,
    revision_id     text,
    evaluated_by    text NOT NULL,
    stored_at       timestamptz NOT NULL DEFAULT now()
);

REVOKE UPDATE, DELETE, TRUNCATE ON records, evaluations FROM lychd_helmloop_app;
