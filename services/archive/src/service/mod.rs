//! The office's use cases, composing the pure rules (`domain`) and the store. Handlers in
//! `grpc` decode, authorize, call these and encode.
//!
//! Every use case is one Archive transaction ([`store::begin`]: 5 s statement and 2 s lock
//! timeouts, set locally) that first locks its namespace row — `FOR UPDATE` for intake and
//! lifecycle changes, `FOR SHARE` for recall, resolution and metadata reads — so every
//! operation on a namespace has one decision order. A use case that writes awaits its
//! [`Recheck`] (Ward asked again with the first decision's policy generation) under that lock,
//! answered before its first write (intake asks it alongside its one lookup; lifecycle changes
//! and recall after theirs); a refusal there rolls everything back. The handler asks
//! once more after the transaction has ended, before returning any material.

mod metrics;
mod recollect;
pub mod retention;

use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::config::Settings;
use crate::domain::digest::{self, IntakeMaterial};
use crate::domain::lifecycle::{self, Change, Refused, State};
use crate::domain::recall::{self, Current};
use crate::error::{ArchiveError, Result};
use crate::store::namespaces::{self, Mode, Namespace};
use crate::store::notes::{self, NewNote};
use crate::store::receipts;
use crate::store::{self, Tx};

/// The stored shapes the handlers encode.
pub use crate::store::notes::NoteRow;
pub use crate::store::receipts::ReceiptRow;

/// Asks Ward again whether the caller is still allowed what its first decision allowed; an
/// `Err` is the refusal to answer with ([`ArchiveError::Refused`]).
pub type Recheck = Arc<dyn Fn() -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// A validated intake request.
#[derive(Debug, Clone)]
pub struct IntakeCommand {
    pub namespace: String,
    pub request_id: String,
    pub source_key: String,
    pub source_revision: String,
    pub text: String,
    pub chars: usize,
    pub producer: String,
    pub classification: String,
    pub observed_at: OffsetDateTime,
}

impl IntakeCommand {
    fn content_digest(&self) -> digest::Sha {
        digest::content(&self.text)
    }

    fn request_digest(&self, content: &digest::Sha) -> digest::Sha {
        digest::intake(&IntakeMaterial {
            source_key: &self.source_key,
            source_revision: &self.source_revision,
            content,
            producer: &self.producer,
            classification: &self.classification,
            observed_at_ns: self.observed_at.unix_timestamp_nanos(),
        })
    }
}

/// An intake's answer.
#[derive(Debug, Clone)]
pub struct Intaken {
    pub note: NoteRow,
    pub replayed: bool,
}

/// A validated lifecycle change.
#[derive(Debug, Clone)]
pub struct LifecycleCommand {
    pub namespace: String,
    pub revision: Uuid,
    pub expected_version: i64,
    pub change: Change,
}

/// A lifecycle change's answer.
#[derive(Debug, Clone)]
pub struct Changed {
    pub note: NoteRow,
    /// The source's previously promoted revision, archived by this promotion.
    pub superseded: Option<NoteRow>,
}

/// A validated recall request.
#[derive(Debug, Clone)]
pub struct RecallCommand {
    pub namespace: String,
    pub request_id: String,
    pub query: String,
    pub purpose: String,
    pub max_results: u32,
    pub max_chars: u32,
}

/// One recalled note.
#[derive(Debug, Clone)]
pub struct Recalled {
    pub note: NoteRow,
    pub text: String,
    pub score: f32,
    pub projection: digest::Sha,
}

/// A recall's (or a resolution's) answer.
#[derive(Debug, Clone)]
pub struct Recollection {
    pub receipt: ReceiptRow,
    pub notes: Vec<Recalled>,
    pub replayed: bool,
}

/// The office's state.
pub struct Service {
    pub settings: Settings,
    pub pool: PgPool,
}

impl Service {
    pub fn new(settings: Settings, pool: PgPool) -> Arc<Self> {
        Arc::new(Service { settings, pool })
    }

    /// Ward's second question, asked after waiting for the namespace and never while holding
    /// it: wait for the namespace row in a transaction of its own (the same lock mode and
    /// timeouts), release it, ask Ward, and only then begin the transaction that writes. So a
    /// Ward call never extends the namespace's critical section (a call that outlasted the 2 s
    /// lock timeout would make every other operation `NAMESPACE_BUSY`), and authority withdrawn
    /// while the caller queued for the namespace is still seen before any write. What separates
    /// the answer from the write is the second acquisition of the lock, normally uncontended.
    async fn wait_then_recheck(&self, name: &str, mode: Mode, recheck: &Recheck) -> Result<()> {
        let mut tx = store::begin(&self.pool).await?;
        namespaces::lock(&mut tx, name, mode).await?;
        tx.commit().await?;
        recheck().await
    }

    /// Lock the namespace and check its policy binding.
    async fn namespace(&self, tx: &mut Tx, name: &str, mode: Mode) -> Result<Option<Namespace>> {
        let ns = namespaces::lock(tx, name, mode).await?;
        match ns {
            Some(ns) if ns.policy_revision != self.settings.policy_revision => {
                Err(ArchiveError::PolicyMismatch)
            }
            ns => Ok(ns),
        }
    }

    async fn note(tx: &mut Tx, namespace: &str, id: Uuid) -> Result<NoteRow> {
        notes::get(tx, namespace, id)
            .await?
            .ok_or_else(|| broken("a bound or changed revision has no metadata"))
    }

    /// Intake: exact replay of the request id answers what it admitted; a different request
    /// under it refuses; the same source revision with the same bytes is the same note (the new
    /// request id is bound to it); different bytes, or a revoked source revision, refuse;
    /// otherwise a new candidate. The namespace is created by its first intake, bound to
    /// `owner` and the configured policy revision.
    pub async fn intake(
        &self,
        owner: &str,
        cmd: &IntakeCommand,
        recheck: Recheck,
    ) -> Result<Intaken> {
        let content = cmd.content_digest();
        let request = cmd.request_digest(&content);
        let ns = cmd.namespace.as_str();
        // Ward was asked before this; it is asked again once the namespace was free, never
        // while holding it; the last authority check before the answer follows the commit.
        self.wait_then_recheck(ns, Mode::Update, &recheck).await?;
        let mut tx = store::begin(&self.pool).await?;
        if self.namespace(&mut tx, ns, Mode::Update).await?.is_none() {
            // A concurrent first intake waits here for the other's commit, then finds its row.
            namespaces::ensure(&mut tx, ns, owner, self.settings.policy_revision).await?;
            self.namespace(&mut tx, ns, Mode::Update).await?;
        }
        let found = notes::find_for_intake(
            &mut tx,
            ns,
            &cmd.request_id,
            &cmd.source_key,
            &cmd.source_revision,
        )
        .await?;
        if let (Some(digest), Some(revision)) = (found.bound_digest, found.bound_revision) {
            if digest != request {
                return Err(ArchiveError::IntakeConflict);
            }
            let note = Self::note(&mut tx, ns, revision).await?;
            tx.commit().await?;
            return Ok(Intaken {
                note,
                replayed: true,
            });
        }
        if let (Some(revision), Some(stored), Some(state)) = (
            found.existing_id,
            found.existing_digest,
            found.existing_state,
        ) {
            if state == State::Revoked.as_str() {
                return Err(ArchiveError::SourceRevoked);
            }
            if stored != content {
                return Err(ArchiveError::SourceConflict);
            }
            notes::bind(&mut tx, ns, &cmd.request_id, &request, revision).await?;
            let note = Self::note(&mut tx, ns, revision).await?;
            lychd_runtime::refusal::commit(tx).await?;
            return Ok(Intaken {
                note,
                replayed: true,
            });
        }
        let note = notes::insert(
            &mut tx,
            &NewNote {
                id: Uuid::new_v4(),
                namespace: ns,
                source_key: &cmd.source_key,
                source_revision: &cmd.source_revision,
                text: &cmd.text,
                content_digest: &content,
                chars: i32::try_from(cmd.chars).unwrap_or(i32::MAX),
                producer: &cmd.producer,
                classification: &cmd.classification,
                observed_at: cmd.observed_at,
            },
            &cmd.request_id,
            &request,
        )
        .await?;
        lychd_runtime::refusal::commit(tx).await?;
        tracing::info!(namespace = ns, "note admitted");
        Ok(Intaken {
            note,
            replayed: false,
        })
    }

    /// Promote, archive or revoke: compare-and-set on the expected lifecycle version under the
    /// namespace lock. Promotion archives the source's previously promoted revision in the same
    /// transaction; revocation deletes the text and its search data.
    pub async fn change(&self, cmd: &LifecycleCommand, recheck: Recheck) -> Result<Changed> {
        let ns = cmd.namespace.as_str();
        // Re-asked once the namespace was free, never under its lock.
        self.wait_then_recheck(ns, Mode::Update, &recheck).await?;
        let mut tx = store::begin(&self.pool).await?;
        self.namespace(&mut tx, ns, Mode::Update)
            .await?
            .ok_or(ArchiveError::NoteNotFound)?;
        let row = notes::lock_lifecycle(&mut tx, ns, cmd.revision)
            .await?
            .ok_or(ArchiveError::NoteNotFound)?;
        let state = State::parse(&row.state).ok_or_else(|| broken("unknown lifecycle state"))?;
        let (to, _) = lifecycle::decide(state, row.version, cmd.expected_version, cmd.change)
            .map_err(|r| match r {
                Refused::VersionMismatch => ArchiveError::VersionMismatch,
                Refused::Transition => ArchiveError::TransitionInvalid,
            })?;
        let previous = match cmd.change {
            Change::Promote => notes::lock_promoted_of_source(&mut tx, ns, &row.source_key).await?,
            Change::Archive | Change::Revoke => None,
        };
        let mut superseded = None;
        if let Some(prev) = previous {
            if !notes::set_state(
                &mut tx,
                prev.revision_id,
                prev.version,
                State::Archived.as_str(),
                Some(cmd.revision),
            )
            .await?
            {
                return Err(conflict());
            }
            superseded = Some(prev.revision_id);
        }
        if !notes::set_state(&mut tx, cmd.revision, row.version, to.as_str(), None).await? {
            return Err(conflict());
        }
        if to == State::Revoked {
            notes::clear_text(&mut tx, cmd.revision).await?;
        }
        let note = Self::note(&mut tx, ns, cmd.revision).await?;
        let superseded = match superseded {
            Some(id) => Some(Self::note(&mut tx, ns, id).await?),
            None => None,
        };
        lychd_runtime::refusal::commit(tx).await?;
        tracing::info!(namespace = ns, state = %to, "note lifecycle changed");
        Ok(Changed { note, superseded })
    }

    /// A receipt's metadata (no text, no eligibility claim).
    pub async fn inspect(&self, namespace: &str, request_id: &str) -> Result<ReceiptRow> {
        let mut tx = store::begin(&self.pool).await?;
        self.namespace(&mut tx, namespace, Mode::Share)
            .await?
            .ok_or(ArchiveError::ReceiptNotFound)?;
        let receipt = receipts::find(&mut tx, namespace, request_id)
            .await?
            .ok_or(ArchiveError::ReceiptNotFound)?;
        tx.commit().await?;
        Ok(receipt)
    }

    /// One note's metadata.
    pub async fn get_note(&self, namespace: &str, id: Uuid) -> Result<NoteRow> {
        let mut tx = store::begin(&self.pool).await?;
        self.namespace(&mut tx, namespace, Mode::Share)
            .await?
            .ok_or(ArchiveError::NoteNotFound)?;
        let note = notes::get(&mut tx, namespace, id)
            .await?
            .ok_or(ArchiveError::NoteNotFound)?;
        tx.commit().await?;
        Ok(note)
    }

    /// A page of note metadata (`limit` rows at most); a missing namespace lists empty.
    pub async fn list_notes(
        &self,
        namespace: &str,
        state: Option<State>,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<NoteRow>> {
        let mut tx = store::begin(&self.pool).await?;
        if self
            .namespace(&mut tx, namespace, Mode::Share)
            .await?
            .is_none()
        {
            return Ok(Vec::new());
        }
        let rows = notes::list(&mut tx, namespace, state.map(State::as_str), after, limit).await?;
        tx.commit().await?;
        Ok(rows)
    }
}

/// A broken invariant of the stored state (answered `INTERNAL`, logged).
fn broken(what: &'static str) -> ArchiveError {
    ArchiveError::Database(sqlx::Error::Protocol(what.into()))
}

/// A concurrent change got there first (`CONCURRENT_CHANGE`, retry).
fn conflict() -> ArchiveError {
    ArchiveError::Conflict
}
