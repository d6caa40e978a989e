//! A proposal as stored: its row and columns, the read of one (with the lock asked), and the
//! commands that name one.
//!
//! Invariant: the one mapping between `ward.proposals` rows and [`ProposalRecord`].

use sqlx::postgres::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::error::Result;

/// A proposal as stored, with what its records say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProposalRecord {
    pub id: Uuid,
    pub seq: i64,
    pub group_id: Uuid,
    pub consent_id: Uuid,
    pub revises: Option<Uuid>,
    pub run_id: String,
    pub occurrence: String,
    pub initiated_by: Uuid,
    pub created_at: OffsetDateTime,
    /// Records appended so far (the last sequence number).
    pub records: i64,
    pub withdrawn: bool,
    pub superseded_by: Option<Uuid>,
}

pub(crate) const COLUMNS: &str = "p.id, p.seq, p.group_id, p.consent_id, p.revises, p.run_id, \
     p.occurrence, p.initiated_by, p.created_at, p.records, \
     EXISTS (SELECT 1 FROM ward.proposal_records w \
             WHERE w.proposal_id = p.id AND w.kind = 'withdrawal') AS withdrawn, \
     (SELECT s.successor FROM ward.proposal_records s \
      WHERE s.proposal_id = p.id AND s.kind = 'supersession') AS superseded_by";

pub(crate) type Row = (
    Uuid,
    i64,
    Uuid,
    Uuid,
    Option<Uuid>,
    String,
    String,
    Uuid,
    OffsetDateTime,
    i64,
    bool,
    Option<Uuid>,
);

pub(crate) fn proposal(r: Row) -> ProposalRecord {
    let (
        id,
        seq,
        group_id,
        consent_id,
        revises,
        run_id,
        occurrence,
        initiated_by,
        created_at,
        records,
        withdrawn,
        superseded_by,
    ) = r;
    ProposalRecord {
        id,
        seq,
        group_id,
        consent_id,
        revises,
        run_id,
        occurrence,
        initiated_by,
        created_at,
        records,
        withdrawn,
        superseded_by,
    }
}

impl ProposalRecord {
    /// Withdrawn or superseded: nothing more can close it.
    pub fn closed(&self) -> bool {
        self.withdrawn || self.superseded_by.is_some()
    }
}

/// How [`read`] locks the proposal row.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    None,
    /// `FOR SHARE`: no close of it (which takes `FOR UPDATE`) interleaves.
    Share,
    /// `FOR UPDATE`: this transaction closes or appends to it.
    Update,
}

pub(crate) async fn read(
    conn: &mut PgConnection,
    id: Uuid,
    lock: Lock,
) -> Result<Option<ProposalRecord>> {
    let lock = match lock {
        Lock::None => "",
        Lock::Share => " FOR SHARE OF p",
        Lock::Update => " FOR UPDATE OF p",
    };
    Ok(sqlx::query_as::<_, Row>(&format!(
        "SELECT {COLUMNS} FROM ward.proposals p WHERE p.id = $1{lock}"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .map(proposal))
}

/// What `CreateProposal` asks for.
pub struct NewProposal<'a> {
    pub consent_id: Uuid,
    pub group_id: Option<Uuid>,
    pub revises: Option<Uuid>,
    pub occurrence: &'a str,
}

/// How a proposal is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    Withdraw,
    /// Superseded by this proposal of the same group (open, not the predecessor).
    Supersede(Uuid),
}
