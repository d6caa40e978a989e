//! The actions this office enforces: its action catalogue (Ward decides each).

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "orchestrator:describe";
    /// read the conflict graph and preview plans (`GetTopology` on `topology:*`, `PreviewPlan` on `capability:<key>`)
    READ = "orchestrator:read";
}
