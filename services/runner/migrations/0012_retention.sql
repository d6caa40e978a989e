-- Issue 30 item 3: the Runner's retention (docs/operations.md, "Retention").
--
-- A run goes only with its whole tree (a root and every run whose `root_run_id` is it), and only
-- when every run of the tree is terminal, finished (its last change, `updated_at`) more than
-- the given age ago, with no consent release and no compensation still due and every outbox
-- row settled: nothing of it is still in use. With the runs go every row that names them: transitions, checkpoints,
-- reviews, state migrations, provenance snapshots, recorded inputs and, for a tree with
-- effects, its effects, outbox rows, compensations and effect ledger.
--
-- Trees with effects and trees without are two rules with their own ages (the effect ledger is
-- the evidence of what was done outside; it is kept longer). The effects and the ledger stay
-- append-only: the runtime role no longer holds DELETE on them, and their trigger lets a
-- delete through only inside the owner's `runner.prune_runs` (`runner.pruning` set locally).

CREATE OR REPLACE FUNCTION runner.effect_ledger_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('runner.pruning', true) = 'runs' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'runner.effect_ledger is append-only' USING ERRCODE = '42501';
END;
$$;

REVOKE DELETE, TRUNCATE ON runner.effects, runner.effect_ledger FROM lychd_runner_app;

-- The finished roots, oldest first, and the trees under them.
CREATE INDEX runs_finished_roots ON runner.runs (updated_at)
    WHERE parent_run_id IS NULL AND terminal_category IS NOT NULL;
CREATE INDEX runs_tree ON runner.runs (root_run_id) WHERE root_run_id IS NOT NULL;
CREATE INDEX run_transitions_run ON runner.run_transitions (run_id);
CREATE INDEX effect_outbox_run ON runner.effect_outbox (run_id);

-- Delete at most `batch` finished trees older than `keep`: those with effects when
-- `with_effects`, those without otherwise. Returns how many runs went.
CREATE FUNCTION runner.prune_runs(keep interval, with_effects boolean, batch bigint)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, runner AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM set_config('runner.pruning', 'runs', true);
    WITH roots AS (
        SELECT r.id FROM runner.runs r
         WHERE r.parent_run_id IS NULL AND r.terminal_category IS NOT NULL
           AND r.updated_at < now() - keep AND r.consent_release_due IS NULL
           AND r.compensation_due IS NULL
           AND NOT EXISTS (
               SELECT 1 FROM runner.runs d
                WHERE d.root_run_id = r.id
                  AND (d.terminal_category IS NULL OR d.updated_at >= now() - keep
                       OR d.consent_release_due IS NOT NULL OR d.compensation_due IS NOT NULL))
           AND NOT EXISTS (
               SELECT 1 FROM runner.effect_outbox o
                WHERE o.settled_at IS NULL
                  AND (o.run_id = r.id
                       OR o.run_id IN (SELECT d.id FROM runner.runs d WHERE d.root_run_id = r.id)))
           AND EXISTS (
               SELECT 1 FROM runner.effects e
                WHERE e.run_id = r.id
                   OR e.run_id IN (SELECT d.id FROM runner.runs d WHERE d.root_run_id = r.id))
               = with_effects
         ORDER BY r.updated_at LIMIT batch FOR UPDATE OF r SKIP LOCKED),
    doomed AS (
        SELECT id FROM roots
        UNION ALL
        SELECT d.id FROM runner.runs d WHERE d.root_run_id IN (SELECT id FROM roots)),
    inputs AS (DELETE FROM runner.run_inputs WHERE run_id IN (SELECT id FROM doomed)),
    ledger AS (DELETE FROM runner.effect_ledger WHERE run_id IN (SELECT id FROM doomed)),
    outbox AS (DELETE FROM runner.effect_outbox WHERE run_id IN (SELECT id FROM doomed)),
    compensations AS (
        DELETE FROM runner.effect_compensations WHERE run_id IN (SELECT id FROM doomed)),
    effects AS (DELETE FROM runner.effects WHERE run_id IN (SELECT id FROM doomed)),
    snapshots AS (DELETE FROM runner.provenance_snapshots WHERE run_id IN (SELECT id FROM doomed)),
    migrations AS (DELETE FROM runner.state_migrations WHERE run_id IN (SELECT id FROM doomed)),
    reviews AS (DELETE FROM runner.run_reviews WHERE run_id IN (SELECT id FROM doomed)),
    checkpoints AS (DELETE FROM runner.run_checkpoints WHERE run_id IN (SELECT id FROM doomed)),
    transitions AS (DELETE FROM runner.run_transitions WHERE run_id IN (SELECT id FROM doomed))
    DELETE FROM runner.runs WHERE id IN (SELECT id FROM doomed);
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('runner.pruning', '', true);
    RETURN n;
END $$;

REVOKE ALL ON FUNCTION runner.prune_runs(interval, boolean, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION runner.prune_runs(interval, boolean, bigint) TO lychd_runner_app;
