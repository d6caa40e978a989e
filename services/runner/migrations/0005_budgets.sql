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

-- Descendant runs: a run started under a parent (`StartRun.parent_run_id`) is one level deeper
-- than it, and belongs to its parent's root (`root_run_id`; NULL for a root). A root's
-- `desc_*` columns aggregate what its descendants consumed (steps, tokens, tool calls, cost):
-- every consuming commit of a run of the tree locks its root's row (`FOR UPDATE`) first,
-- checks the tree's total against the root's budgets, and adds its own consumption in the
-- same transaction — two replicas committing in one tree serialize on the root's row.
ALTER TABLE runner.runs
    ADD COLUMN parent_run_id uuid REFERENCES runner.runs (id),
    ADD COLUMN root_run_id uuid REFERENCES runner.runs (id),
    ADD COLUMN depth integer NOT NULL DEFAULT 0 CHECK (depth BETWEEN 0 AND 3),
    ADD COLUMN desc_steps bigint NOT NULL DEFAULT 0 CHECK (desc_steps >= 0),
    ADD COLUMN desc_tokens bigint NOT NULL DEFAULT 0 CHECK (desc_tokens >= 0),
    ADD COLUMN desc_tool_calls bigint NOT NULL DEFAULT 0 CHECK (desc_tool_calls >= 0),
    ADD COLUMN desc_cost_milli bigint NOT NULL DEFAULT 0 CHECK (desc_cost_milli >= 0),
    ADD CONSTRAINT runs_tree CHECK ((parent_run_id IS NULL) = (root_run_id IS NULL)
                                    AND (parent_run_id IS NULL) = (depth = 0));

-- A parent's non-terminal children are counted under its lock (`max_parallelism`).
CREATE INDEX runs_children ON runner.runs (parent_run_id) WHERE parent_run_id IS NOT NULL;
