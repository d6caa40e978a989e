-- Issue 23.5: every decision record carries the id its writer gave it when it was queued, and is
-- written with ON CONFLICT DO NOTHING: a batch whose commit was ambiguous (the connection lost
-- after the statement was sent) is retried whole and written once. Records written by anything
-- else (administration, bootstrap) carry none (NULL; the unique constraint ignores NULLs).
ALTER TABLE ward.audit ADD COLUMN record_id uuid;
ALTER TABLE ward.audit ADD CONSTRAINT audit_record_id_key UNIQUE (record_id);
