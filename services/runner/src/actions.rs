//! The actions this office enforces: its action catalogue (Ward decides each).

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "runner:describe";
    /// start a run (`StartRun` on `run:*`)
    START = "runner:start";
    /// read one's own runs and their transitions (`GetRun`, `ListRunTransitions`, `InspectCheckpoint`, `ListProvenance` and `ReplayRun` on `run:<id>`, `ListRuns` on `run:*`)
    READ = "runner:read";
    /// see every principal's runs, not only one's own (`GetRun`, `ListRuns`, `ListRunTransitions`; on `run:*`)
    READ_ALL = "runner:read_all";
    /// cancel a run one started (`CancelRun` on `run:<id>`)
    CANCEL = "runner:cancel";
    /// review a quarantined run: resume it from its recovery point, fail or cancel it (`ReviewQuarantine` on `run:<id>`, any principal's run)
    REVIEW = "runner:review";
    /// inspect a run's effect and settle an unknown effect outcome (`InspectEffect`, `ResolveUnknownOutcome` on `run:<id>`, any principal's run)
    RECONCILE = "runner:reconcile";
    /// the Runner's own effect permission through the HTTP adapter, asked of Ward immediately before every dispatch (on `destination:<host>`); also required of the caller at `StartRun` for each effect step
    EFFECT_HTTP = "runner:effect_http";
}
