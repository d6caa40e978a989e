-- Issue 22 point 8: Ward's owner authority covers every owner-issued HelmLoop record type.
--
-- A `ward.promotions` row is now any issuance the accountable owner settles: a promotion
-- (Ward derives its records from the terms) or proposed owner records (the terms hold the exact
-- records: contracts, grants, assurance decisions, promotion decisions, accepted learning
-- signals). Both issue into the same outbox, delivered the same way; the outbox takes every
-- owner record type.
ALTER TABLE ward.promotion_outbox DROP CONSTRAINT promotion_outbox_record_type_check;
ALTER TABLE ward.promotion_outbox ADD CONSTRAINT promotion_outbox_record_type_check
    CHECK (record_type IN ('OutcomeContractV1', 'AuthorityGrantV1', 'AssuranceDecisionV1',
                           'PromotionDecisionV1', 'LearningSignalV1'));
