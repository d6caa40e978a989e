//! The contract's trace fields (`trace.transition_fields`) on every transition: in its row,
//! answered by `ListRunTransitions`, and as attributes of the span that commits it (captured
//! here by a test subscriber with an OpenTelemetry layer); the input's text appears in no row,
//! span or log. Provenance snapshots: the input's, digest only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use lychd_proto::runner::v1 as pb;
use lychd_runner::config::Settings;
use lychd_runner::domain::fsm::Fsm;
use lychd_runner::domain::trace::TRANSITION_FIELDS;
use lychd_runner::service::Service;
use lychd_runner::service::driver::{Driver, Stopped};
use lychd_runner::store::leases;
use opentelemetry::trace::TracerProvider as _;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::common::*;
use crate::steps::TASKS;

/// A closed span: its name and fields.
type Closed = (String, BTreeMap<String, String>);

/// Every span (name and fields, as recorded by its close) and every event's fields.
#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<Closed>>>,
    events: Arc<Mutex<Vec<String>>>,
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        attrs.record(&mut f);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(f);
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(f) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(f);
        }
    }
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        self.events
            .lock()
            .expect("events")
            .push(format!("{:?}", f.0));
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span
                .extensions()
                .get::<Fields>()
                .map(|f| f.0.clone())
                .unwrap_or_default();
            self.spans
                .lock()
                .expect("spans")
                .push((span.name().to_owned(), fields));
        }
    }
}

const SECRET: &str = "SECRET-INPUT-7d1f-do-not-trace";
const RATIONALE_MARK: &str = "rationale-mark-93ab";
const RATIONALE: &str = "inspected by hand: fail it (rationale-mark-93ab)";

#[tokio::test]
async fn every_transition_carries_the_contract_trace_fields_in_its_row_and_its_span() {
    let capture = Capture::default();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry()
        .with(capture.clone())
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("runner-test")));
    let _guard = tracing::subscriber::set_default(subscriber);

    let mut s = crate::verified::stack().await;
    let run = s
        .client
        .start_run(pb::StartRunRequest {
            request_id: "trace-1".into(),
            workflow: TASKS.as_bytes().to_vec(),
            input: SECRET.as_bytes().to_vec(),
            budgets: None,
            timeout_seconds: 0,
            parent_run_id: String::new(),
        })
        .await
        .expect("start")
        .into_inner()
        .run
        .expect("run");
    let d = Driver::new(
        Service::new(s.spawned.ctx.pool.clone(), Fsm::bound().expect("fsm")),
        lychd_runner::model::Models::none(),
        Settings {
            drive: true,
            lease_ttl_ms: 60_000,
            poll_ms: 10,
            concurrency: 1,
            task_step_ms: 0,
            price_milli_per_1k_tokens: Default::default(),
            effects: Default::default(),
        },
    )
    .with_verifier(s.verifier());
    let claimed = leases::claim(&s.spawned.ctx.pool, d.holder(), 60_000)
        .await
        .expect("claim")
        .expect("a run");
    assert!(
        matches!(d.drive(claimed).await.expect("drive"), Stopped::Waiting(_)),
        "held for verification"
    );
    let uuid = uuid::Uuid::parse_str(&run.run_id).expect("uuid");
    crate::verified::drive_to_end(&s, &d, uuid).await;
    let t = transitions(&mut s.client, &run.run_id).await.expect("t");
    assert_eq!(t.last().expect("last").target_state, "SUCCEEDED");
    // The steps' 11 transitions through `ready_to_verify`, then the verifier's.
    let triggers: Vec<&str> = t.iter().map(|t| t.trigger.as_str()).collect();
    assert_eq!(triggers[10], "ready_to_verify", "{triggers:?}");
    assert!(
        crate::verified::verifier_tail(&triggers[11..]),
        "{triggers:?}"
    );

    // In every row (as answered): trace and span ids of OpenTelemetry, the checkpoint id, the
    // cycle, the evidence of a step's result and what it consumed.
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    for tr in &t {
        assert!(hex(&tr.trace_id, 32), "{tr:?}");
        assert!(hex(&tr.span_id, 16), "{tr:?}");
        assert_eq!(tr.checkpoint_id, format!("{}:{}", run.run_id, tr.version));
        assert!(tr.recorded_at.is_some());
        let delta: serde_json::Value = serde_json::from_str(&tr.budget_delta).expect("json");
        let steps = u64::from(tr.trigger == "plan_step");
        // A held verification's wait is suspended time, charged when it changes.
        let suspended = if tr.trigger == "verification_changed" {
            delta["suspended_ms"].as_u64().expect("suspended_ms")
        } else {
            0
        };
        assert_eq!(
            delta,
            // A task step entered is a step and a tool call.
            serde_json::json!({"steps": steps, "tokens": 0, "tool_calls": steps,
                "cost_milli": 0, "suspended_ms": suspended}),
            "{tr:?}"
        );
        let evidence = usize::from(tr.trigger == "step_result");
        assert_eq!(tr.evidence_hashes.len(), evidence, "{tr:?}");
        assert!(tr.evidence_hashes.iter().all(|h| hex(h, 64)));
        assert_eq!(tr.capability, "", "task steps use no capability");
    }
    // WatchRun streams the same rows, every field included.
    let mut stream = s
        .client
        .watch_run(pb::WatchRunRequest {
            run_id: run.run_id.clone(),
            after_sequence: 0,
        })
        .await
        .expect("watch")
        .into_inner();
    let mut watched = Vec::new();
    while let Some(tr) = stream.message().await.expect("a transition") {
        watched.push(tr);
    }
    assert_eq!(watched, t);
    let cycles: Vec<u64> = t.iter().map(|tr| tr.cycle_id).collect();
    assert_eq!(cycles[..11], [0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    assert!(cycles[11..].iter().all(|c| *c == 3), "{cycles:?}");

    // The span that committed each transition carries every field of the contract.
    let spans = capture.spans.lock().expect("spans").clone();
    let committed: Vec<&BTreeMap<String, String>> = spans
        .iter()
        .filter(|(name, f)| name == "runner.transition" && f.get("run_id") == Some(&run.run_id))
        .map(|(_, f)| f)
        .collect();
    assert_eq!(committed.len(), t.len());
    for f in &committed {
        for field in TRANSITION_FIELDS {
            assert!(f.contains_key(field), "{field} missing from {f:?}");
        }
        assert!(!f["timestamp"].is_empty());
    }
    let span_ids: BTreeSet<&str> = committed.iter().map(|f| f["span_id"].as_str()).collect();
    let row_ids: BTreeSet<&str> = t.iter().map(|tr| tr.span_id.as_str()).collect();
    assert_eq!(
        span_ids, row_ids,
        "the row names the span that committed it"
    );

    // A review's rationale is kept with the review, and in no span or log either.
    let other_run = start(&mut s.client, "trace-2", "").await;
    let mut db = s.db().await;
    sqlx::query("UPDATE runner.run_checkpoints SET body = '\\x00' WHERE run_id = $1::uuid")
        .bind(&other_run.run_id)
        .execute(&mut db)
        .await
        .expect("corrupt");
    let q = s
        .client
        .inspect_checkpoint(pb::InspectCheckpointRequest {
            run_id: other_run.run_id.clone(),
            version: 0,
        })
        .await
        .expect("inspect")
        .into_inner();
    assert_eq!(q.run.expect("run").state, "QUARANTINED");
    let (_, mut operator) = s.principal("operator", &["runner:review"]).await;
    let reviewed = operator
        .review_quarantine(pb::ReviewQuarantineRequest {
            run_id: other_run.run_id.clone(),
            decision: pb::ReviewDecision::Fail as i32,
            recovery_checksum: String::new(),
            rationale: RATIONALE.into(),
        })
        .await
        .expect("review")
        .into_inner();
    assert_eq!(reviewed.run.expect("run").state, "FAILED");

    // The input's text is in no span, no log event and no row of the office but its own.
    let events = capture.events.lock().expect("events").clone();
    let spans = capture.spans.lock().expect("spans").clone();
    assert!(!events.is_empty(), "the capture sees the office's logs");
    assert!(!format!("{spans:?}").contains(SECRET));
    assert!(!format!("{events:?}").contains(SECRET));
    assert!(
        events.iter().any(|e| e.contains("quarantine reviewed")),
        "the review is logged"
    );
    assert!(!format!("{spans:?}").contains(RATIONALE_MARK));
    assert!(!format!("{events:?}").contains(RATIONALE_MARK));
    let mut db = s.db().await;
    for table in [
        "run_transitions",
        "run_checkpoints",
        "provenance_snapshots",
        "run_reviews",
        "state_migrations",
    ] {
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM runner.{table} r \
              WHERE row_to_json(r)::text LIKE '%' || $1 || '%' \
                 OR row_to_json(r)::text LIKE '%' || encode(convert_to($1, 'UTF8'), 'hex') || '%'"
        ))
        .bind(SECRET)
        .fetch_one(&mut db)
        .await
        .expect("scan");
        assert_eq!(n, 0, "{table}");
    }
    let body_hits: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM runner.run_checkpoints WHERE position(convert_to($1, 'UTF8') in body) > 0",
    )
    .bind(SECRET)
    .fetch_one(&mut db)
    .await
    .expect("scan bodies");
    assert_eq!(body_hits, 0);

    // The input is a provenance snapshot: its digest, never its content.
    let p = s
        .client
        .list_provenance(pb::ListProvenanceRequest {
            run_id: run.run_id.clone(),
        })
        .await
        .expect("provenance")
        .into_inner()
        .snapshots;
    assert_eq!(p.len(), 1);
    let input = &p[0];
    assert_eq!(
        (
            input.source.as_str(),
            input.step.as_str(),
            input.content_sha256.as_str(),
            input.responsibility.as_str(),
            input.version
        ),
        (
            "input",
            "",
            run.input_sha256.as_str(),
            run.owner.as_str(),
            1
        )
    );
    assert!(!input.parser_version.is_empty());
    assert!(input.retrieved_at.is_some());
    // Another principal's run's provenance is not found.
    let (_, mut other) = s.principal("other", &["runner:read"]).await;
    refused(
        other
            .list_provenance(pb::ListProvenanceRequest {
                run_id: run.run_id.clone(),
            })
            .await,
        tonic::Code::NotFound,
        "RUN_NOT_FOUND",
    );
}
