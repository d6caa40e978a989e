//! The actions the Archive enforces: its action catalogue (Ward decides each, on object
//! `namespace:<name>`, with the verb as purpose). Intake, lifecycle, recall, resolution and
//! inspection are distinct: recall is no shortcut to review authority.

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "archive:describe";
    /// admit note revisions as candidates into a namespace (`Intake`)
    INTAKE = "archive:intake";
    /// promote, archive and revoke a namespace's notes (`Promote`, `ArchiveNote`, `Revoke`)
    LIFECYCLE = "archive:lifecycle";
    /// recall a namespace's promoted notes and keep a receipt (`Recall`)
    RECALL = "archive:recall";
    /// resolve a namespace's receipts into their notes again (`ResolveReceipt`)
    RESOLVE = "archive:resolve";
    /// read note and receipt metadata of a namespace, never text (`ListNotes`, `GetNote`, `InspectReceipt`)
    INSPECT = "archive:inspect";
}
