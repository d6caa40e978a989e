//! Who may do what besides describing the offices (in a deployment and in a dev stack alike): plain data, `(action,
//! object)` rows. Every action is in its office's action catalogue, on an object type that
//! office decides on, and a service principal holds only what its office's calls need: the
//! workspace's tidy test (`tests/e2e/shape.rs`) links this module and checks it.

/// What the dev operator holds besides `ward:administer` and describing every office: the
/// Dispatcher's read, lease and observe API, so the printed examples work; the approver's side
/// of consent (review every consent, settle any effect's, cancel a run's, manage standing
/// rules); the Archive's intake, lifecycle, recall, resolve and inspect actions on every
/// namespace (no note is seeded), so the documented walk works; the Orchestrator's read,
/// transition and recover API; and the HelmLoop API but the owner records' append actions:
/// owner records come only from Ward, on an owner's approval (issue 22 point 8); and the
/// Runner's start, read and cancel API on every run.
pub const OPERATOR_GRANTS: &[(&str, &str)] = &[
    ("ward:review", "consent:*"),
    ("ward:approve", "effect:*"),
    ("ward:cancel", "run:*"),
    ("ward:administer", "preauth:*"),
    ("dispatcher:read", "capability:*"),
    ("dispatcher:read", "lease:*"),
    ("dispatcher:read", "event:*"),
    // Every principal's leases, in lists and in dispatch events (others see only their own).
    ("dispatcher:read_all", "lease:*"),
    ("dispatcher:lease", "capability:*"),
    ("dispatcher:lease", "lease:*"),
    ("dispatcher:observe", "animator:*"),
    ("orchestrator:read", "topology:*"),
    ("orchestrator:read", "capability:*"),
    ("orchestrator:read", "transition:*"),
    // Every principal's transitions, in Get, List and Watch (others see only their own).
    ("orchestrator:read_all", "transition:*"),
    ("orchestrator:read", "containment:*"),
    ("orchestrator:transition", "capability:*"),
    ("orchestrator:recover", "containment:*"),
    ("orchestrator:cancel", "transition:*"),
    ("archive:intake", "namespace:*"),
    ("archive:lifecycle", "namespace:*"),
    ("archive:recall", "namespace:*"),
    ("archive:resolve", "namespace:*"),
    ("archive:inspect", "namespace:*"),
    ("helmloop:append_observation", "subject:*"),
    ("helmloop:append_learning_proposal", "subject:*"),
    ("helmloop:read", "subject:*"),
    ("helmloop:reduce", "subject:*"),
    ("helmloop:reduce", "office:helmloop"),
    ("helmloop:check", "office:helmloop"),
    ("runner:start", "run:*"),
    ("runner:read", "run:*"),
    // Every principal's runs, in Get, List and ListRunTransitions (others see only their own).
    ("runner:read_all", "run:*"),
    ("runner:cancel", "run:*"),
    // Recovery review of a quarantined run (any principal's): resume, fail or cancel it.
    ("runner:review", "run:*"),
    // Inspect a run's effect and settle an unknown outcome (any principal's run).
    ("runner:reconcile", "run:*"),
    // Start runs whose effect steps deliver through the HTTP adapter, to any destination.
    ("runner:effect_http", "destination:*"),
];

/// HelmLoop's owner-record actions: only Ward's own service principal holds them (Ward issues
/// owner records on an owner's approval; nobody else, the operator included, appends one). Ward also reads records: a
/// promotion's contract, and an issued record whose acknowledgement was lost.
pub const WARD_GRANTS: &[(&str, &str)] = &[
    ("helmloop:append_contract", "subject:*"),
    ("helmloop:append_grant", "subject:*"),
    ("helmloop:append_assurance", "subject:*"),
    ("helmloop:append_promotion", "subject:*"),
    ("helmloop:append_learning_acceptance", "subject:*"),
    ("helmloop:read", "subject:*"),
];

/// The Orchestrator's service principal: it observes animators and alone closes and reopens
/// admission.
pub const ORCHESTRATOR_GRANTS: &[(&str, &str)] = &[
    ("dispatcher:observe", "animator:*"),
    ("dispatcher:admission", "animator:*"),
];

/// The Runner's service principal: a model step leases its capability from the Dispatcher and
/// releases the lease after the call (Ward is asked again, for this principal, on every lease);
/// a verified run's candidate observations are appended to HelmLoop, its owner records read
/// back and its records reduced, and its owner records and promotion *proposed* to Ward (the
/// owner approves them; no owner-record append action, no verdict); an effect is proposed to
/// Ward's consent and its approval consumed as the effect's owner (`effect:runner`), and
/// delivered through the HTTP adapter only while Ward allows the Runner `runner:effect_http`
/// on the destination (asked immediately before every dispatch; the operator narrows
/// `destination:*` to the hosts effects may reach); a run it cancels has its pending consents
/// settled at Ward (`CancelForRun`).
pub const RUNNER_GRANTS: &[(&str, &str)] = &[
    ("dispatcher:lease", "capability:*"),
    ("dispatcher:lease", "lease:*"),
    ("helmloop:append_observation", "subject:*"),
    ("helmloop:read", "subject:*"),
    ("helmloop:reduce", "subject:*"),
    ("ward:propose", "effect:helmloop"),
    ("ward:propose", "effect:runner"),
    ("ward:consume", "effect:runner"),
    // A cancelled run's pending consents are released (`CancelForRun` on `run:<id>`).
    ("ward:cancel", "run:*"),
    ("runner:effect_http", "destination:*"),
];
