//! Asking Ward over gRPC (every office but Ward itself).
//!
//! Authorization questions are batched (issue 31): one task per verifier sends the questions
//! of this office's callers to Ward, one `AuthorizeBatch` call at a time. A question asked
//! while no call is in flight is sent at once (alone); the questions asked while one is in
//! flight go together in the next (up to [`MAX_BATCH`]). Nothing is cached or answered here:
//! every question is decided by Ward from a statement that starts after it was asked, so a
//! revocation committed before the question is seen. The batch carries the trace context of
//! its first question.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use lychd_proto::ward::v1::authenticate_response::Result as AuthResult;
use lychd_proto::ward::v1::authorize_answer::Result as Answer;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_proto::ward::v1::{self as pb, AuthenticateRequest};
use secrecy::ExposeSecret;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;

use crate::credentials::SessionSource;
use crate::{AuthError, Decision, Principal, Query, Verifier};

/// Questions one `AuthorizeBatch` call carries at most: Ward refuses more (`QUESTIONS_INVALID`),
/// by this same constant.
pub const MAX_BATCH: usize = 256;
/// `AuthorizeBatch` calls in flight at once, at most. One: with two, an office's `Reduce` cost
/// a tenth to a quarter more CPU (smaller batches, each paying Ward's per-call work; ADR 0006).
const IN_FLIGHT: usize = 1;
/// Questions waiting for the batching task at most (then askers wait: backpressure).
const QUEUE: usize = 1024;

/// Ward over gRPC, called with this office's own session.
#[derive(Clone)]
pub struct WardVerifier {
    client: WardClient<Channel>,
    session: SessionSource,
    /// The batching task's queue, started by the first question.
    batcher: Arc<OnceLock<mpsc::Sender<Pending>>>,
    sent: Arc<Sent>,
}

/// How much batching happened: `AuthorizeBatch` calls made and the questions they carried.
#[derive(Debug, Default)]
pub struct Sent {
    pub calls: AtomicU64,
    pub questions: AtomicU64,
}

/// A question waiting for its batch: the audience it is about, the question, the trace context
/// it was asked in, and where its answer goes.
struct Pending {
    audience: String,
    question: pb::AuthorizeQuestion,
    trace: MetadataMap,
    reply: oneshot::Sender<Result<Decision, AuthError>>,
}

impl WardVerifier {
    pub fn new(channel: Channel, session: SessionSource) -> Self {
        WardVerifier {
            client: WardClient::new(channel),
            session,
            batcher: Arc::new(OnceLock::new()),
            sent: Arc::default(),
        }
    }

    /// The `AuthorizeBatch` calls made so far and the questions they carried (for tests and
    /// benchmarks).
    pub fn sent(&self) -> (u64, u64) {
        (
            self.sent.calls.load(Ordering::Relaxed),
            self.sent.questions.load(Ordering::Relaxed),
        )
    }

    /// The batching task's queue (the task starts with the first question).
    fn batcher(&self) -> &mpsc::Sender<Pending> {
        self.batcher.get_or_init(|| {
            let (queue, pending) = mpsc::channel(QUEUE);
            let to = (self.client.clone(), self.session.clone(), self.sent.clone());
            tokio::spawn(batch(to, pending));
            queue
        })
    }

    fn request<T>(&self, message: T) -> Result<tonic::Request<T>, AuthError> {
        let mut trace = MetadataMap::new();
        crate::inject_trace(&mut trace);
        request(&self.session, message, trace)
    }
}

/// `message` with this office's session as the bearer, in the trace context `trace` holds.
fn request<T>(
    session: &SessionSource,
    message: T,
    trace: MetadataMap,
) -> Result<tonic::Request<T>, AuthError> {
    let token = session
        .current()
        .ok_or_else(|| AuthError::Unavailable("no session with ward yet".into()))?;
    let mut request = tonic::Request::new(message);
    *request.metadata_mut() = trace;
    let value = format!("Bearer {}", token.expose_secret())
        .parse()
        .map_err(|_| AuthError::Unavailable("session token is not a header value".into()))?;
    request.metadata_mut().insert("authorization", value);
    Ok(request)
}

/// The batching task: takes the first question waiting and — once one of [`IN_FLIGHT`] call
/// slots is free — every question queued behind it (up to [`MAX_BATCH`]), and asks them in one
/// call per audience.
async fn batch(
    (client, session, sent): (WardClient<Channel>, SessionSource, Arc<Sent>),
    mut pending: mpsc::Receiver<Pending>,
) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(first) = pending.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match pending.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        sent.questions
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        // An office asks about tokens presented to itself: one audience, one call.
        let mut by_audience: BTreeMap<String, Vec<Pending>> = BTreeMap::new();
        for p in batch {
            by_audience.entry(p.audience.clone()).or_default().push(p);
        }
        sent.calls
            .fetch_add(by_audience.len() as u64, Ordering::Relaxed);
        let (client, session) = (client.clone(), session.clone());
        tokio::spawn(async move {
            for (audience, same) in by_audience {
                ask(&client, &session, audience, same).await;
            }
            drop(slot);
        });
    }
}

/// One `AuthorizeBatch` call of `batch` (all about `audience`); each question gets its answer
/// (or the call's failure, as `Authorize` would have failed).
async fn ask(
    client: &WardClient<Channel>,
    session: &SessionSource,
    audience: String,
    batch: Vec<Pending>,
) {
    let mut replies = Vec::with_capacity(batch.len());
    let mut questions = Vec::with_capacity(batch.len());
    let mut trace = None;
    for p in batch {
        trace.get_or_insert(p.trace);
        questions.push(p.question);
        replies.push(p.reply);
    }
    let message = pb::AuthorizeBatchRequest {
        audience,
        questions,
    };
    let answers = match request(session, message, trace.unwrap_or_default()) {
        Ok(request) => client
            .clone()
            .authorize_batch(request)
            .await
            .map(|a| a.into_inner().answers)
            .map_err(unavailable),
        Err(e) => Err(e),
    };
    match answers {
        Ok(answers) if answers.len() == replies.len() => {
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(decision(answer));
            }
        }
        Ok(_) => {
            for reply in replies {
                let _ = reply.send(Err(AuthError::Unavailable("answers do not match".into())));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

/// One answer of a batch, as `Authorize`'s answer (or refusal) would have been taken.
fn decision(answer: pb::AuthorizeAnswer) -> Result<Decision, AuthError> {
    match answer.result {
        Some(Answer::Decided(d)) => Ok(Decision {
            allowed: d.decision == pb::Decision::Allow as i32,
            reason: d.reason,
            principal: d.principal.map(principal_of),
            policy_generation: d.policy_generation,
            revocation_generation: d.revocation_generation,
        }),
        // What `Authorize` refuses with `INVALID_ARGUMENT`.
        Some(Answer::Refused(_)) => Err(unavailable(tonic::Status::invalid_argument(""))),
        None => Err(AuthError::Unavailable("empty answer".into())),
    }
}

pub(crate) fn principal_of(p: pb::Principal) -> Principal {
    let kind = pb::PrincipalKind::try_from(p.kind)
        .map(|k| {
            k.as_str_name()
                .trim_start_matches("PRINCIPAL_KIND_")
                .to_ascii_lowercase()
        })
        .unwrap_or_else(|_| "unknown".into());
    Principal {
        id: p.id,
        kind,
        name: p.name,
        policy_generation: p.policy_generation,
        revocation_generation: p.revocation_generation,
    }
}

fn unavailable(status: tonic::Status) -> AuthError {
    AuthError::Unavailable(format!("{:?}", status.code()))
}

#[tonic::async_trait]
impl Verifier for WardVerifier {
    async fn authenticate(&self, token: &str, audience: &str) -> Result<Principal, AuthError> {
        let request = self.request(AuthenticateRequest {
            token: token.to_owned(),
            audience: audience.to_owned(),
        })?;
        let answer = self
            .client
            .clone()
            .authenticate(request)
            .await
            .map_err(unavailable)?
            .into_inner();
        match answer.result {
            Some(AuthResult::Authenticated(a)) => a
                .principal
                .map(principal_of)
                .ok_or_else(|| AuthError::Unavailable("empty answer".into())),
            Some(AuthResult::Refused(r)) => Err(AuthError::Unauthenticated(r.reason)),
            None => Err(AuthError::Unavailable("empty answer".into())),
        }
    }

    async fn authorize(&self, query: &Query<'_>) -> Result<Decision, AuthError> {
        let (reply, answer) = oneshot::channel();
        let mut trace = MetadataMap::new();
        crate::inject_trace(&mut trace);
        let pending = Pending {
            audience: query.audience.to_owned(),
            question: pb::AuthorizeQuestion {
                token: query.token.to_owned(),
                action: query.action.to_owned(),
                object: query.object.to_owned(),
                purpose: query.purpose.to_owned(),
                expected_policy_generation: query.expected_policy_generation,
            },
            trace,
            reply,
        };
        self.batcher()
            .send(pending)
            .await
            .map_err(|_| AuthError::Unavailable("the batching task ended".into()))?;
        answer
            .await
            .map_err(|_| AuthError::Unavailable("the batching task ended".into()))?
    }
}
