//! The actions this office enforces: its action catalogue (Ward decides each).

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "orchestrator:describe";
    /// read the conflict graph, preview plans, one's own transitions, list containments (`GetTopology` on `topology:*`, `PreviewPlan` on `capability:<key>`, `GetTransition` on `transition:<id>`, `ListTransitions` and `WatchTransitions` on `transition:*`, `ListContainments` on `containment:*`)
    READ = "orchestrator:read";
    /// see every principal's transitions, not only one's own (`GetTransition`, `ListTransitions`, `WatchTransitions`; on `transition:*`)
    READ_ALL = "orchestrator:read_all";
    /// request a transition to a capability (`RequestTransition` on `capability:<key>`)
    TRANSITION = "orchestrator:transition";
    /// cancel an in-flight transition its caller owns (`CancelTransition` on `transition:<id>`)
    CANCEL = "orchestrator:cancel";
    /// recover a containment after a fresh observation proves its world (`RecoverContainment` on `containment:*`)
    RECOVER = "orchestrator:recover";
}
