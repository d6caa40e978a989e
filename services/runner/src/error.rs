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
