//! Retention while leases flow (issue 30 item 3): the office's own job, configured with ages of
//! two seconds and a round every second, deletes ended leases (released, or expired), their
//! events and requests and reopened closures once they are older than that — and never a live
//! lease, its dispatch event or an open closure, whatever the traffic does meanwhile.

use std::time::{Duration, Instant};

use lychd_proto::dispatcher::v1 as pb;
use lychd_testkit::simllama::SimLlama;
use uuid::Uuid;

use crate::common::*;

const RETENTION: &str = "interval_seconds = 1\nbatch_size = 7\npause_ms = 0\n\
    [keep_seconds]\nleases = 2\ndispatch_events = 2\nlease_requests = 2\nclosures = 2\n";

fn held(holder: &str, ttl: u32) -> pb::LeaseRequest {
    pb::LeaseRequest {
        holder: holder.into(),
        ttl_seconds: ttl,
        ..request(exact("gpu0:chat:m"))
    }
}

fn renew(id: &str, holder: &str) -> pb::RenewLeaseRequest {
    pb::RenewLeaseRequest {
        lease_id: id.into(),
        holder: holder.into(),
        ttl_seconds: 60,
    }
}

fn release(id: &str, holder: &str) -> pb::ReleaseLeaseRequest {
    pb::ReleaseLeaseRequest {
        lease_id: id.into(),
        holder: holder.into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn retention_under_traffic_keeps_what_is_live_and_removes_what_ended() {
    let sim = SimLlama::serving("m").await;
    let spare = SimLlama::serving("n").await;
    let reg = animator("gpu0", &sim.endpoint(), "dedicated = true")
        + &capability("gpu0", "chat", "m", "")
        + &animator("gpu1", &spare.endpoint(), "dedicated = true")
        + &capability("gpu1", "chat", "n", "");
    let s = stack_adjusted(&reg, "", |cfg| {
        cfg.retention = toml::from_str(RETENTION).expect("retention toml");
    })
    .await;
    let mut c = s.client.clone();

    // In use throughout: five live leases (renewed while traffic flows) and an open closure.
    let mut live = Vec::new();
    for i in 0..5 {
        let holder = format!("keeper-{i}");
        let g = granted(lease_req(&mut c, held(&holder, 30)).await);
        live.push((g.lease_id, holder));
    }
    let mut orch = s.orchestrator.clone();
    let open = close(&mut orch, "kept-closed", &["gpu1"])
        .await
        .closure_token;
    let reopened = close(&mut orch, "reopened-soon", &["gpu1"])
        .await
        .closure_token;
    reopen(&mut orch, &reopened).await;

    // Traffic for six seconds (three rounds past the age): leases granted, renewed and released
    // by four workers, and leases left to expire; every renew and release of a lease in use
    // must succeed, whatever the job deletes meanwhile.
    let until = Instant::now() + Duration::from_secs(6);
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = s.client.clone();
            tokio::spawn(async move {
                let (mut granted_n, mut expiring) = (0u32, 0u32);
                while Instant::now() < until {
                    let holder = format!("worker-{w}");
                    let g = granted(lease_req(&mut c, held(&holder, 30)).await);
                    c.renew_lease(renew(&g.lease_id, &holder))
                        .await
                        .expect("a lease in use is renewed");
                    let released = c
                        .release_lease(release(&g.lease_id, &holder))
                        .await
                        .expect("a lease in use is released")
                        .into_inner();
                    assert!(!released.already_over, "released by its holder first");
                    // One in four is left to expire (a one-second lease, never released).
                    if granted_n % 4 == 0 {
                        granted(lease_req(&mut c, held("expiring", 1)).await);
                        expiring += 1;
                    }
                    granted_n += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (granted_n, expiring)
            })
        })
        .collect();
    while Instant::now() < until {
        for (id, holder) in &live {
            c.renew_lease(renew(id, holder))
                .await
                .expect("a live lease is never lost");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mut issued = 0;
    for w in workers {
        let (n, e) = w.await.expect("worker");
        issued += n + e;
    }
    assert!(issued > 40, "traffic flowed: {issued} leases");

    // Two rounds more than the age after the last lease ended.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut db = s.spawned.db.superuser().await;
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    let leases = count("SELECT count(*) FROM dispatcher.leases")
        .fetch_one(&mut db)
        .await
        .expect("count");
    assert_eq!(
        leases,
        live.len() as i64,
        "only the live leases are left of {issued} + {}",
        live.len()
    );
    for (id, _) in &live {
        let id: Uuid = id.parse().expect("lease id");
        let events: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM dispatcher.dispatch_events WHERE lease_id = $1",
        )
        .bind(id)
        .fetch_one(&mut db)
        .await
        .expect("count");
        assert_eq!(events, 1, "a live lease keeps its dispatch event");
    }
    // Counted while the live leases are still live: once released, their events are old
    // enough for the next round of the job.
    let events = count("SELECT count(*) FROM dispatcher.dispatch_events")
        .fetch_one(&mut db)
        .await
        .expect("count");
    assert_eq!(events, live.len() as i64, "old events went");
    for (id, holder) in &live {
        c.release_lease(release(id, holder))
            .await
            .expect("still there to release");
    }
    let closures: Vec<String> = sqlx::query_scalar("SELECT token::text FROM dispatcher.closures")
        .fetch_all(&mut db)
        .await
        .expect("closures");
    assert_eq!(
        closures,
        vec![open.clone()],
        "the open closure stays, the reopened one went"
    );
    let admission: i32 = sqlx::query_scalar(
        "SELECT open_closures FROM dispatcher.admission WHERE animator = 'gpu1'",
    )
    .fetch_one(&mut db)
    .await
    .expect("admission");
    assert_eq!(admission, 1, "gpu1 is still closed by the kept closure");
    reopen(&mut orch, &open).await;
}
