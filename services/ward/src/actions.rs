//! The actions Ward enforces: its action catalogue (Ward decides each, from its own tables).

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "ward:describe";
    /// administer principals, credentials, sessions, assignments and the audit (on `principal:*`)
    ADMINISTER = "ward:administer";
    /// ask about other principals' tokens: `Authenticate` and `Authorize` (on `decision:*`)
    DECIDE = "ward:decide";
    /// propose an effect for consent (`ProposeEffect`, on `effect:<effect_owner>`); make, annotate, withdraw or supersede one's own proposal (`CreateProposal`, `AppendProposalRecord`, `Withdraw`, `Supersede`); propose a HelmLoop promotion or owner records for the owner's approval (`ProposePromotion`, `ProposeOwnerRecords`, on `effect:helmloop`)
    PROPOSE = "ward:propose";
    /// settle or revoke a consent (`Decide`, `RevokeConsent`, on `effect:<effect_owner>`)
    APPROVE = "ward:approve";
    /// consume an approval at effect time (`ConsumeConsent`, on `effect:<effect_owner>`); append attempt and receipt references to a proposal (`AppendProposalRecord`)
    CONSUME = "ward:consume";
    /// cancel a run's pending consents (`CancelForRun`, on `run:<run_id>`)
    CANCEL = "ward:cancel";
    /// read consents and proposals (`GetConsent`, `ListConsents`, `WatchConsents`, `GetProposal`, `ListProposals`, on `consent:*`)
    REVIEW = "ward:review";
}
