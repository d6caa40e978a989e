//! Proposal history ("25. HitL", "Consent history and proposal branches"): proposals with a
//! stable identity, revision links, and an append-only record sequence per proposal. Pure: the
//! store applies these rules; nothing here reads a clock or a database.
//!
//! A proposal binds exactly one consent of its own: a revision is a new proposal with a new
//! consent, so approval never passes from a parent, a sibling or the group. Closing a
//! proposal (withdrawal, supersession) ends its remaining eligibility through the consent's
//! existing guarded changes ([`closing`]).

use super::consent::ConsentState;

/// Largest explanation or correction text (bytes). The text is untrusted content: stored and
/// returned, never interpreted, never logged.
pub const TEXT_MAX: usize = 2048;

/// Kinds of record in a proposal's sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    Preparation,
    Judgment,
    Withdrawal,
    Supersession,
    AttemptReference,
    ReceiptReference,
    Correction,
    Explanation,
}

impl RecordKind {
    pub const ALL: [RecordKind; 8] = [
        RecordKind::Preparation,
        RecordKind::Judgment,
        RecordKind::Withdrawal,
        RecordKind::Supersession,
        RecordKind::AttemptReference,
        RecordKind::ReceiptReference,
        RecordKind::Correction,
        RecordKind::Explanation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Preparation => "preparation",
            RecordKind::Judgment => "judgment",
            RecordKind::Withdrawal => "withdrawal",
            RecordKind::Supersession => "supersession",
            RecordKind::AttemptReference => "attempt_reference",
            RecordKind::ReceiptReference => "receipt_reference",
            RecordKind::Correction => "correction",
            RecordKind::Explanation => "explanation",
        }
    }

    pub fn parse(s: &str) -> Option<RecordKind> {
        RecordKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Who may append a record of this kind with `AppendProposalRecord`: the proposer, the
    /// effect's owner (attempt and receipt references), or nobody — judgments are appended by
    /// the consent's settlement itself, withdrawals and supersessions by their own calls.
    pub fn appended_by(self) -> Option<Appender> {
        match self {
            RecordKind::Preparation | RecordKind::Correction | RecordKind::Explanation => {
                Some(Appender::Proposer)
            }
            RecordKind::AttemptReference | RecordKind::ReceiptReference => {
                Some(Appender::EffectOwner)
            }
            RecordKind::Judgment | RecordKind::Withdrawal | RecordKind::Supersession => None,
        }
    }
}

/// Who appends a record kind directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appender {
    /// The principal that initiated the proposal (`ward:propose` on `effect:<owner>`).
    Proposer,
    /// The effect's owner (`ward:consume` on `effect:<owner>`).
    EffectOwner,
}

/// Where a record came from: a human principal, a standing preauthorization rule, or a service
/// (a service principal, or Ward's clock for an expiry). Derived by Ward, never claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Human,
    StandingPolicy,
    Service,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Human => "human",
            Source::StandingPolicy => "standing_policy",
            Source::Service => "service",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        [Source::Human, Source::StandingPolicy, Source::Service]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// A record to append with `AppendProposalRecord`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    pub kind: RecordKind,
    pub text: Option<String>,
    pub attempt_id: Option<String>,
    pub receipt_id: Option<String>,
}

/// Which fields a record kind needs and allows: `Ok(())` or the field and why.
pub fn record_shape(r: &NewRecord) -> Result<(), (&'static str, &'static str)> {
    use RecordKind as K;
    let texted = matches!(r.kind, K::Explanation | K::Correction);
    match (texted, &r.text) {
        (true, None) => return Err(("text", "is required for an explanation or a correction")),
        (false, Some(_)) => return Err(("text", "is only for an explanation or a correction")),
        _ => {}
    }
    let references = matches!(r.kind, K::AttemptReference | K::ReceiptReference);
    if r.kind == K::AttemptReference && r.attempt_id.is_none() {
        return Err(("attempt_id", "is required for an attempt reference"));
    }
    if r.kind == K::ReceiptReference && r.receipt_id.is_none() {
        return Err(("receipt_id", "is required for a receipt reference"));
    }
    if !references && r.attempt_id.is_some() {
        return Err(("attempt_id", "is only for an attempt or receipt reference"));
    }
    if !references && r.receipt_id.is_some() {
        return Err(("receipt_id", "is only for an attempt or receipt reference"));
    }
    Ok(())
}

/// What closing a proposal (withdrawal or supersession) must do to its consent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// Pending: settle it `cancelled` (the guarded decision path: a concurrent verdict that
    /// commits first wins, and the close is judged again on what it became).
    Cancel,
    /// Granted and unconsumed: revoke the approval (the verdict stays visible; it can never
    /// be consumed).
    Revoke,
    /// Nothing left to close: denied, cancelled, expired, or an approval already revoked.
    Nothing,
}

/// Why a proposal cannot be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseRefusal {
    /// Its approval was consumed: an effect may have started, and closing cannot retract it.
    Consumed,
}

/// What closing a proposal whose consent stands so must do first.
pub fn closing(state: ConsentState, consumed: bool, revoked: bool) -> Result<Close, CloseRefusal> {
    match state {
        ConsentState::Pending => Ok(Close::Cancel),
        ConsentState::Granted if consumed => Err(CloseRefusal::Consumed),
        ConsentState::Granted if revoked => Ok(Close::Nothing),
        ConsentState::Granted => Ok(Close::Revoke),
        ConsentState::Denied | ConsentState::Cancelled | ConsentState::Expired => {
            Ok(Close::Nothing)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_sources_round_trip() {
        for k in RecordKind::ALL {
            assert_eq!(RecordKind::parse(k.as_str()), Some(k));
        }
        for s in [Source::Human, Source::StandingPolicy, Source::Service] {
            assert_eq!(Source::parse(s.as_str()), Some(s));
        }
        assert_eq!(RecordKind::parse("verdict"), None);
    }

    #[test]
    fn judgments_withdrawals_and_supersessions_are_never_appended_directly() {
        for k in [
            RecordKind::Judgment,
            RecordKind::Withdrawal,
            RecordKind::Supersession,
        ] {
            assert_eq!(k.appended_by(), None);
        }
        assert_eq!(
            RecordKind::ReceiptReference.appended_by(),
            Some(Appender::EffectOwner)
        );
        assert_eq!(
            RecordKind::Explanation.appended_by(),
            Some(Appender::Proposer)
        );
    }

    fn rec(kind: RecordKind) -> NewRecord {
        NewRecord {
            kind,
            text: None,
            attempt_id: None,
            receipt_id: None,
        }
    }

    #[test]
    fn record_shapes() {
        assert_eq!(record_shape(&rec(RecordKind::Preparation)), Ok(()));
        assert_eq!(
            record_shape(&rec(RecordKind::Explanation)).map_err(|e| e.0),
            Err("text")
        );
        let mut explained = rec(RecordKind::Explanation);
        explained.text = Some("why".into());
        assert_eq!(record_shape(&explained), Ok(()));
        let mut prepared = rec(RecordKind::Preparation);
        prepared.text = Some("x".into());
        assert_eq!(record_shape(&prepared).map_err(|e| e.0), Err("text"));
        assert_eq!(
            record_shape(&rec(RecordKind::AttemptReference)).map_err(|e| e.0),
            Err("attempt_id")
        );
        let mut receipt = rec(RecordKind::ReceiptReference);
        receipt.receipt_id = Some("r-1".into());
        receipt.attempt_id = Some("a-1".into());
        assert_eq!(record_shape(&receipt), Ok(()));
        let mut stray = rec(RecordKind::Correction);
        stray.text = Some("fix".into());
        stray.receipt_id = Some("r-1".into());
        assert_eq!(record_shape(&stray).map_err(|e| e.0), Err("receipt_id"));
    }

    #[test]
    fn closing_cancels_pending_revokes_unconsumed_and_refuses_consumed() {
        use ConsentState as S;
        assert_eq!(closing(S::Pending, false, false), Ok(Close::Cancel));
        assert_eq!(closing(S::Granted, false, false), Ok(Close::Revoke));
        assert_eq!(closing(S::Granted, false, true), Ok(Close::Nothing));
        assert_eq!(
            closing(S::Granted, true, false),
            Err(CloseRefusal::Consumed)
        );
        for s in [S::Denied, S::Cancelled, S::Expired] {
            assert_eq!(closing(s, false, false), Ok(Close::Nothing));
        }
    }
}
