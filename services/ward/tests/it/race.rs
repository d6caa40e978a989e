//! Revocation racing batched authorization: once a revocation's commit has returned, every
//! decision that starts afterwards denies. Many concurrent deciders share one batching
//! `Resolver` (as the office's callers do), so their questions are answered together, many per
//! statement, while the revocation commits; each records when its decision started and what it
//! was. The interleaving is drawn at random per case: which revocation, how long the deciders
//! run before it, and how many there are.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lychd_ward::domain::decision::Reason;
use lychd_ward::store::{assignments, credentials, principals, sessions};
use secrecy::ExposeSecret;
use uuid::Uuid;

use crate::common::{LEASE, Ward};

const DECIDERS: usize = 24;

#[derive(Clone, Copy, Debug)]
enum Revocation {
    Session,
    Credential,
    Principal,
    Assignment,
}

/// Decisions (start, allowed) from `deciders` tasks while `revoke` runs after `lead`; returns
/// them and the instant the revocation returned.
async fn race(
    w: &Ward,
    what: Revocation,
    name: &str,
    deciders: usize,
    lead: Duration,
) -> (Vec<(Instant, Reason)>, Instant, Reason) {
    let p = w.service(name).await;
    let assigned = w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    let (c, s) = w.session(p.id).await;
    let token = s.token.expose_secret().to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..deciders)
        .map(|_| {
            let resolver = w.resolver.clone();
            let log = w.log.clone();
            let token = token.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let d = lychd_ward::store::decisions::authorize(
                        &resolver,
                        &log,
                        &lychd_ward::store::decisions::Question {
                            token: &token,
                            action: LEASE.0,
                            object: LEASE.1,
                            audience: LEASE.2,
                            purpose: LEASE.3,
                            expected_policy_generation: None,
                            asked_by: None,
                        },
                    )
                    .await
                    .expect("decision");
                    out.push((started, d.reason));
                }
                out
            })
        })
        .collect();
    tokio::time::sleep(lead).await;
    let changed = match what {
        Revocation::Session => sessions::revoke(&w.pool, None, s.id).await.unwrap().changed,
        Revocation::Credential => {
            credentials::revoke(&w.pool, None, c.id)
                .await
                .unwrap()
                .changed
        }
        Revocation::Principal => {
            principals::revoke(&w.pool, None, p.id)
                .await
                .unwrap()
                .changed
        }
        Revocation::Assignment => {
            assignments::unassign(&w.pool, None, assigned.assignment.id)
                .await
                .unwrap()
                .changed
        }
    };
    let returned = Instant::now();
    assert!(changed);
    tokio::time::sleep(Duration::from_millis(150)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("decider"));
    }
    let expected = match what {
        Revocation::Session => Reason::SessionRevoked,
        Revocation::Credential => Reason::CredentialRevoked,
        Revocation::Principal => Reason::PrincipalRevoked,
        Revocation::Assignment => Reason::NoAssignment,
    };
    (all, returned, expected)
}

/// One drawn interleaving: decisions, each started before or after the revocation returned.
async fn check(w: &Ward, what: Revocation, deciders: usize, lead: Duration) {
    let name = format!("svc-{}", Uuid::new_v4().simple());
    let (decisions, returned, expected) = race(w, what, &name[..20], deciders, lead).await;
    let before = decisions.iter().filter(|(t, _)| *t < returned).count();
    let after: Vec<_> = decisions.iter().filter(|(t, _)| *t > returned).collect();
    let allowed_before = decisions
        .iter()
        .filter(|(t, r)| *t < returned && *r == Reason::Allowed)
        .count();
    assert!(
        allowed_before > 0,
        "{what:?}: the race must start from allowed decisions"
    );
    assert!(
        after.len() > deciders,
        "{what:?}: decisions must also start after the revocation ({})",
        after.len()
    );
    for (_, reason) in &after {
        assert_eq!(
            *reason, expected,
            "{what:?}: a decision started after the revocation returned"
        );
    }
    // Before: only allowed or the revocation's own reason (the commit point lies in between).
    assert!(
        decisions
            .iter()
            .all(|(_, r)| *r == Reason::Allowed || *r == expected)
    );
    eprintln!(
        "{what:?} ({deciders} deciders, {lead:?} lead): {before} decisions before, {} after the revocation returned",
        after.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_decision_started_after_a_revocation_returned_allows() {
    let w = Ward::with_pool(DECIDERS as u32 + 4).await;
    // Every revocation once, then drawn interleavings (a fixed seed, printed, so a failure
    // replays).
    for what in [
        Revocation::Session,
        Revocation::Credential,
        Revocation::Principal,
        Revocation::Assignment,
    ] {
        check(&w, what, DECIDERS, Duration::from_millis(150)).await;
    }
    let seed: u64 = std::env::var("RACE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0031);
    eprintln!("drawn interleavings: RACE_SEED={seed}");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    for _ in 0..8 {
        use rand::Rng;
        let what = [
            Revocation::Session,
            Revocation::Credential,
            Revocation::Principal,
            Revocation::Assignment,
        ][rng.random_range(0..4)];
        let deciders = rng.random_range(2..=DECIDERS);
        let lead = Duration::from_millis(rng.random_range(20..=200));
        check(&w, what, deciders, lead).await;
    }
    // The deciders' questions were answered together: fewer statements than questions, and
    // their equal questions bound once per statement.
    let b = w.resolver.batching();
    assert!(b.asks > b.statements, "decisions were not batched: {b:?}");
    assert!(b.bound < b.asks, "equal questions were bound apart: {b:?}");
    eprintln!("batching: {b:?}");
}

/// Equal and different questions asked together each get their own answer: a batch binds each
/// distinct question once and hands its row to every asker of it, never another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn questions_asked_together_are_answered_each_by_its_own_facts() {
    const SUBJECTS: usize = 6;
    let w = Ward::with_pool(12).await;
    let mut subjects = Vec::new();
    for i in 0..SUBJECTS {
        let p = w.service(&format!("mixed-{i}")).await;
        // Even subjects hold the lease; the last one's session is revoked.
        if i % 2 == 0 {
            w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
        }
        let (_, s) = w.session(p.id).await;
        if i == SUBJECTS - 1 {
            sessions::revoke(&w.pool, None, s.id).await.expect("revoke");
        }
        let expected = match i {
            i if i == SUBJECTS - 1 => Reason::SessionRevoked,
            i if i % 2 == 0 => Reason::Allowed,
            _ => Reason::NoAssignment,
        };
        subjects.push((p.id, s.token.expose_secret().to_owned(), expected));
    }
    let subjects = Arc::new(subjects);
    let before = w.resolver.batching();
    let tasks: Vec<_> = (0..48)
        .map(|t| {
            let (resolver, log, subjects) = (w.resolver.clone(), w.log.clone(), subjects.clone());
            tokio::spawn(async move {
                for k in 0..20 {
                    let (id, token, expected) = &subjects[(t + k) % SUBJECTS];
                    // Every third question asks about an object nobody holds.
                    let (object, expected) = if k % 3 == 0 {
                        (
                            "lease:other",
                            if *expected == Reason::Allowed {
                                Reason::NoAssignment
                            } else {
                                *expected
                            },
                        )
                    } else {
                        (LEASE.1, *expected)
                    };
                    let d = lychd_ward::store::decisions::authorize(
                        &resolver,
                        &log,
                        &lychd_ward::store::decisions::Question {
                            token,
                            action: LEASE.0,
                            object,
                            audience: LEASE.2,
                            purpose: LEASE.3,
                            expected_policy_generation: None,
                            asked_by: None,
                        },
                    )
                    .await
                    .expect("decision");
                    assert_eq!(d.reason, expected, "subject {id}, object {object}");
                    if expected != Reason::SessionRevoked {
                        assert_eq!(d.principal.map(|p| p.id), Some(*id), "another's answer");
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("decider");
    }
    let after = w.resolver.batching();
    let (statements, asks, bound) = (
        after.statements - before.statements,
        after.asks - before.asks,
        after.bound - before.bound,
    );
    assert_eq!(asks, 48 * 20);
    assert!(statements < asks, "not batched: {after:?}");
    assert!(bound < asks, "equal questions were bound apart: {after:?}");
    eprintln!("{statements} statements bound {bound} distinct of {asks} questions");
}

/// Issue 31, third round: the resolving statement is planned once per worker connection (a
/// generic plan), not afresh per statement — and a revocation is still seen by the next
/// decision, since a plan holds no data: only the snapshot each execution takes does.
#[tokio::test(flavor = "multi_thread")]
async fn the_resolving_statement_is_planned_once_and_still_reads_each_revocation() {
    let w = Ward::new().await;
    let p = w.service("planned").await;
    w.grant(p.id, LEASE.0, LEASE.1, LEASE.2, LEASE.3).await;
    let (_, s) = w.session(p.id).await;
    let token = s.token.expose_secret().to_owned();
    let question = lychd_ward::store::decisions::Question {
        token: &token,
        action: LEASE.0,
        object: LEASE.1,
        audience: LEASE.2,
        purpose: LEASE.3,
        expected_policy_generation: None,
        asked_by: None,
    };
    let decide = || lychd_ward::store::decisions::authorize(&w.resolver, &w.log, &question);
    // One at a time: each decision is a statement of its own.
    for _ in 0..12 {
        assert_eq!(decide().await.expect("decision").reason, Reason::Allowed);
    }
    sessions::revoke(&w.pool, None, s.id).await.expect("revoke");
    assert_eq!(
        decide().await.expect("decision").reason,
        Reason::SessionRevoked,
        "the decision after the revocation read it"
    );
    let statements = w.resolver.batching().statements;
    let (generic, custom) = w.resolver.plans().await.expect("plans");
    assert_eq!(statements, 13);
    assert_eq!(custom, 0, "the statement was planned per execution");
    assert_eq!(
        generic, 13,
        "every statement ran on the worker's one connection"
    );
}
