//! The actions Ward enforces: its action catalogue (Ward decides each, from its own tables).

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "ward:describe";
    /// administer principals, credentials, sessions, assignments and the audit (on `principal:*`)
    ADMINISTER = "ward:administer";
    /// ask about other principals' tokens: `Authenticate` and `Authorize` (on `decision:*`)
    DECIDE = "ward:decide";
}
