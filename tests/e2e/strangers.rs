//! Strangers cost bounded work: a flood of calls whose tokens or credentials authenticate
//! nobody, at Ward and at the Dispatcher, grows Ward's audit by counted rows only — at most one
//! per (source, reason) per write — and a concurrent operator's calls all succeed, also while
//! the audit table is locked for 3 s (a stalled database for Ward's writers).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use lychd_proto::dispatcher::v1 as dpb;
use lychd_proto::dispatcher::v1::dispatcher_client::DispatcherClient;
use lychd_proto::ward::v1 as wpb;
use lychd_proto::ward::v1::ward_client::WardClient;
use lychd_testkit::{channel_with, spawn_office};
use tonic::Code;

const CALLS: u64 = 100_000;

fn junk_session(i: u64) -> String {
    format!("lws_{i:064x}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_strangers_grows_the_audit_by_counts_and_fails_no_operator_call() {
    let s = spawn_office(lychd_dispatcher::spec()).await;
    s.allow("dispatcher:read", "capability:*").await;
    let (dispatcher, ward) = (s.endpoint(), s.ward_endpoint());
    let mut admin = s.admin.clone();
    let seq_before = admin.audit(1).await.expect("audit")[0].seq;

    // The operator's calls, every 10 ms until the flood is over.
    let done = Arc::new(tokio::sync::Notify::new());
    let operator = {
        let (done, mut client) = (done.clone(), DispatcherClient::new(s.channel()));
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            loop {
                match client
                    .list_capabilities(dpb::ListCapabilitiesRequest::default())
                    .await
                {
                    Ok(_) => ok += 1,
                    Err(status) => failed.push(format!("{:?} {}", status.code(), status.message())),
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(10)) => {}
                    () = done.notified() => return (ok, failed),
                }
            }
        })
    };
    // A stall of Ward's audit writes in the middle of the flood.
    let stall = {
        let db = s.db.superuser().await;
        tokio::spawn(async move {
            let mut db = db;
            tokio::time::sleep(Duration::from_secs(1)).await;
            sqlx::query("BEGIN").execute(&mut db).await.expect("begin");
            sqlx::query("LOCK TABLE ward.audit IN ACCESS EXCLUSIVE MODE")
                .execute(&mut db)
                .await
                .expect("lock");
            tokio::time::sleep(Duration::from_secs(3)).await;
            sqlx::query("COMMIT")
                .execute(&mut db)
                .await
                .expect("commit");
        })
    };

    // A quarter each: junk credentials at Ward's exchange, unknown sessions at Ward's
    // Authenticate, malformed and unknown sessions at the Dispatcher's Lease.
    let started = Instant::now();
    let unauthenticated = Arc::new(AtomicU64::new(0));
    // Sixteen strangers of each kind, each with its own connection.
    let ward_junk = WardClient::new(channel_with(&ward, "junk"));
    let unknown: Vec<String> = (0..16).map(junk_session).collect();
    let at_ward: Vec<_> = unknown
        .iter()
        .map(|t| WardClient::new(channel_with(&ward, t)))
        .collect();
    let at_dispatcher: Vec<_> = (0..16)
        .map(|i| {
            let malformed = DispatcherClient::new(channel_with(&dispatcher, &format!("junk-{i}")));
            let unknown = DispatcherClient::new(channel_with(&dispatcher, &unknown[i]));
            (malformed, unknown)
        })
        .collect();
    futures::stream::iter(0..CALLS)
        .for_each_concurrent(64, |i| {
            let unauthenticated = unauthenticated.clone();
            let n = (i / 4 % 16) as usize;
            let (ward_junk, mut at_ward, token) =
                (ward_junk.clone(), at_ward[n].clone(), unknown[n].clone());
            let (mut malformed, mut unknown_at_dispatcher) = at_dispatcher[n].clone();
            async move {
                let code = match i % 4 {
                    0 => ward_junk
                        .clone()
                        .exchange_credential(wpb::ExchangeCredentialRequest {
                            ttl_seconds: 0,
                            audiences: vec!["ward".into()],
                        })
                        .await
                        .map(|_| ())
                        .map_err(|e| e.code()),
                    1 => at_ward
                        .authenticate(wpb::AuthenticateRequest {
                            token,
                            audience: String::new(),
                        })
                        .await
                        .map(|_| ())
                        .map_err(|e| e.code()),
                    k => {
                        let client = if k == 2 {
                            &mut malformed
                        } else {
                            &mut unknown_at_dispatcher
                        };
                        client
                            .lease(dpb::LeaseRequest {
                                demand: Some(dpb::Demand {
                                    family: dpb::Family::Chat as i32,
                                    ..Default::default()
                                }),
                                holder: "stranger".into(),
                                ..Default::default()
                            })
                            .await
                            .map(|_| ())
                            .map_err(|e| e.code())
                    }
                };
                assert_eq!(code, Err(Code::Unauthenticated), "call {i}");
                unauthenticated.fetch_add(1, Ordering::Relaxed);
            }
        })
        .await;
    let elapsed = started.elapsed();
    stall.await.expect("stall");
    done.notify_one();
    let (operator_ok, operator_failed) = operator.await.expect("operator");
    assert_eq!(unauthenticated.load(Ordering::Relaxed), CALLS);
    assert!(
        operator_failed.is_empty(),
        "operator calls failed: {operator_failed:?}"
    );
    assert!(operator_ok > 20, "the operator kept calling: {operator_ok}");

    // What the flood added to the audit: counts only (the operator's decisions aside), at
    // most one row per (source, reason) per write — three keys here, written every 10 s and
    // at this listing.
    let events = admin.audit(1000).await.expect("audit");
    let added: Vec<_> = events
        .iter()
        .filter(|e| e.seq > seq_before && e.event != "authorize.allow")
        .collect();
    let writes = elapsed.as_secs() / 10 + 3;
    assert!(
        added.iter().all(|e| e.event == "refusals.counted"),
        "{added:#?}"
    );
    assert!(
        added.len() as u64 <= 3 * writes,
        "{} rows for {elapsed:?}",
        added.len()
    );
    let counted: u64 = added
        .iter()
        .map(|e| e.detail["count"].parse::<u64>().expect("count"))
        .sum();
    // Every stranger that reached Ward is counted; the malformed ones at the Dispatcher
    // never reached it.
    assert_eq!(counted, CALLS / 4 * 3, "{added:#?}");
    s.stop().await;
}
