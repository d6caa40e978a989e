//! One Orchestrator per host, fenced (issue 25, point 2): two real Orchestrator processes
//! configured for one host — the second stands by (refuses to actuate, says so in health and
//! `Describe`) until the first is killed with SIGKILL and its lease lapses, then takes the
//! host over under the next generation and contains the transition the first left open; and
//! the store's fence refusing a write under a stale generation.

use std::time::Duration;

use lychd_orchestrator::domain::phase::TransitionPhase;
use lychd_orchestrator::store::lease::{self, Fence};
use lychd_orchestrator::store::resources::{NewEvent, append};
use lychd_proto::orchestrator::v1 as pb;
use lychd_proto::orchestrator::v1::orchestrator_client::OrchestratorClient;
use lychd_runtime::Office;
use lychd_testkit::channel_with;
use lychd_testkit::simllama::UnitFaults;
use nix::sys::signal::Signal;
use tonic::Code;

use crate::common::{Client, eventually, next, reason, rid, stack, three};

/// The office's own service name, which a standby holds back.
const SERVICE: &str = "lychd.orchestrator.v1.Orchestrator";

/// `service`'s health status at `endpoint` (1 SERVING, 2 NOT_SERVING).
async fn health(endpoint: &str, service: &str) -> i32 {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
        .expect("endpoint")
        .connect()
        .await
        .expect("connects");
    HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health answers")
        .into_inner()
        .status
}

async fn lease_of(c: &Client) -> pb::HostLease {
    c.clone()
        .describe(pb::DescribeRequest {
            include_peers: false,
        })
        .await
        .expect("describe")
        .into_inner()
        .host_lease
        .expect("the host lease")
}

fn to_a() -> pb::RequestTransitionRequest {
    pb::RequestTransitionRequest {
        request_id: rid(),
        wait_ms: crate::common::WAIT,
        capability_key: "a:chat:m".into(),
        priority: 50,
        admission_timeout_s: None,
    }
}

#[tokio::test]
async fn a_second_orchestrator_stands_by_and_takes_the_host_over_after_a_kill() {
    let mut s = stack(&three(true)).await;
    let standby = s.sandbox.start_another(Office::Orchestrator).await;
    let second: Client =
        OrchestratorClient::new(channel_with(&standby.endpoint(), &s.sandbox.token));

    // The first holds the lease; the second stands by, naming the holder.
    let held = lease_of(&s.client).await;
    assert_eq!(held.standing(), pb::HostLeaseStanding::Holding);
    assert_eq!(held.holder, held.this_holder);
    assert_eq!(held.host_id, "local");
    let generation = held.generation;
    assert!(generation >= 1);
    let waiting = lease_of(&second).await;
    assert_eq!(waiting.standing(), pb::HostLeaseStanding::Standby);
    assert_eq!(waiting.holder, held.this_holder);
    assert_ne!(waiting.this_holder, held.this_holder);
    assert_eq!(waiting.generation, generation);
    // Health: the standby's server answers, its office's service does not serve.
    let first_endpoint = s.sandbox.office(Office::Orchestrator).endpoint();
    assert_eq!(health(&first_endpoint, SERVICE).await, 1);
    assert_eq!(health(&standby.endpoint(), SERVICE).await, 2);
    assert_eq!(health(&standby.endpoint(), "").await, 1);

    // The standby refuses to actuate, precisely, and serves reads.
    let e = second
        .clone()
        .request_transition(to_a())
        .await
        .expect_err("standby");
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert_eq!(reason(&e), "HOST_LEASE_NOT_HELD");
    let e = second
        .clone()
        .cancel_transition(pb::CancelTransitionRequest {
            transition_id: "0".repeat(32),
            wait_ms: None,
        })
        .await
        .expect_err("standby");
    assert_eq!(reason(&e), "HOST_LEASE_NOT_HELD");
    let e = second
        .clone()
        .recover_containment(pb::RecoverContainmentRequest { containment_id: 1 })
        .await
        .expect_err("standby");
    assert_eq!(reason(&e), "HOST_LEASE_NOT_HELD");
    second
        .clone()
        .list_transitions(pb::ListTransitionsRequest::default())
        .await
        .expect("reads are served");

    // The holder starts a hard swap and is killed while the host starts `a`.
    s.host
        .set_faults(
            "a",
            UnitFaults {
                start_latency: Duration::from_millis(3000),
                ..UnitFaults::default()
            },
        )
        .await;
    let mut events = s.watch().await;
    let c = s.client.clone();
    let pending = tokio::spawn(async move { c.clone().request_transition(to_a()).await });
    let actuating = loop {
        let e = next(&mut events).await;
        if e.phase() == pb::TransitionPhase::Actuating {
            break e;
        }
    };
    eventually("a's start reached the host", || async {
        s.host.counts("a").await.0 > 0
    })
    .await;
    s.sandbox
        .office(Office::Orchestrator)
        .signal(Signal::SIGKILL);
    s.sandbox
        .office_mut(Office::Orchestrator)
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the holder exits");
    assert!(
        pending.await.expect("task").is_err(),
        "its caller lost the answer"
    );

    // Once the lease lapses the standby takes the host over under the next generation.
    eventually("the standby takes the host over", || async {
        lease_of(&second).await.standing() == pb::HostLeaseStanding::Holding
    })
    .await;
    let taken = lease_of(&second).await;
    assert_eq!(taken.generation, generation + 1);
    assert_eq!(taken.holder, waiting.this_holder);
    assert_eq!(health(&standby.endpoint(), SERVICE).await, 1);

    // The open transition is contained as a restart contains it; nothing reopened.
    let t = second
        .clone()
        .get_transition(pb::GetTransitionRequest {
            transition_id: actuating.transition_id.clone(),
        })
        .await
        .expect("get")
        .into_inner()
        .transition
        .expect("transition");
    assert_eq!(t.phase(), pb::TransitionPhase::ContainedUncertain);
    assert_eq!(t.detail, "INTERRUPTED");
    assert!(t.settled);
    let contained = second
        .clone()
        .list_containments(pb::ListContainmentsRequest {
            include_recovered: false,
        })
        .await
        .expect("list")
        .into_inner()
        .containments;
    assert_eq!(contained.len(), 1);
    assert_eq!(contained[0].cause, "INTERRUPTED");
    assert!(
        s.open_closures("a").await > 0 && s.open_closures("b").await > 0,
        "no reopen"
    );
    let e = second
        .clone()
        .request_transition(to_a())
        .await
        .expect_err("fenced by the containment");
    assert_eq!(reason(&e), "TRANSITION_CONTAINED");

    // The new holder recovers it (the host finished `a`'s start) and actuates again.
    eventually("a's start completes", || s.host.ready("a")).await;
    let r = second
        .clone()
        .recover_containment(pb::RecoverContainmentRequest {
            containment_id: contained[0].containment_id,
        })
        .await
        .expect("proven")
        .into_inner();
    assert_eq!(r.proved, "DESIRED");
    s.host.set_faults("a", UnitFaults::default()).await;
    let o = second
        .clone()
        .request_transition(pb::RequestTransitionRequest {
            capability_key: "b:chat:m".into(),
            ..to_a()
        })
        .await
        .expect("the new holder actuates")
        .into_inner()
        .outcome
        .expect("outcome");
    assert_eq!(o.phase(), pb::TransitionPhase::Completed, "{o:?}");
    assert!(s.host.ready("b").await && !s.host.running("a").await);
    standby.stop().await.expect("stops");
}

fn event(id: &str) -> NewEvent<'_> {
    NewEvent {
        transition_id: id,
        capability_key: "a:chat:m",
        priority: 50,
        phase: TransitionPhase::Requested,
        detail: "",
        plan: None,
    }
}

#[tokio::test]
async fn a_write_under_a_stale_generation_is_refused_and_changes_nothing() {
    let db = lychd_testkit::test_db_for(&[lychd_orchestrator::spec()]).await;
    let opts = lychd_runtime::db::connect_options(
        &db.runtime_url(Office::Orchestrator),
        None,
        Office::Orchestrator,
    )
    .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 4)
        .await
        .expect("runtime role connects");
    let ttl = Duration::from_secs(60);
    let fence = |holder: &str, generation| Fence {
        host_id: "h".into(),
        holder: holder.into(),
        generation,
    };
    // One statement takes the lease; a second holder is refused while it runs.
    assert_eq!(
        lease::acquire(&pool, "h", "one", ttl).await.expect("db"),
        Some(1)
    );
    assert_eq!(
        lease::acquire(&pool, "h", "two", ttl).await.expect("db"),
        None
    );
    let (one, two) = (fence("one", 1), fence("two", 2));
    let id = "0123456789abcdef0123456789abcdef";
    append(&pool, &one, &event(id))
        .await
        .expect("the holder writes");
    // Another holder's fence (not held) is refused.
    let e = append(&pool, &two, &event(id)).await.expect_err("not held");
    assert!(lease::not_held(&e), "{e}");

    // The lease lapses and the other process takes over: generation 2.
    lease::release(&pool, &one).await.expect("lapse");
    assert_eq!(
        lease::acquire(&pool, "h", "two", ttl).await.expect("db"),
        Some(2)
    );
    let e = append(&pool, &one, &event(id))
        .await
        .expect_err("stale generation");
    assert!(lease::not_held(&e), "{e}");
    let e = lychd_orchestrator::store::contain_interrupted(&pool, &one)
        .await
        .expect_err("stale generation");
    assert!(lease::not_held(&e), "{e}");
    assert!(
        !lease::renew(&pool, &one, ttl).await.expect("db"),
        "taken over"
    );
    append(&pool, &two, &event(id))
        .await
        .expect("the new holder writes");
    assert!(lease::renew(&pool, &two, ttl).await.expect("db"));
    // Exactly the holders' writes, each under its generation.
    let generations: Vec<Option<i64>> = sqlx::query_scalar(
        "SELECT generation FROM orchestrator.transition_events ORDER BY sequence",
    )
    .fetch_all(&pool)
    .await
    .expect("read");
    assert_eq!(generations, vec![Some(1), Some(2)]);
    let current = lease::current(&pool, "h").await.expect("db").expect("row");
    assert_eq!((current.holder.as_str(), current.generation), ("two", 2));
}

#[tokio::test]
async fn a_holder_whose_generation_is_taken_stops_reports_it_and_takes_the_host_over_again() {
    let s = stack(&three(true)).await;
    let before = lease_of(&s.client).await;
    s.host
        .set_faults(
            "a",
            UnitFaults {
                start_latency: Duration::from_millis(3000),
                ..UnitFaults::default()
            },
        )
        .await;
    let mut events = s.watch().await;
    let c = s.client.clone();
    let pending = tokio::spawn(async move { c.clone().request_transition(to_a()).await });
    let actuating = loop {
        let e = next(&mut events).await;
        if e.phase() == pb::TransitionPhase::Actuating {
            break e;
        }
    };
    // Another holder takes the host's lease (as a process would after a lapse) while the
    // actuator call is in flight.
    let opts = lychd_runtime::db::connect_options(
        &s.sandbox.db.runtime_url(Office::Orchestrator),
        None,
        Office::Orchestrator,
    )
    .expect("runtime url");
    let pool = lychd_runtime::db::pool(opts, 1).await.expect("connects");
    let taken: i64 = sqlx::query_scalar(
        "UPDATE orchestrator.host_leases SET holder = 'intruder', generation = generation + 1, \
         expires_at = now() + interval '3 seconds' WHERE host_id = 'local' RETURNING generation",
    )
    .fetch_one(&pool)
    .await
    .expect("taken");
    assert_eq!(taken as u64, before.generation + 1);

    // Its next recorded phase is refused: the caller hears the loss, never a success.
    let e = pending
        .await
        .expect("task")
        .expect_err("the outcome is not this process's to tell");
    assert_eq!(reason(&e), "HOST_LEASE_NOT_HELD");
    let lost = lease_of(&s.client).await;
    assert_eq!(lost.standing(), pb::HostLeaseStanding::Lost);
    assert_eq!(lost.holder, "intruder");
    let endpoint = s.sandbox.office(Office::Orchestrator).endpoint();
    assert_eq!(health(&endpoint, SERVICE).await, 2);
    let e = s
        .client
        .clone()
        .request_transition(to_a())
        .await
        .expect_err("lost");
    assert_eq!(reason(&e), "HOST_LEASE_NOT_HELD");
    assert!(
        s.open_closures("a").await > 0 && s.open_closures("b").await > 0,
        "nothing reopened under a lost generation"
    );

    // Once the intruder's lease lapses the process takes the host over again, under a new
    // generation, and contains what the lost one left open.
    eventually("the host is taken over again", || async {
        lease_of(&s.client).await.standing() == pb::HostLeaseStanding::Holding
    })
    .await;
    let again = lease_of(&s.client).await;
    assert_eq!(again.generation, before.generation + 2);
    assert_eq!(again.holder, before.this_holder);
    assert_eq!(health(&endpoint, SERVICE).await, 1);
    let t = s
        .client
        .clone()
        .get_transition(pb::GetTransitionRequest {
            transition_id: actuating.transition_id,
        })
        .await
        .expect("get")
        .into_inner()
        .transition
        .expect("transition");
    assert_eq!(t.phase(), pb::TransitionPhase::ContainedUncertain);
    assert_eq!(t.detail, "INTERRUPTED");
    let generations: Vec<Option<i64>> =
        sqlx::query_scalar("SELECT generation FROM orchestrator.containments ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("read");
    assert_eq!(generations, vec![Some(again.generation as i64)]);
}

#[tokio::test]
async fn a_graceful_stop_lets_the_lease_lapse_at_once() {
    // A TTL far beyond the wait below: only the stop's release lets the standby in.
    let mut s = crate::common::stack_with(&three(true), "host_lease_ttl_ms = 600000\n").await;
    let standby = s.sandbox.start_another(Office::Orchestrator).await;
    let second: Client =
        OrchestratorClient::new(channel_with(&standby.endpoint(), &s.sandbox.token));
    let generation = lease_of(&s.client).await.generation;
    assert_eq!(
        lease_of(&second).await.standing(),
        pb::HostLeaseStanding::Standby
    );
    s.sandbox
        .office(Office::Orchestrator)
        .signal(Signal::SIGTERM);
    s.sandbox
        .office_mut(Office::Orchestrator)
        .wait_exit(Duration::from_secs(15))
        .await
        .expect("the holder stops");
    // The standby asks for the lease at least every second: it takes the released lease.
    eventually("the standby takes the released lease", || async {
        lease_of(&second).await.standing() == pb::HostLeaseStanding::Holding
    })
    .await;
    let taken = lease_of(&second).await;
    assert_eq!(taken.generation, generation + 1);
    assert_eq!(health(&standby.endpoint(), SERVICE).await, 1);
    standby.stop().await.expect("stops");
}
