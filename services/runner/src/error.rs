//! The office's refusals, each declared once (`refusals!`): its reasons (listed in
//! `docs/refusals.md`), its one error type and their `tonic::Status`. Messages are lowercase
//! and never echo a workflow document, an input or a refused value.

lychd_runtime::refusal::refusals! {
    /// The Runner's one error type: every refusal it answers, each declared once below.
    #[derive(Debug, thiserror::Error)]
    pub enum RunnerError in crate::OFFICE.domain();
    common [InvalidArgument, invalid, Database];
    shared [
        REQUEST_ID_INVALID,
        PAGE_TOKEN_INVALID,
        STREAM_LIMIT_REACHED,
        STREAM_SHARE_REACHED,
    ];
    streams [StreamLimit, StreamShare];
    reasons {
        /// `workflow` is not a valid `lychd.runner.workflow/v1` document (the description names the JSON path)
        WORKFLOW_INVALID = InvalidArgument;
        /// `input` is larger than 64 KiB
        INPUT_TOO_LARGE = InvalidArgument;
        /// a budget (`budgets.<name>`) is above loop-contract v1's maximum for it
        BUDGET_ABOVE_CONTRACT = InvalidArgument;
        /// `timeout_seconds` is negative or above the run's `max_wall_seconds`
        TIMEOUT_INVALID = InvalidArgument;
        /// `parent_run_id` names no run the caller started (it never existed, or another principal started it); nothing changed
        PARENT_RUN_NOT_FOUND = NotFound => ParentNotFound;
        /// the parent run has ended; a descendant run needs a live parent; nothing changed
        PARENT_FINISHED = FailedPrecondition => ParentFinished;
        /// the descendant run would be deeper than its root's `max_recursion_depth`; nothing changed
        RECURSION_TOO_DEEP = FailedPrecondition => RecursionTooDeep;
        /// the parent already has `max_parallelism` descendant runs that have not ended; nothing changed
        PARALLELISM_REACHED = FailedPrecondition => ParallelismReached;
        /// the root of the tree has nothing left of a budget a descendant run needs (steps, tool calls, tokens, cost, wall seconds); nothing changed
        ROOT_BUDGET_SPENT = FailedPrecondition => RootBudgetSpent;
        /// `timeout_seconds` is beyond the wall seconds the root of the tree has left; nothing changed
        TIMEOUT_BEYOND_ROOT = FailedPrecondition => TimeoutBeyondRoot;
        /// `run_id` is not a UUID
        RUN_ID_MALFORMED = InvalidArgument;
        /// no run with this id that the caller may see (it never existed, or another principal started it)
        RUN_NOT_FOUND = NotFound => RunNotFound;
        /// this `request_id` already started a run with another workflow, input or budgets; nothing changed
        START_REQUEST_CONFLICT = AlreadyExists => StartConflict;
        /// the run ended in a terminal state other than `CANCELED`; nothing changed
        RUN_FINISHED = FailedPrecondition => RunFinished;
        /// the run has no checkpoint of this version
        CHECKPOINT_NOT_FOUND = NotFound => CheckpointNotFound;
        /// `version` is beyond any version
        VERSION_OUT_OF_RANGE = InvalidArgument;
        /// `after_sequence` is beyond any sequence
        SEQUENCE_OUT_OF_RANGE = InvalidArgument;
        /// the run's state, version or lease generation changed under this commit (another runner holds it); nothing changed
        RUN_FENCED = Aborted => Fenced;
        /// `decision` is not one of `REVIEW_DECISION_RESUME`, `_RECONCILE`, `_FAIL`, `_CANCEL`
        REVIEW_DECISION_INVALID = InvalidArgument;
        /// `rationale` is empty, only whitespace, longer than 1024 characters or holds a control character
        RATIONALE_INVALID = InvalidArgument;
        /// `recovery_checksum` is neither empty nor 64 lowercase hex digits
        CHECKSUM_MALFORMED = InvalidArgument;
        /// the run is not quarantined (and this is not a replay of the review that released it); nothing changed
        RUN_NOT_QUARANTINED = FailedPrecondition => NotQuarantined;
        /// `recovery_checksum` is not the checksum of the run's recovery point (it changed, or another checkpoint was inspected): inspect again; nothing changed
        RECOVERY_CHECKSUM_STALE = FailedPrecondition => RecoveryStale;
        /// `reconcile` needs a pending effect and the run has none; nothing changed
        NO_PENDING_EFFECT = FailedPrecondition => NoPendingEffect;
        /// `resume` needs a checkpoint before the quarantine that verifies and no checkpoint does: decide `fail` or `cancel`; nothing changed
        NO_VERIFIED_CHECKPOINT = FailedPrecondition => NoVerifiedCheckpoint;
        /// the run's owner asked to cancel it while it was quarantined: decide `cancel` or `fail`; nothing changed
        RECOVERY_CANCEL_PENDING = FailedPrecondition => RecoveryCancelPending;
        /// a runner holds the run's lease: its state-schema version changes only while no runner drives it; nothing changed
        RUN_LEASED = FailedPrecondition => RunLeased;
        /// the run's latest checkpoint is not of its version or does not verify; nothing changed
        CHECKPOINT_CORRUPT = FailedPrecondition => CheckpointCorrupt;
        /// no registered state-schema migration leads from the run's version to the one asked (or the state is not of its shape); nothing changed
        STATE_MIGRATION_UNKNOWN = FailedPrecondition => MigrationUnknown;
        /// the run has not ended: only a finished run is replayed; nothing changed
        RUN_NOT_ENDED = FailedPrecondition => RunNotEnded;
        /// the run was recorded under a version this process cannot replay (its FSM digest, state-schema version, the step loop's rules, or it was started before its inputs were recorded); nothing changed
        REPLAY_VERSION_UNSUPPORTED = FailedPrecondition => ReplayUnsupported;
        /// the rollback would not give back exactly the state its forward migration started from; nothing changed
        STATE_ROLLBACK_NOT_EXACT = FailedPrecondition => RollbackNotExact;
        /// `resolution` is not one of `EFFECT_RESOLUTION_CONFIRMED`, `_NOT_APPLIED`, `_ABANDON`
        RESOLUTION_INVALID = InvalidArgument;
        /// `receipt_digest` or `evidence_digest` is not `sha256:` and 64 lowercase hex digits (a receipt digest is required for `CONFIRMED` only)
        DIGEST_MALFORMED = InvalidArgument;
        /// the run is not in `HUMAN_RECONCILIATION`: no unknown effect outcome to settle; nothing changed
        RUN_NOT_RECONCILING = FailedPrecondition => NotReconciling;
        /// `evidence_digest` is not the digest of the effect's ledger now (it changed since it was inspected): inspect again; nothing changed
        EVIDENCE_STALE = FailedPrecondition => EvidenceStale;
        /// the run has no effect (it never planned one); nothing to inspect
        NO_EFFECT = FailedPrecondition => NoEffect;
    }
    answers {
        /// As many run streams are open as the office serves.
        StreamLimit => STREAM_LIMIT_REACHED
            with "the office serves as many run streams as it may; retry later";
        /// The caller holds its whole share of the run streams.
        StreamShare => STREAM_SHARE_REACHED
            with "the caller holds its whole share of the office's run streams: close one of its own; others may still open theirs";
    }
}
