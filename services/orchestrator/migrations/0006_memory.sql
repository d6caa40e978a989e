-- Placement by measured memory (issue 25 point 3): the footprint measured for a model at a
-- context size on an animator, after the animator became WARM for it. One row per (animator,
-- model, context size), replaced by every new measurement; the planner uses it instead of the
-- declared estimate.
CREATE TABLE orchestrator.footprints (
    animator text NOT NULL,
    model_id text NOT NULL,
    context_tokens integer NOT NULL CHECK (context_tokens >= 0),
    memory_mib bigint NOT NULL CHECK (memory_mib > 0),
    measured_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (animator, model_id, context_tokens)
);
