-- Cancel releases the run's pending consents (issue 28, Runner II): a caller's cancel that ends
-- a run marks, in the cancel's own transaction, that Ward must settle the run's pending
-- consents (`CancelForRun`: an effect's approval waited for in `WAIT_APPROVAL`, the owner
-- records and promotion proposed for its verification). The mark is cleared only once Ward
-- answered; until then the step loop asks again (`consent_release_due` is when it may: the
-- next ask is pushed out before each ask, so replicas do not ask at once). NULL: nothing to
-- release.
ALTER TABLE runner.runs ADD COLUMN consent_release_due timestamptz;
CREATE INDEX runs_consent_release_due ON runner.runs (consent_release_due)
    WHERE consent_release_due IS NOT NULL;
