-- Explicit cancellation and soft activation (LychD design rules §23): two more final phases,
-- `cancelled_restored` (cancelled by its owner: nothing invoked, or the exact inverse proved the
-- prior world) and `failed` (a runtime-native activation was invoked and the target did not
-- become WARM: no inverse exists, admission stays closed); and the durable runtime-guard
-- record a soft activation arms before it invokes the runtime.

ALTER TABLE orchestrator.transitions DROP CONSTRAINT transitions_phase_check;
ALTER TABLE orchestrator.transitions ADD CONSTRAINT transitions_phase_check
    CHECK (phase IN ('draining', 'actuating', 'verifying', 'compensating', 'completed',
        'declined_no_effect', 'failed_restored', 'cancelled_restored', 'contained_uncertain',
        'failed'));

-- One record per soft activation, armed (one committed statement) before the activation is
-- invoked. Only an observed WARM target clears it (`WARM_OBSERVED`) — or an actuator that
-- refused before the call began (`NOT_INVOKED`); otherwise it stays armed,
-- and a process that starts and finds it armed contains its transition. An operator's
-- recovery clears it (`RECOVERED`) only after the target animator is observed stopped.
CREATE TABLE orchestrator.runtime_guards (
    transition_id text PRIMARY KEY REFERENCES orchestrator.transitions (id),
    target_animator text NOT NULL,
    capability_key text NOT NULL,
    armed_at timestamptz NOT NULL DEFAULT now(),
    cleared_at timestamptz,
    cleared_by text CHECK (cleared_by IN ('WARM_OBSERVED', 'NOT_INVOKED', 'RECOVERED')),
    CHECK ((cleared_at IS NULL) = (cleared_by IS NULL))
);

CREATE INDEX runtime_guards_armed ON orchestrator.runtime_guards (armed_at)
    WHERE cleared_at IS NULL;
