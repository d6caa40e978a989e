//! Step 8: authority consumption and action binding (spec §4.2, §4.3, §7).
//!
//! Produces the `execution` and `authority` axes. The authority axis is about
//! the execution action: the grant the single receipt used, or, when no
//! eligible receipt used one, the lineage(s) of grants for the policy's
//! expected action. Promote grants are checked with the same [`check_use`]
//! by the promotion stage.

use super::axes::{Authority as A, Execution as E};
use super::codes::ReasonCode as C;
use super::frame::string_set;
use super::lineage::{GrantLineage, state};
use super::result::RecordStatus;
use super::time::Millis;
use super::{ExecutionFacts, Resolved, Work};
use crate::schema::RecordType as T;
use crate::value::Value;

/// A consumer's attempted use of a grant.
pub(crate) struct Use<'v> {
    /// The consumer's `grantRef`, if any.
    pub grant_ref: Option<&'v Value>,
    /// The consumer record.
    pub consumer: usize,
    /// Action binding the grant must carry.
    pub action: &'v str,
    pub parameters: Option<&'v Value>,
    /// Scope set (receipts), `None` when the consumer has none (promotions).
    pub scope: Option<Vec<&'v str>>,
    /// Grantee (the receipt's executor), `None` for promotions.
    pub grantee: Option<&'v str>,
    /// Idempotency key (promotions), `None` for receipts.
    pub idempotency_key: Option<&'v str>,
    /// Dispatch (receipt `startedAt`) or decision (promotion `decidedAt`) time.
    pub dispatch_at: Millis,
    /// Terminal fact time, `None` for an unknown attempt.
    pub terminal_at: Option<Millis>,
}

/// Judges one attempted use: the authority state it leaves and the code
/// explaining a non-`CONSUMED` state (`None` when an earlier stage already
/// reported the cause). Checks run in a fixed order and the first failure
/// decides (documented in `docs/helmloop-reducer.md`).
pub(crate) fn check_use(
    w: &Work<'_>,
    lineages: &[GrantLineage<'_>],
    u: &Use<'_>,
) -> (A, Option<C>) {
    let Some(grant_ref) = u.grant_ref else {
        return (A::WrongBinding, Some(C::AuthorityUnreservedUse));
    };
    let g = match w.resolve(grant_ref, T::AuthorityGrant) {
        Resolved::Found(g) => g,
        Resolved::Missing => return (A::Missing, Some(C::AuthorityMissing)),
        Resolved::TypeMismatch | Resolved::DigestMismatch => return (A::Invalid, None),
    };
    match w.recs[g].status {
        RecordStatus::Eligible => {}
        RecordStatus::LaterFact => return (A::Missing, Some(C::RecordAfterEvaluatedAt)),
        RecordStatus::Invalid => return (A::Invalid, None),
        RecordStatus::Ineligible => return (A::Missing, Some(C::AuthorityMissing)),
    }
    let gid = w.recs[g].s(&["lineage", "grantId"]);
    let Some(l) = super::lineage::find(lineages, gid) else {
        return (A::Missing, Some(C::AuthorityMissing));
    };
    if l.invalid {
        return (A::Invalid, None);
    }
    match state(w, g) {
        "reserved" => {}
        "revoked" => return (A::Revoked, Some(C::AuthorityRevokedUse)),
        _ => return (A::WrongBinding, Some(C::AuthorityUnreservedUse)),
    }
    let gr = &w.recs[g];
    let binding_ok = gr.s(&["action"]) == u.action
        && gr.at(&["actionParameters"]) == u.parameters
        && u.scope
            .as_ref()
            .is_none_or(|s| *s == string_set(gr.at(&["scope"])))
        && u.grantee.is_none_or(|e| e == gr.s(&["granteeId"]))
        && u.idempotency_key
            .is_none_or(|k| k == gr.s(&["idempotencyKey"]))
        && gr.at(&["subject"]) == w.recs[u.consumer].at(&["subject"])
        && gr.at(&["revision"]) == w.recs[u.consumer].at(&["revision"]);
    // A defective grant is already INVALID (step 7); here only its binding
    // to this consumer is judged.
    if !binding_ok {
        return (A::WrongBinding, Some(C::AuthorityWrongBinding));
    }
    if gr.issued() > u.dispatch_at {
        return (A::WrongBinding, Some(C::AuthorityReservedAfterDispatch));
    }
    if u.dispatch_at >= gr.t(&["validity", "notAfter"]) {
        return (A::Expired, Some(C::AuthorityExpiredUse));
    }
    if u.dispatch_at < gr.t(&["validity", "notBefore"]) {
        return (A::WrongBinding, Some(C::AuthorityWrongBinding));
    }
    if l.double_consumed {
        return (A::Ambiguous, None);
    }
    if l.orphan {
        return (A::WrongBinding, Some(C::AuthorityWrongBinding));
    }
    if l.competing {
        return (A::Ambiguous, Some(C::AuthorityLineageAmbiguous));
    }
    let consumer = &w.recs[u.consumer];
    let Some(next) = l.next_after(w, g) else {
        let consumed_later = l.later.iter().any(|&s| {
            state(w, s) == "consumed"
                && w.recs[s]
                    .f
                    .supersedes
                    .is_some_and(|p| gr.is_referenced_by(&strip_reason(p)))
                && w.recs[s]
                    .at(&["consumedBy"])
                    .is_some_and(|c| consumer.is_referenced_by(c))
        });
        return if consumed_later {
            (A::Active, Some(C::AuthorityConsumedAfterEvaluatedAt))
        } else {
            (A::Active, Some(C::AuthorityNotConsumed))
        };
    };
    match state(w, next) {
        // Revocation before consumption voids the reservation, whether it
        // came before or after dispatch (design-inference).
        "revoked" => (A::Revoked, Some(C::AuthorityRevokedUse)),
        "consumed" => {
            let by_consumer = w.recs[next]
                .at(&["consumedBy"])
                .is_some_and(|c| consumer.is_referenced_by(c));
            if !by_consumer {
                return (A::Ambiguous, Some(C::AuthorityDoubleConsumed));
            }
            match u.terminal_at {
                Some(t) if w.recs[next].issued() >= t => (A::Consumed, None),
                _ => (A::WrongBinding, Some(C::AuthorityConsumedBeforeTerminal)),
            }
        }
        _ => (A::Invalid, None),
    }
}

/// A `supersedes` entry without its `reason`, i.e. the exact reference.
fn strip_reason(p: &Value) -> Value {
    match p {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "reason")
                .map(|(k, v)| (k.to_owned(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

pub(crate) fn evaluate(w: &mut Work<'_>, lineages: &[GrantLineage<'_>]) -> ExecutionFacts {
    let c = w.frame.c();
    let expected_action = c.expected_action;
    let auth_required = c.execution_authority_required;
    let receipts = w.heads_of(T::ExecutionReceipt);
    let exec_lineages: Vec<&GrantLineage<'_>> = lineages
        .iter()
        .filter(|l| l.action == expected_action && !l.steps.is_empty())
        .collect();
    let reserved = exec_lineages.iter().any(|l| {
        l.steps
            .iter()
            .any(|&s| matches!(state(w, s), "reserved" | "consumed"))
    });
    let mut facts = ExecutionFacts {
        receipt: None,
        multiple: false,
        reserved_without_receipt: false,
        execution: E::NotStarted,
        authority: A::Missing,
        authority_not_required: false,
    };
    let mut exec_code = None;
    let mut auth_code = None;
    match receipts.as_slice() {
        [] => {
            facts.reserved_without_receipt = reserved;
            (facts.execution, exec_code) = if reserved {
                (E::Unknown, Some(C::ExecutionUnknown))
            } else {
                (E::NotStarted, Some(C::ExecutionMissing))
            };
            (facts.authority, auth_code) = without_use(w, &exec_lineages);
        }
        [r] => {
            let r = *r;
            facts.receipt = Some(r);
            let rec = &w.recs[r];
            let required = rec.at(&["authority", "required"]).and_then(Value::as_bool);
            if required == Some(false) {
                if auth_required {
                    (facts.authority, auth_code) =
                        (A::WrongBinding, Some(C::AuthorityWrongBinding));
                } else {
                    facts.authority = A::Missing;
                    facts.authority_not_required = true;
                }
            } else {
                let status = rec.s(&["status"]);
                let u = Use {
                    grant_ref: rec.at(&["authority", "grantRef"]),
                    consumer: r,
                    action: rec.s(&["action"]),
                    parameters: rec.at(&["actionParameters"]),
                    scope: Some(string_set(rec.at(&["scope"]))),
                    grantee: Some(rec.s(&["executor", "id"])),
                    idempotency_key: None,
                    dispatch_at: rec.t(&["startedAt"]),
                    terminal_at: (status != "unknown").then(|| rec.t(&["finishedAt"])),
                };
                (facts.authority, auth_code) = check_use(w, lineages, &u);
            }
            let c = w.frame.c();
            let action_ok = rec.s(&["action"]) == c.expected_action
                && rec.at(&["actionParameters"]) == Some(c.expected_parameters)
                && string_set(rec.at(&["scope"])) == c.expected_scope;
            // `resourceOwnership` is recorded, not judged against the
            // accountable owner (resolutions §H.2; spec §1: nesting is not
            // ownership, and parentage never changes the owner).
            let status = rec.s(&["status"]);
            if !action_ok {
                w.flag(r, C::ExecutionActionMismatch);
            }
            (facts.execution, exec_code) = if !action_ok {
                (E::Invalid, None)
            } else {
                match status {
                    "succeeded" => (E::Completed, None),
                    "failed" => (E::Failed, Some(C::ExecutionFailed)),
                    _ => (E::Unknown, Some(C::ExecutionUnknown)),
                }
            };
        }
        many => {
            for &r in many {
                w.note(r, C::ExecutionMultipleReceipts);
            }
            facts.multiple = true;
            facts.execution = E::Invalid;
            // Which attempt the single-use authority served is undefined.
            facts.authority = A::Ambiguous;
        }
    }
    // A reject-class problem of any receipt or grant record makes its axis INVALID.
    if any_invalid(w, T::ExecutionReceipt) {
        (facts.execution, exec_code) = (E::Invalid, None);
    }
    if any_invalid(w, T::AuthorityGrant) && facts.authority != A::Ambiguous {
        (facts.authority, auth_code) = (A::Invalid, None);
    }
    if facts.authority != A::Missing {
        facts.authority_not_required = false;
    }
    w.codes.extend(exec_code);
    w.codes.extend(auth_code);
    facts
}

/// Authority when no eligible receipt used a grant: judged from the
/// lineage(s) of grants for the expected action.
fn without_use(w: &Work<'_>, lineages: &[&GrantLineage<'_>]) -> (A, Option<C>) {
    match lineages {
        [] => (A::Missing, Some(C::AuthorityMissing)),
        [l] => {
            if l.invalid {
                return (A::Invalid, None);
            }
            if l.double_consumed {
                return (A::Ambiguous, None);
            }
            if l.orphan || l.competing {
                return (A::Ambiguous, Some(C::AuthorityLineageAmbiguous));
            }
            let Some(head) = l.head() else {
                return (A::Missing, Some(C::AuthorityMissing));
            };
            match state(w, head) {
                "revoked" => (A::Revoked, Some(C::AuthorityUnusable)),
                // A consumed head whose consumer is not an eligible receipt.
                "consumed" => (A::Ambiguous, Some(C::AuthorityLineageAmbiguous)),
                _ if w.frame.c().evaluated_at >= w.recs[head].t(&["validity", "notAfter"]) => {
                    (A::Expired, Some(C::AuthorityUnusable))
                }
                _ => (A::Active, Some(C::AuthorityNotConsumed)),
            }
        }
        _ => (A::Ambiguous, Some(C::AuthorityLineageAmbiguous)),
    }
}

pub(crate) fn any_invalid(w: &Work<'_>, t: T) -> bool {
    w.recs
        .iter()
        .any(|r| r.is(t) && r.status == RecordStatus::Invalid)
}
