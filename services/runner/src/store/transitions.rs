//! SQL of a run's transitions (`runner.run_transitions`): the row appended in the transaction
//! of every state commit, with every trace field of loop-contract v1
//! (`trace.transition_fields`) and the span that writes it, and the transitions read back.

use sqlx::{PgPool, Postgres, Row, Transaction};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::progress::Progress;
use crate::domain::trace;

/// A transition as stored.
#[derive(Debug, Clone)]
pub struct TransitionRow {
    pub sequence: i64,
    pub transition_id: Uuid,
    pub run_id: Uuid,
    pub version: i64,
    pub generation: i64,
    pub source_state: String,
    pub target_state: String,
    pub trigger: String,
    pub actor: String,
    pub workflow_version: String,
    pub state_schema_version: String,
    pub recorded_at: OffsetDateTime,
    /// The contract's trace fields (`trace.transition_fields`) beyond the above.
    pub cycle_id: i64,
    pub capability: String,
    pub evidence_hashes: Vec<String>,
    /// JSON: `{"steps", "tokens", "tool_calls", "cost_milli", "suspended_ms"}` (counts).
    pub budget_delta: String,
    pub trace_id: String,
    pub span_id: String,
}

/// A transition to append.
pub struct NewTransition<'a> {
    pub source_state: &'a str,
    pub target_state: &'a str,
    pub trigger: &'a str,
    pub actor: &'a str,
    /// The capability family of the step the transition concerns ('' for none).
    pub capability: &'a str,
}

/// The run a transition made: its row names it.
pub struct Made<'a> {
    pub run_id: Uuid,
    /// The run's version after it (its checkpoint's).
    pub version: i64,
    pub generation: i64,
    pub workflow_version: &'a str,
    pub state_schema_version: &'a str,
}

/// Append the transition `t` that made `after` (the run's progress going from `before` to
/// `progress`): its
/// row carries every trace field of the contract, and the span that writes it
/// (`runner.transition`) carries them as attributes — digests and counts only, never the
/// input, an answer or a rationale.
pub(crate) async fn append(
    tx: &mut Transaction<'_, Postgres>,
    after: &Made<'_>,
    t: &NewTransition<'_>,
    before: &Progress,
    progress: &Progress,
) -> Result<(), sqlx::Error> {
    use tracing::Instrument as _;

    let traced = Traced::new(after, t, before, progress);
    let recorded_at: OffsetDateTime = sqlx::query_scalar(
        "INSERT INTO runner.run_transitions (transition_id, run_id, version, generation, \
         workflow_version, state_schema_version, source_state, target_state, trigger, actor, \
         cycle_id, capability, evidence_hashes, budget_delta, trace_id, span_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15, $16) \
         RETURNING recorded_at",
    )
    .bind(traced.transition_id)
    .bind(after.run_id)
    .bind(after.version)
    .bind(after.generation)
    .bind(after.workflow_version)
    .bind(after.state_schema_version)
    .bind(t.source_state)
    .bind(t.target_state)
    .bind(t.trigger)
    .bind(t.actor)
    .bind(traced.cycle_id)
    .bind(t.capability)
    .bind(&traced.evidence_hashes)
    .bind(&traced.budget_delta)
    .bind(&traced.trace_id)
    .bind(&traced.span_id)
    .fetch_one(&mut **tx)
    .instrument(traced.span.clone())
    .await?;
    traced.recorded(recorded_at);
    Ok(())
}

/// The trace fields of a transition about to be written, and the span (`runner.transition`)
/// that writes it, carrying them as attributes: computed before the write, so a state commit
/// can insert its transition row in the same statement as its fenced update.
pub(crate) struct Traced {
    pub transition_id: Uuid,
    pub cycle_id: i64,
    pub evidence_hashes: Vec<String>,
    /// JSON text.
    pub budget_delta: String,
    pub trace_id: String,
    pub span_id: String,
    pub span: tracing::Span,
}

impl Traced {
    /// The fields of transition `t` that makes `after` (the run's progress going from
    /// `before` to `progress`).
    pub(crate) fn new(
        after: &Made<'_>,
        t: &NewTransition<'_>,
        before: &Progress,
        progress: &Progress,
    ) -> Traced {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;

        let transition_id = Uuid::new_v4();
        let derived = trace::derive(before, progress);
        let evidence = derived.evidence_hashes.join(",");
        let budget_delta = derived.budget_delta.to_string();
        let checkpoint_id = format!("{}:{}", after.run_id, after.version);
        let span = tracing::info_span!(
            "runner.transition",
            run_id = %after.run_id,
            cycle_id = derived.cycle_id,
            workflow_version = %after.workflow_version,
            state_schema_version = %after.state_schema_version,
            transition_id = %transition_id,
            source_state = t.source_state,
            target_state = t.target_state,
            trigger = t.trigger,
            actor = t.actor,
            capability = t.capability,
            evidence_hashes = %evidence,
            budget_delta = %budget_delta,
            timestamp = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            span_id = tracing::field::Empty,
            checkpoint_id = %checkpoint_id,
            generation = after.generation,
        );
        let (trace_id, span_id) = {
            let cx = span.context();
            let sc = cx.span().span_context().clone();
            if sc.is_valid() {
                (sc.trace_id().to_string(), sc.span_id().to_string())
            } else {
                (String::new(), String::new())
            }
        };
        span.record("trace_id", trace_id.as_str());
        span.record("span_id", span_id.as_str());
        Traced {
            transition_id,
            cycle_id: derived.cycle_id,
            evidence_hashes: derived.evidence_hashes,
            budget_delta,
            trace_id,
            span_id,
            span,
        }
    }

    /// The row was written at `recorded_at` (the database's clock).
    pub(crate) fn recorded(&self, recorded_at: OffsetDateTime) {
        self.span
            .record("timestamp", tracing::field::display(recorded_at));
    }
}

pub(super) const TRANSITION: &str = "t.sequence, t.transition_id, t.run_id, t.version, t.generation, \
     t.source_state, t.target_state, t.trigger, t.actor, t.workflow_version, \
     t.state_schema_version, t.recorded_at, t.cycle_id, t.capability, t.evidence_hashes, \
     t.budget_delta::text AS budget_delta, t.trace_id, t.span_id";

pub(super) fn transition(r: &sqlx::postgres::PgRow) -> Result<TransitionRow, sqlx::Error> {
    Ok(TransitionRow {
        sequence: r.try_get("sequence")?,
        transition_id: r.try_get("transition_id")?,
        run_id: r.try_get("run_id")?,
        version: r.try_get("version")?,
        generation: r.try_get("generation")?,
        source_state: r.try_get("source_state")?,
        target_state: r.try_get("target_state")?,
        trigger: r.try_get("trigger")?,
        actor: r.try_get("actor")?,
        workflow_version: r.try_get("workflow_version")?,
        state_schema_version: r.try_get("state_schema_version")?,
        recorded_at: r.try_get("recorded_at")?,
        cycle_id: r.try_get("cycle_id")?,
        capability: r.try_get("capability")?,
        evidence_hashes: r.try_get("evidence_hashes")?,
        budget_delta: r.try_get("budget_delta")?,
        trace_id: r.try_get("trace_id")?,
        span_id: r.try_get("span_id")?,
    })
}

/// Transitions of run `id` after aggregate version `after`, in order (at most `limit`).
pub async fn transitions(
    pool: &PgPool,
    id: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<TransitionRow>, sqlx::Error> {
    let rows = sqlx::query(&format!(
        "SELECT {TRANSITION} FROM runner.run_transitions t WHERE t.run_id = $1 AND t.version > $2 \
          ORDER BY t.version LIMIT $3"
    ))
    .bind(id)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.iter().map(transition).collect()
}
