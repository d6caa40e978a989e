-- Budgets and deadlines (issue 27, Runner I): a run's optional deadline.
--
-- `deadline_at` is the caller's `StartRun.timeout_seconds` after the run's creation (the
-- database's clock, in the start's transaction); past it the run takes the FSM's
-- `deadline_passed` edge to `TIMED_OUT`, distinct from the wall budget's `BUDGET_EXHAUSTED`.
-- The other budgets' consumption (tool calls, cost, suspended time, no-progress rounds) lives
-- in `progress`, written by the fenced commit of 0004 and carried in every checkpoint.

ALTER TABLE runner.runs
    ADD COLUMN timeout_seconds integer CHECK (timeout_seconds BETWEEN 1 AND 600),
    ADD COLUMN deadline_at timestamptz,
    ADD CONSTRAINT runs_deadline_with_timeout
        CHECK ((timeout_seconds IS NULL) = (deadline_at IS NULL));
