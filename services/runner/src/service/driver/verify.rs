//! The driver at `VERIFY` and `WAIT_VERIFICATION` (every workflow has `verification`;
//! issue 28): the run's records are drafted (`domain::verification::build`), the
//! verifier asked (`crate::verifier`), and its verdict committed — PASS `verified_pass` to
//! `SUCCEEDED`, REJECT (or the owner's refusal) `verification_reject` to `FAILED`, HOLD
//! `verification_hold` to `WAIT_VERIFICATION`, the run released and asked again after
//! `verify_recheck_ms`. From `WAIT_VERIFICATION` a changed answer (another disposition, or a
//! hold for other reasons) takes
//! `verification_changed` back to `VERIFY` (the wait's time counted as suspended), where it is
//! asked once more and committed: every edge into a terminal leaves `VERIFY`.

use super::*;
use crate::domain::verification::{self, Predicate, Verdict, Verification};

/// The actor of a verdict the HelmLoop office reduced (the FSM's issuer `verifier`).
pub const HELMLOOP_VERIFIER: &str = "helmloop";

/// What the driver does with the verifier's answer.
pub(super) enum Verified {
    /// Commit `event` with the progress, then go on (or wait this many ms).
    Commit(&'static str, Box<Progress>, Option<u64>),
    /// Ask again after this many ms (no transition).
    Wait(u64),
}

fn ms(t: time::OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

impl Driver {
    pub(super) async fn verify(
        &self,
        run: &RunRow,
        w: &Workflow,
        p: &Progress,
        open_wait: u64,
    ) -> Verified {
        let recheck = self.verifier.recheck();
        let spec = &w.verification;
        // The records' instant: the commit that first entered `VERIFY` with every obligation
        // closed (the row's `updated_at`), kept in the progress from the first verdict on, so
        // a resumed or repeated ask drafts the same bytes.
        let before = p.verification.clone();
        let mut v = p.verification.clone().unwrap_or(Verification {
            at_ms: ms(run.updated_at),
            ..Verification::default()
        });
        let run_id = run.id.hyphenated().to_string();
        let bundle = verification::build(&verification::Run {
            id: &run_id,
            workflow: w,
            workflow_sha256: &run.workflow_sha256,
            input_sha256: &run.input_sha256,
            created_ms: ms(run.created_at),
            progress: p,
            spec,
            at_ms: v.at_ms,
        });
        let now = ms(time::OffsetDateTime::now_utc());
        let Ok(answer) = self.verifier.ask(&bundle, &run_id, now).await else {
            return Verified::Wait(recheck);
        };
        v.asked = v.asked.saturating_add(1);
        v.disposition = answer.disposition;
        v.reasons = answer.reasons;
        v.axes = answer.axes.into_iter().collect();
        v.input_digest = answer.input_digest;
        let mut verdict = Verdict::of(&v.disposition);
        v.predicate = Predicate {
            obligations_closed: p.obligations_closed(w),
            independent_pass: verdict == Verdict::Pass,
            // An effect is pending from `PLAN_EFFECTS` until its confirmed receipt is
            // ingested; one whose outcome nobody knows never leaves `HUMAN_RECONCILIATION`
            // but to a terminal, so at `VERIFY` none may be pending.
            no_unknown_effect: p.effect.is_none(),
            terminal_edge_legal: self.service.fsm.next("VERIFY", verdict.event()).is_some(),
        };
        if verdict == Verdict::Pass && !v.predicate.holds() {
            verdict = Verdict::Hold;
        }
        tracing::info!(run = %run.id, disposition = %v.disposition, asked = v.asked, "verifier answered");
        let mut q = p.clone();
        if run.state == "WAIT_VERIFICATION" {
            // Still held for the same reasons: nothing to record, asked again later. A hold
            // for other reasons goes back to `VERIFY` too, so the run shows what it waits for.
            let same = before
                .as_ref()
                .is_some_and(|b| b.disposition == v.disposition && b.reasons == v.reasons);
            if verdict == Verdict::Hold && same {
                return Verified::Wait(recheck);
            }
            q.used.suspended_ms = q.used.suspended_ms.saturating_add(open_wait);
            q.verification = Some(v);
            return Verified::Commit("verification_changed", Box::new(q), None);
        }
        q.verification = Some(v);
        let then = (verdict == Verdict::Hold).then_some(recheck);
        Verified::Commit(verdict.event(), Box::new(q), then)
    }
}
