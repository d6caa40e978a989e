//! The actions this office enforces: its action catalogue (Ward decides each).

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "{{office}}:describe";
}
