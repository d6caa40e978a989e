//! The actions this office enforces: its action catalogue (Ward decides each).
//!
//! Appending is split by record type because the reducer trusts owner records by `issuerId`
//! equality alone (HelmLoop resolutions §E): the store, not the record, decides who may submit
//! an owner record. Objects are `subject:<subject.id>` (or `subject:*`); a batch is asked on
//! `subject:*` first and per subject only when that is denied.

lychd_runtime::auth::actions! {
    /// describe the office (`Describe`)
    DESCRIBE = "helmloop:describe";
    /// append receipts, evidence and reconciliation records (`AppendRecords`)
    APPEND_OBSERVATION = "helmloop:append_observation";
    /// append a learning signal that is not accepted: proposed or writeback requested (`AppendRecords`)
    APPEND_LEARNING_PROPOSAL = "helmloop:append_learning_proposal";
    /// append an owner's `OutcomeContractV1` (`AppendRecords`)
    APPEND_CONTRACT = "helmloop:append_contract";
    /// append an owner's `AuthorityGrantV1` lineage step (`AppendRecords`)
    APPEND_GRANT = "helmloop:append_grant";
    /// append an `AssuranceDecisionV1` (`AppendRecords`)
    APPEND_ASSURANCE = "helmloop:append_assurance";
    /// append an owner's `PromotionDecisionV1` (`AppendRecords`)
    APPEND_PROMOTION = "helmloop:append_promotion";
    /// append an accepting `LearningSignalV1` (the owner's acceptance) (`AppendRecords`)
    APPEND_LEARNING_ACCEPTANCE = "helmloop:append_learning_acceptance";
    /// read stored records and evaluations (`GetRecord`, `ListRecords`, `GetEvaluation`)
    READ = "helmloop:read";
    /// reduce inline or stored records and store evaluations (`Reduce`, `ReduceStored`)
    REDUCE = "helmloop:reduce";
    /// validate and digest documents, run the embedded conformance suite (`Validate`, `Digest`, `RunConformance`; on `office:helmloop`)
    CHECK = "helmloop:check";
}
