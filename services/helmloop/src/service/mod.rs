//! The office's use cases: verify and append records, reduce inline or stored records, store
//! and read evaluations, validate, digest and run the embedded conformance suite. The only
//! caller of `store/`. CPU work (parsing, verification, reduction) runs under the bounded
//! [`Workers`] pool, off the async runtime's threads, so one large bundle never stalls other
//! calls; only an inline input of at most [`INLINE_BYTES`] is reduced on the runtime thread
//! that received it (a fraction of a millisecond).

mod metrics;
mod suites;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lychd_helmloop::adapter::Adapter;
use lychd_helmloop::adapter::suite::AdapterReport;
use lychd_helmloop::conformance::{Case, Report, parse_manifest};
use lychd_helmloop::validate::{Report as ValidationReport, validate_document_with};
use lychd_helmloop::{
    C14nError, Domain, EvaluationInput, ParseOptions, Value, canonical_for_domain,
    digest_canonical, parse_with, reduce, to_canonical_vec,
};
use lychd_runtime::refusal::Violations;
use sqlx::PgPool;
use tokio::sync::Semaphore;

use crate::config::Settings;
use crate::domain::input::{Binding, assemble, binding};
use crate::domain::record::{Defect, Verified, verify};
use crate::domain::summary::Summary;
use crate::error::{HelmLoopError, Result, c14n_reason, reasons};
use crate::store::{evaluations, records};

pub use suites::{run_adapter_suite, run_core_suite};

/// The stored shapes and store helpers the handlers use.
pub use crate::store::records::{Appended, Filter, FirstBody, Identity, Row, identities};
pub use crate::store::{timestamp_ms, timestamp_us};

/// Inline inputs this small are parsed and reduced on the runtime thread that received them
/// (about 0.35 ms of CPU at most; the baseline bundle of 21 kB takes 0.23 ms). Issue 31: with
/// the hop to a blocking thread and back a `Reduce` of the baseline cost 760 µs of CPU all
/// told, without it 573 µs (docs/helmloop.md, "Benchmark").
pub const INLINE_BYTES: usize = 32 * 1024;

/// A bounded pool for CPU work: `workers` jobs at once on tokio's blocking threads, at most
/// `queue` waiting; beyond that a job is refused `REDUCER_BUSY`.
pub struct Workers {
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    queue: usize,
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Workers {
    pub fn new(workers: usize, queue: usize) -> Workers {
        Workers {
            permits: Arc::new(Semaphore::new(workers.max(1))),
            waiting: AtomicUsize::new(0),
            queue,
        }
    }

    /// Run `job` on the pool.
    pub async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        self.run_where(false, job).await
    }

    /// Run `job` under the pool's bound: on the calling runtime thread when `small` (work of
    /// at most [`INLINE_BYTES`] of input, a fraction of a millisecond, which the hop to a
    /// blocking thread and back would make dearer), else on a blocking thread.
    pub async fn run_where<T: Send + 'static>(
        &self,
        small: bool,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        let permit = {
            if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.queue {
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                return Err(HelmLoopError::ReducerBusy);
            }
            let _waiting = Waiting(&self.waiting);
            self.permits
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| HelmLoopError::Interrupted)?
        };
        if small {
            let _permit = permit;
            return Ok(job());
        }
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            job()
        })
        .await
        .map_err(|_| HelmLoopError::Interrupted)
    }
}

/// A reduction and what it was computed from.
#[derive(Debug, Clone)]
pub struct Reduced {
    /// Canonical `ReductionResult`.
    pub result: Vec<u8>,
    pub summary: Summary,
    /// Canonical context (`null` when the input has none; empty for an inline reduction that
    /// is not stored).
    pub context: Vec<u8>,
    /// Canonical evaluation input, when asked for.
    pub input: Option<Vec<u8>>,
    /// Distinct stored bodies reduced (stored reductions).
    pub records: usize,
}

/// A conformance run.
#[derive(Debug, Clone)]
pub struct Conformance {
    pub passed: bool,
    pub total: usize,
    pub failed: usize,
    pub fixture_set_digest: String,
    pub report: Vec<u8>,
}

pub struct Service {
    pub settings: Settings,
    pool: PgPool,
    workers: Workers,
}

/// The violation of a defective record at `field`.
pub fn push_defect(v: &mut Violations, field: String, defect: &Defect) {
    match defect {
        Defect::Parse(e) => v.push(field, c14n_reason(e.code()), e.code().rule()),
        Defect::Version => v.push(
            field,
            reasons::RECORD_VERSION_UNSUPPORTED,
            "schemaVersion is not 0.1",
        ),
        Defect::Schema => v.push(
            field,
            reasons::RECORD_SCHEMA_INVALID,
            "not a v0.1 record under its entry schema",
        ),
        Defect::Digest => v.push(
            field,
            reasons::RECORD_DIGEST_MISMATCH,
            "digest differs from the recomputed record digest",
        ),
    }
}

fn parse_error(field: &str, e: &C14nError) -> HelmLoopError {
    HelmLoopError::invalid(field, c14n_reason(e.code()), e.code().rule())
}

impl Service {
    pub fn new(settings: Settings, pool: PgPool) -> Arc<Service> {
        let workers = Workers::new(settings.reduce_workers, settings.reduce_queue);
        Arc::new(Service {
            settings,
            pool,
            workers,
        })
    }

    /// Verify every record (strict parse, version, schema, digest) on the pool; every defect
    /// is one violation, `records[i]`.
    pub async fn verify_all(&self, bodies: Vec<Vec<u8>>) -> Result<Vec<Verified>> {
        let max = self.settings.max_record_bytes;
        self.workers
            .run(move || {
                let mut v = Violations::new();
                let mut ok = Vec::with_capacity(bodies.len());
                for (i, body) in bodies.iter().enumerate() {
                    match verify(body, max) {
                        Ok(r) => ok.push(r),
                        Err(d) => push_defect(&mut v, format!("records[{i}]"), &d),
                    }
                }
                v.finish(|| ok)
            })
            .await?
            .map_err(HelmLoopError::InvalidArgument)
    }

    /// The first stored body of each identity that has one.
    pub async fn first_bodies(
        &self,
        identities: &[records::Identity],
    ) -> Result<BTreeMap<records::Identity, records::FirstBody>> {
        Ok(records::first_bodies(&self.pool, identities).await?)
    }

    /// Store verified records for `principal`, authorized against `known` (the first bodies
    /// of their identities), after `recheck` (Ward asked again, immediately before the write)
    /// allows it. [`HelmLoopError::FirstBodiesChanged`] when an identity gained a first body
    /// since `known` was read: nothing is stored.
    pub async fn append(
        &self,
        verified: &[Verified],
        principal: &str,
        recheck: impl Future<Output = Result<()>>,
        known: &BTreeMap<records::Identity, records::FirstBody>,
    ) -> Result<Vec<records::Appended>> {
        recheck.await?;
        records::append(&self.pool, verified, principal, known)
            .await
            .map_err(|e| match e {
                records::AppendError::FirstBodiesChanged => HelmLoopError::FirstBodiesChanged,
                records::AppendError::Database(db) => HelmLoopError::Database(db),
            })
    }

    /// Parse and reduce an inline evaluation input on the pool; the canonical context is
    /// computed only when the evaluation is to be stored. `input` is taken as received (the
    /// request's own buffer, not a copy).
    pub async fn reduce_inline(
        &self,
        input: impl AsRef<[u8]> + Send + 'static,
        return_input: bool,
        store: bool,
    ) -> Result<Reduced> {
        let max = self.settings.max_input_bytes;
        let small = input.as_ref().len() <= INLINE_BYTES;
        let reduced = self
            .workers
            .run_where(small, move || {
                let parsed =
                    EvaluationInput::parse_with(input.as_ref(), ParseOptions { max_bytes: max })
                        .map_err(|e| parse_error("input", &e))?;
                let result = reduce(&parsed);
                let context = match parsed.value().get("context") {
                    Some(c) if store => to_canonical_vec(c)
                        .map_err(|_| HelmLoopError::Internal("a parsed context serializes"))?,
                    Some(_) => Vec::new(),
                    None => b"null".to_vec(),
                };
                let input = match return_input {
                    true => Some(
                        to_canonical_vec(parsed.value())
                            .map_err(|_| HelmLoopError::Internal("a parsed input serializes"))?,
                    ),
                    false => None,
                };
                Ok(Reduced {
                    result: result.to_json().into_bytes(),
                    summary: Summary::of(&result),
                    context,
                    input,
                    records: 0,
                })
            })
            .await?;
        metrics::reduced(&reduced, "inline");
        reduced
    }

    /// Parse a context (at most `max_record_bytes`) and the subject and revision it binds.
    pub async fn parse_context(&self, context: Vec<u8>) -> Result<(Value, Binding)> {
        let max = self.settings.max_record_bytes;
        self.workers
            .run(move || {
                let value = parse_with(&context, ParseOptions { max_bytes: max })
                    .map_err(|e| parse_error("context", &e))?;
                let b = binding(&value).ok_or_else(|| {
                    HelmLoopError::invalid(
                        "context",
                        reasons::CONTEXT_UNBOUND,
                        "needs subject.id and revision.id identifiers",
                    )
                })?;
                Ok((value, b))
            })
            .await?
    }

    /// Reduce every stored body bound to `binding` under `context`.
    pub async fn reduce_stored(
        &self,
        context: Value,
        binding: &Binding,
        return_input: bool,
    ) -> Result<Reduced> {
        let max = self.settings.max_stored_records;
        let max_bytes = self.settings.max_input_bytes;
        let bodies = records::bodies_bound_to(
            &self.pool,
            &binding.subject_id,
            &binding.revision_id,
            i64::try_from(max).unwrap_or(i64::MAX).saturating_add(1),
            i64::try_from(max_bytes).unwrap_or(i64::MAX),
        )
        .await?;
        if bodies.len() > max || bodies.iter().map(Vec::len).sum::<usize>() > max_bytes {
            return Err(HelmLoopError::StoredSetTooLarge);
        }
        let reduced = self
            .workers
            .run(move || {
                let context_bytes = to_canonical_vec(&context)
                    .map_err(|_| HelmLoopError::Internal("a parsed context serializes"))?;
                let (input, bytes) = assemble(context, &bodies)
                    .map_err(|_| HelmLoopError::Internal("stored bodies parse"))?;
                let result = reduce(&input);
                Ok(Reduced {
                    result: result.to_json().into_bytes(),
                    summary: Summary::of(&result),
                    context: context_bytes,
                    input: return_input.then_some(bytes),
                    records: bodies.len(),
                })
            })
            .await?;
        metrics::reduced(&reduced, "stored");
        reduced
    }

    /// Store `reduced` for `principal` after `recheck` allows it (idempotent per input digest).
    pub async fn store_evaluation(
        &self,
        reduced: &Reduced,
        binding: Option<&Binding>,
        principal: &str,
        recheck: impl Future<Output = Result<()>>,
    ) -> Result<()> {
        recheck.await?;
        evaluations::store(
            &self.pool,
            &evaluations::NewEvaluation {
                input_digest: &reduced.summary.input_digest,
                disposition: &reduced.summary.disposition,
                result: &reduced.result,
                context: &reduced.context,
                subject_id: binding.map(|b| b.subject_id.as_str()),
                revision_id: binding.map(|b| b.revision_id.as_str()),
                evaluated_by: principal,
            },
        )
        .await?;
        Ok(())
    }

    pub async fn get_record(&self, record_type: &str, id: &str) -> Result<Vec<records::Row>> {
        let rows = records::by_identity(&self.pool, record_type, id).await?;
        if rows.is_empty() {
            return Err(HelmLoopError::RecordNotFound);
        }
        Ok(rows)
    }

    pub async fn list_records(
        &self,
        filter: &records::Filter,
        after: i64,
        limit: i64,
        with_body: bool,
    ) -> Result<Vec<records::Row>> {
        Ok(records::list(&self.pool, filter, after, limit, with_body).await?)
    }

    /// A stored evaluation and its summary.
    pub async fn get_evaluation(
        &self,
        input_digest: &str,
    ) -> Result<(evaluations::Stored, Summary)> {
        let stored = evaluations::get(&self.pool, input_digest)
            .await?
            .ok_or(HelmLoopError::EvaluationNotFound)?;
        let result = stored.result.clone();
        let summary = self
            .workers
            .run(move || {
                lychd_helmloop::parse(&result)
                    .map(|v| Summary::from_value(&v))
                    .map_err(|_| HelmLoopError::Internal("a stored result parses"))
            })
            .await??;
        Ok((stored, summary))
    }

    /// What `helmloop validate` reports on `document`.
    pub async fn validate(&self, document: Vec<u8>) -> Result<ValidationReport> {
        let max = self.settings.max_input_bytes;
        self.workers
            .run(move || validate_document_with(&document, ParseOptions { max_bytes: max }))
            .await
    }

    /// The digest of `document` in `domain` and the canonical bytes it hashes.
    pub async fn digest(&self, document: Vec<u8>, domain: Domain) -> Result<(String, Vec<u8>)> {
        let max = self.settings.max_input_bytes;
        self.workers
            .run(move || {
                let value = parse_with(&document, ParseOptions { max_bytes: max })
                    .map_err(|e| parse_error("document", &e))?;
                let canonical = canonical_for_domain(domain, &value)
                    .map_err(|e| parse_error("document", &e))?;
                Ok((digest_canonical(domain, &canonical).render(), canonical))
            })
            .await?
    }

    /// Run the embedded core suite, exactly as `helmloop conformance --adapter core` does.
    pub async fn conformance_core(&self) -> Result<Conformance> {
        self.workers.run(run_core_suite).await
    }

    /// Run an embedded adapter suite, exactly as `helmloop conformance --adapter <name>` does.
    pub async fn conformance_adapter(&self, adapter: Adapter) -> Result<Conformance> {
        self.workers.run(move || run_adapter_suite(adapter)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job holding `workers`' only permit until the sender is used (or dropped).
    async fn occupy(
        workers: &Arc<Workers>,
    ) -> (
        std::sync::mpsc::Sender<()>,
        tokio::task::JoinHandle<Result<Option<()>>>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let w = workers.clone();
        let busy = tokio::spawn(async move { w.run(move || rx.recv().ok()).await });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        (tx, busy)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_refuses_and_a_free_worker_runs() {
        let workers = Arc::new(Workers::new(1, 1));
        let (tx, busy) = occupy(&workers).await;
        let queued = {
            let w = workers.clone();
            tokio::spawn(async move { w.run(|| 2).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(matches!(
            workers.run(|| 3).await,
            Err(HelmLoopError::ReducerBusy)
        ));
        tx.send(()).expect("release");
        assert!(busy.await.expect("join").is_ok());
        assert_eq!(queued.await.expect("join").expect("ran"), 2);
        assert_eq!(workers.run(|| 4).await.expect("ran"), 4);
    }

    /// A small job runs on the calling thread, but under the same permits and queue bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_job_runs_inline_under_the_same_bound() {
        let workers = Arc::new(Workers::new(1, 1));
        let here = std::thread::current().id();
        let ran_on = workers
            .run_where(true, std::thread::current)
            .await
            .expect("ran")
            .id();
        assert_eq!(ran_on, here, "a small job runs where it was asked");
        let elsewhere = workers
            .run_where(false, std::thread::current)
            .await
            .expect("ran")
            .id();
        assert_ne!(elsewhere, here, "a large one on a blocking thread");

        let (tx, busy) = occupy(&workers).await;
        let queued = {
            let w = workers.clone();
            tokio::spawn(async move { w.run_where(true, || 2).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!queued.is_finished(), "a small job waits for a permit too");
        assert!(matches!(
            workers.run_where(true, || 3).await,
            Err(HelmLoopError::ReducerBusy)
        ));
        tx.send(()).expect("release");
        assert!(busy.await.expect("join").is_ok());
        assert_eq!(queued.await.expect("join").expect("ran"), 2);
    }
}
